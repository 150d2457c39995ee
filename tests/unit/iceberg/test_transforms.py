"""Partition transforms: Appendix B's hash test values, the spec's truncate examples, floor semantics
before 1970, transform strings, and PyIceberg as the oracle on random values of every source type
(values, result types, human strings); the Arrow form agrees with the value form, nulls included."""

from __future__ import annotations

import datetime as dt
import random
import struct
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg import transforms as pyiceberg_transforms
from unit.iceberg.test_single_values import SOURCES, random_values

from lakeops.errors import InvalidArgument, ProtocolError, UnsupportedFeature
from lakeops.iceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
    bucket_hash,
    parse_transform,
)
from lakeops.iceberg.types import DecimalType, FixedType, IcebergType, PrimitiveType, StructType


def _p(name: str) -> PrimitiveType:
    return PrimitiveType(name=name)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("type_", "value", "expected"),
    [
        (_p("int"), 34, 2017239379),
        (_p("long"), 34, 2017239379),
        (DecimalType(precision=4, scale=2), Decimal("14.20"), -500754589),
        (_p("date"), 17486, -653330422),  # 2017-11-16
        (_p("time"), 81068000000, -662762989),  # 22:31:08
        (_p("timestamp"), 1510871468000000, -2047944441),  # 2017-11-16T22:31:08
        (_p("timestamptz"), 1510871468000000, -2047944441),  # 2017-11-16T14:31:08-08:00
        (_p("string"), "iceberg", 1210000089),
        (_p("uuid"), uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), 1488055340),
        (FixedType(length=4), bytes([0, 1, 2, 3]), -188683207),
        (_p("binary"), bytes([0, 1, 2, 3]), -188683207),
        (_p("boolean"), True, 1392991556),
        (_p("float"), 1.0, -142385009),
        (_p("float"), 0.0, 1669671676),
        (_p("float"), -0.0, 1669671676),
        (_p("double"), 1.0, -142385009),
        (_p("double"), 0.0, 1669671676),
        (_p("double"), -0.0, 1669671676),
    ],
)
def test_appendix_b_hash_values(type_: IcebergType, value: Any, expected: int) -> None:
    assert bucket_hash(type_, value) == expected


