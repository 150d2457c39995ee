"""Chunk packing (lakeops.icechunk.maintenance.packing), run as ``lakeops compact`` runs it: plan,
``pack_unit`` per unit, ``commit_packing``.

Proves: every head reads back byte-identical with fewer chunk objects (once gc removed the replaced
ones); the target size and ``min_input_files`` bound every unit; inline, virtual and shared chunks are
left alone; a writer racing the compaction on the same branch either makes it abort with
CommitConflict (it rewrote a packed chunk: nothing the compaction wrote stays referenced) or is
rebased over, and each sequence file is written by exactly one of them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import icechunk_repos as repos
import pytest

from lakeops.errors import CommitConflict, InvalidArgument
from lakeops.icechunk import refs
from lakeops.icechunk.maintenance.packing import (
    COMPACT,
    OPERATION_PROPERTY,
    PackingPlan,
    PackResult,
    commit_packing,
    pack_unit,
    plan_packing,
    written_locations,
)
from lakeops.icechunk.manifest import ChunkRef, InlineChunk, VirtualChunkRef
from lakeops.icechunk.repository import Repository
from lakeops.icechunk.writer import ChangeSet, CommitResult, commit
from lakeops.storage import Storage, StorageOptions, open_storage
from lakeops.storage.local import LocalStorage


def _plan(storage: Storage, root: str, **options: int | str) -> PackingPlan:
    return plan_packing(storage, root, StorageOptions(), **options)  # type: ignore[arg-type]


def _pack(plan: PackingPlan) -> list[PackResult]:
    return [pack_unit(unit) for unit in plan.groups]


def _native_objects(repo: Repository, snapshot_id: str) -> set[str]:
    return {
        payload.id
        for node in repo.nodes(snapshot_id)
        if node.is_array
        for payload in repo.chunk_payloads(snapshot_id, node.path).values()
        if isinstance(payload, ChunkRef)
    }


def test_the_test_repository_packs_native_chunks_only(repo_copy: Path) -> None:
    root, storage = str(repo_copy), open_storage(str(repo_copy))
    before = repos.contents(storage, root)
    plan = _plan(storage, root, branch="my-branch", min_input_files=2)
    assert (plan.arrays, plan.native_chunks, plan.live_files, plan.candidate_files) == (3, 3, 3, 3)
    assert [(u.array_path, u.objects, u.object_bytes) for u in plan.groups] == [("/group1/big_chunks", 3, 300)]
    assert sorted(tuple(c.indices) for c in plan.groups[0].chunks) == [(0, 1), (1, 0), (1, 1)]

    results = _pack(plan)
    outcome = commit_packing(plan, results, storage)

    repo = Repository(storage, root)
    assert outcome.sequence == 3 and repo.resolve("my-branch") == outcome.snapshot_id
    assert repo.read_snapshot(outcome.snapshot_id).properties == {OPERATION_PROPERTY: COMPACT}
    assert _native_objects(repo, outcome.snapshot_id) == {results[0].pack_id}
    assert results[0].size == 300 and Path(results[0].location).stat().st_size == 300
    payloads = repo.chunk_payloads(outcome.snapshot_id, "group1/big_chunks")
    assert isinstance(payloads[(0, 0)], VirtualChunkRef)  # the virtual chunk is untouched
    small = repo.chunk_payloads(outcome.snapshot_id, "group1/small_chunks")
    assert len(small) == 4 and all(isinstance(p, InlineChunk) for p in small.values())
    assert repos.contents(storage, root) == before  # every head, the compacted one included
    assert _plan(storage, root, branch="my-branch", min_input_files=2).groups == []  # nothing left to pack


def test_many_small_chunks_pack_and_collect(
    any_storage_root: tuple[str, Storage], request: pytest.FixtureRequest
) -> None:
    root, storage = any_storage_root
    options = repos.storage_options(root, request)
    repos.build_history(storage, root)
    before = repos.contents(storage, root)
    repo = Repository(storage, root)
    objects_before = repos.object_ids(storage, root, "chunks")
    tip_objects = _native_objects(repo, repo.resolve("main"))

    plan = plan_packing(storage, root, options, target_file_size=40, min_input_files=3)
    assert plan.groups and {u.array_path for u in plan.groups} == {"/data/line", "/data/grid"}
    for unit in plan.groups:
        assert unit.objects >= 3 and unit.object_bytes <= 40
    results = _pack(plan)
    assert all(r.size <= 40 for r in results)
    outcome = commit_packing(plan, results, storage)

    assert repos.contents(storage, root) == before
    packed_tip = _native_objects(Repository(storage, root), outcome.snapshot_id)
    assert len(packed_tip) == len(tip_objects) - plan.input_files + len(results) < len(tip_objects)
    assert {r.pack_id for r in results} <= packed_tip

    later = repos.days_from_now_ms(8)
    repos.run_expiry(storage, root, later)
    repos.run_gc(storage, root, later, options)
    assert repos.contents(storage, root) == before
    assert repos.missing_objects(storage, root) == []
    assert len(repos.object_ids(storage, root, "chunks")) < len(objects_before)


def test_target_size_and_min_input_files(tmp_path: Path) -> None:
    root = str(tmp_path / "repo")
    storage = open_storage(root)
    repos.build_history(storage, root, commits=6)
    plan = _plan(storage, root, target_file_size=1000, min_input_files=2)
    assert [u.array_path for u in plan.groups] == ["/data/grid", "/data/line"]  # one unit per array
    assert plan.input_files == plan.candidate_files == plan.live_files
    smallest = min(u.objects for u in plan.groups)
    fewer = _plan(storage, root, target_file_size=1000, min_input_files=smallest + 1)
    assert len(fewer.groups) == 1 and fewer.groups[0].objects > smallest
    assert _plan(storage, root, min_input_files=10_000).groups == []
    tiny = _plan(storage, root, target_file_size=4, min_input_files=2)  # every object is 2..8 bytes
    assert all(u.object_bytes <= 4 for u in tiny.groups) and tiny.candidate_files < plan.candidate_files
    assert _plan(storage, root, target_file_size=2, min_input_files=2).candidate_files == 0
    with pytest.raises(InvalidArgument, match="min_input_files must be at least 2"):
        _plan(storage, root, min_input_files=1)
    with pytest.raises(InvalidArgument, match="target_file_size must be a positive number of bytes, got 0"):
        _plan(storage, root, target_file_size=0)


def test_an_object_two_arrays_share_is_left_alone(tmp_path: Path) -> None:
    root = str(tmp_path / "repo")
    storage = open_storage(root)
    repos.build_history(storage, root, commits=3)
    repo = Repository(storage, root)
    shared = next(
        p for p in repo.chunk_payloads(repo.resolve("main"), "/data/line").values() if isinstance(p, ChunkRef)
    )
    commit(storage, root, ChangeSet().set_chunk_ref("/data/grid", (1, 1), shared), message="share")
    plan = _plan(storage, root, target_file_size=1000, min_input_files=2)
    assert shared.id not in {c.chunk_id for u in plan.groups for c in u.chunks}
    assert plan.candidate_files == plan.live_files - 1


class _RacingStorage(LocalStorage):
    """Local storage that lets another writer commit just before the first branch file write through it."""

    def __init__(self, other_writer: Callable[[], CommitResult]) -> None:
        self.other_writer: Callable[[], CommitResult] | None = other_writer
        self.other: CommitResult | None = None

    def put_if_absent(self, path: str, data: bytes) -> None:
        if "/refs/branch." in path and self.other_writer is not None:
            writer, self.other_writer = self.other_writer, None
            self.other = writer()
        super().put_if_absent(path, data)


def _packed_repo(tmp_path: Path) -> tuple[str, Storage, PackingPlan, list[PackResult]]:
    root = str(tmp_path / "repo")
    storage = open_storage(root)
    repos.build_history(storage, root, commits=6)
    plan = _plan(storage, root, target_file_size=1000, min_input_files=2)
    return root, storage, plan, _pack(plan)


def test_a_racing_writer_that_rewrote_a_packed_chunk_aborts_the_compaction(tmp_path: Path) -> None:
    root, storage, plan, results = _packed_repo(tmp_path)
    packed = plan.groups[0].chunks[0]
    snapshots = repos.object_ids(storage, root, "snapshots")
    racing = _RacingStorage(
        lambda: commit(
            storage, root, ChangeSet().set_chunk(plan.groups[0].array_path, packed.indices, b"new"), message="w"
        )
    )

    with pytest.raises(CommitConflict, match="was rewritten since the plan"):
        commit_packing(plan, results, racing)

    assert racing.other is not None
    history = refs.branch_history(storage, root, "main")
    assert (history[0].sequence, history[0].snapshot_id) == (plan.read_version + 1, racing.other.snapshot_id)
    assert repos.object_ids(storage, root, "snapshots") == snapshots | {
        racing.other.snapshot_id
    }  # our attempt's is gone
    repo = Repository(storage, root)
    live = repo.reachable(repos.heads(repo).values())
    assert not {r.pack_id for r in results} & live.chunks  # the packs are unreferenced: the caller deletes them
    assert written_locations(results) == [r.location for r in results]
    assert repo.read_chunk(racing.other.snapshot_id, plan.groups[0].array_path, packed.indices) == b"new"


def test_a_racing_writer_elsewhere_is_rebased_over(tmp_path: Path) -> None:
    root, storage, plan, results = _packed_repo(tmp_path)
    before = repos.contents(storage, root)["branch main"]
    racing = _RacingStorage(
        lambda: commit(storage, root, ChangeSet().set_chunk("/data/grid", (2, 1), b"other", inline=True), message="w")
    )

    outcome = commit_packing(plan, results, racing)

    assert racing.other is not None and racing.other.sequence == plan.read_version + 1
    assert (outcome.sequence, outcome.attempts) == (plan.read_version + 2, 2)
    history = refs.branch_history(storage, root, "main")
    assert [v.snapshot_id for v in history[:2]] == [outcome.snapshot_id, racing.other.snapshot_id]
    repo = Repository(storage, root)
    assert repo.read_chunk(outcome.snapshot_id, "/data/grid", (2, 1)) == b"other"
    assert {r.pack_id for r in results} <= _native_objects(repo, outcome.snapshot_id)
    after = repos.contents(storage, root)["branch main"]
    after["/data/grid"][2].pop((2, 1))
    assert after == before


def test_results_must_match_the_plan(tmp_path: Path) -> None:
    root, storage, plan, results = _packed_repo(tmp_path)
    with pytest.raises(InvalidArgument, match="do not match the plan's units"):
        commit_packing(plan, results[:-1], storage)
    assert refs.branch_tip(storage, root, "main").sequence == plan.read_version
