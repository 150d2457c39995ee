"""Snapshot files (spec "Snapshot Files"; Rust ``format/snapshot.rs`` at f460a56).

A snapshot file is the MessagePack array of ``struct Snapshot``'s 11 fields, in this order::

    [format_version, format_flags, manifest_files, attribute_files, total_parents,
     short_term_parents, short_term_history, metadata, started_at, properties, nodes]

``manifest_files`` holds ``[manifest_id, format_version]``; ``metadata`` and each history entry are
``[snapshot_id, written_at, message]``; ``nodes`` maps a path to ``[node_id, path, user_attributes,
node_data]`` where ``user_attributes`` is nil, ``{"Inline": <json>}`` or ``{"Ref": [attributes_id,
offset]}`` and ``node_data`` is ``"Group"`` or ``{"Array": [zarr_metadata, [[manifest_id,
extents], ...]]}``. ``zarr_metadata`` is ``[shape, data_type, chunk_shape, chunk_key_encoding,
{"<FillType>": value}, [[codec_name, configuration], ...], storage_transformers,
dimension_names]``.

There is no parent field: the parent is the newest entry of ``short_term_history`` (the child's
copy of its parent's ``metadata``). The embedded ``metadata.id`` need not equal the file's name
(the test repository's initial snapshot differs), so callers resolve parents by embedded id.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lakeops.errors import InvalidArgument, UnsupportedFeature
from lakeops.icechunk.encoding import Decoder, Single, format_timestamp, json_value, pack, unpack

SNAPSHOT_FORMAT_VERSION = 0
CHUNK_KEY_ENCODINGS = ("Slash", "Dot", "Default")

#: Zarr data type -> the ``FillValue`` variant Icechunk pairs with it.
FILL_VALUE_KINDS = {
    "bool": "Bool",
    "int8": "Int8",
    "int16": "Int16",
    "int32": "Int32",
    "int64": "Int64",
    "uint8": "UInt8",
    "uint16": "UInt16",
    "uint32": "UInt32",
    "uint64": "UInt64",
    "float16": "Float16",
    "float32": "Float32",
    "float64": "Float64",
    "complex64": "Complex64",
    "complex128": "Complex128",
}
_RAW_BITS = re.compile(r"r[1-9][0-9]*")
_SINGLE_KINDS = frozenset({"Float16", "Float32", "Complex64"})  # stored as Rust f32


@dataclass(frozen=True, slots=True)
class SnapshotMetadata:
    id: str
    written_at: datetime
    message: str


@dataclass(frozen=True, slots=True)
class ManifestFileInfo:
    id: str
    format_version: int = 0


@dataclass(frozen=True, slots=True)
class AttributeFileInfo:
    id: str
    format_version: int = 0


@dataclass(frozen=True, slots=True)
class InlineUserAttributes:
    """``UserAttributesSnapshot::Inline``: the node's Zarr attributes as JSON."""

    attributes: Any


@dataclass(frozen=True, slots=True)
class UserAttributesRef:
    """``UserAttributesSnapshot::Ref``: attributes stored at ``location`` in an attribute file."""

    object_id: str
    location: int


UserAttributesSnapshot = InlineUserAttributes | UserAttributesRef


@dataclass(frozen=True, slots=True)
class Codec:
    """A Zarr codec or storage transformer: ``[name, configuration]``."""

    name: str
    configuration: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class FillValue:
    """``FillValue::<kind>(value)``; complex values are ``(re, im)``, ``RawBits`` bytes."""

    kind: str
    value: Any


@dataclass(frozen=True, slots=True)
class ZarrArrayMetadata:
    """The array's Zarr v3 metadata. On disk ``chunk_key_encoding`` comes before ``fill_value`` (see the
    module docs); here it follows, so that the common fields can have defaults."""

    shape: tuple[int, ...]
    data_type: str
    chunk_shape: tuple[int, ...]
    fill_value: FillValue
    chunk_key_encoding: str = "Slash"
    codecs: tuple[Codec, ...] = (Codec("bytes", {"endian": "little"}),)
    storage_transformers: tuple[Codec, ...] | None = ()
    dimension_names: tuple[str | None, ...] | None = None

    @property
    def chunk_grid(self) -> tuple[int, ...]:
        """Chunks per dimension: valid chunk indices are ``0 <= i < grid`` in each."""
        return tuple(math.ceil(s / c) for s, c in zip(self.shape, self.chunk_shape, strict=True))

    def check_indices(self, indices: tuple[int, ...], path: str) -> tuple[int, ...]:
        """``indices`` if they name a chunk of this grid, else InvalidArgument naming the array ``path``."""
        grid = self.chunk_grid
        if len(indices) != len(grid) or any(not 0 <= i < n for i, n in zip(indices, grid, strict=True)):
            raise InvalidArgument(f"chunk indices {list(indices)} are outside the chunk grid {list(grid)} of {path!r}")
        return indices


