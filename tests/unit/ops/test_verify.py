"""Post-operation checks after real lakeops runs (plan → tasks → commit, here without Spark): each
passes on what the operation wrote and fails, naming the problem, once the table is damaged."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake
from iceberg_merge_on_read import add_position_deletes, load
from icechunk_repos import build_history
from maintenance_commits import commit_checkpoint, commit_compaction
from pyiceberg_tables import PyIcebergTable, small_file_table
from rich.console import Console

from lakeops.errors import UnsupportedFeature
from lakeops.executors import ThreadExecutor
from lakeops.iceberg.manifest import manifests_of
from lakeops.iceberg.scan import plan_scan
from lakeops.iceberg.table import TableRef
from lakeops.ops import checkpoint, compaction
from lakeops.ops.checkpoint import CheckpointOptions, CheckpointReport
from lakeops.ops.compaction import CompactionOptions, CompactionReport
from lakeops.ops.target import CatalogOptions, Target, resolve_target
from lakeops.ops.verify import change_feed_unique, checkpoint_matches_log, compaction_kept_rows, retained_files_exist
from lakeops.storage import StorageOptions, open_storage

NO_OPTIONS = StorageOptions()


def _compact(table: str, **options: Any) -> CompactionReport:
    opts = CompactionOptions.model_validate(options)
    plan = compaction.plan(table, opts, NO_OPTIONS)
    report = None
    batches = plan.commit_batches()
    for i, groups in enumerate(batches):
        results = [plan.task()(g) for g in groups]
        report = commit_compaction(plan, groups, results, NO_OPTIONS, 0.0, previous=report, final=i == len(batches) - 1)
    assert report is not None and report.committed_version is not None
    return report


def _checkpoint(table: str, **options: Any) -> CheckpointReport:
    plan = checkpoint.plan(table, CheckpointOptions.model_validate(options), NO_OPTIONS)
    assert plan is not None
    written = [plan.task()(u) for u in plan.work_units()]
    return commit_checkpoint(plan, written, NO_OPTIONS, 0.0)


def _delta(tmp_path: Path, appends: int = 6) -> str:
    location = str(tmp_path / "delta")
    for i in range(appends):
        rows = pa.table({"id": pa.array(range(i * 50, i * 50 + 50), pa.int64()), "name": [f"n{j}" for j in range(50)]})
        write_deltalake(location, rows, mode="append")
    return location


def _target(table: str) -> Target:
    return resolve_target(table, CatalogOptions(), NO_OPTIONS)


def _iceberg_target(table: PyIcebergTable) -> Target:
    return resolve_target(table.identifier, CatalogOptions(catalog_uri=table.catalog_uri), NO_OPTIONS)


# --- Delta -----------------------------------------------------------------------------------------


def test_delta_compaction_keeps_rows_and_a_truncated_output_fails(tmp_path: Path) -> None:
    location = _delta(tmp_path)
    report = _compact(location, min_input_files=2)
    result = compaction_kept_rows(_target(location), report)
    assert result.passed, result.summary
    assert result.details["rows_before"] == result.details["rows_after"] == 300
    assert f"version {report.committed_version}" in result.summary

    dry = report.model_copy(update={"dry_run": True, "committed_version": None})
    assert compaction_kept_rows(_target(location), dry).passed

    written = [f for f in (tmp_path / "delta").glob("*.parquet") if os.path.getmtime(f) >= max_mtime_of_log(location)]
    assert len(written) == 1
    pq.write_table(pq.read_table(written[0]).slice(0, 10), written[0])
    broken = compaction_kept_rows(_target(location), report)
    assert not broken.passed and "the row count changed" in broken.summary
    assert broken.details["rows_after"] == 10


def max_mtime_of_log(location: str) -> float:
    """When the commit before the compaction was written (the compaction's files are newer)."""
    commits = sorted(Path(location, "_delta_log").glob("*.json"))
    return os.path.getmtime(commits[-2])


def test_delta_checkpoint_matches_the_log_until_a_live_file_is_dropped(tmp_path: Path) -> None:
    location = _delta(tmp_path, appends=4)
    report = _checkpoint(location)
    assert report.version == 3
    result = checkpoint_matches_log(_target(location), report)
    assert result.passed, result.summary
    assert result.details["files"] == 4

    path = Path(location, "_delta_log", "00000000000000000003.checkpoint.parquet")
    actions = pq.read_table(path)
    adds = [i for i, a in enumerate(actions.column("add").to_pylist()) if a is not None]
    pq.write_table(actions.filter(pa.array([i != adds[0] for i in range(actions.num_rows)])), path)
    broken = checkpoint_matches_log(_target(location), report)
    assert not broken.passed
    assert "live files differ (1 missing" in broken.summary


def test_delta_retained_files_missing_one_fails_naming_it(tmp_path: Path) -> None:
    location = _delta(tmp_path, appends=3)
    _compact(location, min_input_files=2)  # the three originals are tombstones of the retained window
    result = retained_files_exist(_target(location))
    assert result.passed, result.summary
    assert result.details == {"retained_versions": 4, "referenced_files": 4, "missing_files": 0}

    victim = sorted((tmp_path / "delta").glob("*.parquet"), key=os.path.getmtime)[0]
    victim.unlink()
    broken = retained_files_exist(_target(location))
    assert not broken.passed and victim.name in broken.summary and broken.details["missing_files"] == 1


# --- change feeds ----------------------------------------------------------------------------------


def _feed(tmp_path: Path, commit_column: str, rows: list[tuple[int, str, int, str]]) -> str:
    location = str(tmp_path / f"feed-{commit_column}")
    table = pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "name": [r[1] for r in rows],
            "tags": pa.array([[r[1]] for r in rows], pa.list_(pa.string())),
            "_change_type": [r[3] for r in rows],
            commit_column: pa.array([r[2] for r in rows], pa.int64()),
        }
    )
    write_deltalake(location, table)
    return location


