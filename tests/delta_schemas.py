"""Delta schemas built from Arrow schemas, and column mapping's logical → physical names of every field,
for tests (:mod:`lakeops.delta.schema` has the rules)."""

from __future__ import annotations

import pyarrow as pa

from lakeops.delta import schema as rules
from lakeops.delta.schema import ArrayType, ColumnMappingMode, DataType, MapType, StructField, StructType, physical_name


def from_arrow_schema(schema: pa.Schema) -> StructType:
    """The Delta schema of an Arrow schema (see :func:`lakeops.delta.schema.from_arrow_type` for the type rules)."""
    return StructType(tuple(rules._from_arrow_field(f, f.name) for f in schema))


def physical_schema(schema: StructType, mode: ColumnMappingMode) -> StructType:
    """``schema`` with every field, nested ones included, renamed to its physical name."""

    def rename(f: StructField) -> StructField:
        return StructField(physical_name(f, mode), rules._map_type(f.type, rename), f.nullable, f.metadata)

    result = rules._map_type(schema, rename)
    assert isinstance(result, StructType)
    return result


def physical_paths(schema: StructType, mode: ColumnMappingMode) -> dict[tuple[str, ...], tuple[str, ...]]:
    """Logical path → physical path of every field, nested ones included.

    Array elements and map keys/values appear as the path components ``"element"``, ``"key"`` and
    ``"value"``, which column mapping never renames.
    """
    out: dict[tuple[str, ...], tuple[str, ...]] = {}

    def walk(dtype: DataType, logical: tuple[str, ...], physical: tuple[str, ...]) -> None:
        if isinstance(dtype, StructType):
            for f in dtype.fields:
                lp, pp = (*logical, f.name), (*physical, physical_name(f, mode))
                out[lp] = pp
                walk(f.type, lp, pp)
        elif isinstance(dtype, ArrayType):
            walk(dtype.element_type, (*logical, "element"), (*physical, "element"))
        elif isinstance(dtype, MapType):
            walk(dtype.key_type, (*logical, "key"), (*physical, "key"))
            walk(dtype.value_type, (*logical, "value"), (*physical, "value"))

    walk(schema, (), ())
    return out