@dataclass(frozen=True, slots=True)
class ManifestRef:
    object_id: str
    extents: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class GroupData:
    """``NodeData::Group``."""


@dataclass(frozen=True, slots=True)
class ArrayData:
    """``NodeData::Array``: the Zarr metadata and the manifests holding the array's chunks."""

    metadata: ZarrArrayMetadata
    manifests: tuple[ManifestRef, ...] = ()


NodeData = GroupData | ArrayData


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    id: int
    path: str
    user_attributes: UserAttributesSnapshot | None
    node_data: NodeData

    @property
    def is_array(self) -> bool:
        return isinstance(self.node_data, ArrayData)


@dataclass(frozen=True, slots=True)
class Snapshot:
    format_version: int
    format_flags: Mapping[str, Any]
    manifest_files: tuple[ManifestFileInfo, ...]
    attribute_files: tuple[AttributeFileInfo, ...]
    total_parents: int
    short_term_parents: int
    short_term_history: tuple[SnapshotMetadata, ...]
    metadata: SnapshotMetadata
    started_at: datetime
    properties: Mapping[str, Any]
    nodes: Mapping[str, NodeSnapshot] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """The embedded id: what children name as their parent (not necessarily the file name)."""
        return self.metadata.id

    @property
    def parent_id(self) -> str | None:
        return self.short_term_history[0].id if self.short_term_history else None


def node_path(path: str) -> str:
    """The canonical node path: ``group1/a`` and ``/group1/a/`` are both ``/group1/a``; ``/`` is the root.

    Raises :class:`~lakeops.errors.InvalidArgument` for empty, ``.`` or ``..`` segments.
    """
    parts = path.strip("/").split("/") if path.strip("/") else []
    if any(part in ("", ".", "..") for part in parts):
        raise InvalidArgument(f"node path {path!r} has an empty, '.' or '..' segment")
    return "/" + "/".join(parts)


def path_sort_key(path: str) -> tuple[str, ...]:
    """Rust's ``Path`` order (component by component), which is the order of the ``nodes`` map."""
    return tuple(part for part in path.split("/") if part)


# -- decoding ------------------------------------------------------------------------------------


def decode_snapshot(data: bytes, path: str) -> Snapshot:
    """The snapshot in ``data`` read from ``path``.

    Raises :class:`~lakeops.errors.UnsupportedFeature` naming an unknown format version, data
    type, fill value or chunk key encoding, and :class:`~lakeops.errors.CorruptFile` naming the file
    and field for anything malformed.
    """
    d = Decoder(path, "snapshot")
    top = d.array(unpack(data, path, "snapshot"), "Snapshot")
    if not top:
        d.fail("Snapshot", "empty array")
    version = d.version(top[0], SNAPSHOT_FORMAT_VERSION)
    d.array(top, "Snapshot", 11)
    nodes: dict[str, NodeSnapshot] = {}
    for key, raw in d.map(top[10], "nodes").items():
        node = _node(d, raw, f"nodes[{key!r}]")
        if node.path != key:
            d.fail(f"nodes[{key!r}]", f"node path {node.path!r} differs from its key")
        nodes[node.path] = node
    return Snapshot(
        format_version=version,
        format_flags=json_value(d.map(top[1], "format_flags")),
        manifest_files=tuple(
            ManifestFileInfo(*_id_and_version(d, v, f"manifest_files[{i}]", "manifest id"))
            for i, v in enumerate(d.array(top[2], "manifest_files"))
        ),
        attribute_files=tuple(
            AttributeFileInfo(*_id_and_version(d, v, f"attribute_files[{i}]", "attributes id"))
            for i, v in enumerate(d.array(top[3], "attribute_files"))
        ),
        total_parents=d.integer(top[4], "total_parents"),
        short_term_parents=d.integer(top[5], "short_term_parents"),
        short_term_history=tuple(
            _metadata(d, v, f"short_term_history[{i}]") for i, v in enumerate(d.array(top[6], "short_term_history"))
        ),
        metadata=_metadata(d, top[7], "metadata"),
        started_at=d.timestamp(top[8], "started_at"),
        properties=json_value(d.map(top[9], "properties")),
        nodes=nodes,
    )


