"""Chunk manifest files (spec "Chunk Manifest Files"; Rust ``format/manifest.rs`` at f460a56).

A manifest file is the MessagePack array ``[format_version, format_flags, chunks]``; ``chunks``
maps ``[node_id, [i0, i1, ...]]`` (an array used as a map key) to an externally tagged
``ChunkPayload``:

* ``{"Inline": <bin>}`` — the chunk bytes themselves;
* ``{"Virtual": [{"Absolute": "<url>"}, offset, length]}`` — a byte range of a file outside the
  repository (this Icechunk version has no checksum field);
* ``{"Ref": [chunk_id, offset, length]}`` — a byte range of ``chunks/<chunk_id>``.

The map is a Rust ``BTreeMap<(NodeId, ChunkIndices), _>``, so entries are sorted by node id, then
indices lexicographically; :func:`encode_manifest` writes them in that order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from lakeops.icechunk.encoding import Decoder, json_value, pack, unpack

MANIFEST_FORMAT_VERSION = 0

ChunkIndices = tuple[int, ...]
ChunkKey = tuple[int, ChunkIndices]


@dataclass(frozen=True, slots=True)
class InlineChunk:
    """``ChunkPayload::Inline``."""

    data: bytes


@dataclass(frozen=True, slots=True)
class VirtualChunkRef:
    """``ChunkPayload::Virtual``: ``length`` bytes at ``offset`` of ``location`` (outside the repository)."""

    location: str
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class ChunkRef:
    """``ChunkPayload::Ref``: ``length`` bytes at ``offset`` of the repository's ``chunks/<id>``."""

    id: str
    offset: int
    length: int


ChunkPayload = InlineChunk | VirtualChunkRef | ChunkRef


@dataclass(frozen=True, slots=True)
class Manifest:
    format_version: int
    format_flags: Mapping[str, Any]
    chunks: Mapping[ChunkKey, ChunkPayload]

    def chunks_of(self, node_id: int) -> Iterator[tuple[ChunkIndices, ChunkPayload]]:
        """The node's (indices, payload) pairs, in file order."""
        for (node, indices), payload in self.chunks.items():
            if node == node_id:
                yield indices, payload


def decode_manifest(data: bytes, path: str) -> Manifest:
    """The manifest in ``data`` read from ``path``.

    Raises :class:`~lakeops.errors.UnsupportedFeature` naming an unknown format version and
    :class:`~lakeops.errors.CorruptFile` naming the file and entry for anything malformed.
    """
    d = Decoder(path, "manifest")
    top = d.array(unpack(data, path, "manifest"), "Manifest")
    if not top:
        d.fail("Manifest", "empty array")
    version = d.version(top[0], MANIFEST_FORMAT_VERSION)
    d.array(top, "Manifest", 3)
    chunks: dict[ChunkKey, ChunkPayload] = {}
    for raw_key, raw_payload in d.map(top[2], "chunks").items():
        where = f"chunks[{raw_key!r}]"
        node, indices = d.array(raw_key, f"{where} key", 2)
        key = (d.integer(node, f"{where} node id"), d.integers(indices, f"{where} chunk indices"))
        chunks[key] = _payload(d, raw_payload, where)
    return Manifest(version, json_value(d.map(top[1], "format_flags")), chunks)


def _payload(d: Decoder, raw: Any, where: str) -> ChunkPayload:
    kind, value = d.variant(raw, where)
    if kind == "Inline":
        return InlineChunk(d.binary(value, f"{where}.Inline"))
    if kind == "Ref":
        chunk_id, offset, length = d.array(value, f"{where}.Ref", 3)
        return ChunkRef(
            d.object_id(chunk_id, f"{where}.Ref.id", "chunk id"),
            d.integer(offset, f"{where}.Ref.offset"),
            d.integer(length, f"{where}.Ref.length"),
        )
    if kind == "Virtual":
        location, offset, length = d.array(value, f"{where}.Virtual", 3)
        location_kind, url = d.variant(location, f"{where}.Virtual.location")
        if location_kind != "Absolute":
            d.fail(f"{where}.Virtual.location", f"unknown virtual chunk location kind {location_kind!r}")
        return VirtualChunkRef(
            d.text(url, f"{where}.Virtual.location"),
            d.integer(offset, f"{where}.Virtual.offset"),
            d.integer(length, f"{where}.Virtual.length"),
        )
    d.fail(where, f"unknown chunk payload variant {kind!r}")


def encode_manifest(manifest: Manifest) -> bytes:
    """The file bytes of ``manifest``, entries in ``BTreeMap`` order (node id, then indices)."""
    chunks = {key: _payload_tree(manifest.chunks[key]) for key in sorted(manifest.chunks)}
    flags = {k: manifest.format_flags[k] for k in sorted(manifest.format_flags)}
    return pack([manifest.format_version, flags, chunks])


def _payload_tree(payload: ChunkPayload) -> dict[str, Any]:
    if isinstance(payload, InlineChunk):
        return {"Inline": payload.data}
    if isinstance(payload, ChunkRef):
        return {"Ref": [payload.id, payload.offset, payload.length]}
    return {"Virtual": [{"Absolute": payload.location}, payload.offset, payload.length]}
