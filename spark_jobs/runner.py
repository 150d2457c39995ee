"""The generic "execute" step of the plan → execute → commit → report flow (docs/architecture.md).

:func:`run_units` sends plan units (pydantic models, as JSON) to Spark tasks, runs a *pure*
``lakeops`` function on each one and returns the results, in unit order, to the driver. It uses
only the DataFrame API (``createDataFrame`` + ``mapInArrow``), so it runs unchanged under Spark
Connect.

Placement: each unit should get its own task so that big units run in parallel. ``repartition``
cannot promise that (hash and round-robin partitioning may put two units in one partition and
leave another empty), so the units are broadcast-joined onto ``spark.range(p, numPartitions=p)``:
partition ``k`` holds exactly the units whose index is ``k`` modulo ``p``. No shuffle either.

Errors: a unit's exception is caught in the task and returned as data (type, message, worker
traceback), not raised through Spark. That keeps the original type name and message intact and
lets the driver know which units *did* finish (their results carry the files they wrote, which
the caller must clean up when it does not commit). It also means Spark does not retry a failed
unit: tasks are expected to be deterministic and their storage adapters to retry transient IO.

:func:`run_on_driver` is the same contract without Spark: the units run in a thread pool of this
process (for plans too small to pay a Spark session's start-up), through the same per-unit wrapper
and the same result collection, so results, ``TaskFailed`` and its ``completed`` are identical.
pyspark is imported only by :func:`run_units`, so a driver-only run never loads it.
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import threading
import time
import traceback
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from lakeops.errors import InvalidArgument, LakeopsError
from lakeops.jsontext import dumps

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.errors import PythonException
    from pyspark.sql import SparkSession

__all__ = ["MAX_DEFAULT_PARALLELISM", "Progress", "TaskFailed", "run_on_driver", "run_units"]

log = logging.getLogger(__name__)

Unit = TypeVar("Unit", bound=BaseModel)
Result = TypeVar("Result", bound=BaseModel)

#: Called with (finished tasks, total tasks) while a job runs; Spark Classic only.
Progress = Callable[[int, int], None]

#: Default cap on tasks per call: one task per unit up to this many. Beyond it, units share tasks
#: (round-robin by index), which bounds scheduling overhead for plans of many small units.
MAX_DEFAULT_PARALLELISM = 256

_PROGRESS_INTERVAL_S = 0.5

_RESULT_ARROW_SCHEMA = pa.schema(
    [
        ("idx", pa.int64()),
        ("result", pa.string()),
        ("error_type", pa.string()),
        ("error_message", pa.string()),
        ("error_traceback", pa.string()),
    ]
)
_RESULT_DDL = "idx bigint, result string, error_type string, error_message string, error_traceback string"


class TaskFailed(LakeopsError):
    """A plan unit's task raised; carries what the worker saw and what finished anyway.

    ``index`` is the failed unit's position in the ``units`` given to :func:`run_units` (``None``
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
            self.add_note(f"traceback in the Spark task:\n{remote_traceback.rstrip()}")


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    if cls.__module__ == builtins.__name__:
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _task_name(task: Callable[..., object]) -> str:
    func = getattr(task, "func", task)  # functools.partial
    name = getattr(func, "__qualname__", None) or type(func).__qualname__
    return f"{getattr(func, '__module__', None) or '?'}.{name}"


def _dump(model: BaseModel) -> str:
    # by_alias: models mirror spec field names through aliases (pyiceberg style) and validate by
    # alias, so only an aliased dump round-trips.
    try:
        return model.model_dump_json(by_alias=True, round_trip=True)
    except PydanticSerializationError:  # a file name that is not UTF-8: lone surrogates (lakeops.jsontext)
        return dumps(model.model_dump(mode="json", by_alias=True, round_trip=True))


def _load(model_type: type[Unit], payload: str) -> Unit:
    """The model :func:`_dump` wrote. Text with escaped lone surrogates, which pydantic's JSON parser
    refuses, is parsed by :func:`json.loads` (such models hold listed file names, never base64 bytes)."""
    try:
        return model_type.model_validate_json(payload)
    except ValidationError as exc:
        if not any(e["type"] == "json_invalid" and "surrogate" in e["msg"] for e in exc.errors()):
            raise
    return model_type.model_validate(json.loads(payload))


def _run_one(task: Callable[[Unit], BaseModel], unit_type: type[Unit], idx: int, payload: str) -> pa.RecordBatch:
    """Run ``task`` on one unit inside a Spark task; an exception becomes an error row."""
    row: dict[str, list[object]] = {
        "idx": [idx],
        "result": [None],
        "error_type": [None],
        "error_message": [None],
        "error_traceback": [None],
    }
    try:
        result = task(_load(unit_type, payload))
        if not isinstance(result, BaseModel):
            raise TypeError(f"task returned {type(result).__name__}, expected a pydantic model")
        row["result"] = [_dump(result)]
    except Exception as exc:
        row["error_type"] = [_type_name(exc)]
        row["error_message"] = [str(exc)]
        row["error_traceback"] = [traceback.format_exc()]
    return pa.RecordBatch.from_pydict(row, schema=_RESULT_ARROW_SCHEMA)


