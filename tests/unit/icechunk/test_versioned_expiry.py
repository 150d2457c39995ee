"""Snapshot expiry of Icechunk format 1 and 2 repositories by lakeops
(:mod:`lakeops.icechunk.maintenance.versioned_expiry`), then its garbage collection.

Format 1 is judged against the icechunk package: its ``expire_snapshots`` on a second copy must leave
the same histories (and snapshot files that decode to the same records), every ref must read the same
arrays through the package afterwards, and lakeops' ``orphans`` must leave the files the package's
``garbage_collect`` leaves. Repositories are the ``test-repo-v1`` fixture and ones the package writes
here with controlled ages. Format 2, which no installed package reads, is judged against the same
package result on ``test-repo-v1`` (``test-repo-v2`` holds the same commits), the spec ("Repo Info
File", "Changes from spec version 2 to 2.1") and lakeops' own readers.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import icechunk
import numpy as np
import pytest
import zarr
from lakeops_testdata import TESTDATA
from rich.console import Console

from lakeops import api
from lakeops.errors import CommitStateUnknown, StorageError, UnsafeOperation
from lakeops.executors import ThreadExecutor
from lakeops.icechunk import fbs
from lakeops.icechunk.binary import FileType, read_payload
from lakeops.icechunk.flatbuf_codec import Record, decode
from lakeops.icechunk.maintenance import versioned_expiry
from lakeops.icechunk.maintenance.versioned_expiry import VersionedExpiryPlan, decide
from lakeops.icechunk.maintenance.versioned_orphans import VersionedGcPlan
from lakeops.icechunk.repo_info import RepoInfo, decode_repo_object
from lakeops.icechunk.repo_update import RepoDocument, update_repo
from lakeops.icechunk.versioned import VersionedRepository
from lakeops.ops.expiry import ExpiryOptions
from lakeops.ops.icechunk import expiry as ops_expiry
from lakeops.ops.icechunk import orphans as ops_orphans
from lakeops.ops.icechunk.expiry import IcechunkExpiryReport
from lakeops.ops.icechunk.inspect import IcechunkInspectReport
from lakeops.ops.icechunk.orphans import IcechunkGcReport
from lakeops.ops.orphans import OrphansOptions
from lakeops.ops.target import CatalogOptions, resolve_target
from lakeops.ops.verify import retained_files_exist
from lakeops.storage import Storage, StorageOptions, open_storage, relative_to

MODERN = TESTDATA / "modern" / "icechunk"
WEEK_MS = 7 * 24 * 3600 * 1000
#: 4 chunks of 256 random float64 (2 KiB each, incompressible): stored as chunk objects, not inlined.
SHAPE, CHUNK = 1024, 256
LOCAL = StorageOptions()
#: The fixtures' commits, oldest first (upstream test_can_read_old.py writes test-repo-v1 and -v2 alike).
FIXTURE_MESSAGES = [
    "Repository initialized",
    "empty structure",
    "fill data",
    "set virtual chunk",
    "delete a chunk",
    "some more structure",
]


# --- helpers -----------------------------------------------------------------------------------------


def _files(root: Path | str) -> dict[str, bytes]:
    """Every file of the repository, lakeops' own audit records left out."""
    root = Path(root)
    files = {p.relative_to(root): p for p in root.rglob("*") if p.is_file()}
    return {str(rel): p.read_bytes() for rel, p in files.items() if not rel.parts[0].startswith("_lakeops")}


def _age(root: Path | str, before_ms: int) -> None:
    """Every file of the repository last modified a minute before ``before_ms``."""
    old = before_ms / 1000 - 60
    for path in Path(root).rglob("*"):
        os.utime(path, (old, old))


