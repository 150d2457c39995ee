"""Reading an Icechunk repository on any storage (spec "File Layout", "Read from Repository").

Layout under the root: ``refs/`` (branches and tags), ``snapshots/<id>``, ``manifests/<id>``,
``chunks/<id>`` and, once a writer uses them, ``attributes/<id>``. Snapshot and manifest files are
immutable, so a :class:`Repository` caches what it decoded.

Snapshot identity has two spellings: refs name snapshot *files*, children name their parent by
the parent's *embedded* ``metadata.id``. Real writers have let the two differ (the test
repository's initial snapshot file ``WT2Z2GQ09G0RTAEQ3D70`` embeds ``6W05WADKS87N84AMH5KG``), so a
parent id is first tried as a file name and otherwise looked up in an index built by reading every
snapshot file.

Reachability (for expiry and garbage collection): a set of snapshots reaches the manifests its
snapshots list or its arrays reference, the attribute files they name, and every native chunk
(``Ref``) in those manifests. Virtual chunks live outside the repository and are never counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from lakeops.errors import CorruptFile, InvalidArgument, NotATable, NotFound, ProtocolError, VersionNotFound
from lakeops.icechunk import refs
from lakeops.icechunk.ids import validate_id
from lakeops.icechunk.manifest import (
    ChunkIndices,
    ChunkPayload,
    ChunkRef,
    InlineChunk,
    Manifest,
    VirtualChunkRef,
    decode_manifest,
)
from lakeops.icechunk.snapshot import (
    ArrayData,
    NodeSnapshot,
    Snapshot,
    UserAttributesRef,
    decode_snapshot,
    node_path,
    path_sort_key,
)
from lakeops.storage import Storage, StorageOptions, join, normalize, open_storage

SNAPSHOTS_DIR = "snapshots"
MANIFESTS_DIR = "manifests"
CHUNKS_DIR = "chunks"
ATTRIBUTES_DIR = "attributes"


@dataclass(frozen=True, slots=True)
class AncestryEntry:
    """One snapshot in a history. ``file_id`` is None when the snapshot's file is gone (expired) and
    it is known only from a descendant's embedded history."""

    id: str
    file_id: str | None
    parent_id: str | None
    written_at: datetime
    message: str


@dataclass(frozen=True, slots=True)
class Reachable:
    """What a set of snapshots keeps alive, by object id (``snapshots`` are file ids)."""

    snapshots: frozenset[str]
    manifests: frozenset[str]
    attribute_files: frozenset[str]
    chunks: frozenset[str]
    virtual_locations: frozenset[str]


