"""Our own commits (spec "Write New Snapshot"): many small-chunk commits read back byte-identical,
on a fresh repository (local disk and S3) and on a copy of the real test repository; racing
writers on one branch; conflicts, bad changes and unknown outcomes."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lakeops.errors import CommitConflict, CommitStateUnknown, InvalidArgument, StorageError
from lakeops.icechunk.manifest import ChunkRef, InlineChunk, VirtualChunkRef
from lakeops.icechunk.refs import branch_history
from lakeops.icechunk.repository import Repository
from lakeops.icechunk.snapshot import FillValue, ManifestFileInfo, ZarrArrayMetadata, decode_snapshot, encode_snapshot
from lakeops.icechunk.writer import ChangeSet, CommitResult, commit, init_repository
from lakeops.storage import Storage, join, open_storage

GRID = ZarrArrayMetadata(shape=(8, 6), data_type="uint8", chunk_shape=(2, 2), fill_value=FillValue("UInt8", 0))
Chunks = dict[tuple[int, ...], bytes]


def _files(storage: Storage, root: str, directory: str) -> set[str]:
    return {info.path.rsplit("/", 1)[1] for info in storage.list(join(root, directory))}


def _read_all(repo: Repository, snapshot_id: str, path: str) -> Chunks:
    out: Chunks = {}
    for indices in repo.chunk_payloads(snapshot_id, path):
        data = repo.read_chunk(snapshot_id, path, indices)
        assert isinstance(data, bytes)
        out[indices] = data
    return out


def _new_repo(storage: Storage, root: str) -> CommitResult:
    init_repository(storage, root)
    return commit(
        storage, root, ChangeSet().add_group("/", {"title": "t"}).add_array("/grid", GRID), message="structure"
    )


def test_many_small_chunk_commits_read_back_byte_identical(any_storage_root: tuple[str, Storage]) -> None:
    root, storage = any_storage_root
    _new_repo(storage, root)
    rng = random.Random(7)
    expected: Chunks = {}
    states: list[tuple[str, Chunks]] = []
    written = 0
    for k in range(20):
        changes = ChangeSet()
        for _ in range(3):
            indices = (rng.randrange(4), rng.randrange(3))
            expected[indices] = rng.randbytes(rng.randrange(1, 5))
            changes.set_chunk("grid", indices, expected[indices])
        if k % 5 == 4:
            gone = next(iter(expected))
            changes.delete_chunk("/grid", gone)  # replaces a write of the same chunk in this change set
            del expected[gone]
        written += sum(isinstance(v, bytes) for v in changes.chunks.values())
        result = commit(storage, root, changes, message=f"commit {k}")
        assert (result.sequence, result.attempts) == (k + 2, 1)
        states.append((result.snapshot_id, dict(expected)))

    repo = Repository(storage, root)
    tip = repo.resolve("main")
    assert tip == states[-1][0]
    assert _read_all(repo, tip, "grid") == expected
    for snapshot_id, state in states[::4]:  # time travel
        assert _read_all(repo, snapshot_id, "/grid") == state
    messages = [e.message for e in repo.ancestry(tip)]
    assert messages == [f"commit {k}" for k in reversed(range(20))] + ["structure", "Repository initialized"]
    assert [v.sequence for v in branch_history(storage, root, "main")] == list(reversed(range(22)))
    assert len(_files(storage, root, "chunks")) == written  # one object per native chunk written
    assert len(_files(storage, root, "snapshots")) == 22
    for snapshot_id in _files(storage, root, "snapshots"):  # our encoding is canonical
        data = storage.read(repo.snapshot_path(snapshot_id))
        assert encode_snapshot(decode_snapshot(data, snapshot_id)) == data
    live = repo.reachable([tip])
    assert live.chunks == {p.id for p in repo.chunk_payloads(tip, "grid").values() if isinstance(p, ChunkRef)}


def test_fields_our_commits_fill(repo_copy: Path) -> None:
    root, storage = str(repo_copy), open_storage(str(repo_copy))
    started = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    times = iter([started, started.replace(second=6)])
    result = commit(
        storage,
        root,
        ChangeSet().set_chunk("group1/small_chunks", (4,), b"\x07", inline=True),
        message="restore chunk 4",
        branch="my-branch",
        properties={"who": "lakeops"},
        clock=lambda: next(times),
    )
    repo = Repository(storage, root)
    parent = repo.read_snapshot("0XEZMR4J7SJ5QBWAYBE0")
    snap = repo.read_snapshot(result.snapshot_id)
    assert (snap.format_version, snap.format_flags, snap.attribute_files) == (0, {}, ())
    assert snap.manifest_files == (ManifestFileInfo(result.manifest_id or "", 0),)
    assert (snap.total_parents, snap.short_term_parents) == (6, 6)
    assert snap.short_term_history == (parent.metadata, *parent.short_term_history)
    assert snap.metadata.id == result.snapshot_id and snap.metadata.message == "restore chunk 4"
    assert (snap.started_at, snap.metadata.written_at) == (started, started.replace(second=6))
    assert snap.properties == {"who": "lakeops"}
    assert {n.path: n.id for n in snap.nodes.values()} == {n.path: n.id for n in parent.nodes.values()}
    assert (result.sequence, result.parent_id, result.chunk_ids) == (3, "0XEZMR4J7SJ5QBWAYBE0", ())
    assert repo.read_chunk(result.snapshot_id, "group1/small_chunks", (4,)) == b"\x07"


def test_commits_on_a_copy_of_the_test_repository(repo_copy: Path) -> None:
    root, storage = str(repo_copy), open_storage(str(repo_copy))
    rng = random.Random(3)
    big: Chunks = {}
    for k in range(10):
        changes = ChangeSet()
        for _ in range(2):
            indices = (rng.randrange(2), rng.randrange(2))
            big[indices] = rng.randbytes(100)
            changes.set_chunk("group1/big_chunks", indices, big[indices])
        commit(storage, root, changes, message=f"rewrite {k}")
    changes = ChangeSet().add_group("/group1/sub", {"n": 1}).add_array("/group1/sub/tiny", GRID)
    changes.set_chunk("/group1/sub/tiny", (3, 2), b"xyz").set_virtual_chunk(
        "/group1/sub/tiny", (0, 0), VirtualChunkRef("s3://elsewhere/file.nc", 10, 20)
    )
    last = commit(storage, root, changes, message="new array")

    repo = Repository.open(root)
    tip = repo.resolve("main")
    assert tip == last.snapshot_id
    ancestry = repo.ancestry(tip)
    assert [e.message for e in ancestry][-5:] == ["rewrite 0", *MAIN]
    assert ancestry[-1].file_id == "WT2Z2GQ09G0RTAEQ3D70"  # through the quirky initial snapshot
    for indices, data in _read_all(repo, tip, "group1/big_chunks").items():
        assert data == big.get(indices, b"\x00\x00(B" * 25)  # untouched chunks keep 42.0
    payloads = repo.chunk_payloads(tip, "group1/big_chunks")
    if (0, 0) not in big:
        assert isinstance(payloads[(0, 0)], VirtualChunkRef)
    assert repo.chunk_payloads(tip, "group1/small_chunks") == {(i,): InlineChunk(b"T") for i in range(5)}
    assert repo.read_chunk(tip, "group1/sub/tiny", (3, 2)) == b"xyz"
    assert repo.read_chunk(tip, "group1/sub/tiny", (0, 0)) == VirtualChunkRef("s3://elsewhere/file.nc", 10, 20)
    # numbered after main's largest node id (4), parents first
    assert (repo.node(tip, "group1/sub").id, repo.node(tip, "group1/sub/tiny").id) == (5, 6)
    assert [e.message for e in repo.ancestry(repo.resolve("my-branch"))][0] == "some more structure"


MAIN = ["set virtual chunk", "fill data", "empty structure", "Repository initialized"]


# -- concurrency -----------------------------------------------------------------------------------


class _Wrapped:
    """A storage that delegates everything, so tests can step into single calls."""

    def __init__(self, inner: Storage) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _BranchGate(_Wrapped):
    """Holds each thread's first branch write until every racer has reached it: all read the same tip."""

    def __init__(self, inner: Storage, parties: int) -> None:
        super().__init__(inner)
        self.barrier = threading.Barrier(parties)
        self.held: set[int] = set()

    def put_if_absent(self, path: str, data: bytes) -> None:
        if "/refs/branch." in path and threading.get_ident() not in self.held:
            self.held.add(threading.get_ident())
            self.barrier.wait(timeout=60)
        self.inner.put_if_absent(path, data)


