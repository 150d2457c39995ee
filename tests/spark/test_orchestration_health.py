"""Health at a glance on real tables maintained by Dagster's own runs (issue 20, item 2): a delta-rs
table of many small files and a PyIceberg table are "needs compaction" with WARN/ERROR small-file
checks, and a Delta table's CDC output lags; after the compaction and CDC assets ran, every health
check passes, the overview says healthy with the last maintenance, and the CDC output's freshness
passes until its window runs out."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
from dagster._core.definitions.freshness import FreshnessState
from dagster._core.definitions.freshness_evaluator import TimeWindowFreshnessPolicyEvaluator
from dagster._core.test_utils import BasicLoadingContext, freeze_time
from deltalake import write_deltalake
from pyiceberg_tables import small_file_table

from lakeops.registry import parse_registry
from orchestration.assets import operation_key, table_key
from orchestration.health import OVERVIEW_KEY
from orchestration.registry_definitions import build_definitions
from orchestration.resources import SparkResource, StorageResource

RESOURCES = {"spark": SparkResource(master="local[2]"), "storage": StorageResource()}


def test_tables_needing_compaction_and_cdc_are_healthy_after_dagster_maintained_them(
    tmp_path: Path, spark: Any
) -> None:
    for i in range(12):
        rows = pa.table({"id": pa.array([i], pa.int64()), "part": pa.array([f"p{i % 2}"])})
        write_deltalake(str(tmp_path / "events"), rows, mode="append", partition_by=["part"])
    iceberg = small_file_table(tmp_path / "iceberg", appends=8, rows=10)
    today = datetime.now(UTC).date()
    registry = parse_registry(
        f"""
tables:
  - name: events
    location: {tmp_path / "events"}
    compaction: {{min_input_files: 2, small_file_trigger: 4}}
    checkpoint: {{interval: 50}}
    cdc: {{enabled: true, output: {tmp_path / "events_changes"}, start_date: {today - timedelta(days=2)}, key: [id]}}
    health: {{small_files: {{error: 10}}, cdc_lag_versions: {{warn: 5, error: 100}}}}
  - name: orders
    catalog: {{uri: "{iceberg.catalog_uri}"}}
    identifier: {iceberg.identifier}
    compaction: {{min_input_files: 2, small_file_trigger: 4}}
    checkpoint: {{interval: 50}}
"""
    )
    assets = list(build_definitions(registry).assets or [])
    events, orders = registry.tables

    def run(key: dg.AssetKey, partition: str | None = None) -> dg.ExecuteInProcessResult:
        result = dg.materialize(
            assets, selection=[key], partition_key=partition, resources=RESOURCES, instance=instance
        )
        assert result.success, key
        return result

    def health() -> dict[str, dict[str, dg.AssetCheckEvaluation]]:
        result = run(table_key(events))
        checks = {"events": {c.check_name: c for c in result.get_asset_check_evaluations()}}
        result = run(table_key(orders))
        return checks | {"orders": {c.check_name: c for c in result.get_asset_check_evaluations()}}

    def overview() -> dict[str, list[str]]:
        (materialization,) = run(OVERVIEW_KEY).asset_materializations_for_node("lakeops__overview")
        rows = str(materialization.metadata["tables"].value).splitlines()[2:]
        return {cells[0]: cells for cells in ([c.strip() for c in row.strip("|").split("|")] for row in rows)}

    def freshness(at: datetime) -> FreshnessState:
        node = build_definitions(registry).get_repository_def().asset_graph.get(operation_key(events, "cdc"))
        with freeze_time(at):
            evaluator = TimeWindowFreshnessPolicyEvaluator()
            return asyncio.run(evaluator.evaluate_freshness(BasicLoadingContext(instance), node))

    with dg.instance_for_test() as instance:
        before = health()
        small = before["events"]["small_files"]
        assert (small.passed, small.severity) == (False, dg.AssetCheckSeverity.ERROR)  # 12 of 12, error at 10
        lag = before["events"]["cdc_lag_versions"]
        assert (lag.passed, lag.severity) == (False, dg.AssetCheckSeverity.WARN)
        assert lag.metadata["value"].value == 12
        iceberg_small = before["orders"]["small_files"]
        assert (iceberg_small.passed, iceberg_small.severity) == (False, dg.AssetCheckSeverity.WARN)  # 8: warn at 4
        rows = overview()
        assert rows["events"][2:4] == ["**needs compaction** (ERROR)", "small_files 12 (warn 4 / error 10)"]
        assert rows["orders"][1:3] == ["iceberg", "**needs compaction** (WARN)"]
        assert rows["orders"][3].startswith("small_files 8 (warn 4")
        assert freshness(datetime.now(UTC)) == FreshnessState.UNKNOWN  # never extracted

        run(operation_key(events, "cdc"), today.isoformat())
        run(operation_key(events, "compaction"))
        run(operation_key(orders, "compaction"))

        after = health()
        failing = {
            (t, name): c.description for t, checks in after.items() for name, c in checks.items() if not c.passed
        }
        assert failing == {}
        assert after["events"]["last_compaction"].metadata["value_s"].value < 600
        # The output lags by the compaction's commit (no changes in it; the next extraction records it).
        assert after["events"]["cdc_lag_versions"].metadata["value"].value == 1
        assert after["events"]["cdc_lag_time"].metadata["value_s"].value < 600
        rows = overview()
        assert [rows[t][2] for t in ("events", "orders")] == ["healthy", "healthy"]
        assert rows["orders"][4].startswith("compaction, ")  # the last maintenance, and when

        now = datetime.now(UTC)
        assert freshness(now) == FreshnessState.PASS
        assert freshness(now + timedelta(hours=2)) == FreshnessState.WARN  # default: warn 1 h, fail 6 h
        assert freshness(now + timedelta(hours=7)) == FreshnessState.FAIL