class Repository:
    """An Icechunk repository at ``root`` read through ``storage``."""

    def __init__(self, storage: Storage, root: str) -> None:
        self.storage = storage
        self.root = normalize(root)
        self._snapshots: dict[str, Snapshot] = {}
        self._manifests: dict[str, Manifest] = {}
        self._embedded_index: dict[str, str] | None = None

    @classmethod
    def open(cls, location: str, options: StorageOptions | None = None) -> Repository:
        """The repository at ``location``; :class:`~lakeops.errors.NotATable` without a ``main`` branch
        (the spec's test for "a valid repository in a given path")."""
        repo = cls(open_storage(location, options), location)
        if "main" not in repo.branches():
            raise NotATable(f"{location}: not an Icechunk repository (no refs/branch.main/)")
        return repo

    # -- where files live ---------------------------------------------------------------------

    def snapshot_path(self, file_id: str) -> str:
        return join(self.root, SNAPSHOTS_DIR, validate_id(file_id, "snapshot id"))

    def manifest_path(self, manifest_id: str) -> str:
        return join(self.root, MANIFESTS_DIR, validate_id(manifest_id, "manifest id"))

    def chunk_path(self, chunk_id: str) -> str:
        return join(self.root, CHUNKS_DIR, validate_id(chunk_id, "chunk id"))

    def attributes_path(self, attributes_id: str) -> str:
        return join(self.root, ATTRIBUTES_DIR, validate_id(attributes_id, "attributes id"))

    # -- refs ---------------------------------------------------------------------------------

    def branches(self) -> list[str]:
        return refs.list_branches(self.storage, self.root)

    def tags(self) -> list[str]:
        return refs.list_tags(self.storage, self.root)

    def branch_history(self, branch: str) -> list[refs.BranchVersion]:
        return refs.branch_history(self.storage, self.root, branch)

    def resolve(self, name: str, kind: refs.RefKind | None = None) -> str:
        """The snapshot id a branch tip or tag names (see :func:`refs.resolve_ref`)."""
        return refs.resolve_ref(self.storage, self.root, name, kind)

    # -- snapshots ----------------------------------------------------------------------------

    def read_snapshot(self, snapshot_id: str) -> Snapshot:
        """The snapshot with file name, or else embedded id, ``snapshot_id``.

        Raises :class:`~lakeops.errors.VersionNotFound` if no snapshot file holds it.
        """
        return self._load_snapshot(self.locate_snapshot(snapshot_id))

    def locate_snapshot(self, snapshot_id: str) -> str:
        """The file id of the snapshot named ``snapshot_id`` by a ref (file name) or a child (embedded id)."""
        file_id = self._find_file(snapshot_id)
        if file_id is None:
            raise VersionNotFound(f"snapshot {snapshot_id} not found in Icechunk repository {self.root}")
        return file_id

    def _load_snapshot(self, file_id: str) -> Snapshot:
        cached = self._snapshots.get(file_id)
        if cached is None:
            path = self.snapshot_path(file_id)
            cached = self._snapshots[file_id] = decode_snapshot(self.storage.read(path), path)
        return cached

    def _find_file(self, snapshot_id: str) -> str | None:
        validate_id(snapshot_id, "snapshot id")
        if self._embedded_index is not None and snapshot_id in self._embedded_index:
            return self._embedded_index[snapshot_id]
        try:
            self._load_snapshot(snapshot_id)
            return snapshot_id
        except NotFound:
            return self.embedded_index().get(snapshot_id)

    def embedded_index(self) -> dict[str, str]:
        """Embedded snapshot id -> file id, for every snapshot file (read once, then cached)."""
        if self._embedded_index is None:
            index: dict[str, str] = {}
            directory = join(self.root, SNAPSHOTS_DIR)
            for info in self.storage.list(directory):
                file_id = info.path.rsplit("/", 1)[1]
                try:
                    validate_id(file_id, "snapshot file name")
                except InvalidArgument as exc:
                    raise ProtocolError(f"{info.path}: unexpected file in {directory}: {exc}") from None
                embedded = self._load_snapshot(file_id).id
                if embedded in index:
                    raise ProtocolError(
                        f"snapshot files {index[embedded]} and {file_id} of {self.root} both embed id {embedded}"
                    )
                index[embedded] = file_id
            self._embedded_index = index
        return self._embedded_index

    def ancestry(self, snapshot_id: str) -> list[AncestryEntry]:
        """``snapshot_id`` and its ancestors, newest first, following parent ids from file to file.

        Where a parent's file no longer exists, the rest comes from the last readable snapshot's
        embedded ``short_term_history`` (entries with ``file_id=None``).
        """
        file_id: str | None = self.locate_snapshot(snapshot_id)
        entries: list[AncestryEntry] = []
        seen: set[str] = set()
        while file_id is not None:
            if file_id in seen:
                raise ProtocolError(f"snapshot {file_id} of {self.root} is its own ancestor")
            seen.add(file_id)
            snap = self._load_snapshot(file_id)
            meta = snap.metadata
            entries.append(AncestryEntry(meta.id, file_id, snap.parent_id, meta.written_at, meta.message))
            file_id = None if snap.parent_id is None else self._find_file(snap.parent_id)
            if file_id is None and snap.parent_id is not None:
                history = snap.short_term_history
                for i, old in enumerate(history):
                    parent = history[i + 1].id if i + 1 < len(history) else None
                    entries.append(AncestryEntry(old.id, None, parent, old.written_at, old.message))
        return entries

    # -- hierarchy ----------------------------------------------------------------------------

    def nodes(self, snapshot_id: str) -> list[NodeSnapshot]:
        """Every group and array, in path order."""
        return sorted(self.read_snapshot(snapshot_id).nodes.values(), key=lambda n: path_sort_key(n.path))

    def node(self, snapshot_id: str, path: str) -> NodeSnapshot:
        """The node at ``path`` (``group1/a`` or ``/group1/a``); InvalidArgument if there is none."""
        key = node_path(path)
        node = self.read_snapshot(snapshot_id).nodes.get(key)
        if node is None:
            raise InvalidArgument(f"no node {key!r} in snapshot {snapshot_id} of Icechunk repository {self.root}")
        return node

    def array(self, snapshot_id: str, path: str) -> tuple[NodeSnapshot, ArrayData]:
        """The array node at ``path`` and its data; InvalidArgument for a group."""
        node = self.node(snapshot_id, path)
        if not isinstance(node.node_data, ArrayData):
            raise InvalidArgument(
                f"node {node.path!r} in snapshot {snapshot_id} of {self.root} is a group, not an array"
            )
        return node, node.node_data

    # -- chunks -------------------------------------------------------------------------------

    def read_manifest(self, manifest_id: str) -> Manifest:
        cached = self._manifests.get(manifest_id)
        if cached is None:
            path = self.manifest_path(manifest_id)
            try:
                data = self.storage.read(path)
            except NotFound:
                raise NotFound(
                    f"manifest {manifest_id} ({path}) of Icechunk repository {self.root} is missing"
                ) from None
            cached = self._manifests[manifest_id] = decode_manifest(data, path)
        return cached

    def chunk_payloads(self, snapshot_id: str, path: str) -> dict[ChunkIndices, ChunkPayload]:
        """Every written chunk of the array: indices -> payload; absent chunks hold the fill value.

        Manifests are consulted in the node's order and the first holding an index wins, as
        Icechunk's reader does. Entries whose dimensionality differs from the array's are skipped:
        Icechunk 0.1.0-alpha.1 copied 1-d indices of a sibling array into the test repository's
        ``big_chunks``, and no 2-d lookup can ever reach them.
        """
        node, data = self.array(snapshot_id, path)
        ndim = len(data.metadata.shape)
        chunks: dict[ChunkIndices, ChunkPayload] = {}
        for ref in data.manifests:
            for indices, payload in self.read_manifest(ref.object_id).chunks_of(node.id):
                if len(indices) == ndim:
                    chunks.setdefault(indices, payload)
        return chunks

    def chunk_payload(self, snapshot_id: str, path: str, indices: Iterable[int]) -> ChunkPayload | None:
        """The payload of one chunk, or None if it was never written (or deleted)."""
        node, data = self.array(snapshot_id, path)
        key = data.metadata.check_indices(tuple(indices), node.path)
        for ref in data.manifests:
            payload = self.read_manifest(ref.object_id).chunks.get((node.id, key))
            if payload is not None:
                return payload
        return None

    def read_chunk(self, snapshot_id: str, path: str, indices: Iterable[int]) -> bytes | VirtualChunkRef | None:
        """The stored (encoded) bytes of one chunk: inline bytes, or the byte range of the native chunk
        file; a virtual chunk is returned as its reference (it lives outside the repository);
        None for a chunk never written."""
        payload = self.chunk_payload(snapshot_id, path, indices)
        if payload is None or isinstance(payload, VirtualChunkRef):
            return payload
        if isinstance(payload, InlineChunk):
            return payload.data
        return self.read_native_chunk(payload)

    def read_native_chunk(self, ref: ChunkRef) -> bytes:
        """``ref.length`` bytes at ``ref.offset`` of ``chunks/<id>``; CorruptFile if the file is short."""
        location = self.chunk_path(ref.id)
        try:
            data = self.storage.read_range(location, ref.offset, ref.length)
        except NotFound:
            raise NotFound(f"chunk file {location} of Icechunk repository {self.root} is missing") from None
        if len(data) != ref.length:
            raise CorruptFile(
                f"{location}: chunk file ends after {ref.offset + len(data)} bytes, "
                f"but a manifest references bytes {ref.offset}..{ref.offset + ref.length}"
            )
        return data

    # -- reachability -------------------------------------------------------------------------

    def reachable(self, snapshot_ids: Iterable[str]) -> Reachable:
        """Everything the given snapshots (file or embedded ids) keep alive; see the module docs."""
        snapshots: set[str] = set()
        manifests: set[str] = set()
        attributes: set[str] = set()
        for snapshot_id in snapshot_ids:
            file_id = self.locate_snapshot(snapshot_id)
            snapshots.add(file_id)
            snap = self._load_snapshot(file_id)
            manifests.update(m.id for m in snap.manifest_files)
            attributes.update(a.id for a in snap.attribute_files)
            for node in snap.nodes.values():
                if isinstance(node.user_attributes, UserAttributesRef):
                    attributes.add(node.user_attributes.object_id)
                if isinstance(node.node_data, ArrayData):
                    manifests.update(ref.object_id for ref in node.node_data.manifests)
        chunks: set[str] = set()
        virtual: set[str] = set()
        for manifest_id in manifests:
            for payload in self.read_manifest(manifest_id).chunks.values():
                if isinstance(payload, ChunkRef):
                    chunks.add(payload.id)
                elif isinstance(payload, VirtualChunkRef):
                    virtual.add(payload.location)
        return Reachable(
            frozenset(snapshots), frozenset(manifests), frozenset(attributes), frozenset(chunks), frozenset(virtual)
        )
