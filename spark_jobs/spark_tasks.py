"""Plan units as Spark tasks: the Spark executor of the plan → execute → commit → report flow
(docs/architecture.md).

:func:`run_units` sends plan units (pydantic models, as JSON) to Spark tasks, runs a *pure*
``lakeops`` function on each one and returns the results, in unit order, to the driver. It uses
only the DataFrame API and session settings (``createDataFrame`` + ``mapInArrow``), so it runs
unchanged under Spark Connect.

Placement: each task receives only its own units, and no stage exists only to place them. The
units are dealt round-robin into ``slots`` (unit ``i`` to slot ``i % slots``) and sent as a
``createDataFrame`` of an Arrow table with one row per slot (its indices and its units' JSON). That
local relation is parallelized into ``min(rows, spark.sql.leafNodeDefaultParallelism)`` contiguous
slices, so with that setting at ``slots`` for the job (:func:`_leaf_parallelism`) partition ``k`` is
exactly slot ``k``: each task's partition carries one row, its payload bounded by its own units
however large the plan, and ``mapInArrow`` runs them in the scan's own stage (no shuffle, no
broadcast). One row per slot, not per unit, because contiguous slices of unit rows would not fall
on slot boundaries. ``repartition`` cannot promise one slot per partition (hash and round-robin
partitioning may put two slots in one partition and leave another empty) and costs a shuffle.
The alternatives weighed: the broadcast join this replaces sent every unit to every executor
and built the table in a stage of its own; ``parallelize(slices, numSlices)`` places as exactly but
is RDD API, absent under Spark Connect; units written to a staging file per slot, each task reading
its own, keep the driver's plan small too, but need a writable location known to ``run_units`` and
executor credentials for it, and cost a write, a read and a delete per run. The local relation
stays on the driver and in the query plan (under Connect, in the plan sent to the server, which
caches large ones as artifacts), so the driver holds the units' JSON once more while the job runs.
Results come back as Arrow batches; each is turned into models and released, so the driver does not
hold them as Arrow, dicts and models at once. They are all returned, which the list signature asks.

Errors: a unit's exception is caught in the task and returned as data, not raised through Spark
(:mod:`lakeops.executors`, whose per-unit wrapper and result collection run here too, so results,
``TaskFailed`` and its ``completed`` are those of the in-process executor). Spark therefore does not
retry a failed unit. pyspark is imported only by :func:`run_units`, so a driver-only run never loads it.
"""

from __future__ import annotations

import threading
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa
from pydantic import BaseModel

from lakeops.errors import InvalidArgument
from lakeops.executors import (
    RESULT_DDL,
    Progress,
    TaskFailed,
    collect_results,
    dump_model,
    run_unit,
    safe_progress,
    task_name,
    unit_type_of,
)
from lakeops.jsontext import printable

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.errors import PythonException
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["MAX_DEFAULT_PARALLELISM", "run_units"]

Unit = TypeVar("Unit", bound=BaseModel)
Result = TypeVar("Result", bound=BaseModel)

#: Default cap on tasks per call: one task per unit up to this many. Beyond it, units share tasks
#: (round-robin by index), which bounds scheduling overhead for plans of many small units.
MAX_DEFAULT_PARALLELISM = 256

_PROGRESS_INTERVAL_S = 0.5


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

    unit_type = unit_type_of(units)
    if parallelism is not None and parallelism < 1:
        raise InvalidArgument(f"parallelism must be at least 1, got {parallelism}")
    slots = min(len(units), parallelism or MAX_DEFAULT_PARALLELISM)
    # A label naming a path that is not UTF-8 holds lone surrogates, which Py4J cannot send: escaped.
    label = printable(description or f"lakeops {task_name(task)} on {len(units)} units")

    results_df = _results_frame(spark, units, task, unit_type, slots)
    group = f"lakeops-{uuid.uuid4().hex[:12]}"
    try:
        with (
            _job_group(spark, group, label),
            _leaf_parallelism(spark, slots),
            _progress_poller(spark, group, slots, progress),
        ):
            batches = results_df.toArrow().to_batches()
    except PythonException as exc:
        raise _outside_unit_failure(label, exc) from exc
    except Py4JJavaError as exc:  # the JVM gave up on the job: a Python worker crashed or was killed, an executor lost
        raise _job_failure(label, exc) from None
    return collect_results(label, _drain(batches), len(units), result_type)


