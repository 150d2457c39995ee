"""Chunk packing of Icechunk format 1 and 2 repositories, written by lakeops in the repository's own spec version.

Planning and the packing tasks are the seed format's (:mod:`.packing`: chunk objects live in
``chunks/`` in every format and a native ``ChunkRef`` is ``chunk_id``, ``offset``, ``length``,
https://github.com/earth-mover/icechunk/blob/main/docs/docs/spec.md#chunk-files and
#chunk-manifest-files). The commit follows "Write New Snapshot" of the same spec:

* **Manifests**: each manifest of the tip that holds a packed chunk is rewritten under a fresh id
  with those refs repointed at their range of the new chunk file; every other ref (inline, virtual
  with its ``compressed_location`` and the manifest's ``location_dictionary``, other native ones) and
  every other field is kept as read, arrays sorted by node id and refs by index. Manifests without a
  packed chunk are reused, so the tip's split of the chunk grid (``ManifestRef.extents``) is kept.
* **Transaction log** ``transactions/<snapshot id>``: ``updated_chunks`` lists the repointed chunks.
* **Snapshot**: the tip's record with a fresh id, the array nodes' ``ManifestRef``\\ s and
  ``manifest_files`` (format 1 structs) / ``manifest_files_v2`` (format 2 tables) pointing at the
  new manifests with their size and ref count, ``flushed_at`` now, a message, and the metadata item
  ``lakeops.operation = "compact"`` (a MessagePack value in format 1, FlexBuffers in format 2, as
  Icechunk stores commit metadata) by which change capture knows no data changed; ``parent_id`` is the
  tip in format 1 ("Snapshot Files"; format 2 keeps parents in the repo object).
* **Ref**: format 1 replaces ``refs/branch.NAME/ref.json`` if it still names the tip; format 2 adds the
  ``SnapshotInfo`` (parent: the tip) to the ``repo`` object, moves the branch and records a
  ``NewCommitUpdate`` (:mod:`lakeops.icechunk.repo_update`).

A lost race (the branch moved) deletes this attempt's metadata files and starts over on the new tip
if every packed chunk still has the payload it was packed from there, as the seed format rebases;
otherwise :class:`~lakeops.errors.CommitConflict` (the caller deletes the new chunk files).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import msgpack
from flatbuffers import flexbuffers

from lakeops.errors import CommitConflict, NotFound, VersionNotFound
from lakeops.icechunk import fbs
from lakeops.icechunk.binary import FileType, file_bytes, read_payload
from lakeops.icechunk.flatbuf_codec import Record, Schema, decode, encode
from lakeops.icechunk.ids import decode_bytes, encode_bytes, new_id
from lakeops.icechunk.maintenance.packing import (
    COMPACT,
    OPERATION_PROPERTY,
    NativeChunks,
    PackingPlan,
    PackResult,
    check_packable,
    check_packing_options,
    commit_message,
    new_refs,
    plan_fields,
    sources,
)
from lakeops.icechunk.manifest import ChunkIndices
from lakeops.icechunk.manifest import ChunkRef as PackedRef
from lakeops.icechunk.objects import Snapshot
from lakeops.icechunk.refs import parse_ref
from lakeops.icechunk.repo_info import RepoDocument
from lakeops.icechunk.repo_update import branch_ref_path, replace_branch_ref, update_repo
from lakeops.icechunk.repository import MANIFESTS_DIR, SNAPSHOTS_DIR
from lakeops.icechunk.versioned import TRANSACTIONS_DIR, VersionedRepository, format_version
from lakeops.plan import CommitOutcome
from lakeops.storage import Storage, StorageOptions, join, open_storage

__all__ = ["VersionedPackingPlan", "commit_versioned_packing", "is_lakeops_compaction", "plan_versioned_packing"]

_ATTEMPTS = 5
#: ``ManifestFileInfo`` (format 1): ObjectId12, 4 bytes of padding, size_bytes u64, num_chunk_refs u32, padding.
_MANIFEST_FILE_INFO = struct.Struct("<12s4xQI4x")


def _metadata_value(spec_version: int, value: str) -> bytes:
    return msgpack.packb(value) if spec_version == 1 else bytes(flexbuffers.Dumps(value))


def is_lakeops_compaction(snapshot: Snapshot) -> bool:
    """Whether ``snapshot`` was committed by lakeops' compaction (its data unchanged, chunks moved)."""
    raw = snapshot.metadata.get(OPERATION_PROPERTY)
    return raw is not None and raw == _metadata_value(snapshot.spec_version, COMPACT)