def _id_and_version(d: Decoder, raw: Any, where: str, role: str) -> tuple[str, int]:
    item = d.array(raw, where, 2)
    return d.object_id(item[0], f"{where}.id", role), d.integer(item[1], f"{where}.format_version")


def _metadata(d: Decoder, raw: Any, where: str) -> SnapshotMetadata:
    item = d.array(raw, where, 3)
    return SnapshotMetadata(
        id=d.object_id(item[0], f"{where}.id", "snapshot id"),
        written_at=d.timestamp(item[1], f"{where}.written_at"),
        message=d.text(item[2], f"{where}.message"),
    )


def _node(d: Decoder, raw: Any, where: str) -> NodeSnapshot:
    item = d.array(raw, where, 4)
    path = d.text(item[1], f"{where}.path")
    if not path.startswith("/"):
        d.fail(f"{where}.path", f"node path {path!r} is not absolute")
    return NodeSnapshot(
        id=d.integer(item[0], f"{where}.id"),
        path=path,
        user_attributes=None if item[2] is None else _user_attributes(d, item[2], f"{where}.user_attributes"),
        node_data=_node_data(d, item[3], f"{where}.node_data"),
    )


def _user_attributes(d: Decoder, raw: Any, where: str) -> UserAttributesSnapshot:
    kind, payload = d.variant(raw, where)
    if kind == "Inline":
        return InlineUserAttributes(json_value(payload))
    if kind == "Ref":
        ref = d.array(payload, f"{where}.Ref", 2)
        return UserAttributesRef(
            d.object_id(ref[0], f"{where}.Ref.object_id", "attributes id"), d.integer(ref[1], f"{where}.Ref.location")
        )
    d.fail(where, f"unknown user attributes variant {kind!r}")


def _node_data(d: Decoder, raw: Any, where: str) -> NodeData:
    kind, payload = d.variant(raw, where)
    if kind == "Group" and payload is None:
        return GroupData()
    if kind != "Array":
        d.fail(where, f"unknown node kind {kind!r}")
    meta, refs = d.array(payload, f"{where}.Array", 2)
    manifests = []
    for i, ref_raw in enumerate(d.array(refs, f"{where}.manifests")):
        ref = d.array(ref_raw, f"{where}.manifests[{i}]", 2)
        extents = d.array(ref[1], f"{where}.manifests[{i}].extents")
        manifests.append(
            ManifestRef(
                d.object_id(ref[0], f"{where}.manifests[{i}].object_id", "manifest id"),
                tuple(d.integers(e, f"{where}.manifests[{i}].extents[{j}]") for j, e in enumerate(extents)),
            )
        )
    return ArrayData(_zarr_metadata(d, meta, f"{where}.zarr_metadata"), tuple(manifests))


def _zarr_metadata(d: Decoder, raw: Any, where: str) -> ZarrArrayMetadata:
    item = d.array(raw, where, 8)
    shape = d.integers(item[0], f"{where}.shape")
    chunk_shape = d.integers(item[2], f"{where}.chunk_shape")
    if len(shape) != len(chunk_shape) or any(c <= 0 for c in chunk_shape):
        d.fail(f"{where}.chunk_shape", f"chunk shape {chunk_shape} does not fit array shape {shape}")
    data_type = d.text(item[1], f"{where}.data_type")
    if data_type not in FILL_VALUE_KINDS and not _RAW_BITS.fullmatch(data_type):
        raise UnsupportedFeature(f"{d.path}: {where}.data_type {data_type!r} is not a Zarr v3 data type we support")
    encoding = d.text(item[3], f"{where}.chunk_key_encoding")
    if encoding not in CHUNK_KEY_ENCODINGS:
        raise UnsupportedFeature(f"{d.path}: {where}.chunk_key_encoding {encoding!r} is not supported")
    names = item[7]
    return ZarrArrayMetadata(
        shape=shape,
        data_type=data_type,
        chunk_shape=chunk_shape,
        chunk_key_encoding=encoding,
        fill_value=_fill_value(d, item[4], data_type, f"{where}.fill_value"),
        codecs=_codecs(d, item[5], f"{where}.codecs"),
        storage_transformers=None if item[6] is None else _codecs(d, item[6], f"{where}.storage_transformers"),
        dimension_names=None
        if names is None
        else tuple(
            None if n is None else d.text(n, f"{where}.dimension_names[{i}]")
            for i, n in enumerate(d.array(names, f"{where}.dimension_names"))
        ),
    )


