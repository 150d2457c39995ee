"""Appendix D: binary and JSON single values, checked against the spec's examples and against PyIceberg
on a few hundred random values of every primitive type; truncated string and binary bounds.

The random values (:func:`random_values`, :data:`SOURCES`) are shared with the transform tests."""

from __future__ import annotations

import datetime as dt
import random
import struct
import uuid
from decimal import Decimal
from typing import Any

import pytest
from pydantic import TypeAdapter
from pyiceberg import conversions as pyiceberg_conversions
from pyiceberg import types as pyiceberg_types
from pyiceberg.utils import truncate as pyiceberg_truncate

from lakeops.errors import CorruptFile, InvalidArgument, UnsupportedFeature
from lakeops.iceberg.single_values import (
    canonical,
    from_bytes,
    from_json,
    to_bytes,
    to_json,
    truncate_lower,
    truncate_upper,
)
from lakeops.iceberg.types import (
    DecimalType,
    FixedType,
    IcebergType,
    ListType,
    MapType,
    PrimitiveType,
    StructType,
    parse_type,
)

_PRIMITIVES = ("boolean", "int", "long", "float", "double", "date", "time", "string", "uuid", "binary")
_SOURCE_TYPES = {name: name for name in _PRIMITIVES}
_SOURCE_TYPES |= {name: name for name in ("timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns")}
_SOURCE_TYPES |= {"fixed": "fixed[5]", "decimal": "decimal(18,3)", "decimal38": "decimal(38,10)"}
#: name → (our type, PyIceberg's type), both parsed from the spec's spelling
SOURCES: dict[str, tuple[IcebergType, Any]] = {
    name: (parse_type(text), TypeAdapter(pyiceberg_types.IcebergType).validate_python(text))
    for name, text in _SOURCE_TYPES.items()
}
#: every instant ``datetime`` can hold, so PyIceberg's datetime-based arithmetic can answer
_MICROS_RANGE = (-62_135_596_800_000_000, 253_402_300_799_999_999)


