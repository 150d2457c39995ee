"""Delta table schemas: JSON, Arrow, and column mapping.

Implements these sections of the Delta protocol (https://github.com/delta-io/delta/blob/master/PROTOCOL.md):

* "Schema Serialization Format": primitive types (``string``, ``long``, ``integer``, ``short``,
  ``byte``, ``float``, ``double``, ``decimal(p,s)``, ``boolean``, ``binary``, ``date``,
  ``timestamp``, ``timestamp_ntz``; ``void`` is read for old tables), ``struct``, ``array``
  (``containsNull``), ``map`` (``valueContainsNull``) and per-field ``metadata``.
* "Column Mapping" with its writer and reader requirements: the mode (``none``/``name``/``id``)
  from ``delta.columnMapping.mode``, physical names (``delta.columnMapping.physicalName``) and ids
  (``delta.columnMapping.id``) of every field, nested ones included; data files are written with
  physical names and Parquet ``field_id``; they are read by physical name (name mode) or field id
  (id mode), with nulls for columns a file does not contain.

Arrow mapping: ``timestamp`` is ``timestamp("us", tz="UTC")``, ``timestamp_ntz`` is
``timestamp("us")``, ``date`` is ``date32``, ``decimal(p,s)`` is ``decimal128(p, s)``, arrays are
``list<element>`` and maps ``map<key, value>``. Field metadata travels in Arrow field metadata with
every value JSON-encoded (so ``1`` and ``"1"`` stay distinct); ``PARQUET:``/``ARROW:`` keys are
Arrow's own and never become Delta metadata.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from lakeops.delta.actions import Metadata, Protocol
from lakeops.delta.properties import COLUMN_MAPPING_MODE
from lakeops.errors import InvalidArgument, ProtocolError, UnsupportedFeature

__all__ = [
    "COLUMN_ID_KEY",
    "COLUMN_MAPPING_MODE",
    "PHYSICAL_NAME_KEY",
    "ArrayType",
    "ColumnMappingMode",
    "DataType",
    "DecimalType",
    "MapType",
    "PrimitiveType",
    "StructField",
    "StructType",
    "column_id",
    "column_mapping_mode",
    "data_schema",
    "from_arrow_type",
    "logical_to_physical",
    "parse_schema",
    "parse_type",
    "physical_arrow_schema",
    "physical_name",
    "primitive_type_names",
    "read_data_file_as_logical",
    "schema_to_json",
    "schema_to_string",
    "to_arrow_schema",
    "to_arrow_type",
    "type_to_json",
]

PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
COLUMN_ID_KEY = "delta.columnMapping.id"
_PARQUET_FIELD_ID = b"PARQUET:field_id"

ColumnMappingMode = Literal["none", "name", "id"]

PRIMITIVE_TYPE_NAMES = frozenset(
    {
        "string",
        "long",
        "integer",
        "short",
        "byte",
        "float",
        "double",
        "boolean",
        "binary",
        "date",
        "timestamp",
        "timestamp_ntz",
        "void",
        # https://github.com/delta-io/delta/blob/master/PROTOCOL.md#variant-type (table feature variantType)
        "variant",
    }
)
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


# --------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PrimitiveType:
    """A primitive type by its Delta name (``"long"``, ``"timestamp_ntz"``...)."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in PRIMITIVE_TYPE_NAMES:
            raise UnsupportedFeature(f"Delta type {self.name!r} is not supported")


@dataclass(frozen=True)
class DecimalType:
    """``decimal(precision, scale)``; precision and scale up to 38."""

    precision: int
    scale: int

    def __post_init__(self) -> None:
        if not (1 <= self.precision <= 38 and 0 <= self.scale <= self.precision):
            raise ProtocolError(f"invalid Delta type decimal({self.precision},{self.scale})")


@dataclass(frozen=True)
class ArrayType:
    element_type: DataType
    contains_null: bool = True


@dataclass(frozen=True)
class MapType:
    key_type: DataType
    value_type: DataType
    value_contains_null: bool = True