def _expire(root: Path | str, cutoff_ms: int, *, dry_run: bool = False) -> IcechunkExpiryReport:
    """lakeops' expiry with exactly ``cutoff_ms``: the default week, ``now`` a week after it."""
    location = str(root)
    plan = ops_expiry.plan(
        location, open_storage(location), LOCAL, retention=None, force=False, now_ms=cutoff_ms + WEEK_MS
    )
    assert isinstance(plan, VersionedExpiryPlan)
    return ops_expiry.run(plan, LOCAL, dry_run=dry_run)


def _collect(root: Path | str, cutoff_ms: int) -> IcechunkGcReport:
    """lakeops' garbage collection with exactly ``cutoff_ms`` (the default week, ``now`` a week on)."""
    location = str(root)
    plan = ops_orphans.plan(
        location, open_storage(location), LOCAL, retention=None, force=False, now_ms=cutoff_ms + WEEK_MS
    )
    assert isinstance(plan, VersionedGcPlan)
    return ops_orphans.run(
        plan, LOCAL, executor=ThreadExecutor(), dry_run=False, progress=Console(quiet=True), description=""
    )


def _package(root: Path | str) -> Any:
    return icechunk.Repository.open(icechunk.local_filesystem_storage(str(root)))


def _package_lines(root: Path | str, field: str = "id") -> dict[str, list[str]]:
    """Every branch's and tag's history as the package reads it, newest first: each snapshot's ``field``."""
    repo = _package(root)
    lines = {f"branch {b}": list(repo.ancestry(branch=b)) for b in repo.list_branches()}
    lines |= {f"tag {t}": list(repo.ancestry(tag=t)) for t in repo.list_tags()}
    return {ref: [getattr(info, field) for info in line] for ref, line in lines.items()}


def _info(root: Path | str) -> RepoInfo:
    return VersionedRepository(open_storage(str(root)), str(root)).info


def _refs(info: RepoInfo) -> dict[str, str]:
    """``branch NAME`` / ``tag NAME`` -> tip."""
    return {f"branch {b}": tip for b, tip in info.branches.items()} | {f"tag {t}": tip for t, tip in info.tags.items()}


def _lines_by_message(info: RepoInfo) -> dict[str, list[str]]:
    return {ref: [s.message for s in info.ancestry(tip)] for ref, tip in _refs(info).items()}


def _snapshot_records(root: Path | str) -> dict[str, Record]:
    """Every snapshot file decoded whole."""
    records = {}
    for path in sorted(Path(root, "snapshots").iterdir()):
        _, table = read_payload(path.read_bytes(), str(path), FileType.SNAPSHOT)
        records[path.name] = decode(table, fbs.SNAPSHOT)
    return records


def _ref_contents(root: Path | str) -> dict[str, dict[str, Any]]:
    """What every branch and tag holds, read by lakeops: each node's path, kind and chunk references."""
    repo = VersionedRepository(open_storage(str(root)), str(root))
    refs = {
        **{f"branch {b}": t for b, t in repo.info.branches.items()},
        **{f"tag {t}": s for t, s in repo.info.tags.items()},
    }
    contents: dict[str, dict[str, Any]] = {}
    for ref, tip in refs.items():
        nodes: dict[str, Any] = {}
        for node in repo.snapshot(tip).nodes:
            arrays = node.node_data is not None
            nodes[node.path] = repo.chunk_refs(tip, node.path) if arrays else "group"
        contents[ref] = nodes
    return contents


def _cutoff_after(info: RepoInfo, message: str) -> int:
    """The first millisecond after the snapshot with ``message`` was flushed."""
    flushed = next(s.flushed_at for s in info.snapshots.values() if s.message == message)
    return math.floor(flushed / 1000) + 1


# --- format 1, repositories the package writes ---------------------------------------------------------


@dataclass(frozen=True)
class History:
    """What :func:`_write_history` committed: snapshot ids and array values by name, the instant
    between the old and the new commits (ms), and the objects ``c0`` added (relative paths)."""

    ids: dict[str, str]
    values: dict[str, np.ndarray]
    mid_ms: int
    c0_files: frozenset[str]


