"""``inspect`` for Icechunk repositories: refs, objects and chunks in numbers, and what maintenance
would act on. Reuses the plans themselves (expiry, garbage collection, packing) for the estimates,
so the numbers are exactly what a run with the default options would touch at this moment."""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel

from lakeops.icechunk.maintenance.expiry import plan_expiry
from lakeops.icechunk.maintenance.gc import list_objects, plan_gc
from lakeops.icechunk.maintenance.packing import plan_packing
from lakeops.icechunk.manifest import ChunkRef, InlineChunk, VirtualChunkRef
from lakeops.icechunk.repository import Repository
from lakeops.storage import Storage, StorageOptions

__all__ = ["RepositorySummary", "summarize"]


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
    #: Branch files ``expire`` would remove now, with the default retention.
    expirable_branch_files: int = 0
    #: Objects ``orphans`` would delete now, with the default retention.
    reclaimable_objects: int = 0
    reclaimable_bytes: int = 0


def summarize(storage: Storage, root: str, *, branch: str = "main", now_ms: int) -> RepositorySummary:
    """Read the refs, the tip of ``branch`` and a listing of every object directory."""
    repo = Repository(storage, root)
    expiry = plan_expiry(storage, repo.root, retention=None, force=False, now_ms=now_ms)
    gc = plan_gc(storage, repo.root, StorageOptions(), retention=None, force=False, now_ms=now_ms)
    packing = plan_packing(storage, repo.root, StorageOptions(), branch=branch, min_input_files=2)
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
        chunks_inline=kinds["inline"],
        chunks_virtual=kinds["virtual"],
        chunks_native=kinds["native"],
        inline_bytes=sizes["inline"],
        virtual_bytes=sizes["virtual"],
        native_bytes=sizes["native"],
        chunk_objects=len(objects["chunk"]),
        chunk_object_bytes=sum(info.size for info in objects["chunk"].values()),
        packable_chunk_objects=packing.input_files,
        expirable_branch_files=len(expiry.files),
        reclaimable_objects=len(candidates),
        reclaimable_bytes=sum(c.size for c in candidates),
    )
