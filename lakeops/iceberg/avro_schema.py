"""Iceberg types as Avro schemas and values as Avro data, and the Avro files manifests and manifest
lists are stored in (Appendix A "Avro": "Data Type Mappings" and "Field IDs").

Writing: optional fields are ``["null", T]`` unions defaulting to null; record fields carry
``field-id``, arrays ``element-id``; string-keyed maps are Avro maps with ``key-id``/``value-id``,
other maps arrays of ``key``/``value`` records with logical type ``map``. Avro wants every named type
defined once per schema and names matching ``[A-Za-z_][A-Za-z0-9_]*``, so types are named as the
reference implementation names them (records ``r<field id>``, map entries ``k<key id>_v<value id>``,
``decimal_P_S``, ``uuid_fixed``, ``fixed_L``; a repeated type is referenced by name) and field names
are escaped as it escapes them, which lets both Java and PyIceberg read our files.

Reading resolves fields by id, never by name: the spec and writers disagree on names (Java still
writes ``added_data_files_count`` for id 504), ids are what Appendix A makes binding. Values are read
*as stored* (the logical types are dropped from the file's schema before decoding) and converted to
lakeops' canonical values with the Iceberg type, so a date stays its day number and a timestamp its
microseconds, with no calendar round trip that could overflow or lose precision.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import fastavro

from lakeops.errors import CorruptFile, NotFound, ProtocolError, UnsupportedFeature
from lakeops.iceberg.single_values import decimal_from_unscaled, decimal_unscaled
from lakeops.iceberg.types import (
    DecimalType,
    FixedType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    PrimitiveType,
    StructType,
)
from lakeops.storage import Storage
from lakeops.storage.uri import normalize

__all__ = [
    "AvroFile",
    "avro_name",
    "avro_schema",
    "decimal_size",
    "field_schema",
    "from_avro",
    "read_avro",
    "struct_from_avro",
    "to_avro",
    "write_avro",
]

_PRIMITIVES: dict[str, Any] = {
    "boolean": "boolean",
    "int": "int",
    "long": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "bytes",
    "date": {"type": "int", "logicalType": "date"},
    "time": {"type": "long", "logicalType": "time-micros"},
    "timestamp": {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": False},
    "timestamptz": {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": True},
    "timestamp_ns": {"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": False},
    "timestamptz_ns": {"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": True},
}
_PLAIN_FROM_AVRO = {"boolean": "boolean", "float": "float", "double": "double", "string": "string", "bytes": "binary"}
_TIMESTAMP_FROM_AVRO: dict[tuple[Any, bool], str] = {
    ("timestamp-micros", False): "timestamp",
    ("timestamp-micros", True): "timestamptz",
    ("timestamp-nanos", False): "timestamp_ns",
    ("timestamp-nanos", True): "timestamptz_ns",
}

#: The Avro object container header (Avro specification, "Object Container Files").
_HEADER = fastavro.parse_schema(
    {
        "type": "record",
        "name": "org.apache.avro.file.Header",
        "fields": [
            {"name": "magic", "type": {"type": "fixed", "name": "Magic", "size": 4}},
            {"name": "meta", "type": {"type": "map", "values": "bytes"}},
            {"name": "sync", "type": {"type": "fixed", "name": "Sync", "size": 16}},
        ],
    }
)
_MAGIC = b"Obj\x01"


def decimal_size(precision: int) -> int:
    """minBytesRequired(P): the fewest bytes whose two's complement holds every P-digit number."""
    size = 1
    while 2 ** (8 * size - 1) <= 10**precision - 1:
        size += 1
    return size


def avro_name(name: str) -> str:
    """An Avro-legal name for an Iceberg field name: a leading digit gets a ``_`` prefix, any other
    illegal character becomes ``_x`` and its code point in upper-case hex (``my-col`` → ``my_x2Dcol``)."""
    out = []
    for i, char in enumerate(name):
        if char == "_" or (char.isascii() and (char.isalpha() or (i > 0 and char.isdigit()))):
            out.append(char)
        elif i == 0 and char.isascii() and char.isdigit():
            out.append("_" + char)
        else:
            out.append(f"_x{ord(char):X}")
    return "".join(out)


def _is_string(type_: IcebergType) -> bool:
    return isinstance(type_, PrimitiveType) and type_.name == "string"


