"""Icechunk chunk packing: many small chunk objects of an array become one shared chunk file.

Spec basis: "Chunk files can be ... Multiple contiguous chunks from the same array in a single chunk
file" and a native reference is ``ChunkRef{id, offset, length}`` ("Chunk Files", "Chunk Manifest
Files"); a commit writes chunks, manifests, a snapshot, then the next branch file with
put-if-absent ("Write New Snapshot").

plan (driver) → :func:`pack_unit` per bin (a task of any executor) → :func:`commit_packing` (driver);
:class:`PackingPlan` is a :class:`~lakeops.plan.MaintenancePlan`, which :mod:`lakeops.ops.batches` drives:

* **Plan**, pinned to the branch tip (sequence and snapshot): for every array, its native chunks
  whose chunk *object* is smaller than the target file size and referenced by this array only
  (an object shared with another array is left alone: repacking it per array would copy it). The
  objects are binned in chunk-index order up to the target size; a bin with fewer than
  ``min_input_files`` objects is not worth a rewrite. Inline and virtual chunks are never touched.
* **Execute**: each bin's byte ranges are read (lengths checked) and written, concatenated, to one
  new ``chunks/<id>`` object (put-if-absent, a fresh id: nothing is overwritten); identical ranges
  are stored once.
* **Commit**: a :class:`~lakeops.icechunk.writer.ChangeSet` pointing every packed chunk at its
  range of the new file, committed by :func:`lakeops.icechunk.writer.commit`: one consolidated
  manifest holding every chunk of every array, a new snapshot (property
  ``lakeops.operation = compact``, so change capture knows no data changed), the next branch file.
  Each attempt first checks that every packed chunk still has the payload it was packed from at the
  tip it builds on; a concurrent commit that touched other chunks is rebased over, one that
  replaced a packed chunk aborts the compaction with :class:`~lakeops.errors.CommitConflict` (the
  caller then deletes the new chunk files: nothing references them).

The replaced small objects stay until garbage collection finds them unreferenced (``orphans``),
so older snapshots keep reading them.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from lakeops.errors import CommitConflict, InvalidArgument, NotFound, VersionNotFound
from lakeops.icechunk import refs
from lakeops.icechunk.ids import new_id
from lakeops.icechunk.maintenance.expiry import require_repository
from lakeops.icechunk.maintenance.orphans import list_kind
from lakeops.icechunk.manifest import ChunkIndices, ChunkRef
from lakeops.icechunk.repository import CHUNKS_DIR, Repository
from lakeops.icechunk.writer import ChangeSet, CommitResult, commit
from lakeops.plan import CommitOutcome, MaintenancePlan
from lakeops.storage import Storage, StorageOptions, join, open_storage

__all__ = [
    "COMPACT",
    "DEFAULT_PACK_SIZE",
    "OPERATION_PROPERTY",
    "PackChunk",
    "PackResult",
    "PackUnit",
    "PackingPlan",
    "commit_packing",
    "pack_unit",
    "plan_packing",
    "written_locations",
]

DEFAULT_PACK_SIZE = 64 * 1024 * 1024
#: Snapshot property our compaction commits carry: the snapshot changes where chunks live, not data.
OPERATION_PROPERTY = "lakeops.operation"
COMPACT = "compact"


class PackChunk(BaseModel):
    """One chunk to move: its indices and the range it is read from."""

    model_config = ConfigDict(frozen=True)

    indices: list[int]
    chunk_id: str
    offset: int
    length: int

    @property
    def ref(self) -> ChunkRef:
        return ChunkRef(self.chunk_id, self.offset, self.length)


class PackUnit(BaseModel):
    """One bin: chunks of one array written into one new chunk file by one task."""

    model_config = ConfigDict(frozen=True)

    unit_id: int
    table_root: str
    storage: StorageOptions
    array_path: str
    objects: int
    object_bytes: int
    chunks: list[PackChunk]


class PackedChunk(BaseModel):
    model_config = ConfigDict(frozen=True)

    indices: list[int]
    offset: int
    length: int


class PackResult(BaseModel):
    unit_id: int
    array_path: str
    pack_id: str
    location: str
    size: int
    chunks: list[PackedChunk]
    seconds: float


class PackingPlan(BaseModel, MaintenancePlan[PackUnit, PackResult]):
    """Immutable, printable plan pinned to the branch tip ``read_version`` (its sequence number)."""

    model_config = ConfigDict(frozen=True)

    format: ClassVar[str] = "icechunk"

    table_root: str
    branch: str
    read_version: int
    base_snapshot: str
    target_file_size: int
    min_input_files: int
    arrays: int
    native_chunks: int
    live_files: int
    live_bytes: int
    candidate_files: int
    groups: list[PackUnit] = Field(default_factory=list)

    @property
    def input_files(self) -> int:
        return sum(u.objects for u in self.groups)

    @property
    def input_bytes(self) -> int:
        return sum(u.object_bytes for u in self.groups)

    @property
    def arrays_compacted(self) -> int:
        return len({u.array_path for u in self.groups})

    @property
    def version_noun(self) -> str:
        return "snapshots"

    def table_label(self) -> str:
        return self.table_root

    def work_units(self) -> list[PackUnit]:
        return self.groups

    def task(self) -> Callable[[PackUnit], PackResult]:
        return pack_unit

    def result_type(self) -> type[PackResult]:
        return PackResult

    def work_bytes(self, units: Sequence[PackUnit]) -> int:
        return sum(u.object_bytes for u in units)

    def commit_batches(self) -> list[list[PackUnit]]:
        """Every bin in one commit; no commit without bins (it would be a snapshot that moves nothing)."""
        return [list(self.groups)] if self.groups else []

    def commit(
        self, units: Sequence[PackUnit], results: Sequence[PackResult], storage_options: StorageOptions, *, final: bool
    ) -> CommitOutcome:
        """:func:`commit_packing`; the outcome's version is the branch's new sequence number."""
        done = commit_packing(self, list(results), open_storage(self.table_root, storage_options))
        return CommitOutcome(version=done.sequence, snapshot_id=done.snapshot_id, attempts=done.attempts)

    def discard(self, results: Sequence[PackResult], storage_options: StorageOptions) -> int:
        """Delete the chunk files ``results`` wrote (never anything else, never outside the root)."""
        paths = written_locations(results)
        return open_storage(self.table_root, storage_options).delete_many(paths) if paths else 0


def _bins(
    chunks_by_object: dict[str, list[tuple[ChunkIndices, ChunkRef]]], sizes: dict[str, int], target: int
) -> list[list[str]]:
    """Objects in order of their first chunk's indices, packed greedily up to ``target`` bytes."""
    ordered = sorted(chunks_by_object, key=lambda oid: min(i for i, _ in chunks_by_object[oid]))
    bins: list[list[str]] = []
    used = 0
    for object_id in ordered:
        if not bins or used + sizes[object_id] > target:
            bins.append([])
            used = 0
        bins[-1].append(object_id)
        used += sizes[object_id]
    return bins


