"""Sensor evaluations on real local Delta tables (``build_sensor_context``): each sensor requests
exactly the runs its policy calls for, with run keys naming the table state, advances its cursor so
an unchanged table is not requested again, and logs and skips a table it cannot read."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from lakeops.registry import parse_registry
from orchestration.registry_definitions import build_definitions
from orchestration.resources import StorageResource


def _append(path: Path, commits: int, first_id: int = 0) -> None:
    for i in range(commits):
        start = first_id + i * 5
        write_deltalake(str(path), pa.table({"id": pa.array(range(start, start + 5), pa.int64())}), mode="append")


@pytest.fixture
def tables(tmp_path: Path) -> dict[str, Path]:
    busy, quiet = tmp_path / "busy", tmp_path / "quiet"
    _append(busy, 6)
    _append(quiet, 2)
    return {"busy": busy, "quiet": quiet, "root": tmp_path}


def _sensors(tables: dict[str, Path], *, broken: bool = False, cdc: bool = False) -> dict[str, dg.SensorDefinition]:
    extra = f"\n  - name: gone\n    location: {tables['root'] / 'missing'}\n    format: delta" if broken else ""
    feed = f"\n    cdc: {{enabled: true, output: {tables['root'] / 'changes'}, start_date: 2026-01-01}}" if cdc else ""
    registry = parse_registry(
        f"""
tables:
  - name: busy
    location: {tables["busy"]}
    compaction: {{small_file_trigger: 4}}
    checkpoint: {{interval: 5}}{feed}
  - name: quiet
    location: {tables["quiet"]}
    compaction: {{small_file_trigger: 4}}
    checkpoint: {{interval: 5}}{extra}
"""
    )
    return {s.name: s for s in build_definitions(registry).sensors or []}


def _evaluate(
    sensor: dg.SensorDefinition, cursor: str | None = None, instance: dg.DagsterInstance | None = None
) -> dg.SensorResult:
    context = dg.build_sensor_context(
        cursor=cursor, resources={"storage": StorageResource()}, instance=instance or dg.DagsterInstance.ephemeral()
    )
    result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def test_small_file_sensor_requests_compaction_once_per_table_state(tables: dict[str, Path]) -> None:
    sensor = _sensors(tables)["lakeops_small_files"]
    first = _evaluate(sensor)
    assert [(r.run_key, r.asset_selection) for r in first.run_requests or []] == [
        ("busy:compaction:5", [dg.AssetKey(["busy", "compaction"])])
    ]
    assert (first.run_requests or [])[0].tags["lakeops/small_files"] == "6"
    assert json.loads(first.cursor or "") == {"busy": "5"}

    again = _evaluate(sensor, first.cursor)
    assert again.run_requests == [] and json.loads(again.cursor or "") == {"busy": "5"}

    _append(tables["busy"], 1, first_id=1000)
    _append(tables["quiet"], 2, first_id=1000)
    moved = _evaluate(sensor, again.cursor)
    assert sorted(r.run_key for r in moved.run_requests or []) == ["busy:compaction:6", "quiet:compaction:3"]
    assert json.loads(moved.cursor or "") == {"busy": "6", "quiet": "3"}


def test_checkpoint_sensor_counts_commits_since_the_last_checkpoint(tables: dict[str, Path]) -> None:
    sensor = _sensors(tables)["lakeops_checkpoints"]
    result = _evaluate(sensor)
    (request,) = result.run_requests or []
    assert request.run_key == "busy:checkpoint:5"
    assert request.asset_selection == [dg.AssetKey(["busy", "checkpoint"])]
    assert request.tags["lakeops/commits_since_checkpoint"] == "6"
    assert _evaluate(sensor, result.cursor).run_requests == []


def test_an_unreadable_table_is_logged_and_skipped(tables: dict[str, Path], capfd: pytest.CaptureFixture[str]) -> None:
    sensor = _sensors(tables, broken=True)["lakeops_small_files"]
    result = _evaluate(sensor)
    assert [r.run_key for r in result.run_requests or []] == ["busy:compaction:5"]
    assert "gone" not in json.loads(result.cursor or "")
    warning = next(line for line in capfd.readouterr().err.splitlines() if "WARNING - gone" in line)
    assert f"gone ({tables['root'] / 'missing'}): skipped, cannot read it: NotATable" in warning


def test_cdc_sensor_requests_todays_partition_for_unextracted_versions(tables: dict[str, Path]) -> None:
    sensor = _sensors(tables, cdc=True)["lakeops_cdc"]
    result = _evaluate(sensor)
    (request,) = result.run_requests or []
    assert request.run_key == "busy:cdc:5"
    assert request.partition_key == datetime.now(UTC).strftime("%Y-%m-%d")
    assert request.tags["lakeops/pending_versions"] == "0..5"
    assert _evaluate(sensor, result.cursor).run_requests == []


def test_requests_resolve_as_the_daemon_resolves_them_to_runs_of_one_table(
    tables: dict[str, Path], tmp_path: Path
) -> None:
    """Evaluated with the repository and a persistent instance, as the daemon and the UI's dry run
    evaluate: each request names its table, and its selection (the asset and its check) with its
    partition is a valid run of the job it resolves to. The UI's "Apply requests" once failed with
    InvalidSubsetError (an asset selected without its check), and the location did not load at all
    with two CDC tables starting on different days."""
    parted = tmp_path / "parted"
    for i in range(6):
        rows = pa.table({"id": pa.array([i], pa.int64()), "day": pa.array([f"d{i % 2}"])})
        write_deltalake(str(parted), rows, mode="append", partition_by=["day"])
    today = datetime.now(UTC).date()
    registry = parse_registry(
        f"""
