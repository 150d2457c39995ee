"""The daily-partitioned CDC asset on a Delta table whose commits fall on three days: a backfill of
the three days (one run over the range, as the asset's single-run backfill policy makes the UI and
``dagster asset materialize --partition-range`` do) writes each day's changes once; re-running the
range or one of its days writes nothing more; day-by-day runs produce the same output. An Iceberg
table's changelog runs the same way, and expiry keeps what its consumer has yet to extract."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from deltalake import DeltaTable, write_deltalake
from pyiceberg_tables import batch, small_file_table
from run_events import own_checks, own_materializations

from lakeops.registry import TableEntry, parse_registry
from orchestration.assets import operation_key
from orchestration.registry_definitions import build_definitions
from orchestration.resources import SparkResource, StorageResource

RESOURCES = {"spark": SparkResource(master="local[2]"), "storage": StorageResource()}
PROJECT = Path(__file__).resolve().parents[2]
DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"]
#: Commit version -> the day it is committed on (two commits on the middle day).
COMMIT_DAYS = {0: DAYS[0], 1: DAYS[1], 2: DAYS[1], 3: DAYS[2]}


def _source(path: Path) -> None:
    for version, day in COMMIT_DAYS.items():
        rows = pa.table({"id": pa.array(range(version * 10, version * 10 + 10), pa.int64())})
        write_deltalake(str(path), rows, mode="append")
        noon = datetime.fromisoformat(day).replace(hour=12, tzinfo=UTC).timestamp()
        os.utime(path / "_delta_log" / f"{version:020d}.json", (noon, noon))


class Feed:
    def __init__(self, root: Path, output: str) -> None:
        self.source = root / "events"
        if not self.source.exists():
            _source(self.source)
        self.output = root / output
        registry = parse_registry(
            f"""
tables:
  - name: events
    location: {self.source}
    cdc: {{enabled: true, output: {self.output}, start_date: {DAYS[0]}, key: [id]}}
