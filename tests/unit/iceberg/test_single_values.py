"""Appendix D: binary and JSON single values, checked against the spec's examples and PyIceberg."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pytest
from pyiceberg import conversions as pyiceberg_conversions
from pyiceberg import types as pyiceberg_types

from lakeops.errors import CorruptFile, InvalidArgument, UnsupportedFeature
from lakeops.iceberg.single_values import from_bytes, from_json, to_bytes, to_json, truncate_lower, truncate_upper
from lakeops.iceberg.types import DecimalType, FixedType, IcebergType, ListType, MapType, PrimitiveType, StructType


def _p(name: str) -> PrimitiveType:
    return PrimitiveType(name=name)  # type: ignore[arg-type]


BINARY_CASES: list[tuple[IcebergType, Any, Any, bytes]] = [
    (_p("boolean"), True, pyiceberg_types.BooleanType(), b"\x01"),
    (_p("int"), -2, pyiceberg_types.IntegerType(), b"\xfe\xff\xff\xff"),
    (_p("long"), 34, pyiceberg_types.LongType(), (34).to_bytes(8, "little")),
    (_p("float"), 1.5, pyiceberg_types.FloatType(), b"\x00\x00\xc0\x3f"),
    (_p("double"), -0.0, pyiceberg_types.DoubleType(), b"\x00" * 7 + b"\x80"),
    (_p("date"), 17486, pyiceberg_types.DateType(), (17486).to_bytes(4, "little")),
    (_p("time"), 81068123456, pyiceberg_types.TimeType(), (81068123456).to_bytes(8, "little")),
    (_p("timestamp"), -1, pyiceberg_types.TimestampType(), b"\xff" * 8),
    (_p("timestamptz"), 1510871468123456, pyiceberg_types.TimestamptzType(), (1510871468123456).to_bytes(8, "little")),
    (_p("string"), "iceberg😀", pyiceberg_types.StringType(), "iceberg😀".encode()),
    (
        _p("uuid"),
        uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"),
        pyiceberg_types.UUIDType(),
        bytes.fromhex("F79C3E09677C4BBDA4793F349CB785E7"),
    ),
    (FixedType(length=3), b"\x00\x01\xff", pyiceberg_types.FixedType(3), b"\x00\x01\xff"),
    (_p("binary"), b"", pyiceberg_types.BinaryType(), b""),
    (DecimalType(precision=9, scale=2), Decimal("14.20"), pyiceberg_types.DecimalType(9, 2), b"\x05\x8c"),
    (DecimalType(precision=9, scale=2), Decimal("-1.28"), pyiceberg_types.DecimalType(9, 2), b"\x80"),
    (DecimalType(precision=9, scale=2), Decimal("1.28"), pyiceberg_types.DecimalType(9, 2), b"\x00\x80"),
    (
        DecimalType(precision=38, scale=0),
        Decimal(10**37),
        pyiceberg_types.DecimalType(38, 0),
        (10**37).to_bytes(16, "big"),
    ),
]


@pytest.mark.parametrize(("type_", "value", "theirs", "expected"), BINARY_CASES)
def test_binary_single_values_match_the_spec_and_pyiceberg(
    type_: IcebergType, value: Any, theirs: Any, expected: bytes
) -> None:
    encoded = to_bytes(type_, value)
    assert encoded == expected
    assert from_bytes(type_, encoded) == value
    # PyIceberg decodes our bytes and encodes its value to the same bytes.
    assert pyiceberg_conversions.to_bytes(theirs, pyiceberg_conversions.from_bytes(theirs, encoded)) == encoded


def test_corrupt_lengths_and_unsupported_types() -> None:
    with pytest.raises(CorruptFile, match="a long single value has 3 bytes, expected 8"):
        from_bytes(_p("long"), b"\x00\x00\x00")
    with pytest.raises(CorruptFile, match="uuid single value has 15 bytes"):
        from_bytes(_p("uuid"), bytes(15))
    with pytest.raises(CorruptFile, match="not UTF-8"):
        from_bytes(_p("string"), b"\xff")
    with pytest.raises(UnsupportedFeature, match="struct values have no binary single-value form"):
        to_bytes(StructType(fields=()), {})


@pytest.mark.parametrize(
    ("type_", "value", "json_value"),
    [
        (_p("boolean"), True, True),
        (_p("int"), 34, 34),
        (_p("double"), 1.0, 1.0),
        (DecimalType(precision=9, scale=2), Decimal("14.20"), "14.20"),
        (DecimalType(precision=20, scale=10), Decimal("1E-10"), "0.0000000001"),
        (_p("date"), 17486, "2017-11-16"),
        (_p("time"), 81068123456, "22:31:08.123456"),
        (_p("timestamp"), 1510871468123456, "2017-11-16T22:31:08.123456"),
        (_p("timestamptz"), 1510871468123456, "2017-11-16T22:31:08.123456+00:00"),
        (_p("timestamp_ns"), 1510871468123456789, "2017-11-16T22:31:08.123456789"),
        (_p("string"), "iceberg", "iceberg"),
        (_p("uuid"), uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), "f79c3e09-677c-4bbd-a479-3f349cb785e7"),
        (FixedType(length=4), bytes.fromhex("000102ff"), "000102ff"),
        (_p("binary"), bytes.fromhex("000102ff"), "000102ff"),
    ],
)
def test_json_single_values_of_the_spec(type_: IcebergType, value: Any, json_value: Any) -> None:
    assert to_json(type_, value) == json_value
    assert from_json(type_, json_value) == value


def test_json_nested_values_and_zones() -> None:
    struct = StructType.model_validate(
        {
            "fields": [
                {"id": 1, "name": "a", "required": True, "type": "int"},
                {"id": 2, "name": "b", "required": False, "type": "string"},
            ]
        }
    )
    assert to_json(struct, {"a": 1, "b": "bar"}) == {"1": 1, "2": "bar"}
    assert from_json(struct, {"1": 1, "2": "bar"}) == {"a": 1, "b": "bar"}
    list_type = ListType.model_validate({"element-id": 3, "element-required": True, "element": "long"})
    assert to_json(list_type, [1, 2, 3]) == [1, 2, 3]
    map_type = MapType.model_validate(
        {"key-id": 4, "key": "string", "value-id": 5, "value-required": True, "value": "date"}
    )
    assert to_json(map_type, {"a": 0, "b": 1}) == {"keys": ["a", "b"], "values": ["1970-01-01", "1970-01-02"]}
    assert from_json(map_type, {"keys": ["a", "b"], "values": ["1970-01-01", "1970-01-02"]}) == {"a": 0, "b": 1}
    # An offset is converted to UTC on read.
    assert from_json(_p("timestamptz"), "2017-11-16T14:31:08-08:00") == 1510871468000000
    with pytest.raises(InvalidArgument, match="'soon' is not a JSON single value of type date"):
        from_json(_p("date"), "soon")
    with pytest.raises(InvalidArgument, match="not a JSON single value of type fixed\\[2\\]"):
        from_json(FixedType(length=2), "00")


def test_truncated_bounds() -> None:
    string = _p("string")
    assert truncate_lower(string, "abcdef", 3) == "abc"
    assert truncate_upper(string, "abcdef", 3) == "abd"
    assert truncate_upper(string, "ab", 3) == "ab"
    assert truncate_upper(string, "a\U0010ffff\U0010ffffz", 3) == "b"  # carries past maximal code points
    assert truncate_upper(string, "\U0010ffff" * 4, 3) is None
    assert truncate_upper(string, "a\ud7ffz", 2) == "a\ue000"  # skips the surrogate range
    assert truncate_upper(_p("binary"), b"\x01\xff\xff\x00", 3) == b"\x02"
    assert truncate_upper(_p("binary"), b"\xff\xff\x00", 2) is None
    assert truncate_lower(_p("long"), 5, 1) == 5