tables:
  - name: busy
    location: {tables["busy"]}
    compaction: {{small_file_trigger: 4}}
    checkpoint: {{interval: 5}}
    cdc: {{enabled: true, output: {tmp_path / "busy_changes"}, start_date: {today - timedelta(days=40)}}}
  - name: quiet
    location: {tables["quiet"]}
    compaction: {{small_file_trigger: 2}}
    cdc: {{enabled: true, output: {tmp_path / "quiet_changes"}, start_date: {today}}}
  - name: parted
    location: {parted}
    compaction: {{small_file_trigger: 2, min_input_files: 2, partitioned: true}}
"""
    )
    repo = build_definitions(registry).get_repository_def()
    requested = set()
    with dg.instance_for_test() as instance:
        for sensor in repo.sensor_defs:
            context = dg.build_sensor_context(
                instance=instance,
                instance_ref=instance.get_ref(),
                repository_def=repo,
                resources={"storage": StorageResource()},
            )
            tick = sensor.evaluate_tick(context)
            added = {key for add in tick.dynamic_partitions_requests or [] for key in add.partition_keys or []}
            for request in tick.run_requests or []:
                table = request.tags["lakeops/table"]
                (key,) = request.asset_selection or []
                assert (
                    key.path[0] == table and request.run_key and request.run_key.startswith(f"{table}:{key.path[1]}:")
                )
                assert [c.asset_key for c in request.asset_check_keys or []] == [key]
                job = repo.get_job(request.job_name or "")
                job.get_subset(asset_selection={key}, asset_check_selection=set(request.asset_check_keys or []))
                partitions = repo.asset_graph.get(key).partitions_def
                if isinstance(partitions, dg.DynamicPartitionsDefinition):
                    assert request.partition_key in added
                elif partitions is not None:
                    assert partitions.has_partition_key(request.partition_key or "")
                assert request.tags.get("dagster/partition") == request.partition_key
                requested.add(request.run_key)
    assert requested == {
        "busy:compaction:5",
        "quiet:compaction:1",
        "parted:compaction:day=d0:5",
        "parted:compaction:day=d1:5",
        "busy:checkpoint:5",
        "busy:cdc:5",
        "quiet:cdc:1",
    }


def test_cdc_that_starts_after_today_requests_nothing_even_with_a_watermark(
    tables: dict[str, Path], tmp_path: Path
) -> None:
    """An output that already holds versions 0..2 and a start date moved past today: today is not a
    partition yet, and requesting it would fail the whole tick (every table's requests)."""
    output = tmp_path / "busy_changes"
    source_id = DeltaTable(str(tables["busy"])).metadata().id
    watermark = CommitProperties(app_transactions=[Transaction(app_id=source_id, version=2)])
    write_deltalake(str(output), pa.table({"id": pa.array([0], pa.int64())}), commit_properties=watermark)
    start = datetime.now(UTC).date() + timedelta(days=3)
    registry = parse_registry(
        f"""
tables:
  - name: busy
    location: {tables["busy"]}
    cdc: {{enabled: true, output: {output}, start_date: {start}}}
"""
    )
    repo = build_definitions(registry).get_repository_def()
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(
            instance=instance,
            instance_ref=instance.get_ref(),
            repository_def=repo,
            resources={"storage": StorageResource()},
        )
        tick = repo.get_sensor_def("lakeops_cdc").evaluate_tick(context)
    assert tick.run_requests == [] and json.loads(tick.cursor or "{}") == {}
