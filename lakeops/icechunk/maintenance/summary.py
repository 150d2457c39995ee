"""``inspect`` for Icechunk repositories: refs, objects and chunks in numbers, and what maintenance
would act on. Reuses the plans themselves (expiry, garbage collection, packing) for the estimates,
so the numbers are exactly what a run with the default options would touch at this moment."""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel

from lakeops.errors import VersionNotFound
from lakeops.icechunk.maintenance.expiry import plan_expiry
from lakeops.icechunk.maintenance.orphans import list_objects, plan_gc, scan_directory
from lakeops.icechunk.maintenance.packing import plan_packing
from lakeops.icechunk.maintenance.retention import DEFAULT_RETENTION
from lakeops.icechunk.maintenance.versioned_expiry import expirable
from lakeops.icechunk.maintenance.versioned_orphans import KINDS, plan_versioned_gc
from lakeops.icechunk.maintenance.versioned_packing import plan_versioned_packing
from lakeops.icechunk.manifest import ChunkRef, InlineChunk, VirtualChunkRef
from lakeops.icechunk.repository import Repository
from lakeops.icechunk.versioned import VersionedRepository
from lakeops.storage import Storage, StorageOptions, join
from lakeops.units import cutoff_ms as compute_cutoff

__all__ = ["RepositorySummary", "summarize", "summarize_versioned"]


class RepositorySummary(BaseModel):
    """Chunk counts describe the tip of ``branch``; object counts the whole repository."""

    branch: str = "main"
    snapshot: str = ""
    branches: list[str] = []
    tags: list[str] = []
    branch_files: int = 0
    snapshots: int = 0
    ancestry_length: int = 0
    #: Age of the oldest snapshot of ``branch``'s history whose file still exists (expiry's horizon).
    oldest_snapshot_age_s: float | None = None
    manifests: int = 0
    attribute_files: int = 0
    groups: int = 0
    arrays: int = 0
    chunks_inline: int = 0
    chunks_virtual: int = 0
    chunks_native: int = 0
    inline_bytes: int = 0
    virtual_bytes: int = 0
    native_bytes: int = 0
    chunk_objects: int = 0
    chunk_object_bytes: int = 0
    #: Chunk objects ``compact`` would pack now (default target size, bins of at least 2 objects).
    packable_chunk_objects: int = 0
    #: Branch files ``expire`` would remove now, with the default retention (seed format).
    expirable_branch_files: int = 0
    #: Snapshots ``expire`` would expire now, with the default retention.
    expirable_snapshots: int = 0
    #: Objects ``orphans`` would delete now, with the default retention.
    reclaimable_objects: int = 0
    reclaimable_bytes: int = 0


def _chunk_fields(kinds: Counter[str], sizes: Counter[str]) -> dict[str, int]:
    """Chunk refs and their bytes by kind (``inline``, ``virtual``, ``native``), named as the fields."""
    fields: dict[str, int] = {}
    for kind in ("inline", "virtual", "native"):
        fields[f"chunks_{kind}"], fields[f"{kind}_bytes"] = kinds[kind], sizes[kind]
    return fields


