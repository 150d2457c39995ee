"""``max_rewrite_bytes``: a compaction cut to its first groups, so a table too large for one
maintenance window is compacted a piece per run (the planner's split actions). Each format's piece
rewrites fewer groups than the whole plan, the peer reads the same rows after every piece, and the
pieces together leave nothing the whole compaction would have merged."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from icechunk_repos import build_history
from pyiceberg_tables import small_file_table

from lakeops import api
from lakeops.ops.compaction import CompactionOptions
from lakeops.ops.target import CatalogOptions, resolve_target
from lakeops.ops.verify import compaction_kept_rows
from lakeops.storage import StorageOptions, open_storage


def _delta_rows(location: str) -> list[tuple[int, str]]:
    table = DeltaTable(location).to_pyarrow_table()
    return sorted(zip(table["id"].to_pylist(), table["part"].to_pylist(), strict=True))


def test_delta_pieces_cover_the_whole_compaction(tmp_path: Path) -> None:
    location = str(tmp_path / "delta")
    for i in range(4):
        batch = pa.table({"id": pa.array([2 * i, 2 * i + 1], pa.int64()), "part": pa.array(["a", "b"])})
        write_deltalake(location, batch, mode="append", partition_by=["part"])
    rows = _delta_rows(location)
    whole = api.compact(location, CompactionOptions(min_input_files=2), dry_run=True)
    assert (whole.groups, whole.files_removed) == (2, 8)  # one group per partition
    piece = CompactionOptions(min_input_files=2, max_rewrite_bytes=whole.bytes_removed // 2)

    first = api.compact(location, piece)
    assert (first.groups, first.partitions_compacted, first.files_removed, first.files_added) == (1, 1, 4, 1)
    assert _delta_rows(location) == rows
    second = api.compact(location, piece)
    assert (second.groups, second.files_removed, second.files_added) == (1, 4, 1)
    assert first.bytes_removed + second.bytes_removed == whole.bytes_removed
    assert _delta_rows(location) == rows and len(DeltaTable(location).file_uris()) == 2
    assert api.compact(location, piece, dry_run=True).groups == 0


def test_iceberg_pieces_cover_the_whole_compaction(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "identity", appends=4, rows=6)
    rows = table.rows()
    options = {"catalog_uri": table.catalog_uri, "min_input_files": 2}
    whole = api.compact(table.identifier, CompactionOptions(**options), dry_run=True)
    assert whole.groups >= 2
    piece = CompactionOptions(**options, max_rewrite_bytes=1)  # at least one group a run
    removed = 0
    for run in range(whole.groups):
        report = api.compact(table.identifier, piece)
        assert (report.groups, report.partitions_compacted) == (1, 1), run
        removed += report.files_removed
        assert table.rows() == rows  # PyIceberg reads the same rows after each piece
    assert removed == whole.files_removed
    assert api.compact(table.identifier, piece, dry_run=True).groups == 0


def test_icechunk_pieces_cover_the_whole_packing(tmp_path: Path) -> None:
    root = str(tmp_path / "repo")
    build_history(open_storage(root), root, commits=4)
    whole = api.compact(root, CompactionOptions(min_input_files=2), dry_run=True)
    assert whole.groups >= 2
    first = api.compact(root, CompactionOptions(min_input_files=2, max_rewrite_bytes=1))
    assert (first.groups, first.dry_run) == (1, False)
    checked = compaction_kept_rows(resolve_target(root, CatalogOptions(), StorageOptions()), first)
    assert checked.passed, checked.summary  # every packed chunk reads back identical
    rest = api.compact(root, CompactionOptions(min_input_files=2), dry_run=True)
    assert rest.groups == whole.groups - 1
    assert first.files_removed + rest.files_removed == whole.files_removed
