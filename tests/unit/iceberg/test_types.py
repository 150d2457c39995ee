"""Iceberg types and schemas round-trip the spec's JSON (Appendix C)."""

from __future__ import annotations

import pytest

from lakeops.errors import ProtocolError
from lakeops.iceberg.types import DecimalType, FixedType, ListType, MapType, PrimitiveType, Schema, StructType

SCHEMA = {
    "type": "struct",
    "schema-id": 3,
    "identifier-field-ids": [1],
    "fields": [
        {"id": 1, "name": "id", "required": True, "type": "long"},
        {"id": 2, "name": "price", "required": False, "type": "decimal(9,2)", "doc": "in EUR"},
        {
            "id": 3,
            "name": "points",
            "required": False,
            "type": {
                "type": "list",
                "element-id": 5,
                "element-required": False,
                "element": {
                    "type": "struct",
                    "fields": [
                        {"id": 6, "name": "key", "required": True, "type": "fixed[16]", "initial-default": "AA=="}
                    ],
                },
            },
        },
        {
            "id": 4,
            "name": "tags",
            "required": False,
            "type": {
                "type": "map",
                "key-id": 7,
                "key": "string",
                "value-id": 8,
                "value-required": True,
                "value": "timestamptz",
            },
        },
    ],
}


def test_schema_round_trips_the_spec_json() -> None:
    schema = Schema.model_validate(SCHEMA)
    assert schema.to_json() == SCHEMA
    assert schema.schema_id == 3 and schema.identifier_field_ids == (1,)
    assert schema.fields[1].type == DecimalType(precision=9, scale=2)
    assert schema.fields[2].type.element.fields[0].initial_default == "AA=="  # type: ignore[union-attr]


def test_decimal_with_spaces_and_fixed_parse() -> None:
    schema = Schema.model_validate(
        {"type": "struct", "fields": [{"id": 1, "name": "d", "required": True, "type": "decimal(38, 10)"}]}
    )
    assert schema.fields[0].type == DecimalType(precision=38, scale=10)
    assert schema.to_json()["fields"][0]["type"] == "decimal(38,10)"
    assert schema.schema_id == 0  # Appendix E: v1 schemas without an id are schema 0


def test_fields_by_id_indexes_nested_fields_with_parquet_names() -> None:
    index = Schema.model_validate(SCHEMA).fields_by_id()
    assert index[6] == (("points", "element", "key"), FixedType(length=16), True)
    assert index[7] == (("tags", "key"), PrimitiveType(name="string"), True)
    assert index[8][0] == ("tags", "value")
    assert isinstance(index[3][1], ListType) and isinstance(index[4][1], MapType)
    assert Schema.model_validate(SCHEMA).highest_field_id() == 8


def test_duplicate_field_ids_are_refused_naming_both_fields() -> None:
    schema = Schema(
        fields=(
            {"id": 1, "name": "a", "required": True, "type": "int"},  # type: ignore[arg-type]
            {"id": 1, "name": "b", "required": True, "type": {"type": "struct", "fields": []}},  # type: ignore[arg-type]
        )
    )
    assert isinstance(schema.fields[1].type, StructType)
    with pytest.raises(ProtocolError, match="field id 1 is used by both a and b"):
        schema.fields_by_id()


@pytest.mark.parametrize(
    ("bad", "message"),
    [("varchar", "unknown Iceberg type 'varchar'"), ({"type": "union"}, "unknown Iceberg nested type 'union'")],
)
def test_unknown_types_are_refused_by_name(bad: object, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        Schema.model_validate({"type": "struct", "fields": [{"id": 1, "name": "a", "required": True, "type": bad}]})


def test_decimal_precision_above_38_is_invalid() -> None:
    with pytest.raises(ValueError, match="38"):
        DecimalType(precision=39, scale=0)