@dataclass(frozen=True)
class StructField:
    """A (possibly nested) column; ``metadata`` holds Delta's column metadata as parsed JSON."""

    name: str
    type: DataType
    nullable: bool = True
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class StructType:
    """A struct type; also the top-level table schema."""

    fields: tuple[StructField, ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for f in self.fields:
            key = f.name.lower()  # Delta (Spark) column names are case-insensitive
            if key in seen:
                raise ProtocolError(f"duplicate column name {f.name!r} in struct")
            seen.add(key)

    def __iter__(self) -> Iterator[StructField]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def get(self, name: str) -> StructField | None:
        """The field called ``name``: exact match first, then case-insensitive, as Spark does."""
        for f in self.fields:
            if f.name == name:
                return f
        lowered = name.lower()
        for f in self.fields:
            if f.name.lower() == lowered:
                return f
        return None


DataType = PrimitiveType | DecimalType | ArrayType | MapType | StructType

STRING = PrimitiveType("string")
LONG = PrimitiveType("long")
INTEGER = PrimitiveType("integer")
SHORT = PrimitiveType("short")
BYTE = PrimitiveType("byte")
FLOAT = PrimitiveType("float")
DOUBLE = PrimitiveType("double")
BOOLEAN = PrimitiveType("boolean")
BINARY = PrimitiveType("binary")
DATE = PrimitiveType("date")
TIMESTAMP = PrimitiveType("timestamp")
TIMESTAMP_NTZ = PrimitiveType("timestamp_ntz")


# --------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------


def parse_type(obj: Any, where: str = "<schema>") -> DataType:
    """A Delta type from its JSON form: a type-name string or a struct/array/map object."""
    if isinstance(obj, str):
        if obj in PRIMITIVE_TYPE_NAMES:
            return PrimitiveType(obj)
        match = _DECIMAL.match(obj)
        if match:
            return DecimalType(int(match.group(1)), int(match.group(2)))
        if obj == "decimal":
            return DecimalType(10, 0)  # Spark's default precision and scale
        raise UnsupportedFeature(f"column {where}: Delta type {obj!r} is not supported")
    if not isinstance(obj, Mapping):
        raise ProtocolError(f"column {where}: a type must be a string or an object, got {obj!r}")
    kind = obj.get("type")
    try:
        if kind == "struct":
            return _parse_struct(obj, where)
        if kind == "array":
            return ArrayType(
                parse_type(obj["elementType"], f"{where}.element"),
                bool(obj.get("containsNull", True)),
            )
        if kind == "map":
            return MapType(
                parse_type(obj["keyType"], f"{where}.key"),
                parse_type(obj["valueType"], f"{where}.value"),
                bool(obj.get("valueContainsNull", True)),
            )
    except KeyError as exc:
        raise ProtocolError(f"column {where}: {kind} type lacks {exc.args[0]!r}") from None
    raise UnsupportedFeature(f"column {where}: Delta type {kind!r} is not supported")


def _parse_struct(obj: Mapping[str, Any], where: str) -> StructType:
    raw_fields = obj.get("fields")
    if not isinstance(raw_fields, list):
        raise ProtocolError(f"column {where}: struct type lacks a 'fields' list")
    fields: list[StructField] = []
    for raw in raw_fields:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str) or "type" not in raw:
            raise ProtocolError(f"column {where}: struct field needs 'name' and 'type': {raw!r}")
        name = raw["name"]
        path = name if where == "<schema>" else f"{where}.{name}"
        metadata = raw.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise ProtocolError(f"column {path}: 'metadata' must be an object")
        fields.append(StructField(name, parse_type(raw["type"], path), bool(raw.get("nullable", True)), metadata))
    return StructType(tuple(fields))


def parse_schema(schema: str | Mapping[str, Any] | Metadata) -> StructType:
    """The table schema of a ``metaData`` action (its ``schemaString``, parsed or not)."""
    if isinstance(schema, Metadata):
        schema = schema.schema_string
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise ProtocolError(f"schemaString is not valid JSON: {exc}") from None
    parsed = parse_type(schema)
    if not isinstance(parsed, StructType):
        raise ProtocolError("schemaString must describe a struct type")
    return parsed


def type_to_json(dtype: DataType) -> str | dict[str, Any]:
    """The JSON form of a type (a string for primitives and decimals)."""
    if isinstance(dtype, PrimitiveType):
        return dtype.name
    if isinstance(dtype, DecimalType):
        return f"decimal({dtype.precision},{dtype.scale})"
    if isinstance(dtype, ArrayType):
        return {
            "type": "array",
            "elementType": type_to_json(dtype.element_type),
            "containsNull": dtype.contains_null,
        }
    if isinstance(dtype, MapType):
        return {
            "type": "map",
            "keyType": type_to_json(dtype.key_type),
            "valueType": type_to_json(dtype.value_type),
            "valueContainsNull": dtype.value_contains_null,
        }
    return {
        "type": "struct",
        "fields": [
            {
                "name": f.name,
                "type": type_to_json(f.type),
                "nullable": f.nullable,
                "metadata": dict(f.metadata),
            }
            for f in dtype.fields
        ],
    }


