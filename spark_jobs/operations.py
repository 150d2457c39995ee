"""The programmatic entry point of every operation, shared by the ``lakeops`` CLI and Dagster.

Each command module of :data:`spark_jobs.commands.COMMANDS` defines ``Options`` (a pydantic model of its
options, named as the CLI names them; unknown options are an error) and ``execute(table, options,
storage_options, *, spark, progress) -> Report`` (plan → execute on Spark → commit → report). Its
``run(args, ...)`` only maps parsed command-line arguments onto those, so the CLI, ``spark-submit``
and Dagster run the same code. :func:`run_operation` is that call by command name, with the options
as a mapping.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich.console import Console

from lakeops.deletion import BatchResult, DeleteBatch, delete_batch, delete_in_threads, for_run
from lakeops.errors import InvalidArgument
from lakeops.jsontext import printable
from lakeops.ops.report import Report
from lakeops.quarantine import TRASH_DIR
from lakeops.redaction import mask_text, register_secret_settings
from lakeops.storage import StorageOptions
from lakeops.units import format_size, parse_size
from spark_jobs.commands import COMMANDS

__all__ = [
    "DRIVER_MAX_BYTES",
    "DRIVER_MAX_BYTES_ENV",
    "DRIVER_MAX_UNITS",
    "DRIVER_MAX_UNITS_ENV",
    "Deletions",
    "MaskedConsole",
    "PlanOnly",
    "SparkSettings",
    "options_from_args",
    "run_operation",
    "spark_from_args",
]

Unit = TypeVar("Unit", bound=BaseModel)
Result = TypeVar("Result", bound=BaseModel)
OptionsT = TypeVar("OptionsT", bound=BaseModel)


#: Up to this many deletion batches (about a thousand files each) are deleted by threads on the
#: driver: a batch is one S3 DeleteObjects request or a thousand unlinks, far cheaper than starting a
#: Spark session (seconds). Larger deletions run as Spark tasks when a master is configured (or a
#: session is running); on the default local session they stay on the driver too (:meth:`SparkSettings.delete`).
DRIVER_DELETE_BATCHES = 16

#: A plan whose units read at most this many bytes (None: any plan with a byte figure) runs in threads
#: on the driver instead of starting a local Spark session. Such units are pyarrow rewrites, which
#: release the GIL: local Spark runs the same code on the same cores, in worker processes, after ~7 s
#: of session start-up and ~5 s for the first job, and pays Arrow serialisation on top. Measured on a
#: 2-CPU machine (bench/README.md): 70 MB compacted in 3.6 s on the driver against 26.5 s on local
#: Spark, 2 GB in 104 s against 147 s. ``$LAKEOPS_DRIVER_MAX_BYTES`` (or ``driver_max_bytes``) caps it:
#: 0 sends every plan to Spark.
DRIVER_MAX_BYTES: int | None = None
DRIVER_MAX_BYTES_ENV = "LAKEOPS_DRIVER_MAX_BYTES"

#: For plans whose units have no byte figure (checkpoint parts, manifests, directory listings,
#: snapshot diffs, deletion batches): up to this many units run on the driver. Such units are mostly
#: Python work, which threads run one at a time (the GIL) where Spark's workers run them in
#: parallel; the same bound as :data:`DRIVER_DELETE_BATCHES`, so deletions keep their rule.
#: ``$LAKEOPS_DRIVER_MAX_UNITS`` (or ``driver_max_units``) overrides; 0: always Spark.
DRIVER_MAX_UNITS = 16
DRIVER_MAX_UNITS_ENV = "LAKEOPS_DRIVER_MAX_UNITS"


class MaskedConsole(Console):
    """A console that masks secrets (:func:`lakeops.redaction.mask_text`) in the text it prints: the
    CLI's stderr and Dagster's run log. Masked before rich renders: rich wraps long lines, and a URL
    split across two lines would slip past a mask applied to the output. File names that are not
    UTF-8 are shown escaped (:func:`lakeops.jsontext.printable`), which every log can store."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(printable(mask_text(o)) if isinstance(o, str) else o for o in objects), **kwargs)


