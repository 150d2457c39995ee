"""Snapshot diffs and their export (lakeops.icechunk.maintenance.diff), run as ``lakeops cdc`` runs it:
``plan_diff``, ``extract_unit`` per unit, ``commit_diff``.

Proves: the test repository's history gives the rows its README describes (nodes added, chunks added,
the virtual replacement ``modified``, chunk 4 ``removed``); attribute and Zarr metadata changes are
``metadata-changed`` while a NaN fill value is not a change; a compaction snapshot gives no rows; the
export is a Delta table deltalake reads, idempotent (a re-run adds nothing, an overlapping range
continues, a gap or an earlier start is refused); a range whose snapshots expired is refused.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable
from icechunk_repos import build_history, days_from_now_ms, run_expiry, run_gc

from lakeops.errors import InvalidArgument, VersionNotFound
from lakeops.icechunk import refs
from lakeops.icechunk.ids import new_id
from lakeops.icechunk.maintenance.diff import (
    DiffOptions,
    DiffPlan,
    commit_diff,
    diff_snapshots,
    extract_unit,
    plan_diff,
    resolve_snapshot,
)
from lakeops.icechunk.maintenance.packing import commit_packing, pack_unit, plan_packing
from lakeops.icechunk.repository import Repository
from lakeops.icechunk.snapshot import GroupData, InlineUserAttributes, SnapshotMetadata, encode_snapshot
from lakeops.storage import StorageOptions, open_storage

INIT, EMPTY, FILL, VIRTUAL, DELETE, MORE = (
    "WT2Z2GQ09G0RTAEQ3D70",
    "J4DQH8NAGRYC10YGT7F0",
    "F8R612XQGFW9CR08HTN0",
    "RZD9SW6JJZHKA94VY1DG",
    "QVY2RGJBE9DX8E525CA0",
    "0XEZMR4J7SJ5QBWAYBE0",
)


def _rows(repo: Repository, parent: str, child: str) -> list[tuple[str, str, str | None, str]]:
    return [(r.path, r.node_type, r.chunk_index, r.change) for r in diff_snapshots(repo, parent, child)]


def test_rows_of_the_test_repository(test_repo: Path) -> None:
    repo = Repository(open_storage(str(test_repo)), str(test_repo))
    assert _rows(repo, INIT, EMPTY) == [
        ("/", "group", None, "added"),
        ("/group1", "group", None, "added"),
        ("/group1/big_chunks", "array", None, "added"),
        ("/group1/small_chunks", "array", None, "added"),
    ]
    assert _rows(repo, EMPTY, FILL) == [
        ("/group1/big_chunks", "array", f"{i}/{j}", "added") for i in (0, 1) for j in (0, 1)
    ] + [("/group1/small_chunks", "array", str(i), "added") for i in range(5)]
    assert _rows(repo, FILL, VIRTUAL) == [("/group1/big_chunks", "array", "0/0", "modified")]
    assert _rows(repo, VIRTUAL, DELETE) == [("/group1/small_chunks", "array", "4", "removed")]
    assert _rows(repo, DELETE, MORE) == [
        ("/group2", "group", None, "added"),
        ("/group2/group3", "group", None, "added"),
        ("/group2/group3/group4", "group", None, "added"),
        ("/group2/group3/group4/group5", "group", None, "added"),
        ("/group2/group3/group4/group5/inner", "array", None, "added"),  # no chunks written
    ]
    # Rows name snapshot files (the initial one's embedded id differs), depth and the child's write time.
    row = diff_snapshots(repo, "6W05WADKS87N84AMH5KG", EMPTY)[0]
    snap = repo.read_snapshot(EMPTY)
    assert (row.snapshot_id, row.parent_snapshot_id, row.snapshot_depth) == (EMPTY, INIT, 1)
    assert row.timestamp == snap.metadata.written_at
    assert _rows(repo, VIRTUAL, VIRTUAL) == []


def test_metadata_changes_and_kind_changes(repo_copy: Path) -> None:
    root, storage = str(repo_copy), open_storage(str(repo_copy))
    repo = Repository(storage, root)
    tip = refs.branch_tip(storage, root, "my-branch")
    parent = repo.read_snapshot(tip.snapshot_id)
    nodes = dict(parent.nodes)
    big = nodes["/group1/big_chunks"]
    nodes[big.path] = dataclasses.replace(big, user_attributes=InlineUserAttributes({"units": "m"}))
    small = nodes["/group1/small_chunks"]
    nodes[small.path] = dataclasses.replace(small, node_data=GroupData())  # an array replaced by a group
    child = dataclasses.replace(
        parent,
        nodes=nodes,
        metadata=SnapshotMetadata(new_id(), parent.metadata.written_at, "edit by hand"),
        short_term_history=(parent.metadata, *parent.short_term_history),
        total_parents=parent.total_parents + 1,
    )
    storage.put_if_absent(repo.snapshot_path(child.id), encode_snapshot(child))

    assert _rows(repo, tip.snapshot_id, child.id) == [
        ("/group1/big_chunks", "array", None, "metadata-changed"),
        ("/group1/small_chunks", "array", None, "removed"),
        *[("/group1/small_chunks", "array", str(i), "removed") for i in range(4)],
        ("/group1/small_chunks", "group", None, "added"),
    ]


def test_a_compaction_snapshot_has_no_rows(repo_copy: Path) -> None:
    root, storage = str(repo_copy), open_storage(str(repo_copy))
    plan = plan_packing(storage, root, StorageOptions(), branch="my-branch", min_input_files=2)
    outcome = commit_packing(plan, [pack_unit(u) for u in plan.groups], storage)
    repo = Repository(storage, root)
    assert diff_snapshots(repo, MORE, outcome.snapshot_id) == []
    # Not because nothing changed: the chunks now live in the packed file.
    moved = repo.chunk_payloads(outcome.snapshot_id, "group1/big_chunks")[(1, 1)]
    assert moved != repo.chunk_payloads(MORE, "group1/big_chunks")[(1, 1)]


def _export(root: str, output: Path, start: str, end: str | None = None, per_unit: int = 1) -> DiffPlan:
    options = DiffOptions(from_snapshot=start, to_snapshot=end, output=str(output), steps_per_unit=per_unit)
    plan = plan_diff(root, options, StorageOptions())
    commit_diff(plan, [extract_unit(u) for u in plan.units], StorageOptions())
    return plan


def _output(output: Path) -> list[tuple[int, str, str | None, str]]:
    table = DeltaTable(str(output)).to_pyarrow_table()
    rows = zip(*(table.column(c).to_pylist() for c in ("snapshot_depth", "path", "chunk_index", "change")), strict=True)
    return sorted(rows, key=lambda r: (r[0], r[1], r[2] or ""))


def test_export_is_idempotent_and_continues(test_repo: Path, tmp_path: Path) -> None:
    root, out = str(test_repo), tmp_path / "changes"
    first = _export(root, out, INIT, FILL)
    assert (first.requested_from, first.from_version, first.to_version, len(first.units)) == (1, 1, 2, 2)
    assert first.source_id == "icechunk:6W05WADKS87N84AMH5KG"
    assert Counter(r[0] for r in _output(out)) == {1: 4, 2: 9}
    version = DeltaTable(str(out)).version()

    again = _export(root, out, INIT, FILL)
    assert again.already_extracted and again.units == [] and DeltaTable(str(out)).version() == version

    more = _export(root, out, INIT, "my-branch", per_unit=2)  # overlaps depths 1..2: continues at 3
    assert (more.requested_from, more.from_version, more.to_version, more.snapshots) == (1, 3, 5, 3)
    rows = _output(out)
    assert Counter(r[0] for r in rows) == {1: 4, 2: 9, 3: 1, 4: 1, 5: 5}
    assert (3, "/group1/big_chunks", "0/0", "modified") in rows
    assert (4, "/group1/small_chunks", "4", "removed") in rows
    assert DeltaTable(str(out)).version() == version + 1
    assert _export(root, out, DELETE, "it also works!").already_extracted  # a tag names the end


def test_from_0_exports_from_the_repositorys_creation(test_repo: Path, tmp_path: Path) -> None:
    plan = _export(str(test_repo), tmp_path / "from-0", "0", FILL)
    _export(str(test_repo), tmp_path / "from-init", INIT, FILL)
    assert plan.from_snapshot == INIT
    assert _output(tmp_path / "from-0") == _output(tmp_path / "from-init")


def test_export_refuses_gaps_and_earlier_starts(test_repo: Path, tmp_path: Path) -> None:
    root = str(test_repo)
    _export(root, tmp_path / "a", INIT, EMPTY)  # depth 1
    with pytest.raises(InvalidArgument, match=r"depths 1\.\.1; starting at depth 4 would leave depths 2\.\.3 out"):
        _export(root, tmp_path / "a", VIRTUAL, "my-branch")
    _export(root, tmp_path / "b", EMPTY, VIRTUAL)  # depths 2..3
    with pytest.raises(InvalidArgument, match=r"holds the changes of depths 2\.\.3 only"):
        _export(root, tmp_path / "b", INIT, VIRTUAL)
    with pytest.raises(InvalidArgument, match="must lie outside the repository"):
        _export(root, test_repo / "changes", INIT)
    with pytest.raises(InvalidArgument, match="is not an ancestor"):
        _export(root, tmp_path / "c", MORE, "main")
    with pytest.raises(InvalidArgument, match="is empty"):
        _export(root, tmp_path / "c", VIRTUAL, VIRTUAL)
    with pytest.raises(VersionNotFound, match="neither a snapshot id"):
        resolve_snapshot(Repository(open_storage(root), root), "no-such-branch")
    assert not (tmp_path / "c").exists()


def test_an_expired_range_is_refused(tmp_path: Path) -> None:
    location = tmp_path / "repo"
    root, storage = str(location), open_storage(str(location))
    build_history(storage, root, commits=6)  # tag "middle" at depth 5, main's tip at depth 7
    later = days_from_now_ms(8)
    run_expiry(storage, root, later)
    run_gc(storage, root, later)
    with pytest.raises(VersionNotFound, match="has expired; the changes of depth 6 can no longer be extracted"):
        _export(root, tmp_path / "out", "middle", "main")
    assert not (tmp_path / "out").exists()
