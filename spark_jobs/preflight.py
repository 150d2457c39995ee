"""Preflight on the executors: before the first unit of a plan runs as a Spark task, check that the
executors can read the plan's table, and fail the run with one error naming the location otherwise.

Executors reach storage with their own identity (the workers' environment, an instance or pod role),
never the driver's keys (:func:`lakeops.storage.s3.using_keys` lends keys to the driver process
only, and so do the credentials a REST catalog vends, :mod:`lakeops.storage.s3_leases`). A cluster
whose workers lack it would fail every unit with "Unable to locate credentials",
after the plan paid for its first stage; here one short task per registered executor (one on a
local master) lists the table root's first entry and stats it: no data is read. A check that passed
is not repeated for the same application, table and storage settings (plans of several batches).

Every plan unit names its table as ``table_root`` or ``table_location`` and its storage settings as
``storage`` (:class:`lakeops.storage.StorageOptions`); a unit without them has no table to check.
"""

from __future__ import annotations

import socket
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pydantic import BaseModel

from lakeops.errors import StorageError
from lakeops.executors import TaskFailed
from lakeops.storage import StorageOptions, normalize, open_storage, scheme

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["check_executors", "probe", "table_of"]

_RESULT_DDL = "host string, problem string"

#: (application or Connect session, table root, storage settings) whose preflight passed.
_PASSED: set[tuple[str, str, str]] = set()


def table_of(unit: BaseModel) -> tuple[str, StorageOptions] | None:
    """The table root and storage settings ``unit`` names, or None if it names none."""
    root = getattr(unit, "table_root", None) or getattr(unit, "table_location", None)
    storage = getattr(unit, "storage", None)
    if not isinstance(root, str) or not isinstance(storage, StorageOptions):
        return None
    return root, storage


def probe(root: str, options: StorageOptions) -> str | None:
    """What keeps this process from reading ``root`` (None: nothing): its first entry is listed and
    stat'ed, which needs the same permissions as the units (list and read), and no data. A ``file:`` URI
    is read literally: only Iceberg units carry one (their table's recorded location); Delta's roots are
    normalised paths already."""
    try:
        root = normalize(root, literal=True)
        storage = open_storage(root, options)
        first = next(iter(storage.list(root)), None)
        if first is None:
            return "nothing found there"
        storage.stat(first.path)
    except Exception as exc:  # any failure is the answer, reported by the driver
        return f"{type(exc).__name__}: {exc}"
    return None


def _hint(root: str) -> str:
    if scheme(root) == "s3":
        return "set AWS_* in the workers' environment or give them an instance/pod role"
    return "the workers must see the same path, e.g. on a shared file system"


def _executors(spark: SparkSession) -> tuple[str, int]:
    """The application (or Connect session) id and how many executors are registered (at least one;
    a local master's driver is its executor; Spark Connect does not tell)."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return f"connect:{getattr(spark, 'session_id', '')}", 1
    sc = spark.sparkContext
    registered = sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # the driver is listed too
    return sc.applicationId, max(1, registered)


def check_executors(spark: SparkSession, units: Sequence[BaseModel]) -> None:
    """Raise :class:`~lakeops.errors.StorageError` naming the table and the first problem unless
    every preflight task could read the table the units name. Spark places the tasks (one per
    executor registered, short ones, so normally one on each)."""
    found = table_of(units[0]) if units else None
    if found is None:
        return
    root, options = found
    application, tasks = _executors(spark)
    key = (application, root, options.model_dump_json())
    if key in _PASSED:
        return

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _ in batches:
            pass
        problem = probe(root, options)
        yield pa.RecordBatch.from_pylist([{"host": socket.gethostname(), "problem": problem}])

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
        checks = spark.range(0, tasks, 1, numPartitions=tasks).mapInArrow(run, _RESULT_DDL)
    try:
        rows = checks.toArrow().to_pylist()
    except Exception as exc:  # the task itself failed (lakeops not importable, a lost worker)
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise TaskFailed(
            f"{root}: the executors' preflight task failed: {first[:500]}",
            index=None,
            error_type=type(exc).__name__,
            error_message=first,
            remote_traceback=str(exc),
        ) from None
    failed = [row for row in rows if row["problem"]]
    if failed:
        hosts = ", ".join(sorted({row["host"] for row in failed}))
        raise StorageError(f"executors cannot read {root} (on {hosts}): {failed[0]['problem']} ({_hint(root)})")
    _PASSED.add(key)
