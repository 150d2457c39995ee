"""Snapshot and manifest files of Icechunk format 1 and 2, decoded into models named as the spec.

https://github.com/earth-mover/icechunk/blob/main/docs/docs/spec.md#snapshot-files and
#chunk-manifest-files: both are flatbuffers tables (``snapshot.fbs``, ``manifest.fbs`` in
https://github.com/earth-mover/icechunk/tree/main/icechunk-format/flatbuffers, whose field order gives
the indices below) in the binary file format (:mod:`lakeops.icechunk.binary`). Format 1
snapshots carry ``parent_id`` and ``manifest_files`` (a vector of structs); format 2 leaves those empty
and fills ``manifest_files_v2`` (tables), the parent living in the repo object instead. Only what
maintenance reads is decoded: node paths, kinds and Zarr metadata, manifest pointers, chunk references.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from lakeops.errors import CorruptFile
from lakeops.icechunk.binary import FileType, read_payload
from lakeops.icechunk.flatbuf import Table
from lakeops.icechunk.ids import encode_bytes

__all__ = [
    "ArrayManifest",
    "ArrayNodeData",
    "ChunkRef",
    "Manifest",
    "ManifestFileInfo",
    "ManifestRef",
    "NodeSnapshot",
    "Snapshot",
    "decode_manifest",
    "decode_snapshot",
    "object_id",
]

_ID12, _ID8 = 12, 8
#: ``ManifestFileInfo`` struct: ObjectId12, 4 bytes padding, size_bytes u64, num_chunk_refs u32, padding.
_MANIFEST_FILE_INFO_SIZE = 32
#: ``NodeData`` union type of an array (``Group`` is 2).
_ARRAY_NODE = 1


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class ManifestRef(_Model):
    object_id: str


class ArrayNodeData(_Model):
    manifests: list[ManifestRef]


class NodeSnapshot(_Model):
    id: str
    path: str
    #: The node's Zarr metadata document (``zarr.json``: attributes, shape, codecs) as the writer stored it.
    user_data: bytes = b""
    #: None for a group.
    node_data: ArrayNodeData | None

    @property
    def is_array(self) -> bool:
        return self.node_data is not None


class ManifestFileInfo(_Model):
    id: str
    size_bytes: int
    num_chunk_refs: int


class Snapshot(_Model):
    spec_version: int
    id: str
    #: Format 1 only; format 2 keeps parents in the repo object.
    parent_id: str | None
    nodes: list[NodeSnapshot]
    #: Microseconds since the epoch.
    flushed_at: int
    message: str
    #: ``manifest_files`` (format 1) or ``manifest_files_v2`` (format 2).
    manifest_files: list[ManifestFileInfo]
    #: ``MetadataItem`` name -> value as stored (MessagePack in format 1, FlexBuffers in format 2).
    metadata: dict[str, bytes] = {}


class ChunkRef(_Model):
    index: list[int]
    inline: bytes | None = None
    offset: int = 0
    length: int = 0
    chunk_id: str | None = None
    location: str | None = None
    compressed_location: bytes | None = None

    @property
    def kind(self) -> str:
        """``inline``, ``native`` or ``virtual`` (spec "ChunkRef": exactly one set is populated)."""
        if self.inline is not None:
            return "inline"
        return "native" if self.chunk_id is not None else "virtual"


class ArrayManifest(_Model):
    node_id: str
    refs: list[ChunkRef]


class Manifest(_Model):
    id: str
    arrays: list[ArrayManifest]


def object_id(table: Table, index: int, size: int = _ID12) -> str | None:
    """An ``ObjectId12`` (or ``ObjectId8``) field as its Crockford base32 name."""
    raw = table.inline_bytes(index, size)
    return None if raw is None else encode_bytes(raw)


def _required_id(table: Table, index: int, what: str, size: int = _ID12) -> str:
    value = object_id(table, index, size)
    if value is None:
        raise CorruptFile(f"{table.path}: required field {what} is missing")
    return value


def _node(table: Table) -> NodeSnapshot:
    path = table.string(1)
    if path is None:
        raise CorruptFile(f"{table.path}: a node has no path")
    data = None
    if table.scalar(3, "B") == _ARRAY_NODE:
        array = table.table(4)
        if array is None:
            raise CorruptFile(f"{table.path}: array node {path} has no node_data")
        data = ArrayNodeData(
            manifests=[ManifestRef(object_id=_required_id(m, 0, "ManifestRef.object_id")) for m in array.tables(2)]
        )
    return NodeSnapshot(
        id=_required_id(table, 0, "NodeSnapshot.id", _ID8),
        path=path,
        user_data=table.byte_vector(2) or b"",
        node_data=data,
    )


def _manifest_file_v1(raw: bytes) -> ManifestFileInfo:
    return ManifestFileInfo(
        id=encode_bytes(raw[:_ID12]),
        size_bytes=int.from_bytes(raw[16:24], "little"),
        num_chunk_refs=int.from_bytes(raw[24:28], "little"),
    )


def decode_snapshot(data: bytes, path: str) -> Snapshot:
    """The snapshot file ``path`` (fields 0-8 of ``snapshot.fbs``'s ``Snapshot``)."""
    version, root = read_payload(data, path, FileType.SNAPSHOT)
    files = [_manifest_file_v1(raw) for raw in root.structs(6, _MANIFEST_FILE_INFO_SIZE)]
    files += [
        ManifestFileInfo(
            id=_required_id(info, 0, "ManifestFileInfoV2.id"),
            size_bytes=info.scalar(1, "Q"),
            num_chunk_refs=info.scalar(2, "I"),
        )
        for info in root.tables(7)
    ]
    return Snapshot(
        spec_version=version,
        id=_required_id(root, 0, "Snapshot.id"),
        parent_id=object_id(root, 1),
        nodes=[_node(node) for node in root.tables(2)],
        flushed_at=root.scalar(3, "Q"),
        message=root.string(4) or "",
        manifest_files=files,
        metadata={item.string(0) or "": item.byte_vector(1) or b"" for item in root.tables(5)},
    )


def _chunk_ref(table: Table) -> ChunkRef:
    return ChunkRef(
        index=table.scalars(0, "I"),
        inline=table.byte_vector(1),
        offset=table.scalar(2, "Q"),
        length=table.scalar(3, "Q"),
        chunk_id=object_id(table, 4),
        location=table.string(5),
        compressed_location=table.byte_vector(8),
    )


def decode_manifest(data: bytes, path: str) -> Manifest:
    """The manifest file ``path`` (``manifest.fbs``'s ``Manifest``: id, arrays of chunk refs)."""
    _, root = read_payload(data, path, FileType.MANIFEST)
    return Manifest(
        id=_required_id(root, 0, "Manifest.id"),
        arrays=[
            ArrayManifest(
                node_id=_required_id(array, 0, "ArrayManifest.node_id", _ID8),
                refs=[_chunk_ref(ref) for ref in array.tables(1)],
            )
            for array in root.tables(1)
        ],
    )
