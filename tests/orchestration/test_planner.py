"""The ``lakeops_planner`` sensor in-process (``build_sensor_context``) on real local Delta tables:
in its window it requests the chosen runs in rank order and records the plan on
``lakeops/maintenance_plan``; once the window is over it records each action's predicted against
actual cost and benefit, from the tables' audit records (the runs here go through ``lakeops.api``,
as an asset's run does, without starting Spark), with the prediction error as a number; a CDC run,
recorded under its change table, counts as its source's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakeops import api
from lakeops.ops.options import CdcOptions, CheckpointOptions, CompactionOptions
from lakeops.planning.models import Action, Benefit, CostEstimate, Decision
from lakeops.registry import RegistryError, parse_registry
from orchestration.assets import MAX_REWRITE_BYTES_TAG
from orchestration.planning import PLAN_KEY, PlannerCursor, _request, evaluate_planner
from orchestration.registry_definitions import build_definitions
from orchestration.resources import StorageResource


def _append(path: Path, commits: int) -> None:
    for i in range(commits):
        write_deltalake(str(path), pa.table({"id": pa.array(range(i * 5, i * 5 + 5), pa.int64())}), mode="append")


def _registry(tmp_path: Path, window: str) -> str:
    busy, quiet = tmp_path / "busy", tmp_path / "quiet"
    _append(busy, 25)
    _append(quiet, 3)
    return f"""
maintenance_budget: {{window: "{window}", core_minutes: 1.2, length: 2h}}
tables:
  - name: busy
    location: {busy}
    compaction: {{min_input_files: 2}}
  - name: quiet
    location: {quiet}
    compaction: {{min_input_files: 2}}
"""


def _context(cursor: str | None, instance: dg.DagsterInstance) -> dg.SensorEvaluationContext:
    return dg.build_sensor_context(cursor=cursor, resources={"storage": StorageResource()}, instance=instance)


def test_the_sensor_plans_its_window_once(tmp_path: Path) -> None:
    """Every minute is a window here, so the sensor plans now; the plan is on the asset."""
    defs = build_definitions(parse_registry(_registry(tmp_path, "* * * * *")))
    sensor = next(s for s in defs.sensors or [] if s.name == "lakeops_planner")
    instance = dg.DagsterInstance.ephemeral()
    result = sensor(_context(None, instance))
    assert isinstance(result, dg.SensorResult)
    requests = result.run_requests or []
    # 1.2 core-minutes: three runs at the default 20 s or so each; quiet's compaction (as much
    # benefit as its checkpoint, more bytes) waits.
    assert [(r.asset_selection, r.tags["lakeops/planned_rank"]) for r in requests] == [
        ([dg.AssetKey(["busy", "checkpoint"])], "1"),
        ([dg.AssetKey(["busy", "compaction"])], "2"),
        ([dg.AssetKey(["quiet", "checkpoint"])], "3"),
    ]
    assert all(r.run_key and r.run_key.startswith("plan:") for r in requests)
    (event,) = result.asset_events or []
    assert isinstance(event, dg.AssetMaterialization) and event.asset_key == PLAN_KEY
    summary = event.metadata["summary"].value
    assert isinstance(summary, str)
    assert "`busy:compaction`" in summary and "25 small files in the table merge into 1" in summary
    assert event.metadata["chosen"].value == 3
    assert PLAN_KEY in {spec.key for spec in defs.assets or [] if isinstance(spec, dg.AssetSpec)}


def test_plan_then_review_after_the_window(tmp_path: Path) -> None:
    registry = parse_registry(_registry(tmp_path, "0 1 * * *"))
    budget = registry.maintenance_budget
    assert budget is not None
    instance = dg.DagsterInstance.ephemeral()
    opened = datetime(2026, 11, 27, 1, 5, tzinfo=UTC)

    before = evaluate_planner(
        registry, budget, _context(None, instance), StorageResource(), opened - timedelta(hours=2)
    )
    assert not before.run_requests and not before.asset_events  # outside any window: nothing

    planned = evaluate_planner(registry, budget, _context(None, instance), StorageResource(), opened)
    cursor = PlannerCursor.model_validate_json(planned.cursor or "")
    assert cursor.window == "2026-11-27T01:00:00+00:00" and not cursor.reviewed
    assert [d.action.key for d in cursor.chosen] == ["busy:checkpoint", "busy:compaction", "quiet:checkpoint"]
    assert cursor.deferred == {"quiet:compaction": 1}

    again = evaluate_planner(registry, budget, _context(planned.cursor, instance), StorageResource(), opened)
    assert not again.run_requests and not again.asset_events  # planned once per window

    # The runs of the window (as the requested assets run them), leaving their audit records.
    api.checkpoint(str(tmp_path / "busy"), CheckpointOptions())
    api.compact(str(tmp_path / "busy"), CompactionOptions(min_input_files=2))
    api.checkpoint(str(tmp_path / "quiet"), CheckpointOptions())

    after = opened + timedelta(hours=3)
    reviewed = evaluate_planner(registry, budget, _context(planned.cursor, instance), StorageResource(), after)
    assert not reviewed.run_requests
    (event,) = reviewed.asset_events or []
    assert isinstance(event, dg.AssetMaterialization) and event.metadata["kind"].value == "review"
    error = event.metadata["prediction_error"].value
    assert isinstance(error, float) and error > 0  # the default prediction (20 s) is far from a 0.1 s run
    assert event.metadata["actual_points"].value == 24 + 24 + 2  # 25 commits and 25 files into 1, 3 commits into 1
    summary = event.metadata["summary"].value
    assert isinstance(summary, str) and "| `busy:compaction` | succeeded |" in summary
    assert PlannerCursor.model_validate_json(reviewed.cursor or "").reviewed

    # The next window: the runs' durations are the cost model's history (a compaction now predicted
    # in seconds, not the default 20), and the compaction that waited is chosen, aged one window.
    tomorrow = opened + timedelta(days=1)
    nxt = evaluate_planner(registry, budget, _context(reviewed.cursor, instance), StorageResource(), tomorrow)
    plan_cursor = PlannerCursor.model_validate_json(nxt.cursor or "")
    assert plan_cursor.window == "2026-11-28T01:00:00+00:00"
    (decision,) = plan_cursor.chosen
    assert decision.action.key == "quiet:compaction" and decision.deferred_windows == 1
    assert decision.cost.basis == "cluster" and decision.cost.seconds < 5


def test_the_review_counts_the_cdc_runs_of_the_window(tmp_path: Path) -> None:
    """The planner requests the CDC of a table with a consumer; the run (recorded under the change
    table, not the source) is matched to that action in the review."""
    source, output = tmp_path / "events", tmp_path / "events_changes"
    for i in range(4):
        rows = pa.table({"id": pa.array([i], pa.int64())})
        write_deltalake(str(source), rows, mode="append", configuration={"delta.enableChangeDataFeed": "true"})
    registry = parse_registry(
        f"""