def run_units(
    spark: SparkSession,
    units: Sequence[Unit],
    task: Callable[[Unit], Result],
    result_type: type[Result],
    *,
    parallelism: int | None = None,
    description: str | None = None,
    progress: Progress | None = None,
) -> list[Result]:
    """Run ``task`` on every unit in Spark tasks and return the results in unit order.

    ``task`` and the unit/result models are pickled to the executors: make them module-level
    definitions in a module the executors can import (``lakeops``, shipped or installed; see
    :func:`spark_jobs.session.ship_project`). Closures and lambdas are pickled by value and work
    too, but keep them for tests. All units must be of one model type.

    ``parallelism`` is the number of Spark tasks; default one per unit, capped at
    :data:`MAX_DEFAULT_PARALLELISM`. ``description`` labels the Spark job (UI, logs, status
    tracker); ``progress`` is polled with (finished tasks, total tasks) under Spark Classic.

    Raises :class:`TaskFailed` if any unit's task raised (the lowest failed index is reported; all
    failed indices and the completed results are attached).
    """
    if not units:
        return []
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PythonException
    from pyspark.sql import functions as F

    unit_type = _unit_type(units)
    if parallelism is not None and parallelism < 1:
        raise InvalidArgument(f"parallelism must be at least 1, got {parallelism}")
    slots = min(len(units), parallelism or MAX_DEFAULT_PARALLELISM)
    label = description or f"lakeops {_task_name(task)} on {len(units)} units"

    unit_df = spark.createDataFrame(
        [(i, _dump(unit)) for i, unit in enumerate(units)], schema="idx bigint, unit string"
    )
    placed = (
        spark.range(0, slots, 1, numPartitions=slots)
        .join(F.broadcast(unit_df), on=F.col("id") == F.col("idx") % F.lit(slots))
        .select("idx", "unit")
    )

    def run_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            indices = batch.column("idx").to_pylist()
            payloads = batch.column("unit").to_pylist()
            for idx, payload in zip(indices, payloads, strict=True):
                yield _run_one(task, unit_type, idx, payload)

    with warnings.catch_warnings():
        # pyspark warns on every new Arrow UDF that it "does not yet fully support pandas >= 3";
        # this path never touches pandas (Arrow batches in, Arrow batches out).
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
        results_df = placed.mapInArrow(run_partition, _RESULT_DDL)
    group = f"lakeops-{uuid.uuid4().hex[:12]}"
    try:
        with _job_group(spark, group, label), _progress_poller(spark, group, slots, progress):
            table = results_df.toArrow()
    except PythonException as exc:
        raise _outside_unit_failure(label, exc) from exc
    except Py4JJavaError as exc:  # the JVM gave up on the job: a Python worker crashed or was killed, an executor lost
        raise _job_failure(label, exc) from None
    return _collect(label, table.to_pylist(), len(units), result_type)


