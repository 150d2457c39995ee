"""lakeops.api without Spark: the typed functions on tables other writers made, read back by those
writers (delta-rs, PyIceberg) after lakeops changed them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from icechunk_repos import build_history
from pyiceberg_tables import MERGE_APPENDS, small_file_table

from lakeops import api
from lakeops.ops.checkpoint import CheckpointOptions
from lakeops.ops.inspect import InspectReport
from lakeops.storage import open_storage


def _delta(tmp_path: Path) -> str:
    location = str(tmp_path / "delta")
    for i in range(5):
        write_deltalake(location, pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64())}), mode="append")
    return location


def test_checkpoint_of_a_delta_rs_table_in_threads(tmp_path: Path) -> None:
    location = _delta(tmp_path)
    assert api.checkpoint(location, dry_run=True).status == "planned"
    assert not (Path(location) / "_delta_log" / "_last_checkpoint").exists()
    report = api.checkpoint(location)
    assert (report.status, report.version, report.add_files, report.last_checkpoint_updated) == ("written", 4, 5, True)
    assert (Path(location) / "_delta_log" / "00000000000000000004.checkpoint.parquet").exists()
    assert DeltaTable(location).to_pyarrow_table().num_rows == 50  # delta-rs reads through the checkpoint
    assert api.checkpoint(location).status == "already checkpointed"
    inspected = api.inspect(location)
    assert isinstance(inspected, InspectReport)
    assert (inspected.version, inspected.last_checkpoint_version, inspected.commits_since_checkpoint) == (4, 4, 0)


def test_checkpoint_of_a_pyiceberg_table_in_threads(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=6, rows=5)
    rows = table.rows()
    options = CheckpointOptions(catalog_uri=table.catalog_uri)
    report = api.checkpoint(table.identifier, options)
    assert report.status == "committed" and report.manifests_before == 6 and report.manifests_after == 1
    assert table.reload().current_snapshot().snapshot_id == report.snapshot_id  # type: ignore[union-attr]
    assert table.rows() == rows  # PyIceberg reads the merged manifest
    assert api.checkpoint(table.identifier, options).status == "nothing to rewrite"


def test_checkpoint_of_a_merge_append_table_has_nothing_to_merge(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=4, rows=5, properties=MERGE_APPENDS)
    report = api.checkpoint(table.identifier, CheckpointOptions(catalog_uri=table.catalog_uri))
    assert report.status == "nothing to rewrite" and report.committed_version is None


def test_an_icechunk_repository_has_no_checkpoint(tmp_path: Path) -> None:
    root = str(tmp_path / "repo")
    build_history(open_storage(root), root, commits=3)
    before = sorted(p.relative_to(root) for p in Path(root).rglob("*"))
    report = api.checkpoint(root)
    assert (report.format, report.status) == ("icechunk", "not applicable")
    assert sorted(p.relative_to(root) for p in Path(root).rglob("*")) == before