class SparkSettings(BaseModel):
    """Where plan units run: ``master`` (None: ``$LAKEOPS_SPARK_MASTER``, else the spark-submit master,
    else ``local[*]``) and Spark ``conf``. The session starts only when a plan has units to run, and
    not at all for a plan that would run on the default ``local[*]`` and is better run on the driver
    (:meth:`runs_on_driver`). ``driver_max_bytes`` / ``driver_max_units``: the largest such plan (None:
    the environment variable, else :data:`DRIVER_MAX_BYTES` / :data:`DRIVER_MAX_UNITS`; 0: always Spark)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    master: str | None = None
    conf: dict[str, str] = {}
    driver_max_bytes: int | None = Field(default=None, ge=0)
    driver_max_units: int | None = Field(default=None, ge=0)

    def model_post_init(self, context: Any, /) -> None:
        """Secret settings (``spark.hadoop.fs.s3a.secret.key``, a Spark Connect URL's ``;token=``) are
        masked by value from now on, however Spark or a library quotes them."""
        parameters = dict(p.partition("=")[::2] for p in (self.master or "").split(";")[1:])
        register_secret_settings({**self.conf, **parameters})

    def runs_on_driver(self, units: int, work_bytes: int | None) -> bool:
        """Whether a plan of ``units`` units reading ``work_bytes`` (None: unknown) runs in threads on
        the driver: it is within the limits, and Spark would be a new ``local[*]`` session on this machine anyway
        (no master asked for, none already running: an active session costs nothing more to use)."""
        max_bytes = _limit(self.driver_max_bytes, DRIVER_MAX_BYTES_ENV, DRIVER_MAX_BYTES, sizes=True)
        if work_bytes is not None:
            small = max_bytes is None or work_bytes <= max_bytes
        else:
            max_units = _limit(self.driver_max_units, DRIVER_MAX_UNITS_ENV, DRIVER_MAX_UNITS, sizes=False)
            small = max_units is None or units <= max_units
        return small and self._spark_would_be_local(max_bytes)

    def _spark_would_be_local(self, max_bytes: int | None) -> bool:
        """Spark would be a new ``local[*]`` session on this machine, and the driver is not capped to 0."""
        if max_bytes == 0 or {"spark.master", "spark.remote"} & self.conf.keys():
            return False
        from spark_jobs.session import would_start_default_session

        return would_start_default_session(self.master)

    def run_units(
        self,
        units: Sequence[Unit],
        task: Callable[[Unit], Result],
        result_type: type[Result],
        *,
        label: str,
        description: str,
        progress: Console,
        work_bytes: int | None = None,
    ) -> list[Result]:
        """Run ``task`` on every unit, echoing ``label`` and progress to ``progress``: in threads on
        the driver when :meth:`runs_on_driver` (``work_bytes``: what the units read, if the plan
        knows), else as Spark tasks (:func:`spark_jobs.spark_tasks.run_units`) once the executors passed their
        preflight (:func:`spark_jobs.preflight.check_executors`: they can read the table). Either way results come
        in unit order and a failed unit raises ``TaskFailed`` with the completed results."""
        from lakeops.executors import run_on_driver
        from spark_jobs.spark_tasks import run_units

        if self.runs_on_driver(len(units), work_bytes):
            threads = min(len(units), os.cpu_count() or 1)
            size = f", {format_size(work_bytes)}" if work_bytes is not None else ""
            progress.print(f"{label} on the driver ({threads} threads{size}) ...")
            return run_on_driver(
                units,
                task,
                result_type,
                threads=threads,
                description=description,
                progress=lambda done, total: progress.print(f"  {done}/{total} units done"),
            )
        from spark_jobs.preflight import check_executors
        from spark_jobs.session import build_session

        spark = build_session(master=self.master, conf=self.conf)
        progress.print(f"{label} on Spark ({spark.conf.get('spark.master', 'connect')}) ...")
        check_executors(spark, units)
        return run_units(
            spark,
            units,
            task,
            result_type,
            description=description,
            progress=lambda done, total: progress.print(f"  {done}/{total} Spark tasks done"),
        )

    def delete(
        self,
        batches: Sequence[DeleteBatch],
        *,
        label: str,
        description: str,
        progress: Console,
        task: Callable[[DeleteBatch], BatchResult] = delete_batch,
        quarantine_run: str | None = None,
        operation: str = "",
    ) -> list[BatchResult]:
        """Delete every batch: on the driver when there are at most :data:`DRIVER_DELETE_BATCHES` or
        Spark would only be a local session (deleting is waiting on storage, which threads do as well as
        local worker processes, without the start-up), else as Spark tasks. A failed batch raises (the
        Spark path: ``TaskFailed``); batches already done stay deleted and a rerun plans only what is
        left. ``quarantine_run``: move the files into that run's trash instead (stamped on every batch
        here, so planners stay unaware of it)."""
        if not batches:
            return []
        batches = for_run(batches, quarantine_run, operation)
        max_bytes = _limit(self.driver_max_bytes, DRIVER_MAX_BYTES_ENV, DRIVER_MAX_BYTES, sizes=True)
        if len(batches) > DRIVER_DELETE_BATCHES and not self._spark_would_be_local(max_bytes):
            return self.run_units(batches, task, BatchResult, label=label, description=description, progress=progress)
        progress.print(f"{label} on the driver ...")
        return delete_in_threads(batches, task)


def _limit(given: int | None, env: str, default: int | None, *, sizes: bool) -> int | None:
    """``given``, else ``$env`` (a count, or with ``sizes`` also a size such as ``2GB``), else ``default``
    (None: no limit)."""
    if given is not None:
        return given
    text = os.environ.get(env, "").strip()
    if not text:
        return default
    if text.isdigit():
        return int(text)
    try:
        if sizes:
            return parse_size(text)
    except InvalidArgument as exc:
        raise InvalidArgument(f"${env}: {exc}") from None
    raise InvalidArgument(f"${env}: expected a whole number of 0 or more, got {text!r}")


class PlanOnly(BaseModel):
    """``--dry-run`` of a command that writes (compact, checkpoint, cdc), declared once for all of them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dry_run: bool = Field(default=False, description="print the plan, write nothing")