def schema_to_json(schema: StructType) -> dict[str, Any]:
    """The schema as a JSON object (what ``schemaString`` holds, before encoding)."""
    out = type_to_json(schema)
    assert isinstance(out, dict)
    return out


def schema_to_string(schema: StructType) -> str:
    """The ``schemaString`` of a ``metaData`` action: compact JSON, as Spark and delta-rs write."""
    return json.dumps(schema_to_json(schema), separators=(",", ":"))


# --------------------------------------------------------------------------------------------
# Arrow
# --------------------------------------------------------------------------------------------

_ARROW_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "void": pa.null(),
    # "Variant data in Parquet": the unshredded form, a struct of the two binary-encoded halves.
    "variant": pa.struct([pa.field("value", pa.binary(), False), pa.field("metadata", pa.binary(), False)]),
}

#: How a struct field becomes an Arrow field: its name and its field metadata.
_FieldNamer = Callable[[StructField], tuple[str, dict[bytes, bytes] | None]]


def _encode_metadata(metadata: Mapping[str, Any]) -> dict[bytes, bytes] | None:
    if not metadata:
        return None
    return {k.encode(): json.dumps(v, separators=(",", ":")).encode() for k, v in metadata.items()}


def _logical_namer(include_metadata: bool) -> _FieldNamer:
    def namer(f: StructField) -> tuple[str, dict[bytes, bytes] | None]:
        return f.name, _encode_metadata(f.metadata) if include_metadata else None

    return namer


def _arrow_type(dtype: DataType, namer: _FieldNamer) -> pa.DataType:
    if isinstance(dtype, PrimitiveType):
        return _ARROW_PRIMITIVES[dtype.name]
    if isinstance(dtype, DecimalType):
        return pa.decimal128(dtype.precision, dtype.scale)
    if isinstance(dtype, ArrayType):
        element = pa.field("element", _arrow_type(dtype.element_type, namer), dtype.contains_null)
        return pa.list_(element)
    if isinstance(dtype, MapType):
        key = pa.field("key", _arrow_type(dtype.key_type, namer), nullable=False)
        value = pa.field("value", _arrow_type(dtype.value_type, namer), dtype.value_contains_null)
        return pa.map_(key, value)
    return pa.struct([_arrow_field(f, namer) for f in dtype.fields])


def _arrow_field(f: StructField, namer: _FieldNamer) -> pa.Field:
    name, metadata = namer(f)
    return pa.field(name, _arrow_type(f.type, namer), f.nullable, metadata=metadata)


def to_arrow_type(dtype: DataType, *, include_metadata: bool = True) -> pa.DataType:
    """The Arrow type of a Delta type (logical names)."""
    return _arrow_type(dtype, _logical_namer(include_metadata))


def to_arrow_schema(schema: StructType, *, include_metadata: bool = True) -> pa.Schema:
    """The Arrow schema of a Delta schema (logical names; Delta metadata as JSON field metadata)."""
    namer = _logical_namer(include_metadata)
    return pa.schema([_arrow_field(f, namer) for f in schema.fields])


