"""Our own Icechunk commits (spec "Initialize New Repository", "Write New Snapshot").

A commit writes its new chunk objects (one ``chunks/<id>`` per native chunk), then one manifest
holding every chunk of every array, then the snapshot, and finally moves the branch by creating
the next sequence file with put-if-absent. When another writer took that sequence number, the
attempt's manifest and snapshot are deleted (nothing can reference them), the tip is re-read and
the same :class:`ChangeSet` is applied on top of it (``on_conflict="rebase"``) or the commit fails
with :class:`~lakeops.errors.CommitConflict` (``"abort"``, or when the changes no longer apply, or
after ``max_attempts``). A branch write whose outcome cannot be determined raises
:class:`~lakeops.errors.CommitStateUnknown` and deletes nothing.

Fields our snapshots fill, mirroring Icechunk 0.1.0-alpha.1: format version 0 and no flags;
``manifest_files`` = the one new manifest (none when no array has chunks); ``attribute_files``
carried over from the parent (we never write attribute files); ``total_parents`` = parent's + 1;
``short_term_history`` = the parent's ``metadata`` followed by the parent's history (unbounded, as
the reference writer did) and ``short_term_parents`` its length; ``metadata`` = a fresh id (also
the file name), the write time and the message; ``started_at`` = when :func:`commit` was called;
``properties`` as given. Every array references the new manifest with empty extents; node ids
are small integers, new nodes numbered after the largest existing id.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

from lakeops.commit_outcome import Answer, created_file, settle
from lakeops.errors import (
    AlreadyExists,
    CommitConflict,
    InvalidArgument,
    StorageError,
)
from lakeops.icechunk import refs
from lakeops.icechunk.ids import new_id
from lakeops.icechunk.manifest import (
    MANIFEST_FORMAT_VERSION,
    ChunkIndices,
    ChunkKey,
    ChunkPayload,
    ChunkRef,
    InlineChunk,
    Manifest,
    VirtualChunkRef,
    encode_manifest,
)
from lakeops.icechunk.repository import Repository
from lakeops.icechunk.snapshot import (
    SNAPSHOT_FORMAT_VERSION,
    ArrayData,
    GroupData,
    InlineUserAttributes,
    ManifestFileInfo,
    ManifestRef,
    NodeData,
    NodeSnapshot,
    Snapshot,
    SnapshotMetadata,
    ZarrArrayMetadata,
    encode_snapshot,
    node_path,
    path_sort_key,
)
from lakeops.storage import ConfinedStorage, Storage

INITIAL_MESSAGE = "Repository initialized"
Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class ChangeSet:
    """What one commit changes, applied on top of whatever the branch tip is when it commits.

    Chunk values: ``bytes`` (a new native chunk object), a payload used as is (:class:`InlineChunk`,
    :class:`VirtualChunkRef`, :class:`ChunkRef`), or ``None`` (delete: the chunk reads as the fill value).
    """

    groups: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, tuple[ZarrArrayMetadata, Any]] = field(default_factory=dict)
    chunks: dict[tuple[str, ChunkIndices], bytes | ChunkPayload | None] = field(default_factory=dict)

    def add_group(self, path: str, attributes: Any = None) -> ChangeSet:
        self.groups[node_path(path)] = attributes
        return self

    def add_array(self, path: str, metadata: ZarrArrayMetadata, attributes: Any = None) -> ChangeSet:
        self.arrays[node_path(path)] = (metadata, attributes)
        return self

    def set_chunk(self, path: str, indices: Iterable[int], data: bytes, *, inline: bool = False) -> ChangeSet:
        """Write ``data`` as the chunk's stored bytes: a new ``chunks/<id>`` object, or inline in the manifest."""
        self.chunks[(node_path(path), tuple(indices))] = InlineChunk(bytes(data)) if inline else bytes(data)
        return self

    def set_virtual_chunk(self, path: str, indices: Iterable[int], ref: VirtualChunkRef) -> ChangeSet:
        self.chunks[(node_path(path), tuple(indices))] = ref
        return self

    def set_chunk_ref(self, path: str, indices: Iterable[int], ref: ChunkRef) -> ChangeSet:
        """Point the chunk at bytes already in the repository (e.g. a range of a packed chunk file)."""
        self.chunks[(node_path(path), tuple(indices))] = ref
        return self

    def delete_chunk(self, path: str, indices: Iterable[int]) -> ChangeSet:
        self.chunks[(node_path(path), tuple(indices))] = None
        return self