def _float32(number: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", number))[0])


def random_values(type_name: str, rng: random.Random, count: int = 300) -> list[Any]:
    """``count`` canonical values of a source type, edge cases first (floats exact in float32)."""
    draw: dict[str, Any] = {
        "boolean": lambda: rng.random() < 0.5,
        "int": lambda: rng.randint(-(2**31), 2**31 - 1),
        "long": lambda: rng.randint(-(2**63), 2**63 - 1),
        "float": lambda: _float32(rng.uniform(-1e6, 1e6)),
        "double": lambda: rng.uniform(-1e300, 1e300),
        "date": lambda: rng.randint(-719_162, 2_932_896),  # 0001-01-01 .. 9999-12-31
        "time": lambda: rng.randrange(86_400_000_000),
        "timestamp": lambda: rng.randint(*_MICROS_RANGE),
        "timestamptz": lambda: rng.randint(*_MICROS_RANGE),
        "timestamp_ns": lambda: rng.randint(-(2**63), 2**63 - 1),
        "timestamptz_ns": lambda: rng.randint(-(2**63), 2**63 - 1),
        "string": lambda: "".join(
            chr(rng.choice([rng.randint(32, 126), rng.randint(0x400, 0x4FF), 0x1F600, 0x10FFFF]))
            for _ in range(rng.randint(0, 12))
        ),
        "uuid": lambda: uuid.UUID(int=rng.getrandbits(128)),
        "fixed": lambda: rng.randbytes(5),
        "binary": lambda: rng.randbytes(rng.randint(0, 20)),
        "decimal": lambda: Decimal(f"{rng.randint(-(10**18) + 1, 10**18 - 1)}E-3"),
        "decimal38": lambda: Decimal(f"{rng.randint(-(10**38) + 1, 10**38 - 1)}E-10"),
    }
    edges: dict[str, list[Any]] = {
        "int": [0, -1, 1, -(2**31) + 7, 2**31 - 1],
        "long": [0, -1, -(2**63) + 7, 2**63 - 1],
        "double": [0.0, -0.0, 5e-324, 1.0],
        "date": [0, -1, -365, 17486],
        "time": [0, 86_399_999_999],
        "timestamp": [0, -1, 1, -3_600_000_000, -3_600_000_001],
        "timestamptz_ns": [0, -1, -999, -1000, -1001],
        "string": ["", "iceberg", "😀😀😀😀😀😀😀😀"],
        "decimal": [Decimal("0.000"), Decimal("-0.001"), Decimal("10.650"), Decimal("-1.280")],
        "decimal38": [Decimal("9999999999999999999999999999.9999999999"), Decimal("0E-10"), Decimal("1E-10")],
    }
    fixed = edges.get(type_name, [])
    return fixed + [draw[type_name]() for _ in range(count - len(fixed))]


def _p(name: str) -> PrimitiveType:
    return PrimitiveType(name=name)  # type: ignore[arg-type]


# --- binary ----------------------------------------------------------------------------------------

BINARY_CASES: list[tuple[IcebergType, Any, bytes]] = [
    (_p("boolean"), True, b"\x01"),
    (_p("boolean"), False, b"\x00"),
    (_p("int"), -2, b"\xfe\xff\xff\xff"),
    (_p("long"), 34, (34).to_bytes(8, "little")),
    (_p("float"), 1.5, b"\x00\x00\xc0\x3f"),
    (_p("double"), -0.0, b"\x00" * 7 + b"\x80"),
    (_p("date"), 17486, (17486).to_bytes(4, "little")),
    (_p("time"), 81068123456, (81068123456).to_bytes(8, "little")),
    (_p("timestamp"), -1, b"\xff" * 8),
    (_p("timestamptz"), 1510871468123456, (1510871468123456).to_bytes(8, "little")),
    (_p("timestamp_ns"), -2, b"\xfe" + b"\xff" * 7),
    (_p("string"), "iceberg😀", "iceberg😀".encode()),
    (_p("uuid"), uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), bytes.fromhex("F79C3E09677C4BBDA4793F349CB785E7")),
    (FixedType(length=3), b"\x00\x01\xff", b"\x00\x01\xff"),
    (_p("binary"), b"", b""),
    (DecimalType(precision=9, scale=2), Decimal("14.20"), b"\x05\x8c"),
    (DecimalType(precision=9, scale=2), Decimal("0.00"), b"\x00"),
    (DecimalType(precision=9, scale=2), Decimal("-1.28"), b"\x80"),
    (DecimalType(precision=9, scale=2), Decimal("1.28"), b"\x00\x80"),
    (DecimalType(precision=9, scale=2), Decimal("-1.29"), b"\xff\x7f"),
    (DecimalType(precision=38, scale=0), Decimal(10**37), (10**37).to_bytes(16, "big")),
]


@pytest.mark.parametrize(("type_", "value", "expected"), BINARY_CASES)
def test_binary_single_values_of_the_spec(type_: IcebergType, value: Any, expected: bytes) -> None:
    assert to_bytes(type_, value) == expected
    decoded = from_bytes(type_, expected)
    assert decoded == value and type(decoded) is type(value)


def test_decimals_keep_their_scale_and_need_not_carry_it() -> None:
    decimal = DecimalType(precision=9, scale=2)
    assert to_bytes(decimal, Decimal("14.2")) == to_bytes(decimal, Decimal("14.20")) == (1420).to_bytes(2, "big")
    assert to_bytes(decimal, 14) == (1400).to_bytes(2, "big")
    with pytest.raises(InvalidArgument, match="more than 2 digits after the point"):
        to_bytes(decimal, 0.1)  # a float is its binary expansion, not 0.10
    assert str(from_bytes(decimal, b"\x05\x8c")) == "14.20"
    assert str(from_bytes(DecimalType(precision=38, scale=10), (-(10**38) + 1).to_bytes(16, "big", signed=True))) == (
        "-9999999999999999999999999999.9999999999"  # all 38 digits: no rounding to 28
    )