def _decode_metadata(metadata: Mapping[bytes, bytes] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for raw_key, raw_value in (metadata or {}).items():
        key = raw_key.decode("utf-8", "replace")
        if key.startswith(("PARQUET:", "ARROW:")):
            continue
        text = raw_value.decode("utf-8", "replace")
        try:
            out[key] = json.loads(text)
        except json.JSONDecodeError:
            out[key] = text
    return out


def from_arrow_type(arrow_type: pa.DataType, where: str = "<column>") -> DataType:
    """The Delta type of an Arrow type, widening unsigned integers losslessly.

    ``uint8``/``uint16``/``uint32`` become ``short``/``integer``/``long``; ``uint64`` has no lossless
    Delta type and is refused, as are time-of-day, duration and interval types.
    """
    t = arrow_type
    if pa.types.is_dictionary(t):
        return from_arrow_type(t.value_type, where)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return STRING
    simple = {
        pa.int8(): BYTE,
        pa.int16(): SHORT,
        pa.int32(): INTEGER,
        pa.int64(): LONG,
        pa.uint8(): SHORT,
        pa.uint16(): INTEGER,
        pa.uint32(): LONG,
        pa.float16(): FLOAT,
        pa.float32(): FLOAT,
        pa.float64(): DOUBLE,
        pa.bool_(): BOOLEAN,
        pa.date32(): DATE,
        pa.date64(): DATE,
        pa.null(): PrimitiveType("void"),
    }
    if t in simple:
        return simple[t]
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        return BINARY
    if pa.types.is_timestamp(t):
        return TIMESTAMP if t.tz is not None else TIMESTAMP_NTZ
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise UnsupportedFeature(f"column {where}: {t} exceeds Delta's decimal precision of 38")
        return DecimalType(t.precision, t.scale)
    if pa.types.is_struct(t):
        return StructType(
            tuple(_from_arrow_field(t.field(i), f"{where}.{t.field(i).name}") for i in range(t.num_fields))
        )
    if pa.types.is_map(t):
        return MapType(
            from_arrow_type(t.key_type, f"{where}.key"),
            from_arrow_type(t.item_type, f"{where}.value"),
            t.item_field.nullable,
        )
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    ):
        return ArrayType(from_arrow_type(t.value_type, f"{where}.element"), t.value_field.nullable)
    raise UnsupportedFeature(f"column {where}: Arrow type {t} has no Delta equivalent")


def _from_arrow_field(f: pa.Field, where: str) -> StructField:
    return StructField(f.name, from_arrow_type(f.type, where), f.nullable, _decode_metadata(f.metadata))


# --------------------------------------------------------------------------------------------
# Column mapping: names and ids
# --------------------------------------------------------------------------------------------


def _supports_column_mapping(protocol: Protocol) -> bool:
    """Reader version 2, or 3 with ``columnMapping`` among the reader features ("Column Mapping")."""
    if protocol.min_reader_version == 2:
        return True
    if protocol.min_reader_version >= 3:
        return "columnMapping" in (protocol.reader_features or [])
    return False


def column_mapping_mode(metadata: Metadata | Mapping[str, str], protocol: Protocol | None = None) -> ColumnMappingMode:
    """``delta.columnMapping.mode`` of a table: ``"none"`` when absent.

    With ``protocol``, the property is honoured only if the protocol supports column mapping, as
    the spec requires.
    """
    configuration = metadata.configuration if isinstance(metadata, Metadata) else metadata
    if protocol is not None and not _supports_column_mapping(protocol):
        return "none"
    mode = (configuration.get(COLUMN_MAPPING_MODE) or "none").strip().lower()
    if mode == "none":
        return "none"
    if mode == "name":
        return "name"
    if mode == "id":
        return "id"
    raise ProtocolError(f"table property {COLUMN_MAPPING_MODE}={mode!r}: expected none, name or id")


def physical_name(f: StructField, mode: ColumnMappingMode) -> str:
    """The name of ``f`` in data files, statistics and partition values."""
    if mode == "none":
        return f.name
    name = f.metadata.get(PHYSICAL_NAME_KEY)
    if not isinstance(name, str) or not name:
        raise ProtocolError(f"column {f.name!r} has no {PHYSICAL_NAME_KEY} although column mapping mode is {mode!r}")
    return name


def column_id(f: StructField) -> int | None:
    """``delta.columnMapping.id`` of ``f`` (the Parquet ``field_id`` of its column), if any."""
    raw = f.metadata.get(COLUMN_ID_KEY)
    if raw is None:
        return None
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise ProtocolError(f"column {f.name!r}: {COLUMN_ID_KEY} {raw!r} is not an integer") from None


def _require_id(f: StructField, mode: ColumnMappingMode) -> int:
    value = column_id(f)
    if value is None:
        raise ProtocolError(f"column {f.name!r} has no {COLUMN_ID_KEY} although column mapping mode is {mode!r}")
    return value


def _is_partition(name: str, partition_columns: Iterable[str]) -> bool:
    lowered = name.lower()
    return any(p == name or p.lower() == lowered for p in partition_columns)


def data_schema(schema: StructType, partition_columns: Iterable[str]) -> StructType:
    """The schema without its partition columns: what data files hold."""
    partitions = list(partition_columns)
    return StructType(tuple(f for f in schema.fields if not _is_partition(f.name, partitions)))


