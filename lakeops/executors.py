"""Running a plan's units: the contract every executor keeps, and the executor without Spark.

A unit's task runs *pure* on a unit (a pydantic model) and returns a result model. Units and results
make a JSON round trip whatever runs them, so a task sees exactly what it would see in a Spark task
(:mod:`spark_jobs.spark_tasks` runs the same :func:`run_unit` there). A unit's exception is caught and
returned as data (type, message, traceback), so the caller learns which units *did* finish: their
results carry the files they wrote, which the caller deletes when it does not commit
(:class:`TaskFailed`). Failed units are not retried: tasks are deterministic and their storage
adapters retry transient IO.

:func:`run_on_driver` runs the units in a thread pool of this process, for plans too small to pay a
Spark session's start-up and for callers of :mod:`lakeops.api` without Spark. :class:`Executor` is
what the format-neutral driver (:mod:`lakeops.ops.batches`) asks of any executor.
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Protocol, TypeVar

import pyarrow as pa
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError
from rich.console import Console

from lakeops.deletion import BatchResult, DeleteBatch, delete_batch, delete_in_threads, for_run
from lakeops.errors import InvalidArgument, LakeopsError
from lakeops.jsontext import dumps

__all__ = [
    "RESULT_ARROW_SCHEMA",
    "RESULT_DDL",
    "Executor",
    "Progress",
    "TaskFailed",
    "ThreadExecutor",
    "collect_results",
    "dump_model",
    "run_on_driver",
    "run_unit",
    "safe_progress",
    "task_name",
    "unit_type_of",
]

log = logging.getLogger(__name__)

#: Called with (finished units, total units) while units run.
Progress = Callable[[int, int], None]

_PROGRESS_INTERVAL_S = 0.5

Unit = TypeVar("Unit", bound=BaseModel)
Result = TypeVar("Result", bound=BaseModel)

RESULT_ARROW_SCHEMA = pa.schema(
    [
        ("idx", pa.int64()),
        ("result", pa.string()),
        ("error_type", pa.string()),
        ("error_message", pa.string()),
        ("error_traceback", pa.string()),
    ]
)
RESULT_DDL = "idx bigint, result string, error_type string, error_message string, error_traceback string"


class TaskFailed(LakeopsError):
    """A plan unit's task raised; carries what the worker saw and what finished anyway.

    ``index`` is the failed unit's position in the ``units`` given to the executor (``None``
    when Spark failed outside any unit, e.g. a worker could not unpickle the task). ``error_type``
    is the original exception's class (``lakeops.errors.CorruptFile``, ``ValueError``),
    ``error_message`` its text. ``failed`` lists every failed unit index, ``completed`` maps the
    index of every unit that succeeded to its result: those outputs exist even though the
    operation as a whole failed.
    """

    def __init__(
        self,
        message: str,
        *,
        index: int | None,
        error_type: str,
        error_message: str,
        remote_traceback: str | None = None,
        failed: Sequence[int] = (),
        completed: Mapping[int, BaseModel] | None = None,
    ) -> None:
        super().__init__(message)
        self.index = index
        self.error_type = error_type
        self.error_message = error_message
        self.remote_traceback = remote_traceback
        self.failed = tuple(failed)
        self.completed = dict(completed or {})
        if remote_traceback:
            self.add_note(f"traceback in the task:\n{remote_traceback.rstrip()}")


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    if cls.__module__ == builtins.__name__:
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def task_name(task: Callable[..., object]) -> str:
    func = getattr(task, "func", task)  # functools.partial
    name = getattr(func, "__qualname__", None) or type(func).__qualname__
    return f"{getattr(func, '__module__', None) or '?'}.{name}"


def dump_model(model: BaseModel) -> str:
    # by_alias: models mirror spec field names through aliases (pyiceberg style) and validate by
    # alias, so only an aliased dump round-trips.
    try:
        return model.model_dump_json(by_alias=True, round_trip=True)
    except PydanticSerializationError:  # a file name that is not UTF-8: lone surrogates (lakeops.jsontext)
        return dumps(model.model_dump(mode="json", by_alias=True, round_trip=True))


def load_model(model_type: type[Unit], payload: str) -> Unit:
    """The model :func:`dump_model` wrote. Text with escaped lone surrogates, which pydantic's JSON parser
    refuses, is parsed by :func:`json.loads` (such models hold listed file names, never base64 bytes)."""
    try:
        return model_type.model_validate_json(payload)
    except ValidationError as exc:
        if not any(e["type"] == "json_invalid" and "surrogate" in e["msg"] for e in exc.errors()):
            raise
    return model_type.model_validate(json.loads(payload))


def run_unit(task: Callable[[Unit], BaseModel], unit_type: type[Unit], idx: int, payload: str) -> pa.RecordBatch:
    """Run ``task`` on the unit ``payload`` (JSON of ``unit_type``); the result, or the exception, as
    one row of :data:`RESULT_ARROW_SCHEMA`."""
    row: dict[str, list[object]] = {
        "idx": [idx],
        "result": [None],
        "error_type": [None],
        "error_message": [None],
        "error_traceback": [None],
    }
    try:
        result = task(load_model(unit_type, payload))
        if not isinstance(result, BaseModel):
            raise TypeError(f"task returned {type(result).__name__}, expected a pydantic model")
        row["result"] = [dump_model(result)]
    except Exception as exc:
        row["error_type"] = [_type_name(exc)]
        row["error_message"] = [str(exc)]
        row["error_traceback"] = [traceback.format_exc()]
    return pa.RecordBatch.from_pydict(row, schema=RESULT_ARROW_SCHEMA)


def run_on_driver(
    units: Sequence[Unit],
    task: Callable[[Unit], Result],
    result_type: type[Result],
    *,
    threads: int | None = None,
    description: str | None = None,
    progress: Progress | None = None,
) -> list[Result]:
    """:func:`spark_jobs.spark_tasks.run_units` without Spark: ``task`` runs on every unit in
    ``threads`` threads (default ``os.cpu_count()``) of this process; results come back in unit order.

    Units and results make the same JSON round trip as on Spark, so a task sees exactly what a Spark
    task would. Every unit runs even after one fails, and a failure raises the same
    :class:`TaskFailed` (lowest failed index, all failed indices, completed results). At most
    ``threads`` units are in progress at once, so memory is bounded by threads × one unit's working
    set, as with that many Spark task slots. Threads suit tasks that spend their time in pyarrow or
    IO (both release the GIL); pure-Python work shares one core. ``progress`` gets (finished units,
    total units) at most every half second and when the last one finishes.
    """
    if not units:
        return []
    unit_type = unit_type_of(units)
    if threads is not None and threads < 1:
        raise InvalidArgument(f"threads must be at least 1, got {threads}")
    label = description or f"lakeops {task_name(task)} on {len(units)} units"
    workers = min(len(units), threads or os.cpu_count() or 1)
    report = safe_progress(progress)
    rows: list[dict[str, object]] = []
    reported = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lakeops-unit") as pool:
        futures = [pool.submit(run_unit, task, unit_type, i, dump_model(unit)) for i, unit in enumerate(units)]
        for done, future in enumerate(as_completed(futures), start=1):
            rows.extend(future.result().to_pylist())
            if done == len(units) or time.monotonic() - reported >= _PROGRESS_INTERVAL_S:
                reported = time.monotonic()
                report(done, len(units))
    return collect_results(label, rows, len(units), result_type)


def unit_type_of(units: Sequence[Unit]) -> type[Unit]:
    unit_type = type(units[0])
    if any(type(unit) is not unit_type for unit in units):
        names = sorted({type(unit).__name__ for unit in units})
        raise InvalidArgument(f"run_units needs units of one model type, got {', '.join(names)}")
    return unit_type


def safe_progress(callback: Progress | None) -> Progress:
    """``callback``, except that its first exception is logged and ends progress reporting: a broken
    progress bar must not fail the operation."""
    state: dict[str, Progress | None] = {"callback": callback}

    def report(done: int, total: int) -> None:
        cb = state["callback"]
        if cb is None:
            return
        try:
            cb(done, total)
        except Exception:
            log.exception("progress callback failed; progress reporting stopped")
            state["callback"] = None

    return report


def collect_results(
    label: str, rows: Iterable[Mapping[str, Any]], count: int, result_type: type[Result]
) -> list[Result]:
    """Validate the task rows into results in unit order, or raise :class:`TaskFailed`.

    ``rows`` is read once, each result validated as it comes, so a streamed source is never held whole.
    """
    completed: dict[int, Result] = {}
    failures: dict[int, Mapping[str, Any]] = {}
    for row in rows:
        idx: int = row["idx"]
        if row["error_type"] is None:
            completed[idx] = load_model(result_type, str(row["result"]))
        else:
            failures[idx] = row
    missing = sorted(set(range(count)) - completed.keys() - failures.keys())
    if missing:  # an executor lost rows without failing: never commit on a partial result
        raise LakeopsError(f"{label}: no result came back for units {missing[:10]}")
    if failures:
        failed = sorted(failures)
        first = failures[failed[0]]
        more = f" ({len(failed) - 1} more of {count} units failed)" if len(failed) > 1 else ""
        raise TaskFailed(
            f"{label}: unit {failed[0]} failed: {first['error_type']}: {first['error_message']}{more}",
            index=failed[0],
            error_type=str(first["error_type"]),
            error_message=str(first["error_message"]),
            remote_traceback=str(first["error_traceback"]) if first["error_traceback"] else None,
            failed=failed,
            completed=dict(sorted(completed.items())),
        )
    return [completed[i] for i in range(count)]


class Executor(Protocol):
    """Where a plan's units run (:func:`lakeops.ops.batches.run_batches`): :class:`ThreadExecutor` in this
    process, :class:`spark_jobs.spark_settings.SparkSettings` on the driver or as Spark tasks. Results come
    back in unit order; a failed unit raises :class:`TaskFailed` carrying the completed results.
    ``label`` is echoed to ``progress``; ``description`` names the job (Spark UI);
    ``work_bytes``: what the units read, when the plan knows."""

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
    ) -> list[Result]: ...

    def runs_on_driver(self, units: int, work_bytes: int | None) -> bool:
        """Whether units run in this process (a plan may then compute its results from what it holds)."""
        ...

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
        """Delete (``quarantine_run``: move into that run's trash) every batch; a failed batch raises,
        the batches already done stay deleted."""
        ...


class ThreadExecutor:
    """Every plan's units in threads of this process (:func:`run_on_driver`): Python callers of
    :mod:`lakeops.api` without Spark, and small plans."""

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads

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
        threads = min(len(units), self.threads or os.cpu_count() or 1) or 1
        progress.print(f"{label} on the driver ({threads} threads) ...")
        return run_on_driver(
            units,
            task,
            result_type,
            threads=threads,
            description=description,
            progress=lambda done, total: progress.print(f"  {done}/{total} units done"),
        )

    def runs_on_driver(self, units: int, work_bytes: int | None) -> bool:
        return True

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
        if batches:
            progress.print(f"{label} on the driver ...")
        return delete_in_threads(for_run(batches, quarantine_run, operation), task)