@dataclass(frozen=True, slots=True)
class CommitResult:
    snapshot_id: str
    parent_id: str | None
    branch: str
    sequence: int
    attempts: int
    manifest_id: str | None
    chunk_ids: tuple[str, ...]


def init_repository(
    storage: Storage, root: str, *, message: str = INITIAL_MESSAGE, clock: Clock = _utc_now
) -> CommitResult:
    """Create an empty repository: an initial snapshot without nodes and ``refs/branch.main`` sequence 0.

    Raises :class:`~lakeops.errors.AlreadyExists` if ``main`` exists (or another writer won the race).
    """
    repo = Repository(storage, root)
    if repo.branches():
        raise AlreadyExists(f"{repo.root}: an Icechunk repository already exists here (branches {repo.branches()})")
    now = clock()
    snapshot = Snapshot(
        format_version=SNAPSHOT_FORMAT_VERSION,
        format_flags={},
        manifest_files=(),
        attribute_files=(),
        total_parents=0,
        short_term_parents=0,
        short_term_history=(),
        metadata=SnapshotMetadata(new_id(), now, message),
        started_at=now,
        properties={},
        nodes={},
    )
    snapshot_path = repo.snapshot_path(snapshot.id)
    storage.put_if_absent(snapshot_path, encode_snapshot(snapshot))
    try:
        version = refs.create_next_branch_file(storage, repo.root, "main", snapshot.id, None)
    except AlreadyExists:
        _delete_own(storage, repo.root, [snapshot_path])
        raise
    return CommitResult(snapshot.id, None, "main", version.sequence, 1, None, ())


def commit(
    storage: Storage,
    root: str,
    changes: ChangeSet,
    *,
    message: str,
    branch: str = "main",
    properties: Mapping[str, Any] | None = None,
    on_conflict: Literal["rebase", "abort"] = "rebase",
    max_attempts: int = 5,
    clock: Clock = _utc_now,
    validate: Callable[[Repository, refs.BranchVersion], None] | None = None,
) -> CommitResult:
    """Commit ``changes`` on ``branch`` (see the module docs for the protocol and the fields filled).

    Raises :class:`~lakeops.errors.InvalidArgument` if the changes do not apply to the current tip
    (missing parent group, chunk of a non-array, indices outside the grid),
    :class:`~lakeops.errors.CommitConflict` as described above, and
    :class:`~lakeops.errors.CommitStateUnknown` when the branch write's outcome is unknown.

    ``validate`` is called with the tip each attempt is about to build on; it raises
    :class:`~lakeops.errors.CommitConflict` when the changes must not be applied on top of that
    tip (a rewrite whose inputs a concurrent commit replaced), which aborts the commit as above.
    """
    if max_attempts < 1:
        raise InvalidArgument(f"max_attempts must be at least 1, got {max_attempts}")
    repo = Repository(storage, root)
    started = clock()
    ours: list[str] = []  # every object this commit wrote that no branch references yet
    branch_write_pending = False  # while True a failure may hide a landed commit: delete nothing
    try:
        payloads, written_chunks = _write_chunks(repo, changes, ours)
        for attempt in range(1, max_attempts + 1):
            tip = refs.branch_tip(storage, repo.root, branch)
            if validate is not None:
                validate(repo, tip)
            parent = repo.read_snapshot(tip.snapshot_id)
            try:
                snapshot, manifest = _apply(
                    parent, _all_chunks(repo, tip.snapshot_id), changes, payloads, message, started, properties, clock
                )
            except InvalidArgument as exc:
                if attempt == 1:
                    raise
                raise CommitConflict(
                    f"commit {message!r} on branch {branch!r} of {repo.root} no longer applies after a concurrent "
                    f"commit (sequence {tip.sequence}): {exc}"
                ) from exc
            attempt_files = _write_metadata(repo, snapshot, manifest, ours)
            branch_write_pending = True
            moved = _move_branch(repo, branch, tip.sequence, snapshot.id)
            branch_write_pending = False
            if moved:
                return CommitResult(
                    snapshot_id=snapshot.id,
                    parent_id=parent.id,
                    branch=branch,
                    sequence=tip.sequence + 1,
                    attempts=attempt,
                    manifest_id=snapshot.manifest_files[0].id if snapshot.manifest_files else None,
                    chunk_ids=written_chunks,
                )
            _delete_own(storage, repo.root, attempt_files)
            ours = [p for p in ours if p not in attempt_files]
            if on_conflict == "abort" or attempt == max_attempts:
                raise CommitConflict(
                    f"commit {message!r} on branch {branch!r} of {repo.root} lost sequence {tip.sequence + 1} to a "
                    f"concurrent commit (attempt {attempt} of {max_attempts}, on_conflict={on_conflict!r})"
                )
            time.sleep(random.uniform(0, 0.02 * attempt))
        raise AssertionError("unreachable: the last attempt returns or raises")
    except BaseException as exc:
        if branch_write_pending:
            raise  # a branch file may name our snapshot (CommitStateUnknown, or interrupted mid-write)
        try:
            _delete_own(storage, repo.root, ours)
        except StorageError as cleanup:
            exc.add_note(f"cleaning up this commit's unreferenced files failed too: {cleanup}")
        raise