@pytest.mark.parametrize("type_name", sorted(SOURCES))
def test_pyiceberg_reads_and_writes_the_same_bytes(type_name: str) -> None:
    ours_type, theirs_type = SOURCES[type_name]
    for value in random_values(type_name, random.Random(f"bytes-{type_name}")):
        encoded = to_bytes(ours_type, value)
        assert encoded == pyiceberg_conversions.to_bytes(theirs_type, value), (type_name, value)
        decoded = from_bytes(ours_type, encoded)
        assert decoded == value, (type_name, value)
        theirs = pyiceberg_conversions.from_bytes(theirs_type, encoded)
        assert decoded == (uuid.UUID(bytes=theirs) if type_name == "uuid" else theirs), (type_name, value)


def test_bytes_of_the_wrong_length_are_corrupt() -> None:
    with pytest.raises(CorruptFile, match="a long single value has 3 bytes, expected 8"):
        from_bytes(_p("long"), b"\x00\x00\x00")
    with pytest.raises(CorruptFile, match="a date single value has 8 bytes, expected 4"):
        from_bytes(_p("date"), bytes(8))
    with pytest.raises(CorruptFile, match="a uuid single value has 15 bytes, expected 16"):
        from_bytes(_p("uuid"), bytes(15))
    with pytest.raises(CorruptFile, match="a fixed\\[3\\] single value has 2 bytes, expected 3"):
        from_bytes(FixedType(length=3), bytes(2))
    with pytest.raises(CorruptFile, match="a boolean single value has 2 bytes, expected 1"):
        from_bytes(_p("boolean"), b"\x01\x00")
    with pytest.raises(CorruptFile, match="a decimal\\(9,2\\) single value has 0 bytes"):
        from_bytes(DecimalType(precision=9, scale=2), b"")
    with pytest.raises(CorruptFile, match="not UTF-8"):
        from_bytes(_p("string"), b"\xff")
    assert from_bytes(_p("boolean"), b"\x02") is True  # any non-zero byte is true


def test_values_a_type_cannot_hold_and_types_without_a_binary_form() -> None:
    nested: list[IcebergType] = [
        StructType(),
        ListType.model_validate({"element-id": 1, "element-required": True, "element": "int"}),
        MapType.model_validate({"key-id": 1, "key": "int", "value-id": 2, "value-required": True, "value": "int"}),
    ]
    for type_ in nested:
        with pytest.raises(UnsupportedFeature, match=f"{type_.type} values have no binary single-value form"):
            to_bytes(type_, {})
        with pytest.raises(UnsupportedFeature, match=f"{type_.type} values have no binary single-value form"):
            from_bytes(type_, b"")
    with pytest.raises(InvalidArgument, match="2147483648 is not a int value"):
        to_bytes(_p("int"), 2**31)
    with pytest.raises(InvalidArgument, match="more than 2 digits after the point for decimal\\(4,2\\)"):
        to_bytes(DecimalType(precision=4, scale=2), Decimal("1.234"))
    with pytest.raises(InvalidArgument, match="more than 4 digits for decimal\\(4,2\\)"):
        to_bytes(DecimalType(precision=4, scale=2), Decimal("123.45"))
    with pytest.raises(InvalidArgument, match="fixed\\[3\\] value has 2 bytes"):
        to_bytes(FixedType(length=3), b"ab")


# --- JSON ------------------------------------------------------------------------------------------


def _struct() -> StructType:
    return StructType.model_validate(
        {
            "fields": [
                {"id": 1, "name": "a", "required": True, "type": "int"},
                {"id": 2, "name": "b", "required": False, "type": "string"},
            ]
        }
    )