def test_appendix_b_timestamptz_example_is_the_utc_instant() -> None:
    instant = dt.datetime.fromisoformat("2017-11-16T14:31:08-08:00")
    micros = (instant - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
    assert bucket_hash(_p("timestamptz"), micros) == -2047944441


def test_nan_is_canonical_and_nanosecond_timestamps_hash_as_micros() -> None:
    nan_bits = [0x7FF8000000000001, 0xFFF8000000000000, 0x7FF0000000000F00]
    nans = [float("nan")] + [struct.unpack("<d", bits.to_bytes(8, "little"))[0] for bits in nan_bits]
    assert {bucket_hash(_p("double"), nan) for nan in nans} == {bucket_hash(_p("float"), float("nan"))}
    assert bucket_hash(_p("double"), float("nan")) != bucket_hash(_p("double"), 0.0)
    assert bucket_hash(_p("timestamp_ns"), 1510871468000000123) == -2047944441
    assert bucket_hash(_p("timestamptz_ns"), -1) == bucket_hash(_p("timestamptz"), -1)  # floored, not truncated
    with pytest.raises(UnsupportedFeature, match="have no Appendix B hash"):
        bucket_hash(StructType(), {})


def test_bucket_drops_the_sign_bit_before_the_modulus() -> None:
    # hash("iceberg") is positive, hash(34 as date) negative: -653330422 & 0x7FFFFFFF = 1494153226
    assert BucketTransform(100).apply(_p("date"), 17486) == 1494153226 % 100
    assert BucketTransform(16).apply(_p("string"), "iceberg") == 1210000089 % 16


def test_truncate_examples() -> None:
    assert TruncateTransform(10).apply(_p("int"), 1) == 0
    assert TruncateTransform(10).apply(_p("int"), -1) == -10
    assert TruncateTransform(10).apply(_p("long"), -1) == -10
    assert TruncateTransform(10).apply(_p("long"), 10) == 10
    assert TruncateTransform(50).apply(DecimalType(precision=9, scale=2), Decimal("10.65")) == Decimal("10.50")
    assert str(TruncateTransform(50).apply(DecimalType(precision=9, scale=2), Decimal("-0.01"))) == "-0.50"
    assert TruncateTransform(3).apply(_p("string"), "iceberg") == "ice"
    assert TruncateTransform(2).apply(_p("string"), "😀😀😀") == "😀😀"  # code points, not bytes
    assert TruncateTransform(2).apply(_p("binary"), b"\x00\x01\x02") == b"\x00\x01"
    with pytest.raises(InvalidArgument, match="more than 2 digits after the point"):
        TruncateTransform(5).apply(DecimalType(precision=9, scale=2), Decimal("1.001"))


def test_time_transforms_floor_before_1970() -> None:
    ts = _p("timestamp")
    transforms = (YearTransform(), MonthTransform(), DayTransform(), HourTransform())
    assert [t.apply(ts, -60_000_000) for t in transforms] == [-1, -1, -1, -1]  # 1969-12-31T23:59
    assert [t.apply(_p("timestamptz_ns"), -1) for t in transforms] == [-1, -1, -1, -1]
    assert [t.apply(ts, 0) for t in transforms] == [0, 0, 0, 0]
    # 1968-02-29T00:00 (a leap day): year -2, month -23, day -672, hour -16128
    assert [t.apply(ts, -672 * 86_400_000_000) for t in transforms] == [-2, -23, -672, -16128]
    assert MonthTransform().apply(_p("date"), -1) == -1 and YearTransform().apply(_p("date"), 365) == 1
    assert [t.apply(_p("date"), -719_162) for t in transforms[:3]] == [-1969, -1969 * 12, -719_162]  # 0001-01-01


def test_human_strings_name_partition_directories() -> None:
    ts = _p("timestamp")
    assert YearTransform().to_human(ts, 47) == "2017" and YearTransform().to_human(ts, -1) == "1969"
    assert MonthTransform().to_human(ts, 574) == "2017-11" and MonthTransform().to_human(ts, -1) == "1969-12"
    assert DayTransform().to_human(ts, 17486) == "2017-11-16" and DayTransform().to_human(ts, -1) == "1969-12-31"
    assert HourTransform().to_human(ts, 419686) == "2017-11-16-22" and HourTransform().to_human(ts, -1) == (
        "1969-12-31-23"
    )
    assert IdentityTransform().to_human(_p("timestamp_ns"), 1510871468123456789) == "2017-11-16T22:31:08.123456789"
    assert IdentityTransform().to_human(_p("timestamptz"), 1510871468000000) == "2017-11-16T22:31:08+00:00"
    assert BucketTransform(4).to_human(_p("string"), 3) == "3" and VoidTransform().to_human(ts, None) == "null"
    assert YearTransform().to_human(_p("date"), 20_000) == "21970"  # past datetime's year 9999


def test_void_and_null_inputs() -> None:
    for text in ("identity", "bucket[4]", "truncate[4]", "year", "month", "day", "hour", "void"):
        source = _p("long") if text.startswith("truncate") else _p("timestamp")
        assert parse_transform(text).apply(source, None) is None
    assert VoidTransform().apply(_p("long"), 5) is None
    assert VoidTransform().result_type(_p("long")) == _p("long")
    assert VoidTransform().apply_arrow(_p("long"), pa.array([1, None, 3])).to_pylist() == [None, None, None]


def test_result_types() -> None:
    decimal = DecimalType(precision=9, scale=2)
    assert DayTransform().result_type(_p("timestamp")) == _p("date")
    assert YearTransform().result_type(_p("date")) == _p("int")
    assert BucketTransform(8).result_type(decimal) == _p("int")
    assert TruncateTransform(8).result_type(decimal) == decimal
    assert IdentityTransform().result_type(FixedType(length=3)) == FixedType(length=3)
    with pytest.raises(ProtocolError, match="hour cannot be applied to a date column"):
        HourTransform().result_type(_p("date"))


def test_transform_strings() -> None:
    for text in ("identity", "bucket[16]", "truncate[4]", "year", "month", "day", "hour", "void"):
        assert str(parse_transform(text)) == text
        assert parse_transform(f"  {text}\n") == parse_transform(text)
    assert parse_transform("truncate[4]") == TruncateTransform(4) and parse_transform("bucket[3]") == BucketTransform(3)
    assert len({parse_transform("bucket[3]"), BucketTransform(3), BucketTransform(4)}) == 2  # hashable, by value
    assert parse_transform("Day") == DayTransform()  # names are case-insensitive, as in the reference implementation
    malformed = ("bucket[sixteen]", "bucket[0]", "truncate[]", "truncate[-1]", "bucket", "year[2]", "bucket 16", "Day!")
    for bad in (*malformed, "", "bucket[١٦]"):
        with pytest.raises(ProtocolError, match=r"'.*' ?; valid forms: identity, bucket\[N\], truncate\[W\], year"):
            parse_transform(bad)
    with pytest.raises(ProtocolError, match="malformed partition transform 'bucket\\[0\\]'"):
        parse_transform("bucket[0]")
    for future in ("zorder", "bucket_v2[4]"):
        with pytest.raises(UnsupportedFeature, match=f"'{future}' is not supported".replace("[", "\\[")):
            parse_transform(future)
    with pytest.raises(ProtocolError, match="cannot be applied to a string column"):
        parse_transform("hour").apply(_p("string"), "x")
    with pytest.raises(InvalidArgument, match="number of buckets must be a positive integer"):
        BucketTransform(0)


# --- PyIceberg as the oracle -------------------------------------------------------------------------

_TRANSFORMS = ["identity", "bucket[1]", "bucket[16]", "bucket[1000]", "truncate[1]", "truncate[7]"]
_TRANSFORMS += ["year", "month", "day", "hour", "void"]


def _normalised(type_: Any) -> str:
    return str(type_).replace(" ", "")


@pytest.mark.parametrize("type_name", sorted(SOURCES))
@pytest.mark.parametrize("transform", _TRANSFORMS)
def test_pyiceberg_agrees_on_values_result_types_and_human_strings(type_name: str, transform: str) -> None:
    ours_type, theirs_type = SOURCES[type_name]
    ours = parse_transform(transform)
    theirs = pyiceberg_transforms.parse_transform(transform)
    assert ours.can_transform(ours_type) == theirs.can_transform(theirs_type)
    if not ours.can_transform(ours_type):
        return
    assert _normalised(ours.result_type(ours_type)) == _normalised(theirs.result_type(theirs_type))
    apply = theirs.transform(theirs_type)
    values = random_values(type_name, random.Random(f"{type_name}-{transform}"))
    for value in [None, *values]:
        result = ours.apply(ours_type, value)
        assert result == apply(value), (transform, type_name, value)
        if not type_name.endswith("_ns"):  # PyIceberg names nanosecond values by their raw integer
            expected_human = theirs.to_human_string(theirs_type, result)
            assert ours.to_human(ours_type, result) == expected_human, (transform, type_name, value)


# --- Arrow form ---------------------------------------------------------------------------------------

_ARROW_TYPES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "date": pa.date32(),
    "time": pa.time64("us"),
    "timestamp": pa.timestamp("us"),
    "timestamptz": pa.timestamp("us", tz="UTC"),
    "timestamp_ns": pa.timestamp("ns"),
    "timestamptz_ns": pa.timestamp("ns", tz="UTC"),
    "string": pa.string(),
    "uuid": pa.uuid(),
    "fixed": pa.binary(5),
    "binary": pa.binary(),
    "decimal": pa.decimal128(18, 3),
    "decimal38": pa.decimal128(38, 10),
}
_ARROW_STORAGE = {"date": pa.int32(), "time": pa.int64(), "uuid": pa.binary(16)}