class _Interfering(_Wrapped):
    """Runs ``before`` once, just before our branch write: another writer lands first."""

    def __init__(self, inner: Storage, before: Callable[[], object]) -> None:
        super().__init__(inner)
        self.before: Callable[[], object] | None = before

    def put_if_absent(self, path: str, data: bytes) -> None:
        if "/refs/branch." in path and self.before is not None:
            before, self.before = self.before, None
            before()
        self.inner.put_if_absent(path, data)


def test_two_racing_writers_one_wins_the_other_retries(any_storage_root: tuple[str, Storage]) -> None:
    root, storage = any_storage_root
    base = _new_repo(storage, root)
    gate = _BranchGate(storage, 2)

    def write(i: int) -> CommitResult:
        changes = ChangeSet().set_chunk("grid", (i, 0), bytes([i]) * 3)
        return commit(gate, root, changes, message=f"writer {i}")  # type: ignore[arg-type]

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(write, [1, 2]))
    assert sorted((r.sequence, r.attempts) for r in results) == [(base.sequence + 1, 1), (base.sequence + 2, 2)]
    repo = Repository(storage, root)
    tip = repo.resolve("main")
    assert tip == max(results, key=lambda r: r.sequence).snapshot_id
    assert _read_all(repo, tip, "grid") == {(1, 0): b"\x01" * 3, (2, 0): b"\x02" * 3}  # the loser rebased
    assert [e.message for e in repo.ancestry(tip)][2:] == ["structure", "Repository initialized"]
    # the loser's first snapshot and manifest were deleted; its chunk object was reused
    assert _files(storage, root, "snapshots") == {e.file_id for e in repo.ancestry(tip)}
    assert len(_files(storage, root, "manifests")) == 2
    assert len(_files(storage, root, "chunks")) == 2


