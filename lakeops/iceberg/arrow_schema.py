"""Iceberg schemas as Arrow schemas for Parquet (Appendix A "Parquet", "Data Type Mappings"; "Column
Projection").

Appendix A requires Parquet column ids and 3-level lists and maps; "Column Projection" selects file
columns by those ids. pyarrow writes a field's ``PARQUET:field_id`` metadata as the Parquet field id and
reads it back the same way, so every struct field, list element and map key/value of the Arrow schema
built here carries its Iceberg id. The Arrow types are the Arrow form of lakeops' canonical values
(``date32`` for days, ``time64[us]``, ``timestamp[us]`` with ``tz=UTC`` for timestamptz, ``timestamp[ns]``
for the v3 ``_ns`` types, ``pa.uuid()``, ``decimal128(P, S)``), and they produce Appendix A's Parquet
types when written with ``store_decimal_as_integer`` (decimal(P<=9) as int32, P<=18 as int64, else
fixed bytes of minimal length) and ``use_compliant_nested_type`` (list element named ``element``).
The element of a list is named ``element`` and a map's parts ``key``/``value``, as Parquet names them.
"""

from __future__ import annotations

import pyarrow as pa

from lakeops.errors import UnsupportedFeature
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

__all__ = ["FIELD_ID_KEY", "field_id", "to_arrow_field", "to_arrow_schema", "to_arrow_type"]

#: The Arrow field-metadata key pyarrow maps to and from the Parquet ``field_id``.
FIELD_ID_KEY = b"PARQUET:field_id"

_UTC = "UTC"
_PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "date": pa.date32(),
    "time": pa.time64("us"),
    "timestamp": pa.timestamp("us"),
    "timestamptz": pa.timestamp("us", tz=_UTC),
    "timestamp_ns": pa.timestamp("ns"),
    "timestamptz_ns": pa.timestamp("ns", tz=_UTC),
    "string": pa.string(),
    "uuid": pa.uuid(),
    "binary": pa.binary(),
    "unknown": pa.null(),
}


def field_id(field: pa.Field) -> int | None:
    """The Parquet field id an Arrow field carries, or ``None``."""
    raw = (field.metadata or {}).get(FIELD_ID_KEY)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def _field(name: str, field_id: int, type_: IcebergType, required: bool) -> pa.Field:
    return pa.field(name, to_arrow_type(type_), nullable=not required, metadata={FIELD_ID_KEY: str(field_id).encode()})


def to_arrow_type(type_: IcebergType) -> pa.DataType:
    """The Arrow type holding values of ``type_``; nested children carry their field ids."""
    if isinstance(type_, PrimitiveType):
        return _PRIMITIVES[type_.name]
    if isinstance(type_, DecimalType):
        return pa.decimal128(type_.precision, type_.scale)
    if isinstance(type_, FixedType):
        return pa.binary(type_.length)
    if isinstance(type_, ListType):
        return pa.list_(_field("element", type_.element_id, type_.element, type_.element_required))
    if isinstance(type_, MapType):
        key = _field("key", type_.key_id, type_.key, True)
        return pa.map_(key, _field("value", type_.value_id, type_.value, type_.value_required))
    if isinstance(type_, StructType):
        return pa.struct([to_arrow_field(f) for f in type_.fields])
    raise UnsupportedFeature(f"no Arrow type for Iceberg type {type_}")


def to_arrow_field(field: NestedField) -> pa.Field:
    """The Arrow field of a struct field: its name, type, id, and nullability (required → not null)."""
    return _field(field.name, field.id, field.type, field.required)


def to_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema of a table schema (or any struct): one top-level field per struct field."""
    return pa.schema([to_arrow_field(f) for f in schema.fields])