def _arrow_column(type_name: str, values: list[Any]) -> pa.Array:
    """Canonical values as the Arrow column a Parquet reader produces for the Iceberg type."""
    arrow_type = _ARROW_TYPES[type_name]
    if type_name in ("date", "time") or type_name.startswith("timestamp"):
        return pa.array(values, _ARROW_STORAGE.get(type_name, pa.int64())).cast(arrow_type)
    if type_name == "uuid":
        storage = pa.array([None if v is None else v.bytes for v in values], pa.binary(16))
        return pa.ExtensionArray.from_storage(arrow_type, storage)
    return pa.array(values, arrow_type)


@pytest.mark.parametrize("type_name", sorted(SOURCES))
@pytest.mark.parametrize("transform", _TRANSFORMS)
def test_arrow_form_agrees_with_values(type_name: str, transform: str) -> None:
    source, _ = SOURCES[type_name]
    ours = parse_transform(transform)
    if not ours.can_transform(source):
        return
    values = random_values(type_name, random.Random(f"arrow-{type_name}-{transform}"), 200)
    values[1::17] = [None] * len(values[1::17])
    column = _arrow_column(type_name, values)
    result = ours.apply_arrow(source, column)
    assert len(result) == len(column)
    if transform == "identity":
        assert result.equals(column)
    else:
        assert result.to_pylist() == [ours.apply(source, v) for v in values], (transform, type_name)


