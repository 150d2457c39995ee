"""The post-operation checks after real ``lakeops`` runs on Spark: compaction of one partition picked
by its key (``partition_where``) rewrites only that partition and keeps its rows, the checkpoint that
follows matches the log, and every retained file exists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyiceberg_tables import small_file_table

from lakeops.ops.checkpoint import CheckpointReport
from lakeops.ops.compaction import CompactionReport
from lakeops.ops.partitions import partition_health, partition_where
from lakeops.ops.target import CatalogOptions, Target, resolve_target
from lakeops.ops.verify import checkpoint_matches_log, compaction_kept_rows, retained_files_exist
from lakeops.storage import StorageOptions
from spark_jobs.operations import run_operation


def _files_by_partition(health: list[Any]) -> dict[str, int]:
    return {h.key: h.files for h in health}


def _checks_after(target: Target, table: str, options: dict[str, Any], compacted: CompactionReport) -> None:
    kept = compaction_kept_rows(target, compacted)
    assert kept.passed, kept.summary
    checkpointed = run_operation("checkpoint", table, options)
    assert isinstance(checkpointed, CheckpointReport)
    matches = checkpoint_matches_log(target, checkpointed)
    assert matches.passed and "nothing to verify" not in matches.summary, matches.summary
    retained = retained_files_exist(target)
    assert retained.passed and retained.details["referenced_files"] > 0, retained.summary


def test_delta_partition_compaction_and_checks(spark: Any, tmp_path: Path) -> None:
    location = str(tmp_path / "delta")
    for i in range(12):
        rows = pa.table(
            {"id": [i], "day": ["2026-11-01" if i % 2 else "2026-11-02"], "region": ["eu/w" if i % 3 else "us"]}
        )
        write_deltalake(location, rows, mode="append", partition_by=["day", "region"])
    target = resolve_target(location, CatalogOptions(), StorageOptions())
    before = _files_by_partition(partition_health(target))
    key = "day=2026-11-01/region=eu%2Fw"
    assert before[key] == 4

    report = run_operation("compact", location, {"where": partition_where(target, key), "min_input_files": 2})
    assert isinstance(report, CompactionReport) and report.files_removed == 4

    after = _files_by_partition(partition_health(target))
    assert after == before | {key: 1}  # only that partition was rewritten
    assert sorted(DeltaTable(location).to_pyarrow_table().column("id").to_pylist()) == list(range(12))
    _checks_after(target, location, {}, report)


def test_iceberg_partition_compaction_and_checks(spark: Any, tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "day", appends=6, rows=15)
    rows = table.rows()
    catalog = {"catalog_uri": table.catalog_uri}
    target = resolve_target(table.identifier, CatalogOptions(**catalog), StorageOptions())
    before = _files_by_partition(partition_health(target))
    key = "ts_day=2024-01-02"
    assert before[key] == 6

    where = partition_where(target, key)
    report = run_operation("compact", table.identifier, {**catalog, "where": where, "min_input_files": 2})
    assert isinstance(report, CompactionReport) and report.files_removed == 6

    assert _files_by_partition(partition_health(target)) == before | {key: 1}
    assert table.rows() == rows  # PyIceberg reads the same rows
    _checks_after(target, table.identifier, catalog, report)