def _results_frame(
    spark: SparkSession, units: Sequence[Unit], task: Callable[[Unit], BaseModel], unit_type: type[Unit], slots: int
) -> DataFrame:
    """The job: each slot's row, in its own partition, runs its units and yields one result row per unit."""

    def run_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            slot = batch.to_pydict()
            for indices, payloads in zip(slot["idx"], slot["unit"], strict=True):
                for idx, payload in zip(indices, payloads, strict=True):
                    yield run_unit(task, unit_type, idx, payload)

    with warnings.catch_warnings():
        # pyspark warns on every new Arrow UDF that it "does not yet fully support pandas >= 3";
        # this path never touches pandas (Arrow batches in, Arrow batches out).
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
        return _slot_rows(spark, units, slots).mapInArrow(run_partition, RESULT_DDL)


def _drain(batches: list[pa.RecordBatch]) -> Iterator[dict[str, object]]:
    """The result rows, each batch released once read: the driver holds the results as Arrow or as models,
    not as both plus a dict per row."""
    batches.reverse()
    while batches:
        yield from batches.pop().to_pylist()


_SLOT_DDL = "idx array<bigint>, unit array<string>"
_SLOT_SCHEMA = pa.schema([("idx", pa.list_(pa.int64())), ("unit", pa.list_(pa.string()))])
_LEAF_PARALLELISM = "spark.sql.leafNodeDefaultParallelism"


def _slot_rows(spark: SparkSession, units: Sequence[BaseModel], slots: int) -> DataFrame:
    """One row per slot ``k``: the indices ``k, k + slots, ...`` and those units' JSON, in that order.

    ``createDataFrame`` of an Arrow table makes a local relation (or, above
    ``spark.sql.execution.arrow.localRelationThreshold``, an RDD of one partition per Arrow batch); with
    :func:`_leaf_parallelism` in force either is cut into exactly ``slots`` partitions of one row each.
    """
    batches = [
        pa.record_batch(
            [
                pa.array([list(range(k, len(units), slots))], pa.list_(pa.int64())),
                pa.array([[dump_model(units[i]) for i in range(k, len(units), slots)]], pa.list_(pa.string())),
            ],
            schema=_SLOT_SCHEMA,
        )
        for k in range(slots)
    ]
    return spark.createDataFrame(pa.Table.from_batches(batches, _SLOT_SCHEMA), schema=_SLOT_DDL)


# Per session (by id) in this process: (run_units calls in progress, the caller's own value, largest slots).
_leaf_settings: dict[int, tuple[int, str | None, int]] = {}
_leaf_lock = threading.Lock()


@contextmanager
def _leaf_parallelism(spark: SparkSession, slots: int) -> Iterator[None]:
    """Cut a local relation of ``slots`` rows into ``slots`` partitions while the job runs, then restore
    the session's own value.

    A local relation of ``n`` rows is parallelized into ``min(n, spark.sql.leafNodeDefaultParallelism)``
    contiguous slices (default: the cluster's cores); at ``n = slots`` rows and at least as many slices,
    slice ``k`` is row ``k``. The setting is the session's, so concurrent calls on one session share it:
    it is the largest of their ``slots`` (exact for each of them), restored when the last one ends.
    """
    key = id(spark)
    with _leaf_lock:
        users, saved, largest = _leaf_settings.get(key) or (0, spark.conf.get(_LEAF_PARALLELISM, None), 0)
        largest = max(largest, slots)
        _leaf_settings[key] = (users + 1, saved, largest)
        spark.conf.set(_LEAF_PARALLELISM, str(largest))
    try:
        yield
    finally:
        with _leaf_lock:
            users, saved, largest = _leaf_settings.pop(key)
            if users > 1:
                _leaf_settings[key] = (users - 1, saved, largest)
            elif saved is None:
                spark.conf.unset(_LEAF_PARALLELISM)
            else:
                spark.conf.set(_LEAF_PARALLELISM, saved)


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
    safe = safe_progress(callback)
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