def test_arrow_form_of_other_units_and_layouts() -> None:
    micros = [None, -1, 0, 1_510_871_468_123_456, -3_600_000_001]
    as_nanos = pa.array([None if v is None else v * 1000 + 999 for v in micros], pa.int64()).cast(pa.timestamp("ns"))
    as_millis = pa.array([None if v is None else v // 1000 for v in micros], pa.int64()).cast(pa.timestamp("ms"))
    for transform in (DayTransform(), HourTransform(), BucketTransform(7)):
        expected = [transform.apply(_p("timestamp"), v) for v in micros]
        assert transform.apply_arrow(_p("timestamp"), as_nanos).to_pylist() == expected
        assert transform.apply_arrow(_p("timestamp"), pa.array(micros, pa.int64())).to_pylist() == expected
        floored = [None if v is None else v // 1000 * 1000 for v in micros]
        assert transform.apply_arrow(_p("timestamp"), as_millis).to_pylist() == [
            transform.apply(_p("timestamp"), v) for v in floored
        ]
    uuids = [uuid.UUID(int=7), None]
    as_fixed = pa.array([None if u is None else u.bytes for u in uuids], pa.binary(16))
    assert BucketTransform(9).apply_arrow(_p("uuid"), as_fixed).to_pylist() == [
        BucketTransform(9).apply(_p("uuid"), u) for u in uuids
    ]
    large = pa.array(["iceberg", None, "😀😀😀😀"], pa.large_string())
    assert TruncateTransform(3).apply_arrow(_p("string"), large).to_pylist() == ["ice", None, "😀😀😀"]
    far = [-3_000_000, 3_000_000, 2_932_897]  # beyond what datetime holds: years -6244, 10183 and 10000
    far_dates = pa.array(far, pa.int32()).cast(pa.date32())
    for transform in (YearTransform(), MonthTransform()):
        assert transform.apply_arrow(_p("date"), far_dates).to_pylist() == [transform.apply(_p("date"), d) for d in far]
    assert YearTransform().apply(_p("date"), 2_932_897) == 10000 - 1970
    with pytest.raises(InvalidArgument, match="does not hold Iceberg date values"):
        DayTransform().apply_arrow(_p("date"), pa.array(["2017-11-16"]))


@pytest.mark.parametrize(("type_name", "smallest"), [("int", -(2**31)), ("long", -(2**63))])
def test_truncating_below_the_smallest_integer_is_refused(type_name: str, smallest: int) -> None:
    source, theirs_type = SOURCES[type_name]
    bucket = pyiceberg_transforms.BucketTransform(10).transform(theirs_type)
    for value in (smallest, smallest + 1):
        assert BucketTransform(10).apply(source, value) == bucket(value)
    assert TruncateTransform(10).apply(source, smallest + 8) == smallest + 8  # ...48 (int) / ...08 (long): multiples
    with pytest.raises(InvalidArgument, match=f"truncate\\[10\\] of {smallest} is below the smallest {type_name}"):
        TruncateTransform(10).apply(source, smallest)
    with pytest.raises(InvalidArgument, match=f"truncate\\[10\\] of {smallest} is below the smallest {type_name}"):
        TruncateTransform(10).apply_arrow(source, pa.array([0, smallest, None], _ARROW_TYPES[type_name]))


def test_truncating_below_the_smallest_decimal_is_refused() -> None:
    source = DecimalType(precision=3, scale=1)
    assert TruncateTransform(10).apply(source, Decimal("-98.9")) == Decimal("-99.0")
    with pytest.raises(InvalidArgument, match="truncate\\[10\\] of -99.9 is below the smallest decimal\\(3,1\\)"):
        TruncateTransform(10).apply(source, Decimal("-99.9"))
    with pytest.raises(InvalidArgument, match="below the smallest decimal\\(3,1\\)"):
        TruncateTransform(10).apply_arrow(source, pa.array([Decimal("-99.9")], pa.decimal128(3, 1)))
