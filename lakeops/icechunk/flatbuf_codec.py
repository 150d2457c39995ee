"""Every field of a FlatBuffers table, decoded into a record and encoded back.

lakeops rewrites Icechunk format 1 and 2 metadata (expiry edits the repo object or a format 1
snapshot's parent; compaction writes manifests, a snapshot and a transaction log). Rewriting must not
drop what the writer stored, so these files are decoded whole, by a declared schema
(:mod:`lakeops.icechunk.fbs`, the ``.fbs`` files field by field), into :class:`Record`\\ s keyed by the
schema's field names, and encoded with the ``flatbuffers`` package's ``Builder``
(https://flatbuffers.dev/internals/). A table holding a field its schema does not declare (written by a
newer format) is refused, naming the file, rather than rewritten without it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import flatbuffers

from lakeops.errors import UnsupportedFeature
from lakeops.icechunk.flatbuf import Table

__all__ = [
    "Bytes",
    "Child",
    "Field",
    "Record",
    "Scalar",
    "Schema",
    "String",
    "Struct",
    "UnionOf",
    "Vector",
    "decode",
    "encode",
]

#: A decoded table: field name to value; an absent field has no key. A union field's value is a
#: ``(type code, Record)`` pair.
Record = dict[str, Any]


@dataclass(frozen=True)
class Scalar:
    """A number or bool, by its ``struct`` format character."""

    fmt: str
    default: int = 0


@dataclass(frozen=True)
class Struct:
    """A fixed-size struct, kept as its bytes (padding included)."""

    size: int
    align: int


@dataclass(frozen=True)
class String:
    pass


@dataclass(frozen=True)
class Bytes:
    """A ``[uint8]`` vector."""


@dataclass(frozen=True)
class Child:
    schema: Schema


@dataclass(frozen=True)
class Vector:
    element: Scalar | Struct | String | Child


@dataclass(frozen=True)
class UnionOf:
    """A union field: two slots, the type code (``ubyte``) then the table."""

    members: dict[int, Schema]


Kind = Scalar | Struct | String | Bytes | Child | Vector | UnionOf


@dataclass(frozen=True)
class Field:
    name: str
    kind: Kind


@dataclass(frozen=True)
class Schema:
    """A table's fields in declaration order (a union takes two slots)."""

    name: str
    fields: tuple[Field, ...]

    def slots(self) -> list[tuple[int, Field]]:
        out: list[tuple[int, Field]] = []
        slot = 0
        for field in self.fields:
            if isinstance(field.kind, UnionOf):
                slot += 1
            out.append((slot, field))
            slot += 1
        return out

    @property
    def slot_count(self) -> int:
        return sum(2 if isinstance(f.kind, UnionOf) else 1 for f in self.fields)


def decode(table: Table, schema: Schema, *, to_rewrite: bool = True) -> Record:
    """Every field of ``table``. A field ``schema`` does not know is refused when the record is read
    ``to_rewrite`` (encoding it back would drop that field), and skipped by a reader."""
    if to_rewrite:
        _refuse_unknown_fields(table, schema)
    record: Record = {}
    for slot, field in schema.slots():
        kind = field.kind
        if isinstance(kind, UnionOf):
            code = table.scalar(slot - 1, "B")
            child = table.table(slot)
            if code and child is not None:
                member = kind.members.get(code)
                if member is None:
                    raise UnsupportedFeature(
                        f"{table.path}: {schema.name}.{field.name} has union type {code}, unknown to lakeops"
                    )
                record[field.name] = (code, decode(child, member, to_rewrite=to_rewrite))
            continue
        if not table.has(slot):
            continue
        record[field.name] = _decode_value(table, slot, kind, to_rewrite)
    return record


def _decode_value(table: Table, slot: int, kind: Kind, to_rewrite: bool) -> Any:
    if isinstance(kind, Scalar):
        return table.scalar(slot, kind.fmt, kind.default)
    if isinstance(kind, Struct):
        return table.inline_bytes(slot, kind.size)
    if isinstance(kind, String):
        return table.string(slot)
    if isinstance(kind, Bytes):
        return table.byte_vector(slot)
    if isinstance(kind, Child):
        child = table.table(slot)
        return None if child is None else decode(child, kind.schema, to_rewrite=to_rewrite)
    if isinstance(kind, Vector):
        element = kind.element
        if isinstance(element, Scalar):
            return table.scalars(slot, element.fmt)
        if isinstance(element, Struct):
            return table.structs(slot, element.size)
        if isinstance(element, String):
            return table.strings(slot)
        return [decode(child, element.schema, to_rewrite=to_rewrite) for child in table.tables(slot)]
    raise AssertionError(kind)


