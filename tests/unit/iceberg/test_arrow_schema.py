"""Appendix A "Parquet" type mapping: Arrow types and field ids, and the Parquet schema pyarrow writes
from them (physical and logical types, 3-level lists and maps), checked against PyIceberg's reading."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import pyarrow_to_schema
from pyiceberg.schema import Schema as PyIcebergSchema

from lakeops.iceberg.arrow_schema import field_id, to_arrow_schema, to_arrow_type
from lakeops.iceberg.data_writer import write_parquet
from lakeops.iceberg.types import IcebergType, Schema, parse_type
from lakeops.storage import open_storage

TYPES: list[tuple[str, pa.DataType]] = [
    ("boolean", pa.bool_()),
    ("int", pa.int32()),
    ("long", pa.int64()),
    ("float", pa.float32()),
    ("double", pa.float64()),
    ("decimal(9,2)", pa.decimal128(9, 2)),
    ("decimal(38,10)", pa.decimal128(38, 10)),
    ("date", pa.date32()),
    ("time", pa.time64("us")),
    ("timestamp", pa.timestamp("us")),
    ("timestamptz", pa.timestamp("us", tz="UTC")),
    ("timestamp_ns", pa.timestamp("ns")),
    ("timestamptz_ns", pa.timestamp("ns", tz="UTC")),
    ("string", pa.string()),
    ("uuid", pa.uuid()),
    ("fixed[7]", pa.binary(7)),
    ("binary", pa.binary()),
]


@pytest.mark.parametrize(("iceberg", "arrow"), TYPES)
def test_primitive_types(iceberg: str, arrow: pa.DataType) -> None:
    type_: IcebergType = parse_type(iceberg)
    assert to_arrow_type(type_) == arrow


NESTED = Schema.model_validate(
    {
        "type": "struct",
        "fields": [
            {"id": 1, "name": "id", "required": True, "type": "long"},
            {
                "id": 2,
                "name": "point",
                "required": False,
                "type": {
                    "type": "struct",
                    "fields": [
                        {"id": 3, "name": "x", "required": True, "type": "double"},
                        {
                            "id": 4,
                            "name": "tags",
                            "required": False,
                            "type": {
                                "type": "list",
                                "element-id": 5,
                                "element-required": True,
                                "element": "string",
                            },
                        },
                    ],
                },
            },
            {
                "id": 6,
                "name": "attrs",
                "required": False,
                "type": {
                    "type": "map",
                    "key-id": 7,
                    "key": "string",
                    "value-id": 8,
                    "value-required": False,
                    "value": {"type": "struct", "fields": [{"id": 9, "name": "v", "required": False, "type": "int"}]},
                },
            },
        ],
    }
)


def test_nested_fields_carry_ids_and_nullability() -> None:
    arrow = to_arrow_schema(NESTED)
    id_field, point, attrs = arrow
    assert (id_field.name, field_id(id_field), id_field.nullable) == ("id", 1, False)
    assert (field_id(point), point.nullable) == (2, True)
    x, tags = point.type
    assert (x.name, field_id(x), x.nullable) == ("x", 3, False)
    assert (tags.type.value_field.name, field_id(tags.type.value_field), tags.type.value_field.nullable) == (
        "element",
        5,
        False,
    )
    key, value = attrs.type.key_field, attrs.type.item_field
    assert (key.name, field_id(key), key.nullable) == ("key", 7, False)
    assert (value.name, field_id(value), value.nullable) == ("value", 8, True)
    assert field_id(value.type.field(0)) == 9


ALL_TYPES = Schema.model_validate(
    {
        "type": "struct",
        "fields": [
            {"id": i + 1, "name": f"c{i}", "required": i % 2 == 0, "type": name} for i, (name, _) in enumerate(TYPES)
        ],
    }
)


def _parquet_columns(path: Path) -> dict[str, tuple[str, str, int]]:
    """Leaf path → (physical type, logical type, field id) as written in the Parquet footer; the ids
    come from the footer's schema text (leaf lines, in leaf order)."""
    schema = pq.ParquetFile(path).schema
    leaf_ids = [int(m[1]) for m in re.finditer(r"field_id=(-?\d+) [^{;]*;", str(schema))]
    columns = {}
    for i in range(len(schema)):
        column = schema.column(i)
        columns[column.path] = (column.physical_type, str(column.logical_type), leaf_ids[i])
    return columns