maintenance_budget: {{window: "0 1 * * *", core_minutes: 30, length: 2h}}
tables:
  - name: events
    location: {source}
    cdc: {{enabled: true, output: {output}, start_date: 2020-01-01}}
"""
    )
    budget = registry.maintenance_budget
    assert budget is not None
    instance = dg.DagsterInstance.ephemeral()
    opened = datetime.now(UTC).replace(hour=1, minute=5, second=0, microsecond=0) - timedelta(days=1)

    planned = evaluate_planner(registry, budget, _context(None, instance), StorageResource(), opened)
    cursor = PlannerCursor.model_validate_json(planned.cursor or "")
    assert "events:cdc" in [d.action.key for d in cursor.chosen]
    assert [dg.AssetKey(["events", "cdc"])] in [r.asset_selection for r in planned.run_requests or []]

    report = api.cdc(str(source), CdcOptions(from_version=0, output=str(output)))
    assert not (source / "_lakeops_audit").exists() and (output / "_lakeops_audit").is_dir()

    after = opened + timedelta(hours=3)
    reviewed = evaluate_planner(registry, budget, _context(planned.cursor, instance), StorageResource(), after)
    (event,) = reviewed.asset_events or []
    assert isinstance(event, dg.AssetMaterialization) and event.metadata["kind"].value == "review"
    summary = event.metadata["summary"].value
    assert isinstance(summary, str) and "| `events:cdc` | succeeded |" in summary
    assert event.metadata["actual_points"].value == 2 * report.versions_extracted == 8  # the one run: 2 a version


def test_a_budget_window_that_is_no_cron_stops_the_load(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="'nightly' is not a cron expression"):
        parse_registry("maintenance_budget: {window: nightly, core_minutes: 10}\ntables: []\n")


def test_partitioned_compaction_is_planned_per_table_partition(tmp_path: Path) -> None:
    """With ``partitioned: true`` each table partition is its own action, requested as its dynamic
    partition (registered by the same evaluation when the small-file sensor has not yet)."""
    table = tmp_path / "daily"
    for i in range(8):
        rows = pa.table({"id": pa.array([i], pa.int64()), "day": ["2026-11-01" if i % 4 else "2026-11-02"]})
        write_deltalake(str(table), rows, mode="append", partition_by=["day"])
    registry = parse_registry(
        f"""
maintenance_budget: {{window: "* * * * *", core_minutes: 10}}
tables:
  - name: daily
    location: {table}
    compaction: {{min_input_files: 2, partitioned: true}}
"""
    )
    sensor = next(s for s in build_definitions(registry).sensors or [] if s.name == "lakeops_planner")
    result = sensor(_context(None, dg.DagsterInstance.ephemeral()))
    assert isinstance(result, dg.SensorResult)
    compactions = [r for r in result.run_requests or [] if r.asset_selection == [dg.AssetKey(["daily", "compaction"])]]
    assert [r.partition_key for r in compactions] == ["day=2026-11-01", "day=2026-11-02"]
    (adds,) = result.dynamic_partitions_requests or []
    assert isinstance(adds, dg.AddDynamicPartitionsRequest)
    assert sorted(adds.partition_keys or []) == ["day=2026-11-01", "day=2026-11-02"]


def test_a_compaction_piece_is_requested_with_its_bound(tmp_path: Path) -> None:
    """A chosen piece of a compaction too large for its window is requested with its bound as a run
    tag, which the compaction asset passes to the run as ``max_rewrite_bytes``; whole actions carry none."""
    (entry,) = parse_registry(f"tables:\n  - name: big\n    location: {tmp_path / 'big'}\n").tables
    cost = CostEstimate(bytes=2, files=3, throughput_bytes_per_s=1.0, basis="default", seconds=60.0, core_minutes=1.0)

    def decision(max_bytes: int | None) -> Decision:
        action = Action(table="big", operation="compaction", max_bytes=max_bytes)
        return Decision(action=action, benefit=Benefit(), cost=cost, chosen=True, rank=1, priority=1.0, reason="")

    now = datetime.now(UTC)
    piece = _request(entry, decision(64 << 20), "w", now)
    assert (piece.tags or {})[MAX_REWRITE_BYTES_TAG] == str(64 << 20)
    assert MAX_REWRITE_BYTES_TAG not in (_request(entry, decision(None), "w", now).tags or {})