def test_conflict_with_abort_deletes_everything_it_wrote(tmp_path: Path) -> None:
    root, storage = str(tmp_path / "repo"), open_storage(str(tmp_path / "repo"))
    _new_repo(storage, root)
    before = {d: _files(storage, root, d) for d in ("snapshots", "manifests", "chunks")}
    other: list[CommitResult] = []
    meddler = _Interfering(
        storage, lambda: other.append(commit(storage, root, ChangeSet().set_chunk("grid", (0, 0), b"o"), message="o"))
    )
    with pytest.raises(CommitConflict, match="lost sequence 2 to a concurrent commit .*on_conflict='abort'"):
        commit(meddler, root, ChangeSet().set_chunk("grid", (1, 1), b"me"), message="me", on_conflict="abort")  # type: ignore[arg-type]
    (winner,) = other
    assert _files(storage, root, "snapshots") == before["snapshots"] | {winner.snapshot_id}
    assert _files(storage, root, "manifests") == before["manifests"] | {winner.manifest_id}
    assert _files(storage, root, "chunks") == before["chunks"] | set(winner.chunk_ids)


def test_rebase_refused_when_the_change_no_longer_applies(tmp_path: Path) -> None:
    root, storage = str(tmp_path / "repo"), open_storage(str(tmp_path / "repo"))
    _new_repo(storage, root)
    meddler = _Interfering(storage, lambda: commit(storage, root, ChangeSet().add_group("/x"), message="x"))
    changes = ChangeSet().add_array("/x", GRID).set_chunk("/x", (0, 0), b"c")
    with pytest.raises(CommitConflict, match="no longer applies .*cannot create '/x': a node already exists"):
        commit(meddler, root, changes, message="mine")  # type: ignore[arg-type]
    repo = Repository(storage, root)
    assert [e.message for e in repo.ancestry(repo.resolve("main"))][0] == "x"
    assert _files(storage, root, "chunks") == set()  # our chunk object was cleaned up