def _delete_own(storage: Storage, root: str, paths: list[str]) -> None:
    """Delete files this commit wrote and nothing references (never anything outside ``root``)."""
    if paths:
        ConfinedStorage(storage, root).delete_many(paths)


def _all_chunks(repo: Repository, snapshot_id: str) -> dict[ChunkKey, ChunkPayload]:
    """Every chunk of every array of the snapshot, keyed as in a manifest."""
    return {
        (node.id, indices): payload
        for node in repo.read_snapshot(snapshot_id).nodes.values()
        if node.is_array
        for indices, payload in repo.chunk_payloads(snapshot_id, node.path).items()
    }


def _write_chunks(
    repo: Repository, changes: ChangeSet, ours: list[str]
) -> tuple[dict[tuple[str, ChunkIndices], ChunkPayload | None], tuple[str, ...]]:
    """Write each new native chunk once (they do not depend on the parent, so retries reuse them).

    Returns the payload of every changed chunk and the ids of the chunk objects written."""
    payloads: dict[tuple[str, ChunkIndices], ChunkPayload | None] = {}
    written: list[str] = []
    for key, value in changes.chunks.items():
        if isinstance(value, bytes):
            chunk_id = new_id()
            path = repo.chunk_path(chunk_id)
            ours.append(path)
            repo.storage.put_if_absent(path, value)
            written.append(chunk_id)
            payloads[key] = ChunkRef(chunk_id, 0, len(value))
        else:
            payloads[key] = value
    return payloads, tuple(written)


def _write_metadata(repo: Repository, snapshot: Snapshot, manifest: Manifest | None, ours: list[str]) -> list[str]:
    """Write the manifest, then the snapshot; returns their paths (also recorded in ``ours``)."""
    written = []
    if manifest is not None:
        path = repo.manifest_path(snapshot.manifest_files[0].id)
        ours.append(path)
        written.append(path)
        repo.storage.put_if_absent(path, encode_manifest(manifest))
    path = repo.snapshot_path(snapshot.id)
    ours.append(path)
    written.append(path)
    repo.storage.put_if_absent(path, encode_snapshot(snapshot))
    return written