def summarize(
    storage: Storage, root: str, *, branch: str = "main", now_ms: int, repo: Repository | None = None
) -> RepositorySummary:
    """Read the refs, the tip of ``branch`` and a listing of every object directory (through ``repo``
    if given, the reader every plan of the summary shares)."""
    repo = Repository(storage, root) if repo is None else repo
    expiry = plan_expiry(storage, repo.root, retention=None, force=False, now_ms=now_ms, repo=repo)
    gc = plan_gc(storage, repo.root, StorageOptions(), retention=None, force=False, now_ms=now_ms, repo=repo)
    packing = plan_packing(storage, repo.root, StorageOptions(), branch=branch, min_input_files=2, repo=repo)
    tip = packing.base_snapshot
    kinds: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    nodes = repo.nodes(tip)
    for node in nodes:
        if node.is_array:
            for payload in repo.chunk_payloads(tip, node.path).values():
                if isinstance(payload, InlineChunk):
                    kinds["inline"] += 1
                    sizes["inline"] += len(payload.data)
                elif isinstance(payload, VirtualChunkRef):
                    kinds["virtual"] += 1
                    sizes["virtual"] += payload.length
                elif isinstance(payload, ChunkRef):
                    kinds["native"] += 1
                    sizes["native"] += payload.length
    objects, _ = list_objects(storage, repo.root)
    candidates = gc.candidates
    ancestry = repo.ancestry(tip)
    stored = [entry.written_at for entry in ancestry if entry.file_id is not None]
    return RepositorySummary(
        branch=branch,
        snapshot=tip,
        branches=repo.branches(),
        tags=repo.tags(),
        branch_files=expiry.branch_files,
        snapshots=len(objects["snapshot"]),
        ancestry_length=len(ancestry),
        oldest_snapshot_age_s=now_ms / 1000 - min(stored).timestamp() if stored else None,
        manifests=len(objects["manifest"]),
        attribute_files=len(objects["attributes"]),
        groups=sum(1 for n in nodes if not n.is_array),
        arrays=sum(1 for n in nodes if n.is_array),
        **_chunk_fields(kinds, sizes),
        chunk_objects=len(objects["chunk"]),
        chunk_object_bytes=sum(info.size for info in objects["chunk"].values()),
        packable_chunk_objects=packing.input_files,
        expirable_branch_files=len(expiry.files),
        expirable_snapshots=len(expiry.expired_snapshots),
        reclaimable_objects=len(candidates),
        reclaimable_bytes=sum(c.size for c in candidates),
    )


def summarize_versioned(
    storage: Storage, root: str, *, branch: str = "main", now_ms: int, repo: VersionedRepository | None = None
) -> RepositorySummary:
    """:func:`summarize` for Icechunk format 1 and 2 (:mod:`lakeops.icechunk.versioned`).

    Expirable snapshots, packable and reclaimable objects are what :mod:`.versioned_expiry`,
    :mod:`.versioned_packing` and :mod:`.versioned_orphans` would act on now with the default settings."""
    repo = VersionedRepository(storage, root) if repo is None else repo
    info = repo.info
    tip = info.branches.get(branch)
    if tip is None:
        raise VersionNotFound(f"{repo.root}: no branch {branch!r} (branches: {', '.join(sorted(info.branches))})")
    gc = plan_versioned_gc(storage, repo.root, StorageOptions(), retention=None, force=False, now_ms=now_ms, repo=repo)
    listed = {kind: scan_directory(storage, join(repo.root, directory))[0] for kind, directory in KINDS.items()}
    reclaimable = gc.candidates
    packing = plan_versioned_packing(storage, repo.root, StorageOptions(), branch=branch, min_input_files=2, repo=repo)
    kinds: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    tip_snapshot = repo.snapshot(tip)
    arrays = {node.id for node in tip_snapshot.nodes if node.is_array}
    for manifest_id in repo.manifest_ids(tip):
        for array in repo.manifest(manifest_id).arrays:
            if array.node_id in arrays:
                for ref in array.refs:
                    kinds[ref.kind] += 1
                    sizes[ref.kind] += len(ref.inline) if ref.inline is not None else ref.length
    ancestry = info.ancestry(tip)
    return RepositorySummary(
        branch=branch,
        snapshot=tip,
        branches=sorted(info.branches),
        tags=sorted(info.tags),
        branch_files=len(info.branches) if info.spec_version == 1 else 0,
        snapshots=len(listed["snapshot"]),
        ancestry_length=len(ancestry),
        oldest_snapshot_age_s=now_ms / 1000 - min(entry.flushed_at for entry in ancestry) / 1_000_000,
        manifests=len(listed["manifest"]),
        groups=len(tip_snapshot.nodes) - len(arrays),
        arrays=len(arrays),
        **_chunk_fields(kinds, sizes),
        chunk_objects=len(listed["chunk"]),
        chunk_object_bytes=sum(file.size for file in listed["chunk"].values()),
        expirable_snapshots=len(expirable(info, compute_cutoff(DEFAULT_RETENTION, now_ms)).expired),
        packable_chunk_objects=packing.input_files,
        reclaimable_objects=len(reclaimable),
        reclaimable_bytes=sum(file.size for file in reclaimable),
    )