def _codecs(d: Decoder, raw: Any, where: str) -> tuple[Codec, ...]:
    codecs = []
    for i, codec_raw in enumerate(d.array(raw, where)):
        name, config = d.array(codec_raw, f"{where}[{i}]", 2)
        codecs.append(
            Codec(d.text(name, f"{where}[{i}].name"), None if config is None else json_value(d.map(config, where)))
        )
    return tuple(codecs)


def _fill_value(d: Decoder, raw: Any, data_type: str, where: str) -> FillValue:
    kind, value = d.variant(raw, where)
    expected = "RawBits" if _RAW_BITS.fullmatch(data_type) else FILL_VALUE_KINDS[data_type]
    if kind != expected:
        d.fail(where, f"fill value {kind!r} does not match data type {data_type!r} (expected {expected!r})")
    if kind == "Bool":
        if not isinstance(value, bool):
            d.fail(where, f"expected a boolean, got {value!r}")
    elif kind.startswith(("Int", "UInt")):
        value = d.integer(value, where)
    elif kind.startswith("Float"):
        if isinstance(value, bool) or not isinstance(value, float | int):
            d.fail(where, f"expected a number, got {value!r}")
        value = float(value)
    elif kind.startswith("Complex"):
        re_, im = d.array(value, where, 2)
        value = (float(re_), float(im))
    else:  # RawBits: serde writes Vec<u8> as an array of small ints
        value = d.binary(value, where) if isinstance(value, bytes) else bytes(d.integers(value, where))
    return FillValue(kind, value)


# -- encoding ------------------------------------------------------------------------------------


def encode_snapshot(snapshot: Snapshot) -> bytes:
    """The file bytes of ``snapshot``, laid out as Icechunk's ``rmp-serde`` does (see module docs).

    Maps that are ``BTreeMap`` in Rust (flags, nodes, inline JSON attributes) are written in
    sorted order; ``HashMap`` ones (properties, codec configurations) in their own order.
    """
    nodes = sorted(snapshot.nodes.values(), key=lambda n: path_sort_key(n.path))
    return pack(
        [
            snapshot.format_version,
            _sorted_json(dict(snapshot.format_flags)),
            [[m.id, m.format_version] for m in snapshot.manifest_files],
            [[a.id, a.format_version] for a in snapshot.attribute_files],
            snapshot.total_parents,
            snapshot.short_term_parents,
            [_metadata_tree(m) for m in snapshot.short_term_history],
            _metadata_tree(snapshot.metadata),
            format_timestamp(snapshot.started_at),
            dict(snapshot.properties),
            {node.path: _node_tree(node) for node in nodes},
        ]
    )


def _metadata_tree(meta: SnapshotMetadata) -> list[Any]:
    return [meta.id, format_timestamp(meta.written_at), meta.message]


def _sorted_json(value: Any) -> Any:
    """serde_json's default ``Map`` is a BTreeMap: objects come out with sorted keys."""
    if isinstance(value, Mapping):
        return {k: _sorted_json(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [_sorted_json(v) for v in value]
    return value


def _node_tree(node: NodeSnapshot) -> list[Any]:
    attributes: Any
    if node.user_attributes is None:
        attributes = None
    elif isinstance(node.user_attributes, InlineUserAttributes):
        attributes = {"Inline": _sorted_json(node.user_attributes.attributes)}
    else:
        attributes = {"Ref": [node.user_attributes.object_id, node.user_attributes.location]}
    data: Any
    if isinstance(node.node_data, GroupData):
        data = "Group"
    else:
        meta = node.node_data.metadata
        data = {
            "Array": [
                [
                    list(meta.shape),
                    meta.data_type,
                    list(meta.chunk_shape),
                    meta.chunk_key_encoding,
                    {meta.fill_value.kind: _fill_tree(meta.fill_value)},
                    _codecs_tree(meta.codecs),
                    None if meta.storage_transformers is None else _codecs_tree(meta.storage_transformers),
                    None if meta.dimension_names is None else list(meta.dimension_names),
                ],
                [[ref.object_id, [list(e) for e in ref.extents]] for ref in node.node_data.manifests],
            ]
        }
    return [node.id, node.path, attributes, data]


def _codecs_tree(codecs: tuple[Codec, ...]) -> list[Any]:
    return [[c.name, None if c.configuration is None else dict(c.configuration)] for c in codecs]


def _fill_tree(fill: FillValue) -> Any:
    if fill.kind in _SINGLE_KINDS:
        if fill.kind == "Complex64":
            return [Single(fill.value[0]), Single(fill.value[1])]
        return Single(fill.value)
    if fill.kind == "Complex128":
        return list(fill.value)
    if fill.kind == "RawBits":
        return list(fill.value)
    return fill.value