_LIST = ListType.model_validate({"element-id": 3, "element-required": True, "element": "int"})
_MAP = MapType.model_validate({"key-id": 4, "key": "string", "value-id": 5, "value-required": True, "value": "int"})


@pytest.mark.parametrize(
    ("type_", "value", "json_value"),
    [  # Appendix D's examples, each type
        (_p("boolean"), True, True),
        (_p("int"), 34, 34),
        (_p("long"), 34, 34),
        (_p("float"), 1.0, 1.0),
        (_p("double"), 1.0, 1.0),
        (DecimalType(precision=9, scale=2), Decimal("14.20"), "14.20"),
        (_p("date"), 17486, "2017-11-16"),
        (_p("time"), 81068123456, "22:31:08.123456"),
        (_p("timestamp"), 1510871468123456, "2017-11-16T22:31:08.123456"),
        (_p("timestamptz"), 1510871468123456, "2017-11-16T22:31:08.123456+00:00"),
        (_p("string"), "iceberg", "iceberg"),
        (_p("uuid"), uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), "f79c3e09-677c-4bbd-a479-3f349cb785e7"),
        (FixedType(length=4), bytes.fromhex("000102ff"), "000102ff"),
        (_p("binary"), bytes.fromhex("000102ff"), "000102ff"),
        (_struct(), {"a": 1, "b": "bar"}, {"1": 1, "2": "bar"}),
        (_LIST, [1, 2, 3], [1, 2, 3]),
        (_MAP, {"a": 1, "b": 2}, {"keys": ["a", "b"], "values": [1, 2]}),
        # and the forms the examples imply for the rest
        (DecimalType(precision=20, scale=10), Decimal("1E-10"), "0.0000000001"),
        (DecimalType(precision=9, scale=2), Decimal("-0.50"), "-0.50"),
        (DecimalType(precision=9, scale=0), Decimal("7"), "7"),
        (_p("time"), 0, "00:00:00.000000"),
        (_p("timestamp"), -1, "1969-12-31T23:59:59.999999"),
        (_p("timestamp_ns"), 1510871468123456789, "2017-11-16T22:31:08.123456789"),
        (_p("timestamptz_ns"), -1, "1969-12-31T23:59:59.999999999+00:00"),
        (_p("date"), -719_162, "0001-01-01"),
    ],
)
def test_json_single_values_of_the_spec(type_: IcebergType, value: Any, json_value: Any) -> None:
    assert to_json(type_, value) == json_value
    decoded = from_json(type_, json_value)
    assert decoded == value and str(decoded) == str(value)


def test_json_decimals_have_exactly_scale_digits_and_read_scientific_notation() -> None:
    decimal = DecimalType(precision=9, scale=2)
    assert [to_json(decimal, v) for v in (Decimal("14.2"), 14, Decimal("1E+2"))] == ["14.20", "14.00", "100.00"]
    assert from_json(DecimalType(precision=21, scale=0), "2E+20") == Decimal(2 * 10**20)  # Appendix D's example
    assert str(from_json(decimal, "14.2")) == "14.20"


def test_json_structs_leave_out_nulls_and_read_missing_fields_as_null() -> None:
    assert to_json(_struct(), {"a": 1, "b": None}) == {"1": 1}
    assert from_json(_struct(), {"1": 1}) == {"a": 1, "b": None}
    assert to_json(_LIST, []) == [] and to_json(_MAP, {}) == {"keys": [], "values": []}
    assert to_json(_p("long"), None) is None and from_json(_p("long"), None) is None


