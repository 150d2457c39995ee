"""One detection and one read of each table (an Icechunk repository's: its format and refs) per sensor
tick and per table observation: every sensor (``build_sensor_context``) and the ``<table>/table``
observation open each table once and hand the handle to the inspection, its partitions, the
consumer's watermark and the data version."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from icechunk_repos import build_history
from pyiceberg_tables import small_file_table
from run_events import own_checks, own_materializations
from table_reads import count_reads

from lakeops.registry import Registry, parse_registry
from lakeops.storage import open_storage
from lakeops.storage.uri import normalize
from orchestration.assets import operation_key, table_key
from orchestration.registry_definitions import build_definitions
from orchestration.resources import SparkResource, StorageResource

pytestmark = pytest.mark.orchestration


def _registry(tmp_path: Path) -> tuple[Registry, str, str]:
    daily = tmp_path / "daily"
    for i in range(8):
        rows = pa.table({"id": pa.array([i], pa.int64()), "day": ["2026-11-01" if i % 4 else "2026-11-02"]})
        write_deltalake(str(daily), rows, mode="append", partition_by=["day"])
    iceberg = small_file_table(tmp_path, appends=4, rows=5)
    repo = tmp_path / "repo"
    build_history(open_storage(str(repo)), str(repo), commits=3)
    registry = parse_registry(
        f"""
tables:
  - name: daily
    location: {daily}
    format: delta
    compaction: {{small_file_trigger: 2, min_input_files: 2, partitioned: true}}
    checkpoint: {{interval: 5}}
    cdc: {{enabled: true, output: {tmp_path / "changes"}, start_date: 2026-01-01}}
  - name: catalogued
    catalog: {{uri: "{iceberg.catalog_uri}"}}
    identifier: {iceberg.identifier}
    compaction: {{small_file_trigger: 2}}
    checkpoint: {{interval: 2}}
  - name: repo
    location: {repo}
    compaction: {{small_file_trigger: 2, min_input_files: 2}}
    cdc: {{enabled: true, output: {tmp_path / "repo_changes"}, start_date: 2026-01-01}}
"""
    )
    return registry, normalize(str(daily)), iceberg.identifier


@pytest.mark.parametrize("sensor", ["lakeops_small_files", "lakeops_checkpoints", "lakeops_cdc"])
def test_a_sensor_tick_detects_and_reads_each_table_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sensor: str
) -> None:
    registry, daily, catalogued = _registry(tmp_path)
    (evaluate,) = [s for s in build_definitions(registry).sensors or [] if s.name == sensor]
    reads = count_reads(monkeypatch)
    context = dg.build_sensor_context(resources={"storage": StorageResource()}, instance=dg.DagsterInstance.ephemeral())
    result = evaluate(context)
    assert isinstance(result, dg.SensorResult)
    assert {r.run_key.split(":")[0] for r in result.run_requests or []} >= {"daily"}  # it decided on real reads
    assert reads.of(daily) == (1, 1, 1)
    if sensor != "lakeops_cdc":  # the catalogued table has no CDC consumer
        assert reads.of(catalogued) == (1, 0, 1)
    # An Icechunk repository: detected once, its format and refs read once for the inspection and the
    # data version alike (the CDC tick needs none of its state today).
    repo = normalize(str(tmp_path / "repo"))
    assert reads.of(repo) == (1, 1, 0 if sensor == "lakeops_cdc" else 1)


def test_a_table_observation_detects_and_reads_the_table_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The inspection, the data version and the CDC lag of one observation share one handle."""
    registry, daily, _ = _registry(tmp_path)
    reads = count_reads(monkeypatch)
    result = dg.materialize(
        list(build_definitions(registry).assets or []),
        selection=[table_key(registry.table("daily"))],
        resources={"spark": SparkResource(), "storage": StorageResource()},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    assert reads.of(daily) == (1, 1, 1)


@pytest.mark.parametrize(("table", "operation"), [("daily", "checkpoint"), ("catalogued", "compaction")])
def test_a_maintenance_run_finds_its_table_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, operation: str
) -> None:
    """The run's options, its operation, its audit record and its check share one handle (the run
    once resolved the table for its options and again inside the operation)."""
    registry, daily, catalogued = _registry(tmp_path)
    reads = count_reads(monkeypatch)
    result = dg.materialize(
        list(build_definitions(registry).assets or []),
        selection=[operation_key(registry.table(table), operation)],
        resources={"spark": SparkResource(executor="driver"), "storage": StorageResource()},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    (check,) = own_checks(result)
    assert check.passed
    found, detected, _ = reads.of(daily if table == "daily" else catalogued)
    assert (found, detected) == ((1, 1) if table == "daily" else (1, 0))  # a catalog names its tables' format


def test_the_driver_executor_runs_every_plan_without_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``executor: driver`` keeps a run in the run's own process however large its plan; ``auto``
    sends a plan over the driver limits to Spark (here: limits 0, and a session that cannot start)."""
    import spark_jobs.session

    location = tmp_path / "events"
    for i in range(6):
        write_deltalake(str(location), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    registry = parse_registry(
        f"tables:\n  - name: events\n    location: {location}\n    compaction: {{min_input_files: 2}}\n"
    )
    entry = registry.table("events")

    def no_spark(**_: object) -> None:
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr(spark_jobs.session, "build_session", no_spark)
    monkeypatch.setenv("LAKEOPS_DRIVER_MAX_BYTES", "0")
    monkeypatch.setenv("LAKEOPS_DRIVER_MAX_UNITS", "0")
    outcomes = {}
    for executor in ("auto", "driver"):  # auto first: its run fails before it commits anything
        result = dg.materialize(
            list(build_definitions(registry).assets or []),
            selection=[operation_key(entry, "compaction")],
            resources={"spark": SparkResource(executor=executor), "storage": StorageResource()},
            instance=dg.DagsterInstance.ephemeral(),
            raise_on_error=False,
        )
        outcomes[executor] = result.success
        if result.success:
            (materialization,) = own_materializations(result, "events__compaction")
            assert materialization.metadata["files_removed"].value == 6
    assert outcomes == {"auto": False, "driver": True}