class _SchemaBuilder:
    """One schema's worth of names: a named type is defined at its first use, referenced after."""

    def __init__(self) -> None:
        self._defined: set[str] = set()

    def _named(self, definition: dict[str, Any]) -> Any:
        if definition["name"] in self._defined:
            return definition["name"]
        self._defined.add(definition["name"])
        return definition

    def record(self, struct: StructType, name: str) -> dict[str, Any]:
        fields = []
        for f in struct.fields:
            inner = self.type(f.type, f"r{f.id}")
            field: dict[str, Any] = {"name": avro_name(f.name), "type": inner if f.required else ["null", inner]}
            if not f.required:
                field["default"] = None
            if f.doc:
                field["doc"] = f.doc
            field["field-id"] = f.id
            fields.append(field)
        return {"type": "record", "name": name, "fields": fields}

    def type(self, type_: IcebergType, name: str) -> Any:
        if isinstance(type_, PrimitiveType):
            if type_.name == "uuid":
                return self._named({"type": "fixed", "name": "uuid_fixed", "size": 16, "logicalType": "uuid"})
            if type_.name not in _PRIMITIVES:
                raise UnsupportedFeature(f"Iceberg type {type_} has no Avro representation")
            avro = _PRIMITIVES[type_.name]
            return dict(avro) if isinstance(avro, dict) else avro
        if isinstance(type_, DecimalType):
            p, s = type_.precision, type_.scale
            return self._named(
                {
                    "type": "fixed",
                    "name": f"decimal_{p}_{s}",
                    "size": decimal_size(p),
                    "logicalType": "decimal",
                    "precision": p,
                    "scale": s,
                }
            )
        if isinstance(type_, FixedType):
            return self._named({"type": "fixed", "name": f"fixed_{type_.length}", "size": type_.length})
        if isinstance(type_, StructType):
            return self.record(type_, name)
        if isinstance(type_, ListType):
            element = self.type(type_.element, f"r{type_.element_id}")
            items = element if type_.element_required else ["null", element]
            return {"type": "array", "items": items, "element-id": type_.element_id}
        if not isinstance(type_, MapType):
            raise UnsupportedFeature(f"Iceberg type {type_} has no Avro representation")
        value = self.type(type_.value, f"r{type_.value_id}")
        value = value if type_.value_required else ["null", value]
        if _is_string(type_.key):
            return {"type": "map", "values": value, "key-id": type_.key_id, "value-id": type_.value_id}
        entry = {
            "type": "record",
            "name": f"k{type_.key_id}_v{type_.value_id}",
            "fields": [
                {"name": "key", "type": self.type(type_.key, f"r{type_.key_id}"), "field-id": type_.key_id},
                {"name": "value", "type": value, "field-id": type_.value_id},
            ],
        }
        return {"type": "array", "logicalType": "map", "items": entry}


def avro_schema(struct: StructType, name: str) -> dict[str, Any]:
    """The Avro record schema of ``struct``, named ``name``, with the ids Appendix A asks for."""
    return _SchemaBuilder().record(struct, name)


def to_avro(type_: IcebergType, value: Any) -> Any:
    """The Avro datum of a canonical value for a schema made by :func:`avro_schema`: structs are
    dicts keyed by field name, decimals fixed-size two's complement, uuids 16 bytes, maps with
    non-string keys lists of key/value records."""
    if value is None:
        return None
    if isinstance(type_, StructType):
        return {avro_name(f.name): to_avro(f.type, value.get(f.name)) for f in type_.fields}
    if isinstance(type_, ListType):
        return [to_avro(type_.element, v) for v in value]
    if isinstance(type_, MapType):
        if _is_string(type_.key):
            return {k: to_avro(type_.value, v) for k, v in value.items()}
        return [{"key": to_avro(type_.key, k), "value": to_avro(type_.value, v)} for k, v in value.items()]
    if isinstance(type_, DecimalType):
        return decimal_unscaled(type_, value).to_bytes(decimal_size(type_.precision), "big", signed=True)
    if isinstance(type_, PrimitiveType) and type_.name == "uuid":
        return (value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))).bytes
    return value


def _resolve(writer: Any, named: Mapping[str, Any]) -> Any:
    """The non-null branch of an optional union, with a named-type reference replaced by its definition."""
    if isinstance(writer, list):
        writer = next((branch for branch in writer if branch != "null"), "null")
    if isinstance(writer, str):
        return named.get(writer, writer)
    return writer