class VersionedPackingPlan(PackingPlan):
    """A :class:`~.packing.PackingPlan` of a format 1 or 2 repository; ``read_version`` is the tip's
    ``flushed_at`` (microseconds), the watermark formats 1 and 2 order snapshots by."""

    spec_version: int

    def commit(
        self, units: Sequence[Any], results: Sequence[PackResult], storage_options: StorageOptions, *, final: bool
    ) -> CommitOutcome:
        return commit_versioned_packing(self, list(results), open_storage(self.table_root, storage_options))


def plan_versioned_packing(
    storage: Storage,
    root: str,
    storage_options: StorageOptions,
    *,
    branch: str = "main",
    target_file_size: int | None = None,
    min_input_files: int = 5,
    repo: VersionedRepository | None = None,
) -> VersionedPackingPlan:
    """Plan the packing of ``branch``'s tip (rules in :mod:`.packing`); a format 2 repository that is
    not Online is refused (``repo``: the reader to plan through)."""
    target = check_packing_options(root, target_file_size, min_input_files)
    repo = VersionedRepository(storage, root) if repo is None else repo
    repo.info.require_online("compaction")
    tip = _tip(repo, branch)
    native: NativeChunks = {}
    for node in repo.snapshot(tip).nodes:
        if node.is_array:
            refs = sorted(repo.chunk_refs(tip, node.path).items())
            native[node.path] = [
                (i, PackedRef(r.chunk_id, r.offset, r.length)) for i, r in refs if r.chunk_id is not None
            ]
    fields = plan_fields(storage, repo.root, storage_options, native, target=target, min_input_files=min_input_files)
    _check_rewritable(repo, tip, {unit.array_path for unit in fields["groups"]})
    return VersionedPackingPlan(
        branch=branch,
        spec_version=repo.info.spec_version,
        read_version=repo.snapshot(tip).flushed_at,
        base_snapshot=tip,
        **fields,
    )


def _check_rewritable(repo: VersionedRepository, tip: str, paths: set[str]) -> None:
    """Decode whole the files the commit rewrites (the tip's snapshot, the manifests of the arrays at
    ``paths``), so that one holding a field lakeops does not know is refused before any chunk is written."""
    if not paths:
        return
    _read(repo.storage, join(repo.root, SNAPSHOTS_DIR, tip), FileType.SNAPSHOT, fbs.SNAPSHOT)
    for node in repo.snapshot(tip).nodes:
        if node.path in paths and node.node_data is not None:
            for manifest in node.node_data.manifests:
                path = join(repo.root, MANIFESTS_DIR, manifest.object_id)
                _read(repo.storage, path, FileType.MANIFEST, fbs.MANIFEST)


def _tip(repo: VersionedRepository, branch: str) -> str:
    tip = repo.info.branches.get(branch)
    if tip is None:
        raise VersionNotFound(f"{repo.info.source}: branch {branch!r} does not exist")
    return tip


def _current_tip(repo: VersionedRepository, plan: VersionedPackingPlan) -> str:
    """The branch's tip as a commit attempt starts. Format 1: its ``ref.json`` alone, not the refs of
    the repository, which walk every ancestor (a branch under a steady writer would move meanwhile);
    format 2: the repo object. :class:`~lakeops.errors.CommitConflict` if the branch or the plan's spec
    version is gone."""
    if plan.spec_version == 1 and format_version(repo.storage, repo.root) == 1:
        path = branch_ref_path(repo.root, plan.branch)
        try:
            return parse_ref(repo.storage.read(path), path)
        except NotFound as exc:
            raise CommitConflict(f"{path}: branch {plan.branch!r} does not exist any more; compaction aborted") from exc
    try:
        tip = _tip(repo, plan.branch)
    except VersionNotFound as exc:
        raise CommitConflict(f"{exc} any more; compaction aborted") from exc
    if repo.info.spec_version != plan.spec_version:
        raise CommitConflict(
            f"{plan.table_root}: the repository moved from spec version {plan.spec_version} to "
            f"{repo.info.spec_version} since the plan; compaction aborted"
        )
    return tip


def _read(storage: Storage, path: str, file_type: FileType, schema: Schema) -> Record:
    _, table = read_payload(storage.read(path), path, file_type)
    return decode(table, schema)


@dataclass
class _Staged:
    """One attempt's files (path -> bytes, in write order) and the new snapshot's ``SnapshotInfo`` fields."""

    snapshot_id: str
    flushed_at: int
    message: str
    metadata: list[Record]
    files: dict[str, bytes] = field(default_factory=dict)