def _map_type(dtype: DataType, fn: Callable[[StructField], StructField]) -> DataType:
    if isinstance(dtype, StructType):
        return StructType(tuple(fn(f) for f in dtype.fields))
    if isinstance(dtype, ArrayType):
        return ArrayType(_map_type(dtype.element_type, fn), dtype.contains_null)
    if isinstance(dtype, MapType):
        return MapType(_map_type(dtype.key_type, fn), _map_type(dtype.value_type, fn), dtype.value_contains_null)
    return dtype


def primitive_type_names(dtype: DataType) -> set[str]:
    """The primitive types used anywhere in ``dtype`` (nested fields, elements, keys, values): what
    decides the type features a table needs, such as ``timestampNtz``."""
    if isinstance(dtype, PrimitiveType):
        return {dtype.name}
    if isinstance(dtype, StructType):
        return set().union(*(primitive_type_names(f.type) for f in dtype.fields))
    if isinstance(dtype, ArrayType):
        return primitive_type_names(dtype.element_type)
    if isinstance(dtype, MapType):
        return primitive_type_names(dtype.key_type) | primitive_type_names(dtype.value_type)
    return set()


def _physical_namer(mode: ColumnMappingMode) -> _FieldNamer:
    def namer(f: StructField) -> tuple[str, dict[bytes, bytes] | None]:
        if mode == "none":
            return f.name, None
        return physical_name(f, mode), {_PARQUET_FIELD_ID: str(_require_id(f, mode)).encode()}

    return namer


def physical_arrow_schema(
    schema: StructType, mode: ColumnMappingMode, *, partition_columns: Iterable[str] = ()
) -> pa.Schema:
    """The Arrow schema a data file is written with.

    Physical names; under column mapping (name *and* id mode: "Writer Requirements for Column
    Mapping" asks for the ``field_id`` regardless of mode, and Spark writes it in both) each struct
    field carries ``PARQUET:field_id``. Partition columns are left out: their values live in the
    log.
    """
    namer = _physical_namer(mode)
    return pa.schema([_arrow_field(f, namer) for f in data_schema(schema, partition_columns).fields])


# --------------------------------------------------------------------------------------------
# Data conversion: physical file <-> logical table
# --------------------------------------------------------------------------------------------

_Resolver = Callable[[StructField, pa.StructType | pa.Schema], int | None]


def _field_index_by_name(container: pa.StructType | pa.Schema, name: str) -> int | None:
    names = [container.field(i).name for i in range(_num_fields(container))]
    if name in names:
        return names.index(name)
    lowered = [n.lower() for n in names]
    return lowered.index(name.lower()) if name.lower() in lowered else None


def _num_fields(container: pa.StructType | pa.Schema) -> int:
    return len(container) if isinstance(container, pa.Schema) else int(container.num_fields)


def _field_index_by_id(container: pa.StructType | pa.Schema, wanted: int) -> int | None:
    for i in range(_num_fields(container)):
        raw = (container.field(i).metadata or {}).get(_PARQUET_FIELD_ID)
        if raw is not None and raw.strip() == str(wanted).encode():
            return i
    return None


def _read_resolver(mode: ColumnMappingMode) -> _Resolver:
    def resolve(f: StructField, container: pa.StructType | pa.Schema) -> int | None:
        if mode == "id":
            return _field_index_by_id(container, _require_id(f, mode))
        if mode == "name":
            # Physical names are exact: a case-insensitive match could pick a dropped column.
            name = physical_name(f, mode)
            names = [container.field(i).name for i in range(_num_fields(container))]
            return names.index(name) if name in names else None
        return _field_index_by_name(container, f.name)

    return resolve


def _write_resolver(f: StructField, container: pa.StructType | pa.Schema) -> int | None:
    return _field_index_by_name(container, f.name)