@pytest.mark.parametrize("commit_column", ["_commit_version", "_commit_snapshot_id"])
def test_change_feed_duplicates_fail(tmp_path: Path, commit_column: str) -> None:
    rows = [(1, "a", 1, "insert"), (1, "a", 2, "delete"), (1, "a", 1, "delete"), (2, "b", 1, "insert")]
    result = change_feed_unique(_feed(tmp_path / "ok", commit_column, rows))
    assert result.passed, result.summary
    assert result.details["key"] == f"{commit_column}, _change_type, id, name"  # the nested column is no key

    broken = change_feed_unique(_feed(tmp_path / "dup", commit_column, [*rows, (2, "b", 1, "insert")]))
    assert not broken.passed and broken.details["duplicate_keys"] == 1
    assert f"{commit_column}=1, _change_type='insert', id=2, name='b'" in broken.summary


def test_change_feed_key_columns(tmp_path: Path) -> None:
    location = _feed(tmp_path, "_commit_version", [(1, "a", 1, "insert"), (1, "b", 1, "insert")])
    assert change_feed_unique(location).passed
    assert not change_feed_unique(location, ["id"]).passed
    with pytest.raises(UnsupportedFeature, match="nope"):
        change_feed_unique(location, ["nope"])
    with pytest.raises(UnsupportedFeature, match="not a lakeops change feed"):
        change_feed_unique(_delta(tmp_path, appends=1))


def test_a_change_feed_not_written_yet_has_no_duplicates(tmp_path: Path) -> None:
    """A CDC day with nothing to extract before the first extraction: the output does not exist yet."""
    result = change_feed_unique(str(tmp_path / "changes"))
    assert result.passed and result.details["rows"] == 0
    assert (
        result.summary == f"{tmp_path / 'changes'}: no change table yet (nothing extracted so far), so no change twice"
    )


# --- Iceberg ---------------------------------------------------------------------------------------