def _repoint(manifest: Record, moves: dict[bytes, dict[ChunkIndices, tuple[PackedRef, PackedRef]]]) -> bool:
    """Repoint ``manifest``'s packed refs in place (only those still at their source); whether any was."""
    changed = False
    for array in manifest.get("arrays", []):
        moved = moves.get(array["node_id"], {})
        for ref in array.get("refs", []):
            move = moved.get(tuple(ref.get("index", [])))
            if move is None:
                continue
            source, target = move
            held = (ref.get("chunk_id"), ref.get("offset", 0), ref.get("length", 0))
            if held == (decode_bytes(source.id), source.offset, source.length):
                ref.update(chunk_id=decode_bytes(target.id), offset=target.offset, length=target.length)
                changed = True
        array["refs"] = sorted(array.get("refs", []), key=lambda r: list(r.get("index", [])))
    manifest["arrays"] = sorted(manifest.get("arrays", []), key=lambda a: bytes(a["node_id"]))
    return changed


def _stage(
    storage: Storage,
    root: str,
    spec_version: int,
    tip: Record,
    moves: dict[bytes, dict[ChunkIndices, tuple[PackedRef, PackedRef]]],
    message: str,
    now: Callable[[], float],
) -> _Staged:
    """The manifests, transaction log and snapshot that repoint ``moves`` (node id -> indices ->
    (source, packed range)) on top of the tip snapshot record ``tip``."""
    flushed_at = max(int(now() * 1_000_000), tip.get("flushed_at", 0) + 1)
    metadata = [{"name": OPERATION_PROPERTY, "value": _metadata_value(spec_version, COMPACT)}]
    staged = _Staged(new_id(), flushed_at, message, metadata)
    nodes = [n for n in tip.get("nodes", []) if n.get("node_data", (0,))[0] == fbs.ARRAY_NODE]
    replaced: dict[bytes, tuple[bytes, int, int]] = {}
    for node in nodes:
        if bytes(node["id"]) not in moves:
            continue
        for manifest_ref in node["node_data"][1].get("manifests", []):
            old = bytes(manifest_ref["object_id"])
            if old in replaced:
                continue
            manifest = _read(storage, join(root, MANIFESTS_DIR, encode_bytes(old)), FileType.MANIFEST, fbs.MANIFEST)
            if not _repoint(manifest, moves):
                continue
            manifest_id = new_id()
            manifest["id"] = decode_bytes(manifest_id)
            data = file_bytes(encode(manifest, fbs.MANIFEST), FileType.MANIFEST, spec_version)
            staged.files[join(root, MANIFESTS_DIR, manifest_id)] = data
            refs = sum(len(a.get("refs", [])) for a in manifest.get("arrays", []))
            replaced[old] = (decode_bytes(manifest_id), len(data), refs)
    snapshot = _snapshot_record(tip, staged, replaced, spec_version)
    log = _transaction_log(staged.snapshot_id, moves, spec_version)
    staged.files[join(root, TRANSACTIONS_DIR, staged.snapshot_id)] = file_bytes(
        encode(log, fbs.TRANSACTION_LOG), FileType.TRANSACTION_LOG, spec_version
    )
    staged.files[join(root, SNAPSHOTS_DIR, staged.snapshot_id)] = file_bytes(
        encode(snapshot, fbs.SNAPSHOT), FileType.SNAPSHOT, spec_version
    )
    return staged


def _snapshot_record(
    tip: Record, staged: _Staged, replaced: dict[bytes, tuple[bytes, int, int]], spec_version: int
) -> Record:
    """The tip's snapshot record as the new snapshot (module docs); ``replaced``: old manifest id ->
    (new id, file size, ref count)."""
    record: Record = {
        **tip,
        "id": decode_bytes(staged.snapshot_id),
        "flushed_at": staged.flushed_at,
        "message": staged.message,
        "metadata": staged.metadata,
    }
    if spec_version == 1:
        record["parent_id"] = tip["id"]
    else:
        record.pop("parent_id", None)
    nodes = []
    for node in tip.get("nodes", []):
        code, data = node.get("node_data", (0, {}))
        if code == fbs.ARRAY_NODE:
            manifests = [
                {**ref, "object_id": replaced.get(bytes(ref["object_id"]), (ref["object_id"],))[0]}
                for ref in data.get("manifests", [])
            ]
            node = {**node, "node_data": (code, {**data, "manifests": manifests})}
        nodes.append(node)
    record["nodes"] = nodes
    if tip.get("manifest_files"):
        files = [
            _MANIFEST_FILE_INFO.pack(*replaced[bytes(raw[:12])]) if bytes(raw[:12]) in replaced else raw
            for raw in tip["manifest_files"]
        ]
        record["manifest_files"] = sorted(files, key=lambda raw: bytes(raw[:12]))
    if tip.get("manifest_files_v2"):
        infos = []
        for info in tip["manifest_files_v2"]:
            if bytes(info["id"]) in replaced:
                new, size, refs = replaced[bytes(info["id"])]
                info = {**info, "id": new, "size_bytes": size, "num_chunk_refs": refs}
            infos.append(info)
        record["manifest_files_v2"] = sorted(infos, key=lambda info: bytes(info["id"]))
    return record