def test_json_timestamps_with_zones() -> None:
    # an offset is converted to UTC on read; Appendix B's timestamptz example is this instant
    assert from_json(_p("timestamptz"), "2017-11-16T14:31:08-08:00") == 1510871468000000
    assert from_json(_p("timestamptz"), "2017-11-16T22:31:08Z") == 1510871468000000
    assert from_json(_p("timestamptz_ns"), "2017-11-17T00:31:08.5+02:00") == 1510871468500000000
    assert from_json(_p("timestamp"), "2017-11-16T22:31") == 1510871460000000
    with pytest.raises(InvalidArgument, match="timestamp values take no offset"):
        from_json(_p("timestamp"), "2017-11-16T22:31:08+00:00")
    with pytest.raises(InvalidArgument, match="timestamptz values need a zone offset"):
        from_json(_p("timestamptz"), "2017-11-16T22:31:08")
    with pytest.raises(InvalidArgument, match="time values take no offset"):
        from_json(_p("time"), "22:31:08+01:00")


def test_malformed_json_single_values() -> None:
    cases: list[tuple[IcebergType, Any, str]] = [
        (_p("date"), "soon", "'soon' is not a JSON single value of type date"),
        (FixedType(length=2), "00", "'00' is not a JSON single value of type fixed\\[2\\]"),
        (_p("int"), True, "True is not a JSON single value of type int"),
        (_p("boolean"), 1, "1 is not a JSON single value of type boolean"),
        (_p("string"), 5, "5 is not a JSON single value of type string"),
        (_p("binary"), "xyz", "'xyz' is not a JSON single value of type binary"),
        (DecimalType(precision=4, scale=2), "1.234", "'1.234' has more than 2 digits after the point for decimal"),
        (_MAP, {"keys": ["a"], "values": []}, "is not a JSON single value of type"),
        (_p("unknown"), 1, "1 is not a JSON single value of type unknown"),
    ]
    for type_, obj, message in cases:
        with pytest.raises(InvalidArgument, match=message):
            from_json(type_, obj)
    with pytest.raises(InvalidArgument, match="86400000000 microseconds is not a time of day"):
        to_json(_p("time"), 86_400_000_000)
    with pytest.raises(InvalidArgument, match="'x' is not a int value"):
        to_json(_p("int"), "x")


_PYICEBERG_JSON = sorted(set(SOURCES) - {"timestamp_ns", "timestamptz_ns"})  # PyIceberg has no JSON for these


@pytest.mark.parametrize("type_name", sorted(SOURCES))
def test_json_round_trips_random_values(type_name: str) -> None:
    type_, _ = SOURCES[type_name]
    for value in random_values(type_name, random.Random(f"json-{type_name}")):
        assert from_json(type_, to_json(type_, value)) == value, (type_name, value)


@pytest.mark.parametrize("type_name", _PYICEBERG_JSON)
def test_pyiceberg_reads_our_json_and_we_read_its_json(type_name: str) -> None:
    ours_type, theirs_type = SOURCES[type_name]
    for value in random_values(type_name, random.Random(f"pyiceberg-json-{type_name}")):
        theirs_json = pyiceberg_conversions.to_json(theirs_type, value)
        assert from_json(ours_type, theirs_json) == value, (type_name, theirs_json)
        read_by_them = pyiceberg_conversions.from_json(theirs_type, to_json(ours_type, value))
        assert read_by_them == pyiceberg_conversions.from_json(theirs_type, theirs_json), (type_name, value)


def test_json_dates_before_the_epoch_floor() -> None:
    for micros in (-1, -86_400_000_000, -86_400_000_001):
        expected = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
        assert to_json(_p("timestamp"), micros) == expected.isoformat(timespec="microseconds")


# --- truncated bounds ------------------------------------------------------------------------------