def check_packing_options(root: str, target_file_size: int | None, min_input_files: int) -> int:
    """The target size the options ask for (None: :data:`DEFAULT_PACK_SIZE`), refusing nonsense."""
    if min_input_files < 2:
        raise InvalidArgument(f"{root}: min_input_files must be at least 2 (one object is already one object)")
    if target_file_size is not None and target_file_size < 1:
        raise InvalidArgument(f"{root}: target_file_size must be a positive number of bytes, got {target_file_size}")
    return DEFAULT_PACK_SIZE if target_file_size is None else target_file_size


#: Every array of the tip: path -> its native chunks (indices, reference), in indices order.
NativeChunks = dict[str, list[tuple[ChunkIndices, ChunkRef]]]


def plan_fields(
    storage: Storage,
    root: str,
    storage_options: StorageOptions,
    native: NativeChunks,
    *,
    target: int,
    min_input_files: int,
) -> dict[str, Any]:
    """The bins and figures of a plan over the tip's ``native`` chunks (rules in the module docs), for
    either kind of repository: chunk objects live in ``chunks/`` in every Icechunk format."""
    objects, _ = list_kind(storage, root, "chunk")
    owners: dict[str, set[str]] = defaultdict(set)
    for path, refs_ in native.items():
        for indices, ref in refs_:
            owners[ref.id].add(path)
            if ref.id not in objects:
                raise NotFound(
                    f"{join(root, CHUNKS_DIR, ref.id)}: chunk file of {path!r} {list(indices)} at the tip of {root} "
                    "is missing"
                )
    sizes = {object_id: objects[object_id].size for object_id in owners}
    units: list[PackUnit] = []
    candidates = 0
    for path, refs_ in native.items():
        by_object: dict[str, list[tuple[ChunkIndices, ChunkRef]]] = defaultdict(list)
        for indices, ref in refs_:
            if owners[ref.id] == {path} and sizes[ref.id] < target:
                by_object[ref.id].append((indices, ref))
        candidates += len(by_object)
        for objects_in_bin in _bins(by_object, sizes, target):
            if len(objects_in_bin) < min_input_files:
                continue
            chunks = sorted((i, r) for oid in objects_in_bin for i, r in by_object[oid])
            units.append(
                PackUnit(
                    unit_id=len(units),
                    table_root=root,
                    storage=storage_options,
                    array_path=path,
                    objects=len(objects_in_bin),
                    object_bytes=sum(sizes[oid] for oid in objects_in_bin),
                    chunks=[
                        PackChunk(indices=list(i), chunk_id=r.id, offset=r.offset, length=r.length) for i, r in chunks
                    ],
                )
            )
    return {
        "table_root": root,
        "target_file_size": target,
        "min_input_files": min_input_files,
        "arrays": len(native),
        "native_chunks": sum(len(r) for r in native.values()),
        "live_files": len(sizes),
        "live_bytes": sum(sizes.values()),
        "candidate_files": candidates,
        "groups": units,
    }