"""
        )
        self.entry: TableEntry = registry.table("events")
        self.defs = build_definitions(registry)

    def run(
        self,
        *,
        day: str | None = None,
        days: tuple[str, str] | None = None,
        instance: dg.DagsterInstance | None = None,
    ) -> dg.ExecuteInProcessResult:
        tags = {ASSET_PARTITION_RANGE_START_TAG: days[0], ASSET_PARTITION_RANGE_END_TAG: days[1]} if days else None
        result = dg.materialize(
            list(self.defs.assets or []),
            selection=[operation_key(self.entry, "cdc")],
            partition_key=day,
            tags=tags,
            resources=RESOURCES,
            instance=instance or dg.DagsterInstance.ephemeral(),
        )
        assert result.success
        (check,) = own_checks(result)
        assert check.passed, check.description
        return result

    def changes(self) -> Counter[tuple[Any, ...]]:
        rows = DeltaTable(str(self.output)).to_pyarrow_table().to_pylist()
        return Counter((r["id"], r["_change_type"], r["_commit_version"]) for r in rows)


@pytest.fixture
def root(tmp_path: Path, spark: Any) -> Path:
    return tmp_path


def _expected(through_version: int) -> Counter[tuple[Any, ...]]:
    return Counter(
        (i, "insert", version) for version in range(through_version + 1) for i in range(version * 10, version * 10 + 10)
    )


def test_a_three_day_backfill_writes_each_day_once(root: Path) -> None:
    feed = Feed(root, "changes")
    result = feed.run(days=(DAYS[0], DAYS[2]))
    keys = {m.partition for m in own_materializations(result, "events__cdc")}
    assert keys == set(DAYS)
    assert feed.changes() == _expected(3)

    feed.run(days=(DAYS[0], DAYS[2]))
    feed.run(day=DAYS[1])
    assert feed.changes() == _expected(3)


def test_day_by_day_runs_extract_each_day_and_match_the_backfill(root: Path) -> None:
    feed = Feed(root, "daily")
    feed.run(day=DAYS[0])
    assert feed.changes() == _expected(0)
    feed.run(day=DAYS[1])
    assert feed.changes() == _expected(2)
    feed.run(day=DAYS[1])
    feed.run(day=DAYS[2])
    assert feed.changes() == _expected(3)


def test_a_run_records_every_earlier_day_it_covered_once(root: Path) -> None:
    """A run for one day extracts every commit up to its end that the output lacks, so every earlier
    day is complete too: the days no run recorded are recorded (the demo's CDC asset said "2% filled"
    after its run for today extracted every version since the start), and only once."""
    feed = Feed(root, "covered")
    key = operation_key(feed.entry, "cdc")
    today = datetime.now(UTC).date()
    every_day = {(date.fromisoformat(DAYS[0]) + timedelta(days=n)).isoformat() for n in range(400)}
    with dg.instance_for_test() as instance:
        feed.run(day=DAYS[2], instance=instance)
        assert instance.get_materialized_partitions(key) == set(DAYS)
        earlier = instance.fetch_materializations(dg.AssetRecordsFilter(key, asset_partitions=[DAYS[0]]), limit=1)
        summary = earlier.records[0].asset_materialization.metadata["summary"].value  # type: ignore[union-attr]
        assert f"Extracted by the run for {DAYS[2]}" in str(summary)

        feed.run(day=today.isoformat(), instance=instance)
        assert instance.get_materialized_partitions(key) == {d for d in every_day if d <= today.isoformat()}
        recorded = len(instance.fetch_materializations(key, limit=1000).records)
        feed.run(day=today.isoformat(), instance=instance)
        assert len(instance.fetch_materializations(key, limit=1000).records) == recorded + 1
    assert feed.changes() == _expected(3)


def test_the_documented_cli_backfill_writes_each_day_once(root: Path) -> None:
    feed = Feed(root, "cli")
    registry = root / "lakeops.yaml"
    registry.write_text(
        f"tables:\n  - name: events\n    location: {feed.source}\n"
        f"    cdc: {{enabled: true, output: {feed.output}, start_date: {DAYS[0]}, key: [id]}}\n"
    )
    (root / "home").mkdir()
    command = [sys.executable, "-m", "dagster", "asset", "materialize", "-m", "orchestration.definitions"]
    command += ["--select", "events/cdc", "--partition-range", f"{DAYS[0]}...{DAYS[2]}"]
    env = os.environ | {"LAKEOPS_REGISTRY": str(registry), "DAGSTER_HOME": str(root / "home")}
    for _ in range(2):  # the second run of the same range writes nothing
        done = subprocess.run(command, env=env, cwd=PROJECT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert feed.changes() == _expected(3)


def test_iceberg_changelog_and_expiry_that_keeps_what_the_consumer_needs(root: Path) -> None:
    """An Iceberg table whose consumer extracted through snapshot 8 of 10: the nightly expiry keeps
    the snapshot it resumes from and every later one, although the table's policy would keep only the
    head; the next CDC run extracts exactly the two snapshots it lacked."""
    table = small_file_table(
        root / "src",
        appends=8,
        rows=5,
        properties={"history.expire.max-snapshot-age-ms": "1", "history.expire.min-snapshots-to-keep": "1"},
    )
    output = root / "order_changes"
    today = datetime.now(UTC).date()
    registry = parse_registry(
        f"""
tables:
  - name: orders
    catalog: {{uri: "{table.catalog_uri}"}}
    identifier: {table.identifier}
    cdc: {{enabled: true, output: {output}, start_date: {today - timedelta(days=1)}, key: [id]}}
"""
    )
    entry = registry.table("orders")
    defs = build_definitions(registry)

    def materialize(operation: str) -> dg.ExecuteInProcessResult:
        result = dg.materialize(
            list(defs.assets or []),
            selection=[operation_key(entry, operation)],
            partition_key=today.isoformat() if operation == "cdc" else None,
            resources=RESOURCES,
            instance=dg.DagsterInstance.ephemeral(),
        )
        assert result.success
        (check,) = own_checks(result)
        assert check.passed, check.description
        return result

    def changes() -> Counter[tuple[Any, ...]]:
        rows = DeltaTable(str(output)).to_pyarrow_table().to_pylist()
        return Counter((r["id"], r["_change_type"], r["_commit_sequence_number"]) for r in rows)

    materialize("cdc")  # from the table's creation: the initial load included
    assert changes() == Counter((i, "insert", i // 5 + 1) for i in range(40))
    table.reload().append(batch(40, 5))
    table.reload().append(batch(45, 5))

    materialize("expiry")
    kept = sorted(s.sequence_number for s in table.reload().snapshots())
    assert kept == [8, 9, 10]  # the watermark's snapshot and the two not extracted yet

    materialize("cdc")
    assert changes() == Counter((i, "insert", i // 5 + 1) for i in range(50))