def _move_branch(repo: Repository, branch: str, sequence: int, snapshot_id: str) -> bool:
    """Create sequence ``sequence + 1``: True if it names our snapshot, False if another writer's.

    Whatever the store answers, the file read back decides (:func:`lakeops.commit_outcome.settle`);
    while it cannot, :class:`CommitStateUnknown`.
    """
    path = refs.branch_dir(repo.root, branch) + "/" + refs.branch_file_name(sequence + 1)
    answer = Answer.ACCEPTED
    failure: StorageError | None = None
    try:
        refs.create_next_branch_file(repo.storage, repo.root, branch, snapshot_id, sequence)
    except AlreadyExists as exc:
        answer, failure = Answer.REFUSED, exc
    except StorageError as exc:
        answer, failure = Answer.NO_VERDICT, exc
    marks = created_file(partial(repo.storage.read, path), lambda raw: refs.parse_ref(raw, path), snapshot_id)
    try:
        settle(path, answer, marks, claimed=snapshot_id, failure=failure)
    except CommitConflict:
        return False
    return True


def _apply(
    parent: Snapshot,
    parent_chunks: Mapping[ChunkKey, ChunkPayload],
    changes: ChangeSet,
    payloads: Mapping[tuple[str, ChunkIndices], ChunkPayload | None],
    message: str,
    started: datetime,
    properties: Mapping[str, Any] | None,
    clock: Clock,
) -> tuple[Snapshot, Manifest | None]:
    """The child snapshot (and its manifest) of ``parent`` with ``changes`` applied.

    Raises :class:`~lakeops.errors.InvalidArgument` naming the first change that does not apply.
    """
    nodes = dict(parent.nodes)
    next_node_id = max((n.id for n in nodes.values()), default=0) + 1
    added: list[tuple[str, NodeData, Any]] = [(path, GroupData(), attrs) for path, attrs in changes.groups.items()]
    added += [(path, ArrayData(meta), attrs) for path, (meta, attrs) in changes.arrays.items()]
    for path, data, attrs in sorted(added, key=lambda item: (len(path_sort_key(item[0])), item[0])):
        if path in nodes:
            raise InvalidArgument(f"cannot create {path!r}: a node already exists there")
        if path != "/":
            container = path.rsplit("/", 1)[0] or "/"
            if container not in nodes or nodes[container].is_array:
                raise InvalidArgument(f"cannot create {path!r}: no group {container!r} to hold it")
        user_attributes = None if attrs is None else InlineUserAttributes(attrs)
        nodes[path] = NodeSnapshot(next_node_id, path, user_attributes, data)
        next_node_id += 1

    chunks = dict(parent_chunks)
    for (path, indices), payload in payloads.items():
        node = nodes.get(path)
        if node is None or not isinstance(node.node_data, ArrayData):
            raise InvalidArgument(f"cannot write chunk {list(indices)} of {path!r}: there is no array at that path")
        node.node_data.metadata.check_indices(indices, path)
        if payload is None:
            chunks.pop((node.id, indices), None)
        else:
            chunks[(node.id, indices)] = payload

    manifest = Manifest(MANIFEST_FORMAT_VERSION, {}, chunks) if chunks else None
    manifest_id = new_id()
    refs_ = (ManifestRef(manifest_id),) if manifest else ()
    for path, node in nodes.items():
        if isinstance(node.node_data, ArrayData):
            nodes[path] = dataclasses.replace(node, node_data=ArrayData(node.node_data.metadata, refs_))
    history = (parent.metadata, *parent.short_term_history)
    snapshot = Snapshot(
        format_version=SNAPSHOT_FORMAT_VERSION,
        format_flags={},
        manifest_files=(ManifestFileInfo(manifest_id, MANIFEST_FORMAT_VERSION),) if manifest else (),
        attribute_files=parent.attribute_files,
        total_parents=parent.total_parents + 1,
        short_term_parents=len(history),
        short_term_history=history,
        metadata=SnapshotMetadata(new_id(), clock(), message),
        started_at=started,
        properties=dict(properties or {}),
        nodes=nodes,
    )
    return snapshot, manifest