class Deletions(BaseModel):
    """What a command that deletes files (expire, orphans) does with them, declared once for both:
    ``dry_run`` lists them, ``quarantine`` moves them into a trash run instead of deleting them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dry_run: bool = Field(default=False, description="list what would be deleted, delete nothing")
    quarantine: bool = Field(
        default=False,
        description=f"move the files to {TRASH_DIR}/RUN_ID/ under the table root instead of deleting them; "
        "undo with lakeops restore TABLE RUN_ID, free the space with lakeops purge-trash",
    )


class Operation(Protocol):
    """What :func:`run_operation` needs of a command module."""

    Options: type[BaseModel]

    def execute(
        self,
        table: str,
        options: Any,
        storage_options: StorageOptions,
        *,
        spark: SparkSettings,
        progress: Console,
    ) -> Report: ...


def options_from_args(model: type[OptionsT], args: argparse.Namespace) -> OptionsT:
    """``model`` from the parsed arguments of the same names (argparse ``dest`` = field name)."""
    return model.model_validate({name: getattr(args, name) for name in model.model_fields if hasattr(args, name)})


def spark_from_args(args: argparse.Namespace) -> SparkSettings:
    return SparkSettings(master=args.master, conf=dict(args.conf))


def run_operation(
    name: str,
    table: str,
    options: Mapping[str, object] | None = None,
    *,
    storage_options: StorageOptions | None = None,
    spark: SparkSettings | None = None,
    progress: Console | None = None,
) -> Report:
    """Run command ``name`` (``compact``, ``expire``, ...) on ``table`` and return its report.

    ``options`` uses the CLI's option names (``{"older_than": "7d", "dry_run": True}``); an unknown
    name or a bad value raises :class:`InvalidArgument` naming the table, the command and the
    option. Progress lines go to ``progress`` (default: discarded).
    """
    if name not in COMMANDS:
        raise InvalidArgument(f"{table}: unknown operation {name!r}; expected one of {', '.join(COMMANDS)}")
    operation = cast(Operation, importlib.import_module(COMMANDS[name]))
    try:
        parsed = operation.Options.model_validate(dict(options or {}))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'options'}: {e['msg']}" for e in exc.errors())
        raise InvalidArgument(f"{table}: lakeops {name}: {problems}") from None
    return operation.execute(
        table,
        parsed,
        storage_options or StorageOptions(),
        spark=spark or SparkSettings(),
        progress=progress or Console(quiet=True),
    )
