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
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, cast

from pydantic import BaseModel, ConfigDict, ValidationError
from rich.console import Console

from lakeops.audit import record_run
from lakeops.deletion import BatchResult, DeleteBatch, delete_batch
from lakeops.errors import InvalidArgument, LakeopsError
from lakeops.ops.report import Report
from lakeops.ops.target import CatalogOptions, resolve_target, table_root
from lakeops.storage import StorageOptions

__all__ = [
    "AUDITED",
    "SparkSettings",
    "audited",
    "options_from_args",
    "refuse_options",
    "run_operation",
    "spark_from_args",
]

Unit = TypeVar("Unit", bound=BaseModel)
ReportT = TypeVar("ReportT", bound=Report)
Result = TypeVar("Result", bound=BaseModel)
OptionsT = TypeVar("OptionsT", bound=BaseModel)


#: Up to this many deletion batches (about a thousand files each) are deleted by threads on the
#: driver: a batch is one S3 DeleteObjects request or a thousand unlinks, far cheaper than starting a
#: Spark session (seconds). Larger deletions run as Spark tasks.
DRIVER_DELETE_BATCHES = 16
DRIVER_DELETE_THREADS = 8

#: Commands that change a table: their runs (not dry runs) leave an audit record (:func:`audited`).
AUDITED = frozenset({"compact", "checkpoint", "expire", "orphans", "restore", "purge-trash"})


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
        quarantine_run: str | None = None,
        operation: str = "",
    ) -> list[BatchResult]:
        """Delete every batch: on the driver when there are at most :data:`DRIVER_DELETE_BATCHES`,
        else as Spark tasks. A failed batch raises (the Spark path: ``TaskFailed``); batches already
        done stay deleted and a rerun plans only what is left. ``quarantine_run``: move the files into
        that run's trash instead (stamped on every batch here, so planners stay unaware of it)."""
        if not batches:
            return []
        if quarantine_run is not None:
            stamp = {"quarantine_run": quarantine_run, "operation": operation}
            batches = [b.model_copy(update=stamp) for b in batches]
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
    console = progress or Console(quiet=True)
    return audited(
        name,
        table,
        parsed,
        storage_options or StorageOptions(),
        lambda: operation.execute(
            table, parsed, storage_options or StorageOptions(), spark=spark or SparkSettings(), progress=console
        ),
        progress=console,
    )


def audited(
    command: str,
    table: str,
    options: BaseModel,
    storage_options: StorageOptions,
    call: Callable[[], ReportT],
    *,
    progress: Console,
) -> ReportT:
    """``call()`` (one run of ``command``), leaving an audit record of its outcome under the table root
    (:mod:`lakeops.audit`). The one place every run passes through: the CLI's ``main`` and
    :func:`run_operation` (Dagster) both call it. Only table-changing commands (:data:`AUDITED`) that
    are not dry runs are recorded: a read-only run writes nothing into the table, so it works with
    read-only credentials. A record that cannot be written is a warning, never the run's outcome."""
    if command not in AUDITED or getattr(options, "dry_run", False):
        return call()
    started = datetime.now(UTC)
    try:
        report = call()
    except Exception as exc:
        _record(command, table, options, storage_options, started, progress, error=exc)
        raise
    _record(command, table, options, storage_options, started, progress, report=report)
    return report


def _record(
    command: str,
    table: str,
    options: BaseModel,
    storage_options: StorageOptions,
    started: datetime,
    progress: Console,
    *,
    report: Report | None = None,
    error: Exception | None = None,
) -> None:
    catalog = options if isinstance(options, CatalogOptions) else CatalogOptions()
    try:
        root = table_root(resolve_target(table, catalog, storage_options), storage_options)
        record_run(
            root,
            command=command,
            table=table,
            options=options.model_dump(mode="json"),
            started=started,
            storage_options=storage_options,
            report=report,
            error=error,
        )
    except LakeopsError as exc:
        progress.print(f"warning: {table}: no audit record written for lakeops {command}: {exc}", soft_wrap=True)