def _transaction_log(
    snapshot_id: str, moves: dict[bytes, dict[ChunkIndices, tuple[PackedRef, PackedRef]]], spec_version: int
) -> Record:
    """A log with no node changes and the repointed chunks as ``updated_chunks``."""
    unchanged = ("new_groups", "new_arrays", "deleted_groups", "deleted_arrays", "updated_arrays", "updated_groups")
    log: Record = {
        "id": decode_bytes(snapshot_id),
        **{name: [] for name in unchanged},
        "updated_chunks": [
            {"node_id": node_id, "chunks": [{"coords": list(indices)} for indices in sorted(chunks)]}
            for node_id, chunks in sorted(moves.items())
        ],
    }
    if spec_version >= 2:
        log["moved_nodes"] = []
    return log


class _BranchMoved(Exception):
    """The branch no longer names the tip this attempt built on."""


def _move_branch(storage: Storage, plan: VersionedPackingPlan, tip: str, staged: _Staged) -> None:
    """Point the branch at the staged snapshot if it still names ``tip`` (module docs), else
    :class:`_BranchMoved`."""
    if plan.spec_version == 1:
        try:
            replace_branch_ref(storage, plan.table_root, plan.branch, tip, staged.snapshot_id)
        except (CommitConflict, NotFound) as exc:
            raise _BranchMoved(str(exc)) from exc
        return

    def change(document: RepoDocument) -> tuple[int, Record]:
        if document.branches.get(plan.branch) != tip:
            raise _BranchMoved(f"branch {plan.branch!r} moved from {tip}")
        document.add_snapshot(staged.snapshot_id, tip, staged.flushed_at, staged.message)
        document.snapshots[staged.snapshot_id]["metadata"] = staged.metadata
        document.branches[plan.branch] = staged.snapshot_id
        return fbs.NEW_COMMIT, {"branch": plan.branch, "new_snap_id": decode_bytes(staged.snapshot_id)}

    update_repo(storage, plan.table_root, change)


def _current_refs(repo: VersionedRepository, snapshot_id: str, path: str) -> dict[ChunkIndices, object]:
    """The array's chunks at ``snapshot_id``, native ones as the packing plan names them."""
    return {
        indices: PackedRef(ref.chunk_id, ref.offset, ref.length) if ref.chunk_id is not None else ref
        for indices, ref in repo.chunk_refs(snapshot_id, path).items()
    }


def commit_versioned_packing(
    plan: VersionedPackingPlan, results: list[PackResult], storage: Storage, *, now: Callable[[], float] = time.time
) -> CommitOutcome:
    """Repoint every packed chunk and commit the branch (module docs); the outcome's version is the new
    snapshot's ``flushed_at``."""
    targets, origins = new_refs(plan, results), sources(plan)
    message = commit_message(plan, results)
    for attempt in range(1, _ATTEMPTS + 1):
        repo = VersionedRepository(storage, plan.table_root)
        tip = _current_tip(repo, plan)
        if tip != plan.base_snapshot:
            check_packable(plan, f"snapshot {tip}", partial(_current_refs, repo, tip))
        record = _read(storage, join(repo.root, SNAPSHOTS_DIR, tip), FileType.SNAPSHOT, fbs.SNAPSHOT)
        node_ids = {node["path"]: bytes(node["id"]) for node in record.get("nodes", [])}
        moves = {
            node_ids[path]: {indices: (origins[path][indices], ref) for indices, ref in chunks.items()}
            for path, chunks in targets.items()
        }
        staged = _stage(storage, repo.root, plan.spec_version, record, moves, message, now)
        for path, data in staged.files.items():
            storage.put_if_absent(path, data)
        try:
            _move_branch(storage, plan, tip, staged)
        except _BranchMoved:
            storage.delete_many(list(staged.files))
            continue
        return CommitOutcome(version=staged.flushed_at, snapshot_id=staged.snapshot_id, attempts=attempt)
    raise CommitConflict(
        f"{plan.table_root}: branch {plan.branch!r} kept moving during the compaction commit ({_ATTEMPTS} attempts)"
    )