def _listing(root: str, options: StorageOptions) -> dict[str, tuple[int, int]]:
    return {relative_to(root, f.path): (f.size, f.mtime_ms) for f in open_storage(root, options).list(root)}


def _commit(repo: Any, branch: str, values: np.ndarray, message: str) -> str:
    session = repo.writable_session(branch)
    group = zarr.open_group(session.store, mode="a")
    array = group["x"] if "x" in group else group.create_array("x", shape=(SHAPE,), chunks=(CHUNK,), dtype="f8")
    array[:] = values
    return str(session.commit(message))


def _write_history(storage: Any, root: str, options: StorageOptions) -> History:
    """Old (before ``mid_ms``): main c0 c1, tag v1 at c1, branch side from c1 with s1. New: main c2 c3,
    tag v3 at c3, branch dev from c0 with d1."""
    repo = icechunk.Repository.create(storage)
    rng = np.random.default_rng(7)
    values = {name: rng.random(SHAPE) for name in ("c0", "c1", "s1", "c2", "c3", "d1")}
    before = set(_listing(root, options))
    ids = {"c0": _commit(repo, "main", values["c0"], "c0")}
    c0_files = frozenset(set(_listing(root, options)) - before - {"refs/branch.main/ref.json"})
    ids["c1"] = _commit(repo, "main", values["c1"], "c1")
    repo.create_tag("v1", ids["c1"])
    repo.create_branch("side", ids["c1"])
    ids["s1"] = _commit(repo, "side", values["s1"], "s1")
    repo.create_branch("dev", ids["c0"])
    time.sleep(0.05)
    mid_ms = int(time.time() * 1000)
    time.sleep(0.05)
    ids["c2"] = _commit(repo, "main", values["c2"], "c2")
    ids["c3"] = _commit(repo, "main", values["c3"], "c3")
    repo.create_tag("v3", ids["c3"])
    ids["d1"] = _commit(repo, "dev", values["d1"], "d1")
    return History(ids=ids, values=values, mid_ms=mid_ms, c0_files=c0_files)


def _read(root: str, **at: str) -> np.ndarray:
    session = _package(root).readonly_session(**at)
    return np.asarray(zarr.open_array(session.store, path="x", mode="r")[:])


def _assert_values(root: str, history: History) -> None:
    """Every branch and tag reads back through the package exactly what was written."""
    expected = {
        "branch": {"main": "c3", "side": "s1", "dev": "d1"},
        "tag": {"v1": "c1", "v3": "c3"},
    }
    for kind, refs in expected.items():
        for name, commit in refs.items():
            assert np.array_equal(_read(root, **{kind: name}), history.values[commit]), (kind, name)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, History]:
    root = str(tmp_path_factory.mktemp("pristine") / "repo")
    return root, _write_history(icechunk.local_filesystem_storage(root), root, LOCAL)


@pytest.fixture
def copies(pristine: tuple[str, History], tmp_path: Path) -> tuple[str, str, History]:
    """Two private copies of the package-written repository: lakeops', the package's."""
    root, history = pristine
    ours = str(shutil.copytree(root, tmp_path / "ours"))
    theirs = str(shutil.copytree(root, tmp_path / "theirs"))
    return ours, theirs, history


def _expire_both(ours: str, theirs: str, cutoff_ms: int) -> tuple[IcechunkExpiryReport, set[str]]:
    report = _expire(ours, cutoff_ms)
    tips = {line[0] for line in _package_lines(theirs).values()}
    released = _package(theirs).expire_snapshots(datetime.fromtimestamp(cutoff_ms / 1000, UTC))
    return report, set(released) - tips


