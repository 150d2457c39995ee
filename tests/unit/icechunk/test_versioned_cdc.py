"""``lakeops cdc`` on Icechunk format 1 and 2 repositories, through ``lakeops.api.cdc``.

Proves: from the first snapshot to main's tip each fixture gives its documented changes (upstream
``icechunk-python/tests/test_can_read_old.py`` writes ``test-repo-v1``/``-v2`` with one script:
structure, then data, then chunk 0/0 of ``big_chunks`` made virtual; ``split-repo-v2`` writes its
arrays three times), and format 1's rows are exactly what the icechunk package and zarr show between
consecutive snapshots; deltalake reads the change table; the watermark is each snapshot's
``flushed_at``, so a re-run writes nothing, an overlapping range writes nothing twice, a gap is
refused, and a CDC after ``lakeops expire`` (format 1, which re-parents the retained snapshots as the
icechunk package does) continues without duplicates, or is refused when the last snapshot extracted
expired.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import icechunk
import pytest
import zarr
from deltalake import DeltaTable
from lakeops_testdata import TESTDATA
from refused_runs import failed_run_records
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync

from lakeops import api
from lakeops.errors import InvalidArgument, VersionNotFound
from lakeops.icechunk.versioned import VersionedRepository
from lakeops.ops.cdc import CdcOptions
from lakeops.ops.expiry import ExpiryOptions
from lakeops.ops.icechunk.cdc import IcechunkCdcReport
from lakeops.storage import open_storage

MODERN = TESTDATA / "modern" / "icechunk"
#: A change as compared here: depth, path, node type, chunk index, change.
Row = tuple[int, str, str, str | None, str]

#: test-repo-v1 and -v2 (the same commits): depth 1 "empty structure", 2 "fill data", 3 "set virtual chunk".
TEST_REPO_ROWS: list[Row] = [
    (1, "/", "group", None, "added"),
    (1, "/group1", "group", None, "added"),
    (1, "/group1/big_chunks", "array", None, "added"),
    (1, "/group1/small_chunks", "array", None, "added"),
    *[(2, "/group1/big_chunks", "array", f"{i}/{j}", "added") for i in range(2) for j in range(2)],
    *[(2, "/group1/small_chunks", "array", str(i), "added") for i in range(5)],
    (3, "/group1/big_chunks", "array", "0/0", "modified"),
]
_SPLIT_CHUNKS = [f"{i}/{j}" for i in range(4) for j in range(4)]  # 10x10 in 3x3 chunks
#: split-repo-v2: depth 1 "empty structure", 2 "write data", 3 "write data again", 4 "... with more splits".
SPLIT_REPO_ROWS: list[Row] = [
    (1, "/", "group", None, "added"),
    (1, "/group1", "group", None, "added"),
    (1, "/group1/small_chunks", "array", None, "added"),
    (1, "/group1/split", "array", None, "added"),
    *[(2, "/group1/small_chunks", "array", str(i), "added") for i in range(5)],
    *[(2, "/group1/split", "array", index, "added") for index in _SPLIT_CHUNKS],
    *[
        (depth, path, "array", index, "modified")
        for depth in (3, 4)
        for path, indices in (("/group1/small_chunks", [str(i) for i in range(5)]), ("/group1/split", _SPLIT_CHUNKS))
        for index in indices
    ],
]
DOCUMENTED = {"test-repo-v1": TEST_REPO_ROWS, "test-repo-v2": TEST_REPO_ROWS, "split-repo-v2": SPLIT_REPO_ROWS}


def _copy(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(MODERN / name, tmp_path / name))


def _main_line(root: Path) -> list[str]:
    """main's ancestry, oldest first, as lakeops reads it."""
    info = VersionedRepository(open_storage(str(root)), str(root)).info
    return [s.id for s in reversed(info.ancestry(info.branches["main"]))]


def _cdc(root: Path, output: Path, start: str, to: str | None = None) -> IcechunkCdcReport:
    report = api.cdc(str(root), CdcOptions(from_version=start, to_version=to, output=str(output)))
    assert isinstance(report, IcechunkCdcReport)
    return report


def _read(output: Path) -> list[Row]:
    """The change table as deltalake reads it, in extraction order."""
    rows = DeltaTable(str(output)).to_pyarrow_table().to_pylist()
    ordered = sorted(rows, key=lambda r: (r["snapshot_depth"], r["path"], r["chunk_index"] or ""))
    return [(r["snapshot_depth"], r["path"], r["node_type"], r["chunk_index"], r["change"]) for r in ordered]