def test_rebase_after_a_concurrent_commit(tmp_path: Path) -> None:
    root, storage = str(tmp_path / "repo"), open_storage(str(tmp_path / "repo"))
    _new_repo(storage, root)
    meddler = _Interfering(
        storage, lambda: commit(storage, root, ChangeSet().set_chunk("grid", (0, 0), b"theirs"), message="theirs")
    )
    mine = commit(meddler, root, ChangeSet().set_chunk("grid", (0, 1), b"mine"), message="mine")  # type: ignore[arg-type]
    assert (mine.sequence, mine.attempts) == (3, 2)
    repo = Repository(storage, root)
    assert _read_all(repo, mine.snapshot_id, "grid") == {(0, 0): b"theirs", (0, 1): b"mine"}
    assert len(_files(storage, root, "snapshots")) == 4


def test_unknown_branch_write_outcome_deletes_nothing(tmp_path: Path) -> None:
    root, storage = str(tmp_path / "repo"), open_storage(str(tmp_path / "repo"))
    _new_repo(storage, root)

    class Flaky(_Wrapped):
        broken = False

        def put_if_absent(self, path: str, data: bytes) -> None:
            if "/refs/branch." in path:
                self.broken = True
                raise StorageError(f"{path}: connection reset")
            self.inner.put_if_absent(path, data)

        def read(self, path: str) -> bytes:
            if self.broken and "/refs/branch." in path:
                raise StorageError(f"{path}: connection reset")
            return self.inner.read(path)

    with pytest.raises(CommitStateUnknown, match="nothing is deleted"):
        commit(Flaky(storage), root, ChangeSet().set_chunk("grid", (0, 0), b"x"), message="m")  # type: ignore[arg-type]
    assert len(_files(storage, root, "chunks")) == 1
    assert len(_files(storage, root, "snapshots")) == 3  # initial, structure and ours (unreferenced)


def test_lost_response_of_a_landed_branch_write_is_success(tmp_path: Path) -> None:
    root, storage = str(tmp_path / "repo"), open_storage(str(tmp_path / "repo"))
    _new_repo(storage, root)

    class LostReply(_Wrapped):
        def put_if_absent(self, path: str, data: bytes) -> None:
            self.inner.put_if_absent(path, data)
            if "/refs/branch." in path:
                raise StorageError(f"{path}: timed out reading the response")

    result = commit(LostReply(storage), root, ChangeSet().set_chunk("grid", (0, 0), b"x"), message="m")  # type: ignore[arg-type]
    assert (result.sequence, result.attempts) == (2, 1)
    assert Repository(storage, root).resolve("main") == result.snapshot_id


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        (ChangeSet().set_chunk("/nope", (0,), b"x"), "no array at that path"),
        (ChangeSet().set_chunk("/grid", (4, 0), b"x"), r"chunk indices \[4, 0\] are outside the chunk grid \[4, 3\]"),
        (ChangeSet().add_array("/a/b", GRID), "no group '/a' to hold it"),
        (ChangeSet().add_group("/grid/x"), "no group '/grid' to hold it"),
        (ChangeSet().add_group("/"), "a node already exists"),
    ],
)
def test_changes_that_do_not_apply_are_refused_and_cleaned_up(tmp_path: Path, changes: ChangeSet, problem: str) -> None:
    root, storage = str(tmp_path / "repo"), open_storage(str(tmp_path / "repo"))
    _new_repo(storage, root)
    with pytest.raises(InvalidArgument, match=problem):
        commit(storage, root, changes, message="bad")
    assert _files(storage, root, "chunks") == set()
    assert len(_files(storage, root, "snapshots")) == 2


def test_init_refuses_an_existing_repository(repo_copy: Path) -> None:
    with pytest.raises(StorageError, match="already exists"):
        init_repository(open_storage(str(repo_copy)), str(repo_copy))