def test_truncated_bounds() -> None:
    string = _p("string")
    assert truncate_lower(string, "abcdef", 3) == "abc"
    assert truncate_upper(string, "abcdef", 3) == "abd"
    assert truncate_upper(string, "ab", 3) == "ab" and truncate_upper(string, "abc", 3) == "abc"
    assert truncate_lower(string, "😀😀😀😀", 2) == "😀😀"  # code points, not bytes
    assert truncate_upper(string, "a\U0010ffff\U0010ffffz", 3) == "b"  # carries past maximal code points
    assert truncate_upper(string, "\U0010ffff" * 4, 3) is None
    assert truncate_upper(string, "a\ud7ffz", 2) == "a\ue000"  # skips the surrogate range
    assert truncate_upper(_p("binary"), b"\x01\xff\xff\x00", 3) == b"\x02"
    assert truncate_upper(_p("binary"), b"\xff\xff\x00", 2) is None
    assert truncate_lower(_p("binary"), b"\xff\xff\x00", 2) == b"\xff\xff"
    assert truncate_lower(_p("long"), 5, 1) == 5 and truncate_upper(FixedType(length=3), b"abc", 1) == b"abc"
    with pytest.raises(InvalidArgument, match="width must be positive, got 0"):
        truncate_upper(string, "abc", 0)


@pytest.mark.parametrize("type_name", ["string", "binary"])
def test_truncated_bounds_still_bound_and_match_pyiceberg(type_name: str) -> None:
    type_, _ = SOURCES[type_name]
    theirs = {
        "string": pyiceberg_truncate.truncate_upper_bound_text_string,
        "binary": pyiceberg_truncate.truncate_upper_bound_binary_string,
    }[type_name]
    maximal: Any = "\U0010ffff" if type_name == "string" else b"\xff"
    for value in random_values(type_name, random.Random(f"bounds-{type_name}"), 500):
        for width in (1, 3, 16):
            lower, upper = truncate_lower(type_, value, width), truncate_upper(type_, value, width)
            assert len(lower) <= width and lower <= value
            assert upper is None or (len(upper) <= width and upper >= value)
            if maximal not in value[:width]:  # PyIceberg keeps maximal elements where we drop them
                assert upper == theirs(value, width), (value, width)


# --- canonical values ------------------------------------------------------------------------------


def test_canonical_values_from_arrow_statistics_and_avro_forms() -> None:
    decimal = DecimalType(precision=9, scale=2)
    utc_instant = dt.datetime(2017, 11, 16, 14, 31, 8, tzinfo=dt.timezone(dt.timedelta(hours=-8)))
    spec_uuid = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
    cases: list[tuple[IcebergType, Any, Any]] = [
        (_p("date"), dt.date(2017, 11, 16), 17486),
        (_p("date"), dt.date(1969, 12, 31), -1),
        (_p("time"), dt.time(22, 31, 8, 123456), 81068123456),
        (_p("timestamp"), dt.datetime(2017, 11, 16, 22, 31, 8, 123456), 1510871468123456),
        (_p("timestamp"), dt.datetime(1969, 12, 31, 23, 59, 59, 999999), -1),
        (_p("timestamptz"), utc_instant, 1510871468000000),  # Appendix B's example instant
        (_p("timestamptz_ns"), utc_instant, 1510871468000000000),
        (_p("uuid"), bytes.fromhex("f79c3e09677c4bbda4793f349cb785e7"), spec_uuid),
        (_p("uuid"), "F79C3E09-677C-4BBD-A479-3F349CB785E7", spec_uuid),
        (_p("binary"), bytearray(b"\x00\x01"), b"\x00\x01"),
        (_MAP, [("a", 1), ("b", 2)], {"a": 1, "b": 2}),
        (_struct(), {"a": 1}, {"a": 1, "b": None}),
    ]
    for type_, value, expected in cases:
        result = canonical(type_, value)
        assert result == expected and type(result) is type(expected), (type_, value)
    assert str(canonical(decimal, Decimal("14.2"))) == "14.20" and str(canonical(decimal, 3)) == "3.00"
    assert canonical(_p("long"), None) is None


@pytest.mark.parametrize("type_name", sorted(SOURCES))
def test_canonical_values_come_back_unchanged(type_name: str) -> None:
    type_, _ = SOURCES[type_name]
    values = random_values(type_name, random.Random(f"canonical-{type_name}"), 100)
    assert [canonical(type_, v) for v in values] == values