def test_iceberg_compaction_with_partial_progress_keeps_rows(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "identity", appends=6, rows=30)
    loaded = load(TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier))
    live = plan_scan(loaded.storage, loaded.metadata, loaded.metadata.current_snapshot()).data_files
    victim = min(live, key=lambda f: f.path)
    add_position_deletes(loaded, [(victim.path, 0), (victim.path, 1)], partition=victim.entry.data_file.partition)
    report = _compact(table.identifier, catalog_uri=table.catalog_uri, min_input_files=2, partial_progress=1)
    assert report.commits >= 2 and report.base_snapshot_id != report.snapshot_id
    result = compaction_kept_rows(_iceberg_target(table), report)
    assert result.passed, result.summary
    assert result.details["replace_snapshots"] == report.commits
    assert result.details["rows_before"] == result.details["rows_after"] == 178

    newest = sorted(Path(table.location, "data").rglob("*.parquet"), key=os.path.getmtime)[-1]
    pq.write_table(pq.read_table(newest).slice(0, 1), newest)
    broken = compaction_kept_rows(_iceberg_target(table), report)
    assert not broken.passed and "rows changed" in broken.summary


def test_iceberg_manifest_rewrite_keeps_live_files(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "day", appends=5, rows=10)
    appended = table.table.current_snapshot()
    assert appended is not None
    report = _checkpoint(table.identifier, catalog_uri=table.catalog_uri)
    assert report.status == "committed"
    result = checkpoint_matches_log(_iceberg_target(table), report)
    assert result.passed, result.summary
    assert result.details["files"] == result.details["parent_files"] == 15

    # An append is not a rewrite: checked as one, it gains files and fails, naming them.
    wrong = report.model_copy(update={"snapshot_id": appended.snapshot_id})
    broken = checkpoint_matches_log(_iceberg_target(table), wrong)
    assert not broken.passed and "gained:" in broken.summary and broken.details["extra"] == 3


def test_iceberg_retained_files_missing_manifest_and_data_file(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "unpartitioned", appends=3, rows=10)
    target = _iceberg_target(table)
    result = retained_files_exist(target)
    assert result.passed, result.summary
    assert result.details["retained_versions"] == 3

    loaded = load(TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier))
    oldest = loaded.metadata.snapshots[0]
    manifest = manifests_of(loaded.storage, oldest)[0].manifest_path
    first = {t.file.file_path for t in table.table.scan(snapshot_id=oldest.snapshot_id).plan_files()}
    data = sorted({t.file.file_path for t in table.table.scan().plan_files()} - first)[-1]  # not in `manifest`
    loaded.storage.delete_many([manifest, data])
    broken = retained_files_exist(target)
    assert not broken.passed and broken.details["missing_files"] == 2
    assert manifest.rsplit("/", 1)[1] in broken.summary and data.rsplit("/", 1)[1] in broken.summary


# --- Icechunk --------------------------------------------------------------------------------------


def test_icechunk_packing_reads_back_identical_and_retained_objects_exist(tmp_path: Path) -> None:
    root = str(tmp_path / "repo")
    storage = open_storage(root)
    build_history(storage, root, commits=6)
    target = _target(root)
    assert checkpoint_matches_log(target, CheckpointReport(format="icechunk", table=root)).passed
    plan = compaction.plan(root, CompactionOptions(min_input_files=2), NO_OPTIONS)
    report = compaction.run(
        plan, NO_OPTIONS, executor=ThreadExecutor(), progress=Console(quiet=True), description="", started=0.0
    )
    result = compaction_kept_rows(target, report)
    assert result.passed, result.summary
    assert result.details["chunks"] > 0 and result.details["problems"] == 0

    retained = retained_files_exist(target)
    assert retained.passed, retained.summary
    packed = sorted(Path(root, "chunks").iterdir(), key=os.path.getmtime)[-1]
    packed.write_bytes(b"\0" * packed.stat().st_size)  # same size, other bytes
    broken = compaction_kept_rows(target, report)
    assert not broken.passed and "differ" in broken.summary
    packed.unlink()
    gone = retained_files_exist(target)
    assert not gone.passed and packed.name in gone.summary