def run_on_driver(
    units: Sequence[Unit],
    task: Callable[[Unit], Result],
    result_type: type[Result],
    *,
    threads: int | None = None,
    description: str | None = None,
    progress: Progress | None = None,
) -> list[Result]:
    """:func:`run_units` without Spark: ``task`` runs on every unit in ``threads`` threads (default
    ``os.cpu_count()``) of this process; results come back in unit order.

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
    unit_type = _unit_type(units)
    if threads is not None and threads < 1:
        raise InvalidArgument(f"threads must be at least 1, got {threads}")
    label = description or f"lakeops {_task_name(task)} on {len(units)} units"
    workers = min(len(units), threads or os.cpu_count() or 1)
    report = _safe_progress(progress)
    rows: list[dict[str, object]] = []
    reported = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lakeops-unit") as pool:
        futures = [pool.submit(_run_one, task, unit_type, i, _dump(unit)) for i, unit in enumerate(units)]
        for done, future in enumerate(as_completed(futures), start=1):
            rows.extend(future.result().to_pylist())
            if done == len(units) or time.monotonic() - reported >= _PROGRESS_INTERVAL_S:
                reported = time.monotonic()
                report(done, len(units))
    return _collect(label, rows, len(units), result_type)


def _unit_type(units: Sequence[Unit]) -> type[Unit]:
    unit_type = type(units[0])
    if any(type(unit) is not unit_type for unit in units):
        names = sorted({type(unit).__name__ for unit in units})
        raise InvalidArgument(f"run_units needs units of one model type, got {', '.join(names)}")
    return unit_type


def _safe_progress(callback: Progress | None) -> Progress:
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


def _collect(label: str, rows: list[dict[str, object]], count: int, result_type: type[Result]) -> list[Result]:
    """Validate the task rows into results in unit order, or raise :class:`TaskFailed`."""
    by_index = {row["idx"]: row for row in rows}
    missing = sorted(set(range(count)) - set(by_index))
    if missing:  # Spark lost rows without failing: never commit on a partial result
        raise LakeopsError(f"{label}: Spark returned no result for units {missing[:10]}")
    failed = [i for i in range(count) if by_index[i]["error_type"] is not None]
    failed_set = set(failed)
    completed = {i: _load(result_type, str(by_index[i]["result"])) for i in range(count) if i not in failed_set}
    if failed:
        first = by_index[failed[0]]
        more = f" ({len(failed) - 1} more of {count} units failed)" if len(failed) > 1 else ""
        raise TaskFailed(
            f"{label}: unit {failed[0]} failed: {first['error_type']}: {first['error_message']}{more}",
            index=failed[0],
            error_type=str(first["error_type"]),
            error_message=str(first["error_message"]),
            remote_traceback=str(first["error_traceback"]) if first["error_traceback"] else None,
            failed=failed,
            completed=completed,
        )
    return [completed[i] for i in range(count)]


def _outside_unit_failure(label: str, exc: PythonException) -> TaskFailed:
    """Turn a Python worker error raised outside any unit (unpickling, imports) into TaskFailed.

    Spark reports it as text: a Python traceback whose unindented tail is ``Type: message``.
    """
    text = str(exc).rstrip()
    lines = text.splitlines()
    tail_start = max((i + 1 for i, line in enumerate(lines) if line.startswith((" ", "\t"))), default=0)
    tail = "\n".join(lines[tail_start:]).strip() or text
    error_type, sep, error_message = tail.partition(": ")
    if not sep or " " in error_type:
        error_type, error_message = type(exc).__name__, tail
    return TaskFailed(
        f"{label}: a Spark task failed outside any unit: {error_type}: {error_message}",
        index=None,
        error_type=error_type,
        error_message=error_message,
        remote_traceback=text,
    )


def _job_failure(label: str, exc: Exception) -> TaskFailed:
    """Turn a job Spark aborted (no unit raised: a worker process died, an executor was lost) into
    TaskFailed, named by the first Java exception line of its trace rather than the whole trace."""
    text = str(exc).strip()
    lines = [line.strip(": ") for line in text.splitlines() if line.strip()]
    cause = next((line for line in lines if "Exception:" in line), lines[0] if lines else type(exc).__name__)
    return TaskFailed(
        f"{label}: the Spark job failed outside any unit: {cause[:500]}",
        index=None,
        error_type=type(exc).__name__,
        error_message=cause,
        remote_traceback=text,
    )


_JOB_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


def _spark_context(spark: SparkSession) -> SparkContext | None:
    """The SparkContext behind ``spark``, or ``None`` under Spark Connect (it has none)."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return None
    return spark.sparkContext


@contextmanager
def _job_group(spark: SparkSession, group: str, description: str) -> Iterator[None]:
    """Label the jobs started in this block (Spark UI, logs, status tracker), then restore.

    Spark Classic: job group + description, which are thread-local properties; the caller's own
    values come back afterwards. Spark Connect: the group id becomes an operation tag.
    """
    sc = _spark_context(spark)
    if sc is None:
        spark.addTag(group)
        try:
            yield
        finally:
            spark.removeTag(group)
        return
    saved = {key: sc.getLocalProperty(key) for key in _JOB_PROPERTIES}
    sc.setJobGroup(group, description, interruptOnCancel=True)
    try:
        yield
    finally:
        for key, value in saved.items():
            sc.setLocalProperty(key, value)  # type: ignore[arg-type]  # None removes the property


@contextmanager
def _progress_poller(spark: SparkSession, group: str, total: int, callback: Progress | None) -> Iterator[None]:
    """Report (finished, total) tasks of the job group from a polling thread; Classic only."""
    sc = _spark_context(spark) if callback is not None else None
    if sc is None or callback is None:
        yield
        return
    tracker = sc.statusTracker()
    stop = threading.Event()
    safe = _safe_progress(callback)
    last = [-1]

    def report(done: int) -> None:
        if done != last[0]:
            last[0] = done
            safe(done, total)

    def finished() -> int:
        done = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else []:
                stage = tracker.getStageInfo(stage_id)
                # The mapInArrow stage is the one with a task per slot.
                if stage is not None and stage.numTasks == total:
                    done = max(done, stage.numCompletedTasks)
        return min(done, total)

    def loop() -> None:
        while not stop.wait(_PROGRESS_INTERVAL_S):
            try:
                report(finished())
            except Exception:  # the session may be stopping; progress is best effort
                return

    thread = threading.Thread(target=loop, name=f"{group}-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    report(total)