def _leaf_compatible(source: pa.DataType, target: pa.DataType) -> bool:
    """Casts that keep meaning: widening and representation changes, never category changes."""
    t = pa.types
    if t.is_null(source):
        return True
    if t.is_integer(target):
        return bool(t.is_integer(source))
    if t.is_floating(target):
        return bool(t.is_integer(source) or t.is_floating(source))
    if t.is_decimal(target):
        return bool(t.is_decimal(source) or t.is_integer(source))
    if t.is_date(target):
        return bool(t.is_date(source))
    if t.is_timestamp(target):
        return bool(t.is_timestamp(source) or t.is_date(source))
    textual = t.is_string(source) or t.is_large_string(source) or t.is_string_view(source)
    binary = (
        t.is_binary(source) or t.is_large_binary(source) or t.is_binary_view(source) or t.is_fixed_size_binary(source)
    )
    if t.is_string(target):
        return bool(textual or binary)  # some writers omit the UTF8 annotation; the cast validates
    if t.is_binary(target):
        return bool(textual or binary)
    if t.is_boolean(target):
        return bool(t.is_boolean(source))
    return bool(source == target)


@dataclass(frozen=True)
class _Conversion:
    resolve: _Resolver
    error: type[ProtocolError] | type[InvalidArgument]
    describe: str  # "data file x.parquet" or "input table"
    check_nullability: bool


def _mask(arr: pa.Array) -> pa.Array | None:
    return arr.is_null() if arr.null_count else None


def _convert(arr: pa.Array, dtype: DataType, target: pa.DataType, where: str, conv: _Conversion) -> pa.Array:
    """``arr`` (one chunk) as ``target``: children resolved, renamed and cast recursively."""
    source = arr.type
    if pa.types.is_dictionary(source):
        return _convert(arr.dictionary_decode(), dtype, target, where, conv)
    if pa.types.is_null(source):
        return pa.nulls(len(arr), target)
    if isinstance(dtype, StructType):
        if not pa.types.is_struct(source):
            raise conv.error(f"{conv.describe}: column {where} is {source}, expected a struct")
        children = [_child(arr, f, target.field(i), where, conv) for i, f in enumerate(dtype.fields)]
        fields = [target.field(i) for i in range(target.num_fields)]
        if not fields:
            return pa.nulls(len(arr), target) if arr.null_count == len(arr) else arr.cast(target)
        return pa.StructArray.from_arrays(children, fields=fields, mask=_mask(arr))
    if isinstance(dtype, ArrayType):
        if not (pa.types.is_list(source) or pa.types.is_large_list(source)):
            raise conv.error(f"{conv.describe}: column {where} is {source}, expected a list")
        offsets, child = _rebased(arr)
        values = _convert(child, dtype.element_type, target.value_type, f"{where}.element", conv)
        result = pa.ListArray.from_arrays(offsets, values, type=target, mask=_mask(arr))
        if conv.check_nullability and not dtype.contains_null:
            _check_no_nulls(result.flatten(), f"{where}.element", conv)
        return result
    if isinstance(dtype, MapType):
        if not pa.types.is_map(source):
            raise conv.error(f"{conv.describe}: column {where} is {source}, expected a map")
        offsets, entries = _rebased(arr)
        keys = _convert(entries.field(0), dtype.key_type, target.key_type, f"{where}.key", conv)
        items = _convert(entries.field(1), dtype.value_type, target.item_type, f"{where}.value", conv)
        result = pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=_mask(arr))
        if conv.check_nullability and not dtype.value_contains_null:
            entry = pa.struct([target.key_field, target.item_field])
            flat = result.cast(pa.list_(pa.field("entries", entry, nullable=False))).flatten()
            _check_no_nulls(flat.field(1), f"{where}.value", conv)
        return result
    if source == target:
        return arr
    if not _leaf_compatible(source, target):
        raise conv.error(f"{conv.describe}: column {where} is {source}, cannot be read as {target}")
    try:
        return pc.cast(arr, options=pc.CastOptions(target, allow_time_truncate=True))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise conv.error(f"{conv.describe}: column {where} ({source}) does not fit {target}: {exc}") from None


