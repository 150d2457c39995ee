"""Type widening: which recorded type changes a reader may honour.

Implements "Type Widening", its "Type Change Metadata" and "Reader Requirements for Type Widening"
(https://github.com/delta-io/delta/blob/master/PROTOCOL.md#type-widening). Data files written before
a widening keep their old physical type; :func:`lakeops.delta.schema.read_data_file_as_logical`
casts them to the current type. A reader must also refuse a table whose ``delta.typeChanges`` lists
a change it does not support, which :func:`check_type_changes` does before anything is read.

Writers (compaction, checkpoints) never change the schema: a rewrite writes the current, wider
type and the commit carries no ``metaData``, so ``delta.typeChanges`` stays as recorded ("Writer
Requirements for Type Widening" only allows removing it, never requires it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from lakeops.delta.schema import ArrayType, DataType, DecimalType, MapType, PrimitiveType, StructType, parse_type
from lakeops.errors import ProtocolError, UnsupportedFeature

__all__ = ["TYPE_CHANGES_KEY", "check_type_changes", "is_supported_widening"]

TYPE_CHANGES_KEY = "delta.typeChanges"

#: Integer widening (``byte`` -> ``short`` -> ``integer`` -> ``long``), by width.
_INTEGER_RANK = {"byte": 0, "short": 1, "integer": 2, "long": 3}
#: The narrowest decimal each integer type widens to: ``decimal(10 + k1, k2)`` from up to ``integer``,
#: ``decimal(20 + k1, k2)`` from ``long``, ``k1 >= k2 >= 0``.
_INTEGER_DECIMAL_DIGITS = {"byte": 10, "short": 10, "integer": 10, "long": 20}


def is_supported_widening(from_type: DataType, to_type: DataType) -> bool:
    """Whether ``from_type`` -> ``to_type`` is one of the spec's supported type changes."""
    if isinstance(from_type, PrimitiveType) and isinstance(to_type, PrimitiveType):
        src, dst = from_type.name, to_type.name
        if src in _INTEGER_RANK and dst in _INTEGER_RANK:
            return _INTEGER_RANK[src] < _INTEGER_RANK[dst]
        if dst == "double":
            return src == "float" or src in ("byte", "short", "integer")
        return (src, dst) == ("date", "timestamp_ntz")
    if isinstance(to_type, DecimalType):
        if isinstance(from_type, DecimalType):
            extra_digits = to_type.precision - from_type.precision
            extra_scale = to_type.scale - from_type.scale
            return extra_digits >= extra_scale >= 0
        if isinstance(from_type, PrimitiveType) and from_type.name in _INTEGER_DECIMAL_DIGITS:
            return to_type.precision - _INTEGER_DECIMAL_DIGITS[from_type.name] >= to_type.scale >= 0
    return False


def check_type_changes(schema: StructType, table: str) -> None:
    """Refuse (:class:`UnsupportedFeature`) a schema recording a type change lakeops cannot read
    files of, naming the table, the column and the change; a malformed record is a
    :class:`ProtocolError`."""
    for path, metadata in _fields_with_metadata(schema):
        changes = metadata.get(TYPE_CHANGES_KEY)
        if changes is None:
            continue
        if not isinstance(changes, list):
            raise ProtocolError(f"{table}: column {path}: {TYPE_CHANGES_KEY} must be a list, got {changes!r}")
        for change in changes:
            _check_change(change, f"{table}: column {path}")


def _check_change(change: Any, where: str) -> None:
    if not isinstance(change, Mapping) or "fromType" not in change or "toType" not in change:
        raise ProtocolError(f"{where}: {TYPE_CHANGES_KEY} entry needs fromType and toType: {change!r}")
    field_path = change.get("fieldPath")
    at = f"{where}{'.' + field_path if field_path else ''}"
    from_type, to_type = parse_type(change["fromType"], at), parse_type(change["toType"], at)
    if not is_supported_widening(from_type, to_type):
        raise UnsupportedFeature(
            f"{at}: type change {change['fromType']} -> {change['toType']} is not a supported type widening; "
            "refusing to read files written before it"
        )


def _fields_with_metadata(dtype: DataType, prefix: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every struct field, nested ones included (through arrays and maps), with its metadata."""
    if isinstance(dtype, StructType):
        for f in dtype.fields:
            path = f"{prefix}.{f.name}" if prefix else f.name
            yield path, f.metadata
            yield from _fields_with_metadata(f.type, path)
    elif isinstance(dtype, ArrayType):
        yield from _fields_with_metadata(dtype.element_type, f"{prefix}.element")
    elif isinstance(dtype, MapType):
        yield from _fields_with_metadata(dtype.key_type, f"{prefix}.key")
        yield from _fields_with_metadata(dtype.value_type, f"{prefix}.value")