@pytest.mark.parametrize("name", ["test-repo-v1", "test-repo-v2", "split-repo-v2"])
def test_changes_from_the_first_snapshot_to_main_are_the_documented_ones(name: str, tmp_path: Path) -> None:
    root, output = _copy(name, tmp_path), tmp_path / "changes"
    line = _main_line(root)
    report = _cdc(root, output, line[0])
    assert _read(output) == DOCUMENTED[name]
    assert (report.watermark, report.committed_version, report.rows_written) == (
        "flushed_at",
        0,
        len(DOCUMENTED[name]),
    )
    table = DeltaTable(str(output))
    by_depth = {r["snapshot_depth"]: r for r in table.to_pyarrow_table().to_pylist()}
    info = VersionedRepository(open_storage(str(root)), str(root)).info
    for depth, snapshot_id in enumerate(line[1:], start=1):
        flushed = info.snapshots[snapshot_id].flushed_at
        assert by_depth[depth]["snapshot_id"] == snapshot_id
        assert by_depth[depth]["parent_snapshot_id"] == line[depth - 1]
        assert int(by_depth[depth]["timestamp"].timestamp() * 1_000_000) == flushed
    assert report.to_depth == info.snapshots[line[-1]].flushed_at  # the watermark, not the depth

    again = _cdc(root, output, line[0])
    assert (again.already_extracted, again.rows_written, again.committed_version) == (True, 0, None)
    assert table.version() == DeltaTable(str(output)).version() == 0


@pytest.mark.parametrize("name", ["test-repo-v1", "test-repo-v2", "split-repo-v2"])
def test_from_0_is_the_repositorys_creation_as_for_delta_and_iceberg(name: str, tmp_path: Path) -> None:
    root = _copy(name, tmp_path)
    report = _cdc(root, tmp_path / "changes", "0")
    assert _read(tmp_path / "changes") == DOCUMENTED[name]
    assert report.from_snapshot == _main_line(root)[0]


def test_a_branch_named_0_is_still_a_branch(tmp_path: Path) -> None:
    root = _copy("test-repo-v1", tmp_path)
    ref = root / "refs" / "branch.main" / "ref.json"
    (root / "refs" / "branch.0").mkdir()
    (root / "refs" / "branch.0" / "ref.json").write_bytes(ref.read_bytes())  # "0" at main's tip
    with pytest.raises(InvalidArgument, match="is empty"):
        _cdc(root, tmp_path / "changes", "0")


# --- format 1 against the icechunk package ---------------------------------------------------------


def _package_state(repo: icechunk.Repository, snapshot_id: str) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """Nodes (path -> node type, canonical zarr.json) and chunks (key -> bytes, or a marker for a
    virtual chunk this machine cannot fetch) of one snapshot, as the package's zarr store lists them."""
    store = repo.readonly_session(snapshot_id=snapshot_id).store

    async def keys() -> list[str]:
        return [key async for key in store.list()]

    def content(key: str) -> bytes:
        buffer = sync(store.get(key, default_buffer_prototype()))
        assert buffer is not None
        return buffer.to_bytes()

    nodes: dict[str, tuple[str, str]] = {}
    chunks: dict[str, str] = {}
    for key in sync(keys()):
        if key == "zarr.json" or key.endswith("/zarr.json"):
            document = json.loads(content(key))
            nodes["/" + key.removesuffix("zarr.json").rstrip("/")] = (
                document["node_type"],
                json.dumps(document, sort_keys=True),
            )
            continue
        try:
            chunks[key] = content(key).hex()
        except icechunk.IcechunkError as exc:
            assert "virtual chunk" in str(exc)
            chunks[key] = "virtual"
    return nodes, chunks


def _package_rows(depth: int, before: tuple[dict, dict], after: tuple[dict, dict]) -> list[Row]:
    """The changes between two snapshots as seen through the package."""
    (old_nodes, old_chunks), (new_nodes, new_chunks) = before, after

    def chunk_row(key: str, change: str) -> Row:
        path, _, index = key.partition("/c/")
        return depth, "/" + path, "array", index, change

    rows: list[Row] = []
    for path in set(old_nodes) | set(new_nodes):
        old, new = old_nodes.get(path), new_nodes.get(path)
        if old is None or new is None:
            kind, change = (new or old)[0], "added" if old is None else "removed"  # type: ignore[index]
            rows.append((depth, path, kind, None, change))
        elif old[1] != new[1]:
            rows.append((depth, path, new[0], None, "metadata-changed"))
    for key in set(old_chunks) | set(new_chunks):
        was, now = old_chunks.get(key), new_chunks.get(key)
        if was != now:
            rows.append(chunk_row(key, "added" if was is None else "removed" if now is None else "modified"))
    return sorted(rows, key=lambda r: (r[0], r[1], r[3] or ""))


def test_format_1_changes_are_what_the_icechunk_package_reads_between_snapshots(tmp_path: Path) -> None:
    root, output = _copy("test-repo-v1", tmp_path), tmp_path / "changes"
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(str(root)))
    line = [s.id for s in reversed(list(repo.ancestry(branch="main")))]
    assert line == _main_line(root)
    _cdc(root, output, line[0])
    states = [_package_state(repo, snapshot_id) for snapshot_id in line]
    expected = [row for depth in range(1, len(line)) for row in _package_rows(depth, states[depth - 1], states[depth])]
    assert _read(output) == expected