@pytest.mark.parametrize("when", ["before every commit", "between old and new", "after every commit"])
def test_format_1_expiry_expires_what_the_package_expires(copies: tuple[str, str, History], when: str) -> None:
    ours, theirs, history = copies
    cutoff_ms = {
        "before every commit": history.mid_ms - 3600_000,
        "between old and new": history.mid_ms,
        "after every commit": int(time.time() * 1000) + 1000,
    }[when]
    report, expired = _expire_both(ours, theirs, cutoff_ms)
    assert _package_lines(ours) == _package_lines(theirs)
    assert _snapshot_records(ours) == _snapshot_records(theirs)  # only parent_id changed, as the package does
    assert report.snapshots_expired == len(expired)
    ids = history.ids
    assert {
        "before every commit": set(),
        "between old and new": {ids["c0"]},
        "after every commit": {ids["c0"], ids["c2"]},
    }[when] == expired
    assert (report.branches, report.tags, report.snapshots_scanned) == (3, 2, 7)  # six commits and the initial
    assert report.snapshots_retained == 7 - len(expired)
    _assert_values(ours, history)


def test_format_1_histories_end_at_the_initial_snapshot(copies: tuple[str, str, History]) -> None:
    ours, _, history = copies
    ids = history.ids
    report = _expire(ours, history.mid_ms)
    initial = "1CECHNKREP0F1RSTCMT0"
    assert _package_lines(ours) == {
        "branch main": [ids["c3"], ids["c2"], initial],
        "branch side": [ids["s1"], initial],
        "branch dev": [ids["d1"], initial],
        "tag v1": [ids["c1"], initial],
        "tag v3": [ids["c3"], ids["c2"], initial],
    }
    assert report.snapshots_reparented == 4  # c2, c1, s1 and d1
    assert _package(ours).list_branches() == {"main", "side", "dev"}  # no ref is deleted
    assert _package(ours).list_tags() == {"v1", "v3"}


def test_format_1_dry_run_reports_the_same_and_changes_nothing(copies: tuple[str, str, History]) -> None:
    ours, _, history = copies
    before = _files(ours)
    dry = _expire(ours, history.mid_ms, dry_run=True)
    assert _files(ours) == before
    assert sorted(Path(p).name for p in dry.paths) == sorted(history.ids[c] for c in ("c1", "s1", "c2", "d1"))
    report = _expire(ours, history.mid_ms)
    figures = ("snapshots_scanned", "snapshots_expired", "snapshots_retained", "snapshots_reparented")
    assert [getattr(dry, f) for f in figures] == [getattr(report, f) for f in figures] == [7, 1, 6, 4]
    assert set(_files(ours)) == set(before)  # expiry deletes nothing


