"""Icechunk repositories for the maintenance tests, and what to compare before and after maintenance.

:func:`build_history` writes, with our own writer, a repository of many commits of small native
chunks (plus one inline and one virtual chunk, deletions, a tag and a side branch); :func:`create_tag`
makes a tag as Icechunk does (lakeops only reads them). A head's :func:`content` is what a reader
sees: every node's attributes and Zarr metadata and every chunk's stored bytes (a virtual chunk as its
reference), so two contents are equal exactly when every array reads back byte-identical.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from lakeops.deletion import delete_batch
from lakeops.errors import AlreadyExists
from lakeops.icechunk import refs
from lakeops.icechunk.maintenance import expiry
from lakeops.icechunk.maintenance import orphans as gc
from lakeops.icechunk.manifest import VirtualChunkRef
from lakeops.icechunk.repository import Repository
from lakeops.icechunk.snapshot import ArrayData, FillValue, ZarrArrayMetadata
from lakeops.icechunk.writer import ChangeSet, commit, init_repository
from lakeops.storage import Storage, StorageOptions, join

LINE = ZarrArrayMetadata(shape=(48,), data_type="uint8", chunk_shape=(1,), fill_value=FillValue("UInt8", 0))
GRID = ZarrArrayMetadata(shape=(6, 6), data_type="uint8", chunk_shape=(2, 2), fill_value=FillValue("UInt8", 7))
VIRTUAL = VirtualChunkRef("s3://elsewhere/outside/the/repository", 16, 4)
DAY_MS = 86_400_000

#: node path -> (user attributes, Zarr metadata as text, {chunk indices: stored bytes, or the virtual reference})
Content = dict[str, tuple[Any, Any, dict[tuple[int, ...], bytes | VirtualChunkRef | None]]]


def build_history(storage: Storage, root: str, *, commits: int = 12, seed: int = 5) -> None:
    """``main``: structure, then ``commits`` commits of small native chunks (some overwrite, some
    delete); tag ``middle`` halfway; branch ``side`` forked there with two commits of its own."""
    init_repository(storage, root)
    structure = ChangeSet().add_group("/", {"title": "many small chunks"}).add_group("/data")
    commit(storage, root, structure.add_array("/data/line", LINE).add_array("/data/grid", GRID), message="structure")
    rng = random.Random(seed)
    for k in range(commits):
        changes = ChangeSet()
        for _ in range(5):
            changes.set_chunk("/data/line", (rng.randrange(48),), rng.randbytes(rng.randrange(2, 9)))
        changes.set_chunk("/data/grid", (rng.randrange(2), rng.randrange(3)), rng.randbytes(4))
        if k == 1:  # the last row of the grid: never overwritten
            changes.set_chunk("/data/grid", (2, 2), b"\x01\x02", inline=True)
            changes.set_virtual_chunk("/data/grid", (2, 0), VIRTUAL)
        if k % 4 == 3:
            changes.delete_chunk("/data/line", (rng.randrange(48),))
        result = commit(storage, root, changes, message=f"batch {k}")
        if k == commits // 2:
            create_tag(storage, root, "middle", result.snapshot_id)
            refs.create_next_branch_file(storage, root, "side", result.snapshot_id, None)
    for k in range(2):
        changes = ChangeSet().set_chunk("/data/line", (k,), bytes([k]) * 3)
        commit(storage, root, changes, message=f"side {k}", branch="side")


def create_tag(storage: Storage, root: str, name: str, snapshot_id: str) -> refs.Tag:
    """Create the immutable tag ``name``; :class:`~lakeops.errors.AlreadyExists` if it exists."""
    path = refs.tag_path(root, name)
    try:
        storage.put_if_absent(path, refs.render_ref(snapshot_id))
    except AlreadyExists:
        raise AlreadyExists(f"{path}: tag {name!r} already exists in {root}; tags are immutable") from None
    return refs.Tag(name, snapshot_id, path)


def storage_options(root: str, request: pytest.FixtureRequest) -> StorageOptions:
    """The options that reach ``root`` of the ``any_storage_root`` fixture (plans carry them to tasks)."""
    return request.getfixturevalue("s3_server").options if root.startswith("s3://") else StorageOptions()


def heads(repo: Repository) -> dict[str, str]:
    """Every branch tip and tag: ``"branch main"`` / ``"tag middle"`` -> snapshot id."""
    named = {f"branch {name}": repo.resolve(name, "branch") for name in repo.branches()}
    return named | {f"tag {name}": repo.resolve(name, "tag") for name in repo.tags()}


def content(repo: Repository, snapshot_id: str) -> Content:
    """What a reader of ``snapshot_id`` sees (module docs)."""
    out: Content = {}
    for node in repo.nodes(snapshot_id):
        data = node.node_data
        chunks = (
            {i: repo.read_chunk(snapshot_id, node.path, i) for i in repo.chunk_payloads(snapshot_id, node.path)}
            if isinstance(data, ArrayData)
            else {}
        )
        metadata = repr(data.metadata) if isinstance(data, ArrayData) else None  # text: a NaN fill equals itself
        out[node.path] = (node.user_attributes, metadata, chunks)
    return out


def contents(storage: Storage, root: str) -> dict[str, Content]:
    """The content of every head, read through a fresh (uncached) repository."""
    repo = Repository(storage, root)
    return {name: content(repo, snapshot_id) for name, snapshot_id in heads(repo).items()}


def missing_objects(storage: Storage, root: str) -> list[str]:
    """Paths of the objects some head reaches that do not exist (should be none)."""
    repo = Repository(storage, root)
    live = repo.reachable(heads(repo).values())
    paths = [repo.snapshot_path(i) for i in live.snapshots] + [repo.manifest_path(i) for i in live.manifests]
    paths += [repo.chunk_path(i) for i in live.chunks] + [repo.attributes_path(i) for i in live.attribute_files]
    return sorted(p for p in paths if not storage.exists(p))


def all_files(storage: Storage, root: str) -> set[str]:
    return {info.path for info in storage.list(root)}


def object_ids(storage: Storage, root: str, directory: str) -> set[str]:
    return {info.path.rsplit("/", 1)[1] for info in storage.list(join(root, directory))}


def set_age(path: Path, days: float) -> None:
    """Give ``path`` (a file, or every file under a directory) a modification time ``days`` ago."""
    stamp = time.time() - days * 86400
    for file in [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]:
        os.utime(file, (stamp, stamp))


def days_from_now_ms(days: float) -> int:
    """A ``now_ms`` ``days`` ahead: with it, everything written so far is ``days`` old."""
    return int(time.time() * 1000 + days * DAY_MS)


def run_expiry(storage: Storage, root: str, now_ms: int) -> expiry.IcechunkExpiryPlan:
    """Plan and execute expiry with the default retention, as ``lakeops expire`` does."""
    plan = expiry.plan_expiry(storage, root, retention=None, force=False, now_ms=now_ms)
    assert expiry.execute_expiry(plan, storage) == len(plan.files)
    return plan


def run_gc(storage: Storage, root: str, now_ms: int, options: StorageOptions | None = None) -> gc.GcPlan:
    """Plan, re-check and delete every batch with the default retention, as ``lakeops orphans`` does."""
    plan = gc.recheck(
        gc.plan_gc(storage, root, options or StorageOptions(), retention=None, force=False, now_ms=now_ms), storage
    )
    for batch in plan.batches:
        assert delete_batch(batch).files == len(batch.files)
    return plan