def test_parquet_physical_and_logical_types(tmp_path: Path) -> None:
    """Appendix A's table: what a Parquet reader sees in our files."""
    location = str(tmp_path / "types.parquet")
    write_parquet(open_storage(str(tmp_path)), location, to_arrow_schema(ALL_TYPES).empty_table(), ALL_TYPES)
    columns = _parquet_columns(tmp_path / "types.parquet")
    expected_physical = {
        "boolean": "BOOLEAN",
        "int": "INT32",
        "long": "INT64",
        "float": "FLOAT",
        "double": "DOUBLE",
        "decimal(9,2)": "INT32",
        "decimal(38,10)": "FIXED_LEN_BYTE_ARRAY",
        "date": "INT32",
        "time": "INT64",
        "timestamp": "INT64",
        "timestamptz": "INT64",
        "timestamp_ns": "INT64",
        "timestamptz_ns": "INT64",
        "string": "BYTE_ARRAY",
        "uuid": "FIXED_LEN_BYTE_ARRAY",
        "fixed[7]": "FIXED_LEN_BYTE_ARRAY",
        "binary": "BYTE_ARRAY",
    }
    for i, (name, _) in enumerate(TYPES):
        physical, logical, fid = columns[f"c{i}"]
        assert (physical, fid) == (expected_physical[name], i + 1), name
        if name.startswith("decimal"):
            assert logical.startswith("Decimal(precision=" + name[8:].split(",")[0]), logical
        if name == "time":
            assert "Time(isAdjustedToUTC=false, timeUnit=microseconds" in logical
        if name.startswith("timestamp"):
            adjusted = "true" if "tz" in name else "false"
            unit = "nanoseconds" if name.endswith("_ns") else "microseconds"
            assert f"Timestamp(isAdjustedToUTC={adjusted}, timeUnit={unit}" in logical
        if name == "uuid":
            assert logical == "UUID"
        if name == "string":
            assert logical == "String"
    # decimal(38, S) uses the minimum number of bytes that can hold 38 digits: 16.
    assert pq.ParquetFile(tmp_path / "types.parquet").schema.column(6).length == 16


def test_three_level_lists_and_maps_with_ids(tmp_path: Path) -> None:
    location = str(tmp_path / "nested.parquet")
    write_parquet(open_storage(str(tmp_path)), location, to_arrow_schema(NESTED).empty_table(), NESTED)
    columns = _parquet_columns(tmp_path / "nested.parquet")
    assert {path: fid for path, (_, _, fid) in columns.items()} == {
        "id": 1,
        "point.x": 3,
        "point.tags.list.element": 5,
        "attrs.key_value.key": 7,
        "attrs.key_value.value.v": 9,
    }
    text = str(pq.ParquetFile(tmp_path / "nested.parquet").schema)
    assert "optional group field_id=4 tags (List)" in text
    assert "optional group field_id=6 attrs (Map)" in text
    assert "optional group field_id=8 value" in text


def test_pyiceberg_reads_back_our_schema(tmp_path: Path) -> None:
    """PyIceberg's own Arrow → Iceberg conversion of our file's schema is our schema (ids, types,
    required), for every v2 type and nested types."""
    v2 = Schema(fields=tuple(f for f in ALL_TYPES.fields if not str(f.type).endswith("_ns")) + NESTED.fields[1:])
    location = str(tmp_path / "oracle.parquet")
    write_parquet(open_storage(str(tmp_path)), location, to_arrow_schema(v2).empty_table(), v2)
    theirs = pyarrow_to_schema(pq.ParquetFile(location).schema_arrow)
    assert theirs == PyIcebergSchema.model_validate_json(json.dumps(v2.to_json()))