class _FailingStorage:
    """Storage whose second compare-and-swap fails as a dropped connection would."""

    def __init__(self, inner: Storage) -> None:
        self.inner, self.swaps = inner, 0

    def replace_if_match(self, path: str, data: bytes, token: str) -> None:
        self.swaps += 1
        if self.swaps == 2:
            raise StorageError(f"{path}: connection reset")
        self.inner.replace_if_match(path, data, token)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_format_1_a_run_stopped_part_way_is_finished_by_the_next(
    copies: tuple[str, str, History], monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs, history = copies
    real_open = versioned_expiry.open_storage
    monkeypatch.setattr(versioned_expiry, "open_storage", lambda *args: _FailingStorage(real_open(*args)))
    with pytest.raises(CommitStateUnknown, match="the rewrite of snapshot .* has an unknown outcome"):
        _expire(ours, history.mid_ms)
    _assert_values(ours, history)  # one snapshot re-parented, the others not yet: every ref still reads
    monkeypatch.undo()
    assert _expire(ours, history.mid_ms).snapshots_reparented == 3
    _expire_both(ours, theirs, history.mid_ms)  # nothing left to do for lakeops; the package on its copy
    assert _package_lines(ours) == _package_lines(theirs)
    assert _snapshot_records(ours) == _snapshot_records(theirs)


def test_format_1_garbage_collection_after_expiry_deletes_what_the_package_deletes(
    copies: tuple[str, str, History],
) -> None:
    ours, theirs, history = copies
    cutoff_ms = int(time.time() * 1000) + 1000
    _expire_both(ours, theirs, cutoff_ms)
    for root in (ours, theirs):
        _age(root, cutoff_ms)
    _package(theirs).garbage_collect(datetime.fromtimestamp(cutoff_ms / 1000, UTC))
    report = _collect(ours, cutoff_ms)
    assert report.deleted_snapshots == 2  # c0 and c2
    assert set(_files(ours)) == set(_files(theirs))
    assert not history.c0_files & set(_files(ours))
    _assert_values(ours, history)


def test_format_1_default_week_keeps_a_fresh_history(copies: tuple[str, str, History]) -> None:
    ours, _, _ = copies
    before = _files(ours)
    report = api.expire(ours)
    assert isinstance(report, IcechunkExpiryReport)
    assert (report.retention, report.snapshots_expired, report.snapshots_reparented) == ("7d", 0, 0)
    assert _files(ours) == before


# --- format 1 and 2 fixtures -----------------------------------------------------------------------------


def _copy(name: str, tmp_path: Path, as_name: str | None = None) -> Path:
    return Path(shutil.copytree(MODERN / name, tmp_path / (as_name or name)))


@pytest.mark.parametrize("after", FIXTURE_MESSAGES)
def test_fixture_expiry_matches_the_package_in_both_formats(after: str, tmp_path: Path) -> None:
    """The package expires a copy of ``test-repo-v1``; lakeops another copy and ``test-repo-v2`` (the
    same commits), each with its cutoff just after the commit ``after``: the same histories."""
    theirs = _copy("test-repo-v1", tmp_path, "theirs")
    ours_v1, ours_v2 = _copy("test-repo-v1", tmp_path), _copy("test-repo-v2", tmp_path)
    cutoff_ms = _cutoff_after(_info(theirs), after)
    _package(theirs).expire_snapshots(datetime.fromtimestamp(cutoff_ms / 1000, UTC))
    expected = _package_lines(theirs, "message")

    _expire(ours_v1, _cutoff_after(_info(ours_v1), after))
    assert _package_lines(ours_v1) == _package_lines(theirs)
    assert _snapshot_records(ours_v1) == _snapshot_records(theirs)
    _expire(ours_v2, _cutoff_after(_info(ours_v2), after))
    assert _lines_by_message(_info(ours_v2)) == expected


def test_format_2_expiry_rewrites_the_repo_object_by_the_spec(tmp_path: Path) -> None:
    """Cutoff after "fill data": "empty structure" and "fill data" expire; "set virtual chunk", the
    oldest snapshot every line keeps, is re-parented onto the initial snapshot and records their logs."""
    root = _copy("test-repo-v2", tmp_path)
    before = _info(root)
    contents = _ref_contents(root)
    snapshot_files = {p: d for p, d in _files(root).items() if p.startswith("snapshots/")}
    by_message = {s.message: s.id for s in before.snapshots.values()}
    report = _expire(root, _cutoff_after(before, "fill data"))

    after = decode_repo_object((root / "repo").read_bytes(), "repo")
    expired = {by_message["empty structure"], by_message["fill data"]}
    assert report.snapshots_expired == 2 and set(before.snapshots) - set(after.snapshots) == expired
    assert (after.branches, after.tags, after.deleted_tags) == (before.branches, before.tags, before.deleted_tags)
    initial = by_message["Repository initialized"]
    moved = {s.id for s in after.snapshots.values() if s.parent_id != before.snapshots[s.id].parent_id}
    assert moved == {by_message["set virtual chunk"]}
    assert after.snapshots[by_message["set virtual chunk"]].parent_id == initial
    # spec 2.1: the expired ancestors' transaction logs, oldest first, on the snapshot that lost them
    pruned = {s.id: s.pruned_ancestor_tx_logs for s in after.snapshots.values() if s.pruned_ancestor_tx_logs}
    assert pruned == {by_message["set virtual chunk"]: [by_message["empty structure"], by_message["fill data"]]}
    # untouched fields, and the operation recorded at the head of latest_updates
    record = decode(read_payload((root / "repo").read_bytes(), "repo", FileType.REPO_INFO)[1], fbs.REPO)
    assert record["latest_updates"][0]["update_type"] == (fbs.EXPIRATION_RAN, {})
    assert after.spec_version == 2 and after.status == before.status
    assert _ref_contents(root) == contents
    assert {p: d for p, d in _files(root).items() if p.startswith("snapshots/")} == snapshot_files


def test_format_2_an_old_tip_keeps_its_place_and_its_descendants_lose_it(tmp_path: Path) -> None:
    """Cutoff after "set virtual chunk", main's tip: it stays (a tip) with its history shortened, and
    my-branch's oldest kept snapshot, "delete a chunk", skips it too: its pruned logs are the three
    commits before it, oldest first; "some more structure" keeps its parent and has none."""
    root = _copy("test-repo-v2", tmp_path)
    before = _info(root)
    ids = {s.message: s.id for s in before.snapshots.values()}
    report = _expire(root, _cutoff_after(before, "set virtual chunk"))
    after = _info(root)
    assert set(after.snapshots) == {ids[m] for m in ["Repository initialized", *FIXTURE_MESSAGES[3:]]}
    assert report.snapshots_reparented == 2
    history = [ids[m] for m in FIXTURE_MESSAGES[1:4]]
    initial = ids["Repository initialized"]
    assert after.snapshots[ids["set virtual chunk"]].pruned_ancestor_tx_logs == history[:2]
    assert after.snapshots[ids["set virtual chunk"]].parent_id == initial
    assert after.snapshots[ids["delete a chunk"]].pruned_ancestor_tx_logs == history
    assert after.snapshots[ids["delete a chunk"]].parent_id == initial
    assert after.snapshots[ids["some more structure"]].pruned_ancestor_tx_logs == []
    assert after.snapshots[ids["some more structure"]].parent_id == ids["delete a chunk"]


def test_format_2_dry_run_changes_nothing(tmp_path: Path) -> None:
    root = _copy("test-repo-v2", tmp_path)
    before = _files(root)
    dry = _expire(root, _cutoff_after(_info(root), "fill data"), dry_run=True)
    assert (dry.snapshots_expired, dry.paths) == (2, [str(root / "repo")])
    assert _files(root) == before


class _RacingStorage:
    """Storage that lets another writer replace the repo object right after expiry first reads it."""

    def __init__(self, inner: Storage, root: Path, other: Any) -> None:
        self.inner, self.root, self.other, self.raced = inner, root, other, False

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        read = self.inner.read_versioned(path)
        if path.endswith("/repo") and not self.raced:
            self.raced = True
            update_repo(self.inner, str(self.root), self.other)
        return read

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_format_2_a_concurrent_update_is_re_applied_on_the_state_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer tags "fill data" between expiry's read and its write: the retry re-decides on the
    new state, where that snapshot is a tag's tip and stays (its own history shortened)."""
    root = _copy("test-repo-v2", tmp_path)
    before = _info(root)
    ids = {s.message: s.id for s in before.snapshots.values()}
    plan = ops_expiry.plan(
        str(root),
        open_storage(str(root)),
        LOCAL,
        retention=None,
        force=False,
        now_ms=_cutoff_after(before, "fill data") + WEEK_MS,
    )
    assert isinstance(plan, VersionedExpiryPlan)
    assert set(plan.expired) == {ids["empty structure"], ids["fill data"]}

    def tag(document: RepoDocument) -> tuple[int, Record]:
        document.tags["pinned"] = ids["fill data"]
        return 5, {"name": "pinned"}  # TagCreatedUpdate

    real_open = versioned_expiry.open_storage
    monkeypatch.setattr(
        versioned_expiry,
        "open_storage",
        lambda location, options: _RacingStorage(real_open(location, options), root, tag),
    )
    report = ops_expiry.run(plan, LOCAL, dry_run=False)
    after = _info(root)
    assert after.tags["pinned"] == ids["fill data"]
    assert set(before.snapshots) - set(after.snapshots) == {ids["empty structure"]}
    assert report.snapshots_expired == 1
    assert after.snapshots[ids["fill data"]].parent_id == ids["Repository initialized"]
    assert after.snapshots[ids["fill data"]].pruned_ancestor_tx_logs == [ids["empty structure"]]
    assert after.snapshots[ids["set virtual chunk"]].pruned_ancestor_tx_logs == [
        ids["empty structure"],
        ids["fill data"],
    ]
    record = decode(read_payload((root / "repo").read_bytes(), "repo", FileType.REPO_INFO)[1], fbs.REPO)
    assert [u["update_type"][0] for u in record["latest_updates"][:2]] == [fbs.EXPIRATION_RAN, 5]


@pytest.mark.parametrize("name", ["test-repo-v1", "test-repo-v2", "split-repo-v2"])
def test_orphans_after_expiry_deletes_what_expiry_released_and_nothing_a_ref_reaches(name: str, tmp_path: Path) -> None:
    """Through ``lakeops.api`` (the fixtures are from 2025: an 8-day window expires all but the tips)."""
    root = _copy(name, tmp_path)
    contents = _ref_contents(root)
    before = _info(root)
    report = api.expire(str(root), ExpiryOptions(older_than="8d"))
    assert isinstance(report, IcechunkExpiryReport) and report.snapshots_expired > 0
    expired = set(before.snapshots) - set(_info(root).snapshots) if name.endswith("v2") else None
    _age(root, int(time.time() * 1000) - 9 * 24 * 3600 * 1000)
    files = set(_files(root))
    gc = api.orphans(str(root), OrphansOptions(older_than="8d"))
    deleted = files - set(_files(root))
    assert gc.deleted_snapshots == report.snapshots_expired
    if expired is not None:
        assert {p for p in deleted if p.startswith("snapshots/")} == {f"snapshots/{i}" for i in expired}
        assert not {p for p in deleted if p.startswith("transactions/")}  # kept as pruned_ancestor_tx_logs
    assert _ref_contents(root) == contents
    target = resolve_target(str(root), CatalogOptions(), StorageOptions())
    assert retained_files_exist(target).passed
    if name == "test-repo-v1":
        repo = _package(root)
        array = zarr.open_array(repo.readonly_session("main").store, path="group1/small_chunks", mode="r")
        assert array[:].shape == (5,)


@pytest.mark.parametrize("name", ["test-repo-v1", "test-repo-v2"])
def test_inspect_counts_what_expire_would_expire_and_no_longer_refuses_it(name: str) -> None:
    """Read in place (neither inspect nor a dry run writes): the 2025 fixtures' two non-tip commits are
    past the default week."""
    root = str(MODERN / name)
    inspected = api.inspect(root)
    assert isinstance(inspected, IcechunkInspectReport)
    assert "expire" in inspected.supported_operations and "expire" not in inspected.refused_operations
    dry = api.expire(root, dry_run=True)
    assert isinstance(dry, IcechunkExpiryReport)
    assert inspected.expirable_snapshots == dry.snapshots_expired == 2


def test_quarantine_moves_nothing_since_expiry_deletes_nothing(tmp_path: Path) -> None:
    root = _copy("test-repo-v2", tmp_path)
    report = api.expire(str(root), ExpiryOptions(older_than="8d"), quarantine=True)
    assert isinstance(report, IcechunkExpiryReport) and report.snapshots_expired == 2
    assert report.quarantine_run is None  # no trash run: ``lakeops orphans --quarantine`` moves the files
    assert not (root / "_lakeops_trash").exists()


@pytest.mark.parametrize(("operation", "flag"), [("expire", "--force"), ("orphans", "--force-short-retention")])
def test_a_retention_under_a_week_needs_the_override(operation: str, flag: str, tmp_path: Path) -> None:
    root = str(_copy("test-repo-v1", tmp_path))
    storage = open_storage(root)
    planner = ops_expiry.plan if operation == "expire" else ops_orphans.plan
    with pytest.raises(UnsafeOperation, match=f"retention 6d is shorter than the default 7d.*Pass {flag}"):
        planner(root, storage, LOCAL, retention=timedelta(days=6), force=False, now_ms=WEEK_MS)
    assert planner(root, storage, LOCAL, retention=timedelta(days=6), force=True, now_ms=WEEK_MS).cutoff_ms == (
        WEEK_MS - 6 * 24 * 3600 * 1000
    )


def test_a_line_stops_at_its_first_old_snapshot() -> None:
    """On a graph (no writer makes a child flushed before its parent, so no fixture has one): c's line
    keeps c, stops at the old b and skips a too, newer than the cutoff though it is; d, listed but on
    no ref's history (format 2), follows its expired parent onto the initial snapshot."""
    parents = {"i": None, "a": "i", "b": "a", "c": "b", "d": "a"}
    flushed = {"i": 0, "a": 8, "b": 2, "c": 10, "d": 9}
    decided = decide(parents, flushed, ["c"], cutoff_us=5)
    assert (decided.scanned, decided.expired) == ({"i", "a", "b", "c"}, {"a", "b"})
    assert {sid: (r.parent, r.skipped) for sid, r in decided.reparented.items()} == {
        "c": ("i", ["a", "b"]),
        "d": ("i", ["a"]),
    }


# --- S3 --------------------------------------------------------------------------------------------


@pytest.mark.s3
def test_format_1_expiry_and_garbage_collection_on_s3(s3_bucket: Any) -> None:
    root = f"{s3_bucket.uri}/repo"
    options = s3_bucket.options
    package_storage = icechunk.s3_storage(
        bucket=s3_bucket.name,
        prefix="repo",
        endpoint_url=options.endpoint_url,
        allow_http=True,
        force_path_style=True,
        from_env=True,
    )
    history = _write_history(package_storage, root, options)
    storage = open_storage(root, options)
    now_ms = history.mid_ms + WEEK_MS  # the default week then ends between the old and the new commits

    plan = ops_expiry.plan(root, storage, options, retention=None, force=False, now_ms=now_ms)
    assert isinstance(plan, VersionedExpiryPlan)
    dry = ops_expiry.run(plan, options, dry_run=True)
    report = ops_expiry.run(plan, options, dry_run=False)
    assert (dry.snapshots_expired, report.snapshots_expired, report.snapshots_reparented) == (1, 1, 4)
    repo = icechunk.Repository.open(package_storage)
    assert [s.id for s in repo.ancestry(branch="main")] == [
        history.ids["c3"],
        history.ids["c2"],
        "1CECHNKREP0F1RSTCMT0",
    ]

    files = _listing(root, options)
    gc_plan = ops_orphans.plan(root, storage, options, retention=None, force=False, now_ms=now_ms)
    gc = ops_orphans.run(
        gc_plan, options, executor=ThreadExecutor(), dry_run=False, progress=Console(quiet=True), description=""
    )
    assert gc.deleted_files == len(history.c0_files)
    assert set(files) - set(_listing(root, options)) == history.c0_files
    session = icechunk.Repository.open(package_storage).readonly_session(tag="v1")
    assert np.array_equal(np.asarray(zarr.open_array(session.store, path="x", mode="r")[:]), history.values["c1"])