def _rebased(arr: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Fresh int32 offsets from 0 and the child values they cover.

    A sliced list's offsets are a view into its parent's, which pyarrow refuses to combine with a
    validity mask when rebuilding the list.
    """
    start = arr.offsets[0].as_py()
    end = arr.offsets[-1].as_py()
    offsets = pc.subtract(arr.offsets, pa.scalar(start, arr.offsets.type)).cast(pa.int32())
    return offsets, arr.values.slice(start, end - start)


def _child(parent: pa.StructArray, f: StructField, target: pa.Field, where: str, conv: _Conversion) -> pa.Array:
    path = f"{where}.{f.name}"
    index = conv.resolve(f, parent.type)
    if index is None:
        if conv.check_nullability and not f.nullable:
            raise conv.error(f"{conv.describe}: non-nullable column {path} is missing")
        return pa.nulls(len(parent), target.type)
    child = _convert(parent.field(index), f.type, target.type, path, conv)
    if conv.check_nullability and not f.nullable and child.null_count:
        # A null parent legitimately has null children; only a valid parent makes it a violation.
        hidden = pc.and_(child.is_null(), parent.is_valid())
        if pc.any(hidden).as_py():
            raise conv.error(f"{conv.describe}: non-nullable column {path} contains nulls")
    return child


def _check_no_nulls(arr: pa.Array, where: str, conv: _Conversion) -> None:
    if arr.null_count:
        raise conv.error(f"{conv.describe}: column {where} does not allow nulls but contains some")


def _convert_table(data: pa.Table, fields: tuple[StructField, ...], target: pa.Schema, conv: _Conversion) -> pa.Table:
    columns: list[pa.ChunkedArray] = []
    for i, f in enumerate(fields):
        target_field = target.field(i)
        index = conv.resolve(f, data.schema)
        if index is None:
            if conv.check_nullability and not f.nullable:
                raise conv.error(f"{conv.describe}: non-nullable column {f.name} is missing")
            columns.append(pa.chunked_array([pa.nulls(data.num_rows, target_field.type)]))
            continue
        chunks = [_convert(c, f.type, target_field.type, f.name, conv) for c in data.column(index).chunks]
        column = pa.chunked_array(chunks, type=target_field.type)
        if conv.check_nullability and not f.nullable and column.null_count:
            raise conv.error(f"{conv.describe}: non-nullable column {f.name} contains nulls")
        columns.append(column)
    if not columns:
        return data.select([])  # keeps the row count, which the caller's partition columns need
    return pa.Table.from_arrays(columns, schema=target)


def read_data_file_as_logical(
    data: pa.Table,
    schema: StructType,
    mode: ColumnMappingMode,
    *,
    partition_columns: Iterable[str] = (),
    file_path: str | None = None,
) -> pa.Table:
    """A table read from a data file, in the table's logical schema (without partition columns).

    Columns are resolved per "Reader Requirements for Column Mapping": by display name (``none``),
    physical name (``name``) or Parquet field id (``id``), recursively through structs; columns a
    file lacks become nulls; compatible physical types (``int32`` vs ``int64``, timestamp
    unit/zone, dictionary encoding, large/view variants) are cast to the schema's types. Partition
    columns are not added: their values come from the ``add`` action.
    """
    describe = f"data file {file_path}" if file_path else "data file"
    if mode == "id" and data.num_columns and _no_field_ids(data.schema):
        raise ProtocolError(
            f"{describe} has no Parquet field ids, which column mapping mode 'id' needs to resolve columns"
        )
    fields = data_schema(schema, partition_columns).fields
    target = pa.schema([_arrow_field(f, _logical_namer(False)) for f in fields])
    conv = _Conversion(_read_resolver(mode), ProtocolError, describe, False)
    return _convert_table(data, fields, target, conv)


def _no_field_ids(schema: pa.Schema) -> bool:
    return all(_PARQUET_FIELD_ID not in (f.metadata or {}) for f in schema)


def logical_to_physical(
    data: pa.Table,
    schema: StructType,
    mode: ColumnMappingMode,
    *,
    partition_columns: Iterable[str] = (),
) -> pa.Table:
    """A logical table as a data file must hold it: the inverse of :func:`read_data_file_as_logical`.

    Partition columns are dropped, columns are renamed (nested ones too) and cast to the schema's
    types, and field ids are attached (see :func:`physical_arrow_schema`). Nullable columns the
    input lacks are written as nulls; a column the schema does not know, a missing non-nullable
    column or a null in a non-nullable position raises :class:`~lakeops.errors.InvalidArgument`.
    """
    partitions = list(partition_columns)
    data_fields = data_schema(schema, partitions)
    unknown = [
        name for name in data.schema.names if data_fields.get(name) is None and not _is_partition(name, partitions)
    ]
    if unknown:
        raise InvalidArgument(f"input table has columns the table schema does not know: {unknown}")
    target = physical_arrow_schema(schema, mode, partition_columns=partitions)
    conv = _Conversion(_write_resolver, InvalidArgument, "input table", True)
    return _convert_table(data, data_fields.fields, target, conv)