# --- watermark: overlaps, gaps, expiry ------------------------------------------------------------


@pytest.mark.parametrize("name", ["test-repo-v1", "test-repo-v2"])
def test_an_overlapping_range_writes_nothing_twice_and_a_gap_is_refused(name: str, tmp_path: Path) -> None:
    root, output = _copy(name, tmp_path), tmp_path / "changes"
    initial, structure, fill, virtual = _main_line(root)
    assert _cdc(root, output, initial, fill).rows_written == 13  # depths 1..2
    continued = _cdc(root, output, initial)  # overlaps 1..2: only depth 3 is new
    assert (continued.rows_written, continued.snapshots_extracted, continued.committed_version) == (1, 1, 1)
    assert _cdc(root, output, structure, "main").already_extracted
    assert _read(output) == TEST_REPO_ROWS

    gapped = tmp_path / "gapped"
    _cdc(root, gapped, initial, structure)
    with pytest.raises(InvalidArgument, match=f"starting after {fill} would leave the snapshots before it out"):
        _cdc(root, gapped, fill)
    assert DeltaTable(str(gapped)).version() == 0
    later = tmp_path / "later"
    _cdc(root, later, structure)  # holds depths 2..3
    with pytest.raises(InvalidArgument, match="earlier changes cannot be added"):
        _cdc(root, later, initial)
    assert DeltaTable(str(later)).version() == 0


def _commit_after_expiry(root: Path) -> str:
    """A new snapshot on main written by the package: small_chunks[0] = 7."""
    session = icechunk.Repository.open(icechunk.local_filesystem_storage(str(root))).writable_session("main")
    array = zarr.open_array(session.store, path="group1/small_chunks", mode="r+")
    array[0] = 7
    return session.commit("after expiry")


def test_cdc_after_expiry_continues_without_duplicates(tmp_path: Path) -> None:
    root, output = _copy("test-repo-v1", tmp_path), tmp_path / "changes"
    initial, _, _, virtual = _main_line(root)
    _cdc(root, output, initial)
    assert api.expire(str(root), ExpiryOptions(older_than="8d")).snapshots_expired > 0
    assert _main_line(root) == [initial, virtual]  # the tip re-parented onto the initial snapshot
    assert _cdc(root, output, initial).already_extracted  # the tip kept its flushed_at

    new = _commit_after_expiry(root)
    report = _cdc(root, output, initial)
    assert (report.snapshots_extracted, report.rows_written) == (1, 1)
    rows = DeltaTable(str(output)).to_pyarrow_table().to_pylist()
    added = [r for r in rows if r["snapshot_id"] == new]
    assert [(r["parent_snapshot_id"], r["path"], r["chunk_index"], r["change"]) for r in added] == [
        (virtual, "/group1/small_chunks", "0", "modified")
    ]
    changes = Counter((r["snapshot_id"], r["path"], r["chunk_index"], r["change"]) for r in rows)
    assert len(rows) == len(TEST_REPO_ROWS) + 1 and max(changes.values()) == 1
    assert _cdc(root, output, virtual).already_extracted


@pytest.mark.parametrize("name", ["test-repo-v1", "test-repo-v2"])
def test_cdc_is_refused_when_the_last_snapshot_extracted_expired(name: str, tmp_path: Path) -> None:
    """Expiry re-parents the tip onto the initial snapshot (format 1: in its file, format 2: in the repo
    object): diffing it there would repeat the changes already extracted, so the range is refused,
    naming the snapshot."""
    root, output = _copy(name, tmp_path), tmp_path / "changes"
    initial, _, fill, virtual = _main_line(root)
    _cdc(root, output, initial, fill)
    api.expire(str(root), ExpiryOptions(older_than="8d"))
    with pytest.raises(VersionNotFound, match=f"no longer the parent of {virtual} .expired, or on another branch"):
        _cdc(root, output, initial)
    assert DeltaTable(str(output)).version() == 0


def test_a_snapshot_flushed_no_later_than_its_parent_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No fixture has one; the decoded graph of a copy is altered: without a strictly increasing
    ``flushed_at`` the watermark could skip or repeat snapshots."""
    root = _copy("test-repo-v2", tmp_path)
    initial, _, fill, virtual = _main_line(root)
    decoded = VersionedRepository(open_storage(str(root)), str(root)).info
    tip = decoded.snapshots[virtual].model_copy(update={"flushed_at": decoded.snapshots[fill].flushed_at})
    altered = decoded.model_copy(update={"snapshots": {**decoded.snapshots, virtual: tip}})
    monkeypatch.setattr(VersionedRepository, "info", property(lambda self: altered))
    with pytest.raises(InvalidArgument, match=f"snapshot {virtual} was flushed no later than its parent {fill}"):
        _cdc(root, tmp_path / "changes", initial)
    assert failed_run_records(tmp_path / "changes") == 1  # the refused run's record, no change table