def plan_packing(
    storage: Storage,
    root: str,
    storage_options: StorageOptions,
    *,
    branch: str = "main",
    target_file_size: int | None = None,
    min_input_files: int = 5,
    repo: Repository | None = None,
) -> PackingPlan:
    """Plan the packing of ``branch``'s tip (rules in the module docs), through ``repo`` if given."""
    target = check_packing_options(root, target_file_size, min_input_files)
    repo = Repository(storage, root) if repo is None else repo
    require_repository(repo)
    tip = refs.branch_tip(storage, repo.root, branch)
    native: NativeChunks = {}
    for node in repo.nodes(tip.snapshot_id):
        if node.is_array:
            payloads = sorted(repo.chunk_payloads(tip.snapshot_id, node.path).items())
            native[node.path] = [(i, p) for i, p in payloads if isinstance(p, ChunkRef)]
    return PackingPlan(
        branch=branch,
        read_version=tip.sequence,
        base_snapshot=tip.snapshot_id,
        **plan_fields(storage, repo.root, storage_options, native, target=target, min_input_files=min_input_files),
    )


# --- execute: runs inside a Spark task -------------------------------------------------------------


def pack_unit(unit: PackUnit) -> PackResult:
    """Read the unit's chunk ranges and store them, concatenated, as one new chunk file."""
    started = time.monotonic()
    storage = open_storage(unit.table_root, unit.storage)
    repo = Repository(storage, unit.table_root)
    payload = bytearray()
    placed: dict[ChunkRef, int] = {}
    packed: list[PackedChunk] = []
    for chunk in unit.chunks:
        ref = chunk.ref
        if ref not in placed:
            placed[ref] = len(payload)
            payload += repo.read_native_chunk(ref)
        packed.append(PackedChunk(indices=chunk.indices, offset=placed[ref], length=ref.length))
    pack_id = new_id()
    location = repo.chunk_path(pack_id)
    storage.put_if_absent(location, bytes(payload))
    return PackResult(
        unit_id=unit.unit_id,
        array_path=unit.array_path,
        pack_id=pack_id,
        location=location,
        size=len(payload),
        chunks=packed,
        seconds=time.monotonic() - started,
    )