def _fields_by_id(record: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    return {f["field-id"]: f for f in record["fields"] if "field-id" in f}


def field_schema(record: Mapping[str, Any], field_id: int, named: Mapping[str, Any]) -> Any:
    """The Avro schema of the field of ``record`` with id ``field_id`` (an optional union's non-null
    branch, a named reference resolved), or None if the record has no such field."""
    field = _fields_by_id(record).get(field_id)
    return None if field is None else _resolve(field["type"], named)


def from_avro(type_: IcebergType, writer: Any, datum: Any, named: Mapping[str, Any]) -> Any:
    """The canonical value of ``datum`` (decoded as stored, see :func:`read_avro`) read as ``type_``.

    ``writer`` is the datum's Avro schema in the file; struct fields, map keys and values are matched
    by field id, and a field the file does not have reads as None. ``named`` resolves named-type
    references (:attr:`AvroFile.named`).
    """
    if datum is None:
        return None
    writer = _resolve(writer, named)
    if isinstance(type_, StructType):
        by_id = _fields_by_id(writer)
        out = {}
        for f in type_.fields:
            field = by_id.get(f.id)
            out[f.name] = None if field is None else from_avro(f.type, field["type"], datum.get(field["name"]), named)
        return out
    if isinstance(type_, ListType):
        return [from_avro(type_.element, writer["items"], v, named) for v in datum]
    if isinstance(type_, MapType):
        if writer["type"] == "map":
            return {k: from_avro(type_.value, writer["values"], v, named) for k, v in datum.items()}
        entry = _fields_by_id(_resolve(writer["items"], named))
        key, value = entry[type_.key_id], entry[type_.value_id]
        return {
            from_avro(type_.key, key["type"], e[key["name"]], named): from_avro(
                type_.value, value["type"], e[value["name"]], named
            )
            for e in datum
        }
    if isinstance(type_, DecimalType):
        return decimal_from_unscaled(type_, int.from_bytes(datum, "big", signed=True))
    if isinstance(type_, PrimitiveType) and type_.name == "uuid":
        return uuid.UUID(bytes=datum) if isinstance(datum, bytes) else uuid.UUID(datum)
    return datum


def _primitive_from_avro(avro: Any, where: str) -> IcebergType:
    attributes: Mapping[str, Any] = {"type": avro} if isinstance(avro, str) else avro
    kind, logical = attributes.get("type"), attributes.get("logicalType")
    name: str | None = None
    if kind == "fixed":
        if logical == "decimal":
            return DecimalType(precision=avro["precision"], scale=avro.get("scale", 0))
        if logical == "uuid":
            name = "uuid"
        else:
            return FixedType(length=avro["size"])
    elif kind == "int":
        name = "date" if logical == "date" else "int"
    elif kind == "long":
        if logical == "time-micros":
            name = "time"
        else:
            name = _TIMESTAMP_FROM_AVRO.get((logical, bool(attributes.get("adjust-to-utc"))), "long")
    elif kind == "string":
        name = "uuid" if logical == "uuid" else "string"
    elif isinstance(kind, str):
        name = _PLAIN_FROM_AVRO.get(kind)
    if name is None:
        raise UnsupportedFeature(f"{where}: Avro type {json.dumps(avro)} is not an Iceberg primitive")
    return PrimitiveType(name=name)  # type: ignore[arg-type]


def struct_from_avro(record: Mapping[str, Any], named: Mapping[str, Any], where: str) -> StructType:
    """The Iceberg struct of an Avro record of primitives (a manifest's partition tuple), read from
    the ids and logical types the file declares; ``where`` names the file in errors."""
    fields = []
    for f in record["fields"]:
        if "field-id" not in f:
            raise ProtocolError(f"{where}: Avro field {f['name']!r} of record {record.get('name')!r} has no field-id")
        optional = isinstance(f["type"], list) and "null" in f["type"]
        type_ = _primitive_from_avro(_resolve(f["type"], named), where)
        fields.append(NestedField(id=f["field-id"], name=f["name"], required=not optional, type=type_))
    return StructType(fields=tuple(fields))


def _named_types(schema: Any) -> dict[str, Any]:
    """Every named type a schema defines, by short name and by full name."""
    found: dict[str, Any] = {}

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for branch in node:
                walk(branch)
            return
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        if kind in ("record", "fixed", "enum") and "name" in node:
            found[node["name"]] = node
            if node.get("namespace"):
                found[f"{node['namespace']}.{node['name']}"] = node
        if kind == "record":
            for field in node.get("fields", ()):
                walk(field.get("type"))
        elif kind == "array":
            walk(node.get("items"))
        elif kind == "map":
            walk(node.get("values"))
        else:
            walk(kind)

    walk(schema)
    return found


def _without_logical_types(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_without_logical_types(s) for s in schema]
    if isinstance(schema, dict):
        return {k: _without_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    return schema


@dataclass(frozen=True)
class AvroFile:
    """An opened Avro file: its length in bytes, key-value metadata (UTF-8 strings), schema as written
    (with field ids and logical types), the named types that schema defines, and its records, decoded
    lazily with the values as stored (no logical-type conversion)."""

    length: int
    metadata: dict[str, str]
    schema: dict[str, Any]
    named: dict[str, Any]
    records: Iterator[dict[str, Any]]


def _guarded(records: Iterator[dict[str, Any]], what: str) -> Iterator[dict[str, Any]]:
    try:
        yield from records
    except Exception as exc:  # fastavro reports damaged blocks with many exception types
        raise CorruptFile(f"{what} is truncated or corrupt ({type(exc).__name__}: {exc})") from exc


def _check_records(schema: Any) -> None:
    """ValueError unless every record in ``schema`` has a list of fields, each with a name and a type.
    fastavro reads a record without ``fields`` as an empty one, which the field-id lookups of a
    manifest reader would then trip over far from the file that caused it."""
    if isinstance(schema, list):
        for branch in schema:
            _check_records(branch)
    elif isinstance(schema, dict):
        if schema.get("type") == "record":
            fields = schema.get("fields")
            if not isinstance(fields, list) or not all(
                isinstance(f, dict) and "name" in f and "type" in f for f in fields
            ):
                raise ValueError(
                    f"its schema has a record {schema.get('name')!r} without a list of named, typed fields"
                )
            for field in fields:
                _check_records(field["type"])
        else:
            for key in ("items", "values", "type"):
                if isinstance(schema.get(key), (dict, list)):
                    _check_records(schema[key])


def read_avro(
    storage: Storage, location: str, what: str, *, project: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> AvroFile:
    """Open the Avro file at ``location``. ``what`` names it in errors ("manifest s3://…/m0.avro
    (listed in …)"): :class:`NotFound` if it is missing, :class:`CorruptFile` if its bytes do not
    decode (raised while iterating :attr:`AvroFile.records` for damage past the header). ``location``
    is an Iceberg path: literal, never percent-decoded.

    ``project`` maps the file's schema (as stored, without logical types) to a reader schema of a
    subset of its fields (Avro "Schema Resolution"): records then hold only those, and the decoder
    skips the rest without building them (a manifest's metrics maps are most of its bytes)."""
    try:
        payload = storage.read(normalize(location, literal=True))
    except NotFound as exc:
        raise NotFound(f"{what} does not exist ({exc})") from exc
    try:
        buffer = io.BytesIO(payload)
        header = cast(dict[str, Any], fastavro.schemaless_reader(buffer, _HEADER))
        if header["magic"] != _MAGIC:
            raise ValueError(f"starts with {header['magic']!r}, not the Avro magic {_MAGIC!r}")
        raw_meta: dict[str, bytes] = header["meta"]
        schema = json.loads(raw_meta["avro.schema"])
        if not (isinstance(schema, dict) and schema.get("type") == "record"):
            raise ValueError("its schema is not a record, as every Iceberg Avro file's is")
        _check_records(schema)
        stored = {**raw_meta, "avro.schema": json.dumps(_without_logical_types(schema)).encode()}
        rewritten = io.BytesIO()
        fastavro.schemaless_writer(rewritten, _HEADER, {**header, "meta": stored})
        body = io.BytesIO(rewritten.getvalue() + payload[buffer.tell() :])
        if project is None:
            reader = fastavro.reader(body)
        else:
            reader = fastavro.reader(body, reader_schema=project(_without_logical_types(schema)))
    except Exception as exc:  # fastavro reports damaged headers with many exception types
        raise CorruptFile(f"{what} is not a readable Avro file ({type(exc).__name__}: {exc})") from exc
    metadata = {key: value.decode("utf-8", errors="replace") for key, value in raw_meta.items()}
    return AvroFile(
        len(payload),
        metadata,
        schema,
        _named_types(schema),
        _guarded(cast(Iterator[dict[str, Any]], iter(reader)), what),
    )


def write_avro(
    storage: Storage,
    location: str,
    schema: dict[str, Any],
    records: list[dict[str, Any]],
    metadata: dict[str, str],
) -> int:
    """Create the Avro file (deflate-compressed, as the reference implementation writes) with
    put-if-absent, so an existing file is never replaced; returns its length in bytes.

    Records are Avro data (:func:`to_avro`); one that does not fit the schema raises the encoder's
    ``ValueError``/``TypeError`` and nothing is written.
    """
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(schema), records, metadata=metadata, codec="deflate")
    payload = buffer.getvalue()
    storage.put_if_absent(normalize(location, literal=True), payload)  # an Iceberg path: literal
    return len(payload)
