"""Partition transforms: Appendix B's hash test values, the spec's truncate examples, floor semantics
before 1970, and PyIceberg as the oracle on random values."""

from __future__ import annotations

import random
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg import transforms as pyiceberg_transforms
from pyiceberg import types as pyiceberg_types

from lakeops.errors import ProtocolError, UnsupportedFeature
from lakeops.iceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    MonthTransform,
    TruncateTransform,
    YearTransform,
    bucket_hash,
    parse_transform,
)
from lakeops.iceberg.types import DecimalType, FixedType, IcebergType, PrimitiveType


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


def test_nan_hashes_canonically_and_nanosecond_timestamps_hash_as_micros() -> None:
    assert bucket_hash(_p("double"), float("nan")) == bucket_hash(_p("double"), -float("nan"))
    assert bucket_hash(_p("timestamp_ns"), 1510871468000000123) == -2047944441


def test_truncate_examples() -> None:
    assert TruncateTransform(10).apply(_p("int"), 1) == 0
    assert TruncateTransform(10).apply(_p("int"), -1) == -10
    assert TruncateTransform(10).apply(_p("long"), -1) == -10
    assert TruncateTransform(50).apply(DecimalType(precision=9, scale=2), Decimal("10.65")) == Decimal("10.50")
    assert TruncateTransform(3).apply(_p("string"), "iceberg") == "ice"
    assert TruncateTransform(2).apply(_p("string"), "😀😀😀") == "😀😀"  # code points, not bytes
    assert TruncateTransform(2).apply(_p("binary"), b"\x00\x01\x02") == b"\x00\x01"


def test_time_transforms_floor_before_1970() -> None:
    minute_before = -60_000_000
    ts = _p("timestamp")
    assert [
        t.apply(ts, minute_before) for t in (YearTransform(), MonthTransform(), DayTransform(), HourTransform())
    ] == [
        -1,
        -1,
        -1,
        -1,
    ]
    assert DayTransform().result_type(ts) == _p("date")
    assert MonthTransform().apply(_p("date"), -1) == -1 and YearTransform().apply(_p("date"), 365) == 1
    assert HourTransform().to_human(ts, 419686) == "2017-11-16-22" and MonthTransform().to_human(ts, 574) == "2017-11"
    assert parse_transform("void").apply(ts, 5) is None and parse_transform("identity").apply(ts, None) is None


def _random_values(type_name: str, rng: random.Random) -> list[Any]:
    if type_name == "int":
        return [rng.randint(-(2**31), 2**31 - 1) for _ in range(200)]
    if type_name == "long":
        return [rng.randint(-(2**63), 2**63 - 1) for _ in range(200)]
    if type_name == "date":
        return [rng.randint(-50_000, 50_000) for _ in range(200)]
    if type_name in ("timestamp", "timestamptz"):
        return [rng.randint(-(2**50), 2**50) for _ in range(200)]
    if type_name == "string":
        return [
            "".join(
                chr(rng.choice([rng.randint(32, 126), rng.randint(0x400, 0x4FF), 0x1F600]))
                for _ in range(rng.randint(0, 12))
            )
            for _ in range(200)
        ]
    if type_name == "decimal":
        return [Decimal(rng.randint(-(10**12), 10**12)).scaleb(-3) for _ in range(200)]
    raise AssertionError(type_name)


_PYICEBERG_TYPES = {
    "int": (_p("int"), pyiceberg_types.IntegerType()),
    "long": (_p("long"), pyiceberg_types.LongType()),
    "date": (_p("date"), pyiceberg_types.DateType()),
    "timestamp": (_p("timestamp"), pyiceberg_types.TimestampType()),
    "timestamptz": (_p("timestamptz"), pyiceberg_types.TimestamptzType()),
    "string": (_p("string"), pyiceberg_types.StringType()),
    "decimal": (DecimalType(precision=18, scale=3), pyiceberg_types.DecimalType(18, 3)),
}


@pytest.mark.parametrize("type_name", sorted(_PYICEBERG_TYPES))
@pytest.mark.parametrize("transform", ["bucket[16]", "bucket[1000]", "truncate[7]", "year", "month", "day", "hour"])
def test_pyiceberg_agrees(type_name: str, transform: str) -> None:
    ours_type, theirs_type = _PYICEBERG_TYPES[type_name]
    ours = parse_transform(transform)
    theirs = pyiceberg_transforms.parse_transform(transform)
    if not ours.can_transform(ours_type):
        assert not theirs.can_transform(theirs_type)
        return
    assert theirs.can_transform(theirs_type)
    apply = theirs.transform(theirs_type)
    for value in _random_values(type_name, random.Random(f"{type_name}-{transform}")):
        assert ours.apply(ours_type, value) == apply(value), (transform, type_name, value)


@pytest.mark.parametrize("transform", ["year", "month", "day", "hour", "bucket[7]"])
def test_arrow_form_agrees_with_values(transform: str) -> None:
    ts = _p("timestamptz")
    values = [None, -1, 0, 1, -3_600_000_001, 1510871468123456, -(2**50), 2**50]
    array = pa.array(values, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    ours = parse_transform(transform)
    assert ours.apply_arrow(ts, array).to_pylist() == [ours.apply(ts, v) for v in values]
    dates = pa.array([None, -1, 0, 17486, -50_000], pa.int32()).cast(pa.date32())
    if transform != "hour":
        assert ours.apply_arrow(_p("date"), dates).to_pylist() == [
            ours.apply(_p("date"), v) for v in [None, -1, 0, 17486, -50_000]
        ]


def test_transform_strings() -> None:
    assert str(parse_transform(" bucket[16] ")) == "bucket[16]"
    assert parse_transform("truncate[4]") == TruncateTransform(4) and parse_transform("bucket[3]") == BucketTransform(3)
    for bad in ("bucket[sixteen]", "bucket[0]", "truncate[]", "bucket 16", "Day!"):
        with pytest.raises(ProtocolError, match="valid forms: identity, bucket\\[N\\]"):
            parse_transform(bad)
    with pytest.raises(UnsupportedFeature, match="'zorder' is not supported"):
        parse_transform("zorder")
    with pytest.raises(ProtocolError, match="cannot be applied to a string column"):
        parse_transform("hour").apply(_p("string"), "x")
