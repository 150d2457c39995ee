"""The programmatic entry point of every operation, shared by the ``lakeops`` CLI and Dagster.

Each command module of :data:`spark_jobs.cli.COMMANDS` defines ``Options`` (a pydantic model of its
options, named as the CLI names them; unknown options are an error) and ``execute(table, options,
storage_options, *, spark, progress) -> Report`` (plan → execute on Spark → commit → report). Its
``run(args, ...)`` only maps parsed command-line arguments onto those, so the CLI, ``spark-submit``
and Dagster run the same code. :func:`run_operation` is that call by command name, with the options
as a mapping.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar, cast

from pydantic import BaseModel, ConfigDict, ValidationError
from rich.console import Console

from lakeops.deletion import BatchResult, DeleteBatch, delete_batch
from lakeops.errors import InvalidArgument
from lakeops.ops.report import Report
from lakeops.storage import StorageOptions

__all__ = ["SparkSettings", "options_from_args", "refuse_options", "run_operation", "spark_from_args"]

Unit = TypeVar("Unit", bound=BaseModel)
Result = TypeVar("Result", bound=BaseModel)
OptionsT = TypeVar("OptionsT", bound=BaseModel)


#: Up to this many deletion batches (about a thousand files each) are deleted by threads on the
#: driver: a batch is one S3 DeleteObjects request or a thousand unlinks, far cheaper than starting a
#: Spark session (seconds). Larger deletions run as Spark tasks.
DRIVER_DELETE_BATCHES = 16
DRIVER_DELETE_THREADS = 8


class SparkSettings(BaseModel):
    """Where plan units run: ``master`` (None: ``$LAKEOPS_SPARK_MASTER``, else the spark-submit master,
    else ``local[*]``) and Spark ``conf``. The session starts only when a plan has units to run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    master: str | None = None
    conf: dict[str, str] = {}

    def run_units(
        self,
        units: Sequence[Unit],
        task: Callable[[Unit], Result],
        result_type: type[Result],
        *,
        label: str,
        description: str,
        progress: Console,
    ) -> list[Result]:
        """Run ``task`` on every unit as Spark tasks (:func:`spark_jobs.runner.run_units`), echoing
        ``label`` and the task count to ``progress``; raises its ``TaskFailed``."""
        from spark_jobs.runner import run_units
        from spark_jobs.session import build_session

        spark = build_session(master=self.master, conf=self.conf)
        progress.print(f"{label} on Spark ({spark.conf.get('spark.master', 'connect')}) ...")
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
    ) -> list[BatchResult]:
        """Delete every batch: on the driver when there are at most :data:`DRIVER_DELETE_BATCHES`,
        else as Spark tasks. A failed batch raises (the Spark path: ``TaskFailed``); batches already
        done stay deleted and a rerun plans only what is left."""
        if not batches:
            return []
        if len(batches) > DRIVER_DELETE_BATCHES:
            return self.run_units(batches, task, BatchResult, label=label, description=description, progress=progress)
        progress.print(f"{label} on the driver ...")
        threads = min(DRIVER_DELETE_THREADS, len(batches))
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="delete") as pool:
            return list(pool.map(task, batches))


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


def refuse_options(table: str, options: BaseModel, *names: str) -> None:
    """Refuse options another format has but ``table``'s does not: set, they would be silently ignored."""
    given = [name for name in names if getattr(options, name) is not None]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise InvalidArgument(f"{table}: {flags} does not apply to this table's format")


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
    from spark_jobs.cli import COMMANDS

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
