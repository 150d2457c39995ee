"""Plan units on Spark (spark_jobs.spark_tasks) and the session that runs them (spark_jobs.session).

The tasks and models below live in this test module, which pytest imports with
``--import-mode=importlib``: Spark workers cannot import it by name. Registering the module with
cloudpickle makes pyspark pickle its functions and classes by value, which is what lets the
workers run them (real tasks live in ``lakeops`` and are pickled by reference).
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field
from pyspark import TaskContext, cloudpickle
from pyspark.sql import SparkSession

from lakeops.errors import CorruptFile, InvalidArgument, LakeopsError
from lakeops.executors import TaskFailed
from spark_jobs import session as session_module
from spark_jobs import spark_tasks as runner
from spark_jobs.session import build_session, is_local_master
from spark_jobs.spark_tasks import run_units

cloudpickle.register_pickle_by_value(sys.modules[__name__])

_LOCAL_RELATION_THRESHOLD = "spark.sql.execution.arrow.localRelationThreshold"


class Unit(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)

    index: int
    # An alias, as in pyiceberg-style models: the unit must round-trip through JSON by alias.
    path: str = Field(alias="file-path")
    sleep_s: float = 0.0


class Echo(BaseModel):
    index: int
    path: str = Field(alias="file-path")
    pid: int


class WorkerInfo(BaseModel):
    executable: str


class Placement(BaseModel):
    partition: int


def echo(unit: Unit) -> Echo:
    time.sleep(unit.sleep_s)
    return Echo(index=unit.index, **{"file-path": unit.path}, pid=os.getpid())


def corrupt_on_odd(unit: Unit) -> Echo:
    if unit.index % 2:
        raise CorruptFile(f"{unit.path}: bad Parquet footer magic b'PAR0'")
    return echo(unit)


def partition_of(unit: Unit) -> Placement:
    context = TaskContext.get()
    assert context is not None
    return Placement(partition=context.partitionId())


def worker_python(unit: Unit) -> WorkerInfo:
    return WorkerInfo(executable=sys.executable)


def units(count: int, *, sleep_s: float = 0.0) -> list[Unit]:
    return [Unit(index=i, path=f"part-{i:05d}.parquet", sleep_s=sleep_s) for i in range(count)]


def test_results_come_back_in_unit_order(spark: SparkSession) -> None:
    results = run_units(spark, units(50), echo, Echo, description="test: echo 50 units")

    assert [r.index for r in results] == list(range(50))
    assert [r.path for r in results] == [f"part-{i:05d}.parquet" for i in range(50)]


def test_each_unit_gets_its_own_task(spark: SparkSession) -> None:
    placed = run_units(spark, units(7), partition_of, Placement)
    assert [p.partition for p in placed] == list(range(7))


def test_units_share_tasks_round_robin_beyond_parallelism(spark: SparkSession) -> None:
    placed = run_units(spark, units(7), partition_of, Placement, parallelism=3)
    assert [p.partition for p in placed] == [0, 1, 2, 0, 1, 2, 0]


def test_placement_holds_for_a_unit_table_above_the_local_relation_threshold(spark: SparkSession) -> None:
    # Above the threshold Spark Classic parallelizes the Arrow batches (one per slot) instead.
    spark.conf.set(_LOCAL_RELATION_THRESHOLD, "0")
    try:
        placed = run_units(spark, units(7), partition_of, Placement, parallelism=3)
    finally:
        spark.conf.unset(_LOCAL_RELATION_THRESHOLD)
    assert [p.partition for p in placed] == [0, 1, 2, 0, 1, 2, 0]


def test_one_stage_of_one_task_per_slot_places_and_runs_the_units(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups: list[str] = []
    label_jobs = runner._job_group

    def recording(session: SparkSession, group: str, description: str) -> object:
        groups.append(group)
        return label_jobs(session, group, description)

    monkeypatch.setattr(runner, "_job_group", recording)
    placed = run_units(spark, units(1000), partition_of, Placement, parallelism=8)

    assert [p.partition for p in placed] == [i % 8 for i in range(1000)]
    tracker = spark.sparkContext.statusTracker()
    stages = [stage for job in tracker.getJobIdsForGroup(groups[0]) for stage in tracker.getJobInfo(job).stageIds]
    # No stage builds or broadcasts a unit table: the units are read by the stage that runs them.
    assert [tracker.getStageInfo(stage).numTasks for stage in stages] == [8]


def _task_payloads(spark: SparkSession, count: int, slots: int) -> tuple[list[int], int, str]:
    """What Spark ships per task of the run_units job for ``count`` units in ``slots`` tasks: each
    partition serialized (a task carries its partition) and the stage's task binary (the RDD lineage
    with the pickled task, sent once per executor), measured by the JVM's own Java serialization,
    and the physical plan."""
    frame = runner._results_frame(spark, units(count), echo, Unit, slots)
    serialize = spark.sparkContext._jvm.org.apache.spark.util.Utils.serialize  # type: ignore[union-attr]
    with runner._leaf_parallelism(spark, slots):
        plan = frame._jdf.queryExecution().executedPlan()
        rdd = plan.execute()
        partitions = [len(serialize(partition)) for partition in rdd.partitions()]
        return partitions, len(serialize(rdd)), plan.toString()


@pytest.mark.parametrize(
    ("threshold", "scan"),
    [(None, "LocalTableScan"), ("0", "Scan ExistingRDD")],
    ids=["local-relation", "above-local-relation-threshold"],
)
def test_each_task_receives_only_its_own_units_however_large_the_plan(
    spark: SparkSession, threshold: str | None, scan: str
) -> None:
    if threshold is not None:
        spark.conf.set(_LOCAL_RELATION_THRESHOLD, threshold)
    try:
        # Five units per task in both plans; the second is a hundred times larger.
        small_parts, small_binary, small_plan = _task_payloads(spark, 10, slots=2)
        large_parts, large_binary, large_plan = _task_payloads(spark, 1000, slots=200)
    finally:
        spark.conf.unset(_LOCAL_RELATION_THRESHOLD)

    assert (len(small_parts), len(large_parts)) == (2, 200)
    # Index digits make the larger plan's units a few bytes longer; nothing else may grow.
    assert max(large_parts) <= max(small_parts) * 1.1
    assert large_binary <= small_binary * 1.1
    # A task's partition is its five units' share of the plan, not the plan.
    whole_plan = sum(len(unit.model_dump_json(by_alias=True)) for unit in units(1000))
    assert max(large_parts) * 20 < whole_plan
    for plan in (small_plan, large_plan):
        assert "Exchange" not in plan  # neither broadcast nor shuffle
        assert scan in plan


def test_leaf_parallelism_setting_is_restored(spark: SparkSession) -> None:
    key = "spark.sql.leafNodeDefaultParallelism"
    assert spark.conf.get(key, None) is None
    run_units(spark, units(3), echo, Echo)
    assert spark.conf.get(key, None) is None
    spark.conf.set(key, "5")
    try:
        with pytest.raises(TaskFailed):
            run_units(spark, units(3), corrupt_on_odd, Echo)
        assert spark.conf.get(key) == "5"
    finally:
        spark.conf.unset(key)


def test_concurrent_calls_on_one_session_each_get_their_own_placement(spark: SparkSession) -> None:
    key = "spark.sql.leafNodeDefaultParallelism"
    with ThreadPoolExecutor(max_workers=2) as pool:
        wide = pool.submit(run_units, spark, units(6, sleep_s=0.5), partition_of, Placement)
        narrow = pool.submit(run_units, spark, units(6, sleep_s=0.5), partition_of, Placement, parallelism=2)
        assert [p.partition for p in wide.result()] == [0, 1, 2, 3, 4, 5]
        assert [p.partition for p in narrow.result()] == [0, 1, 0, 1, 0, 1]
    assert spark.conf.get(key, None) is None


def test_unit_error_surfaces_with_type_and_message(spark: SparkSession) -> None:
    with pytest.raises(TaskFailed) as caught:
        run_units(spark, units(6), corrupt_on_odd, Echo, description="test: corrupt")

    err = caught.value
    assert isinstance(err, LakeopsError)
    assert "CorruptFile" in str(err)
    assert "part-00001.parquet: bad Parquet footer magic b'PAR0'" in str(err)
    assert err.index == 1
    assert err.error_type == "lakeops.errors.CorruptFile"
    assert err.error_message == "part-00001.parquet: bad Parquet footer magic b'PAR0'"
    assert err.failed == (1, 3, 5)
    # What finished anyway is handed back, so the caller can clean up its output.
    assert sorted(err.completed) == [0, 2, 4]
    assert all(isinstance(r, Echo) for r in err.completed.values())
    assert err.remote_traceback is not None and "corrupt_on_odd" in err.remote_traceback


def test_task_returning_a_non_model_fails_clearly(spark: SparkSession) -> None:
    with pytest.raises(TaskFailed, match="TypeError: task returned str, expected a pydantic model"):
        run_units(spark, units(1), str, Echo)  # type: ignore[arg-type]


def test_empty_plan_does_not_touch_spark() -> None:
    assert run_units(None, [], echo, Echo) == []  # type: ignore[arg-type]


def test_mixed_unit_types_are_refused(spark: SparkSession) -> None:
    with pytest.raises(InvalidArgument, match="one model type"):
        run_units(spark, [*units(1), WorkerInfo(executable="x")], echo, Echo)  # type: ignore[list-item]


def test_progress_reports_tasks(spark: SparkSession) -> None:
    seen: list[tuple[int, int]] = []
    run_units(spark, units(4, sleep_s=0.6), echo, Echo, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (4, 4)
    assert all(total == 4 and 0 <= done <= 4 for done, total in seen)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_job_group_is_restored(spark: SparkSession) -> None:
    sc = spark.sparkContext
    sc.setJobGroup("caller-group", "the caller's own label")
    try:
        run_units(spark, units(2), echo, Echo, description="test: labels")
        assert sc.getLocalProperty("spark.jobGroup.id") == "caller-group"
        assert sc.getLocalProperty("spark.job.description") == "the caller's own label"
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
        sc.setLocalProperty("spark.job.interruptOnCancel", None)  # type: ignore[arg-type]


def test_session_defaults(spark: SparkSession) -> None:
    assert spark.sparkContext.master == "local[2]"
    assert spark.conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.pyspark.python") == sys.executable
    assert spark.conf.get("spark.pyspark.driver.python") == sys.executable
    assert spark.conf.get("spark.driver.host") == "127.0.0.1"
    assert spark.conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert spark.conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert int(spark.conf.get("spark.sql.shuffle.partitions")) <= 16
    assert spark.conf.get("spark.log.level") == "WARN"
    assert "log4j2.configurationFile" in spark.conf.get("spark.driver.extraJavaOptions")


def test_workers_run_the_driver_interpreter(spark: SparkSession) -> None:
    [info] = run_units(spark, units(1), worker_python, WorkerInfo)
    assert Path(info.executable) == Path(sys.executable)


@pytest.mark.parametrize(
    ("master", "ui", "expected"),
    [
        ("local[2]", False, "false"),  # a few local tasks: no UI, one less port
        ("spark://master:7077", False, None),  # a cluster's settings decide (deploy/ turns it on)
        ("k8s://https://kubernetes.default.svc:443", False, None),
        (None, False, None),  # spark-submit chose the master
        ("local[2]", True, "true"),
    ],
)
def test_the_ui_is_off_only_for_local_masters(master: str | None, ui: bool, expected: str | None) -> None:
    settings = session_module._settings(master, "lakeops", {}, ui, new_jvm=False)
    assert settings.get("spark.ui.enabled") == expected


def test_build_session_reuses_the_active_session(spark: SparkSession) -> None:
    assert build_session() is spark  # nothing requested explicitly: reuse
    assert build_session(master="local[2]", conf={"spark.sql.shuffle.partitions": "3"}) is spark
    assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    spark.conf.set("spark.sql.shuffle.partitions", "8")


def test_build_session_refuses_another_master(spark: SparkSession) -> None:
    with pytest.raises(InvalidArgument, match="already active"):
        build_session(master="spark://elsewhere:7077")


@pytest.mark.parametrize(
    ("master", "local"),
    [
        ("local", True),
        ("local[*]", True),
        ("local[4,2]", True),
        ("local-cluster[2,1,1024]", True),
        ("spark://host:7077", False),
        ("yarn", False),
        ("k8s://https://api:6443", False),
        ("sc://localhost:15002", False),
    ],
)
def test_is_local_master(master: str, local: bool) -> None:
    assert is_local_master(master) is local