def _refuse_unknown_fields(table: Table, schema: Schema) -> None:
    for slot in range(schema.slot_count, table.field_slots):
        if table.has(slot):
            raise UnsupportedFeature(
                f"{table.path}: {schema.name} has field {slot}, which lakeops does not know; "
                "refusing to rewrite the file without it"
            )


def encode(record: Record, schema: Schema) -> bytes:
    """The FlatBuffers bytes of ``record`` as the root table ``schema``."""
    builder = flatbuffers.Builder(1024)
    builder.Finish(_encode_table(builder, record, schema))
    return bytes(builder.Output())


def _encode_table(builder: flatbuffers.Builder, record: Record, schema: Schema) -> int:
    # Children first: a table's references must be built before the table itself starts.
    offsets: dict[str, int] = {}
    for _, field in schema.slots():
        if field.name in record and record[field.name] is not None:
            offset = _encode_reference(builder, record[field.name], field.kind)
            if offset is not None:
                offsets[field.name] = offset
    builder.StartObject(schema.slot_count)
    for slot, field in schema.slots():
        value = record.get(field.name)
        if value is None:
            continue
        kind = field.kind
        if isinstance(kind, Scalar):
            builder.PrependSlot(_flags(kind.fmt), slot, value, kind.default)
        elif isinstance(kind, Struct):
            _place_raw(builder, value, kind)
            builder.PrependStructSlot(slot, builder.Offset(), 0)
        elif isinstance(kind, UnionOf):
            builder.PrependUint8Slot(slot - 1, value[0], 0)
            builder.PrependUOffsetTRelativeSlot(slot, offsets[field.name], 0)
        else:
            builder.PrependUOffsetTRelativeSlot(slot, offsets[field.name], 0)
    end: int = builder.EndObject()
    return end


def _encode_reference(builder: flatbuffers.Builder, value: Any, kind: Kind) -> int | None:
    """The offset of an out-of-line value (string, vector, table); None for an inline one."""
    if isinstance(kind, String):
        offset: int = builder.CreateString(value)
        return offset
    if isinstance(kind, Bytes):
        offset = builder.CreateByteVector(bytes(value))
        return offset
    if isinstance(kind, Child):
        return _encode_table(builder, value, kind.schema)
    if isinstance(kind, UnionOf):
        return _encode_table(builder, value[1], kind.members[value[0]])
    if isinstance(kind, Vector):
        return _encode_vector(builder, value, kind.element)
    return None


def _encode_vector(builder: flatbuffers.Builder, values: list[Any], element: Scalar | Struct | String | Child) -> int:
    if isinstance(element, (String, Child)):
        children = [
            builder.CreateString(v) if isinstance(element, String) else _encode_table(builder, v, element.schema)
            for v in values
        ]
        builder.StartVector(4, len(children), 4)
        for child in reversed(children):
            builder.PrependUOffsetTRelative(child)
        end: int = builder.EndVector()
        return end
    if isinstance(element, Scalar):
        size = struct.calcsize(element.fmt)
        raw = struct.pack(f"<{len(values)}{element.fmt}", *values)
        builder.StartVector(size, len(values), size)
    else:
        raw = b"".join(values)
        builder.StartVector(element.size, len(values), element.align)
    _copy(builder, raw)
    end = builder.EndVector()
    return end


def _place_raw(builder: flatbuffers.Builder, raw: bytes, kind: Struct) -> None:
    builder.Prep(kind.align, kind.size)
    _copy(builder, raw)


def _copy(builder: flatbuffers.Builder, raw: bytes) -> None:
    """Put ``raw`` just below the builder's head (space already reserved by ``Prep``/``StartVector``)."""
    builder.head -= len(raw)
    builder.Bytes[builder.head : builder.head + len(raw)] = raw


_FLAGS = {
    "B": flatbuffers.number_types.Uint8Flags,
    "?": flatbuffers.number_types.BoolFlags,
    "H": flatbuffers.number_types.Uint16Flags,
    "I": flatbuffers.number_types.Uint32Flags,
    "i": flatbuffers.number_types.Int32Flags,
    "Q": flatbuffers.number_types.Uint64Flags,
    "q": flatbuffers.number_types.Int64Flags,
}


def _flags(fmt: str) -> Any:
    return _FLAGS[fmt]