# --- commit: driver --------------------------------------------------------------------------------


def written_locations(results: Sequence[PackResult]) -> list[str]:
    """Every chunk file this attempt wrote: the only files an abort may delete."""
    return [r.location for r in results]


def sources(plan: PackingPlan) -> dict[str, dict[ChunkIndices, ChunkRef]]:
    """Array path -> indices -> the reference each packed chunk had at the plan's tip."""
    found: dict[str, dict[ChunkIndices, ChunkRef]] = defaultdict(dict)
    for unit in plan.groups:
        for chunk in unit.chunks:
            found[unit.array_path][tuple(chunk.indices)] = chunk.ref
    return found


def check_packable(plan: PackingPlan, moved_to: str, current: Callable[[str], Mapping[ChunkIndices, object]]) -> None:
    """Refuse (:class:`~lakeops.errors.CommitConflict`) to build on a tip, ``moved_to`` as the message
    names it, where a packed chunk no longer has the payload it was packed from (``current``: an
    array's chunks at that tip; InvalidArgument or VersionNotFound if the array is gone)."""
    for path, chunks in sources(plan).items():
        try:
            payloads = current(path)
        except (InvalidArgument, VersionNotFound) as exc:
            raise CommitConflict(
                f"{plan.table_root}: branch {plan.branch!r} moved to {moved_to} and {exc}; compaction aborted"
            ) from exc
        for indices, ref in chunks.items():
            if payloads.get(indices) != ref:
                raise CommitConflict(
                    f"{plan.table_root}: branch {plan.branch!r} moved to {moved_to} and chunk {list(indices)} of "
                    f"{path!r} was rewritten since the plan (snapshot {plan.base_snapshot}); the packed copy is "
                    "stale, compaction aborted"
                )


def _still_packable(plan: PackingPlan) -> Callable[[Repository, refs.BranchVersion], None]:
    """The ``validate`` hook of :func:`~lakeops.icechunk.writer.commit` for this plan."""

    def validate(repo: Repository, tip: refs.BranchVersion) -> None:
        if tip.snapshot_id != plan.base_snapshot:
            check_packable(plan, f"sequence {tip.sequence}", lambda path: repo.chunk_payloads(tip.snapshot_id, path))

    return validate


def new_refs(plan: PackingPlan, results: Sequence[PackResult]) -> dict[str, dict[ChunkIndices, ChunkRef]]:
    """Array path -> indices -> the packed chunk's range in its new file, once ``results`` are checked
    to be the plan's units."""
    if sorted(r.unit_id for r in results) != [u.unit_id for u in plan.groups]:
        raise InvalidArgument(f"{plan.table_root}: packing results do not match the plan's units")
    found: dict[str, dict[ChunkIndices, ChunkRef]] = defaultdict(dict)
    for result in results:
        for chunk in result.chunks:
            found[result.array_path][tuple(chunk.indices)] = ChunkRef(result.pack_id, chunk.offset, chunk.length)
    return found


def commit_message(plan: PackingPlan, results: Sequence[PackResult]) -> str:
    packed = sum(len(r.chunks) for r in results)
    return f"lakeops compact: {packed} chunks of {plan.arrays_compacted} arrays packed into {len(results)} chunk files"


def commit_packing(plan: PackingPlan, results: list[PackResult], storage: Storage) -> CommitResult:
    """Point every packed chunk at its new range and commit (see the module docs for conflicts)."""
    changes = ChangeSet()
    for path, chunks in new_refs(plan, results).items():
        for indices, ref in chunks.items():
            changes.set_chunk_ref(path, list(indices), ref)
    return commit(
        storage,
        plan.table_root,
        changes,
        message=commit_message(plan, results),
        branch=plan.branch,
        properties={OPERATION_PROPERTY: COMPACT},
        validate=_still_packable(plan),
    )
