"""Partition value serialisation: the protocol table, real writers' strings, and Arrow scalars."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_partition_values import serialize_partition_value
from lakeops_testdata import TESTDATA

from lakeops.delta.partitions import parse_partition_value, partition_arrow_type, partition_arrow_value
from lakeops.errors import InvalidArgument, ProtocolError, UnsupportedFeature

UTC = dt.UTC

# (delta type, Python value, its serialised form) — each must round-trip both ways.
ROUND_TRIPS: list[tuple[str, Any, str]] = [
    ("string", "a b/c=d", "a b/c=d"),
    ("long", -(2**63), "-9223372036854775808"),
    ("integer", 2**31 - 1, "2147483647"),
    ("short", -32768, "-32768"),
    ("byte", 127, "127"),
    ("double", 2021.0, "2021.0"),
    ("double", -0.25, "-0.25"),
    ("double", 1e300, "1e+300"),
    ("float", 0.5, "0.5"),
    ("boolean", True, "true"),
    ("boolean", False, "false"),
    ("date", dt.date(1970, 1, 1), "1970-01-01"),
    ("date", dt.date(33, 2, 3), "0033-02-03"),
    ("timestamp", dt.datetime(1970, 1, 1, tzinfo=UTC), "1970-01-01 00:00:00"),
    ("timestamp", dt.datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=UTC), "2024-02-29 23:59:58.123456"),
    ("timestamp_ntz", dt.datetime(2024, 1, 2, 3, 4, 5, 6), "2024-01-02 03:04:05.000006"),
    ("decimal(10,2)", Decimal("-123.45"), "-123.45"),
    ("decimal(38,0)", Decimal(10**37), "1" + "0" * 37),
    ("decimal(38,2)", Decimal("-" + "9" * 36 + ".99"), "-" + "9" * 36 + ".99"),
    ("decimal(5,5)", Decimal("0.00001"), "0.00001"),
    ("binary", b"\x01\x02\x03", "\u0001\u0002\u0003"),
]


@pytest.mark.parametrize(("delta_type", "value", "text"), ROUND_TRIPS)
def test_round_trip(delta_type: str, value: Any, text: str) -> None:
    assert serialize_partition_value(value, delta_type) == text
    parsed = parse_partition_value(text, delta_type)
    assert parsed == value
    assert type(parsed) is type(value)


@pytest.mark.parametrize("delta_type", ["string", "long", "double", "date", "timestamp", "binary", "decimal(4,1)"])
def test_empty_string_and_null_are_null(delta_type: str) -> None:
    assert parse_partition_value("", delta_type) is None
    assert parse_partition_value(None, delta_type) is None
    assert serialize_partition_value(None, delta_type) is None
    assert serialize_partition_value("", delta_type) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [("NaN", math.nan), ("Infinity", math.inf), ("-Infinity", -math.inf), ("1e-5", 1e-5)],
)
def test_floating_point_specials(text: str, expected: float) -> None:
    value = parse_partition_value(text, "double")
    assert isinstance(value, float)
    assert (math.isnan(value) and math.isnan(expected)) or value == expected


def test_floating_point_specials_serialise_as_java_does() -> None:
    assert serialize_partition_value(math.nan, "double") == "NaN"
    assert serialize_partition_value(math.inf, "float") == "Infinity"
    assert serialize_partition_value(-math.inf, "double") == "-Infinity"
    assert serialize_partition_value(0.1, "float") == "0.1"  # shortest float32 text, not 0.10000000149


@pytest.mark.parametrize(
    ("text", "delta_type", "expected"),
    [
        # protocol form, no fraction; interpreted as UTC
        ("2021-03-04 05:06:07", "timestamp", dt.datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC)),
        # ISO-8601 UTC form of newer writers
        ("2021-03-04T05:06:07.000000Z", "timestamp", dt.datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC)),
        ("2021-03-04 05:06:07.5", "timestamp", dt.datetime(2021, 3, 4, 5, 6, 7, 500000, tzinfo=UTC)),
        ("2021-03-04 05:06:07.123456000", "timestamp", dt.datetime(2021, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)),
        ("2021-03-04 07:06:07+02:00", "timestamp", dt.datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC)),
        ("2021-03-04 05:06:07", "timestamp_ntz", dt.datetime(2021, 3, 4, 5, 6, 7)),
    ],
)
def test_timestamp_forms(text: str, delta_type: str, expected: dt.datetime) -> None:
    assert parse_partition_value(text, delta_type) == expected


def test_aware_timestamp_is_written_in_utc() -> None:
    value = dt.datetime(2021, 3, 4, 7, 6, 7, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert serialize_partition_value(value, "timestamp") == "2021-03-04 05:06:07"
    with pytest.raises(InvalidArgument):
        serialize_partition_value(value, "timestamp_ntz")


@pytest.mark.parametrize(
    ("text", "delta_type"),
    [
        ("1_000", "long"),
        (" 1", "integer"),
        ("1.0", "integer"),
        ("128", "byte"),
        ("2147483648", "integer"),
        ("1,5", "double"),
        ("yes", "boolean"),
        ("2021-13-01", "date"),
        ("2021-1-1", "date"),
        ("2021-01-01", "timestamp"),
        ("2021-01-01 00:00:00.1234567", "timestamp"),
        ("2021-01-01 00:00:00Z", "timestamp_ntz"),
        ("1.234", "decimal(10,2)"),
        ("123456789.1", "decimal(10,2)"),
        ("NaN", "decimal(10,2)"),
        ("1E+999999", "decimal(38,0)"),
        ("99.5", "decimal(3,0)"),
    ],
)
def test_invalid_text_is_a_protocol_error_with_context(text: str, delta_type: str) -> None:
    with pytest.raises(ProtocolError, match="00000000000000000003.json: add p.parquet column c"):
        parse_partition_value(text, delta_type, context="00000000000000000003.json: add p.parquet column c")


def test_decimal_is_scaled_and_accepts_scientific_notation() -> None:
    assert parse_partition_value("1.5", "decimal(10,2)") == Decimal("1.50")
    assert str(parse_partition_value("1.5", "decimal(10,2)")) == "1.50"
    assert parse_partition_value("1E+2", "decimal(5,0)") == Decimal(100)
    assert serialize_partition_value(Decimal("1E+2"), "decimal(6,1)") == "100.0"
    assert parse_partition_value("7", "decimal") == Decimal(7)
    with pytest.raises(InvalidArgument):
        serialize_partition_value(1.5, "decimal(10,2)")  # floats would round silently


def test_boolean_is_case_insensitive_on_read() -> None:
    assert parse_partition_value("TRUE", "boolean") is True


def test_strings_for_typed_columns_are_validated_and_canonicalised() -> None:
    assert serialize_partition_value("2021-03-04T05:06:07Z", "timestamp") == "2021-03-04 05:06:07"
    assert serialize_partition_value("+7", "integer") == "7"
    with pytest.raises(InvalidArgument):
        serialize_partition_value("x", "integer")


@pytest.mark.parametrize(
    ("value", "delta_type"),
    [
        (True, "integer"),
        (2**31, "integer"),
        (1.5, "long"),
        ("x", "binary"),
        (b"\xff", "binary"),  # not representable as the string readers decode back
        (dt.datetime(2020, 1, 1), "date"),
        (dt.date(2020, 1, 1), "timestamp"),
        (1, "boolean"),
        (Decimal("1.234"), "decimal(10,2)"),
    ],
)
def test_unwritable_values_are_invalid_arguments(value: Any, delta_type: str) -> None:
    with pytest.raises(InvalidArgument):
        serialize_partition_value(value, delta_type)


@pytest.mark.parametrize("delta_type", ["struct", "array<int>", "map", "void", "decimal(39,0)", "decimal(3,4)"])
def test_unsupported_types(delta_type: str) -> None:
    with pytest.raises(UnsupportedFeature, match="partition column type"):
        parse_partition_value("1", delta_type)


# --- Arrow -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("delta_type", "value", "text"), ROUND_TRIPS)
def test_arrow_scalars(delta_type: str, value: Any, text: str) -> None:
    arrow_type = partition_arrow_type(delta_type)
    scalar = partition_arrow_value(parse_partition_value(text, delta_type), arrow_type)
    assert scalar.type == arrow_type
    assert scalar.as_py() == value


def test_arrow_types() -> None:
    assert partition_arrow_type("timestamp") == pa.timestamp("us", tz="UTC")
    assert partition_arrow_type("timestamp_ntz") == pa.timestamp("us")
    assert partition_arrow_type("decimal(12, 3)") == pa.decimal128(12, 3)
    assert partition_arrow_type("integer") == pa.int32()


def test_arrow_null_dictionary_and_mismatch() -> None:
    assert not partition_arrow_value(None, pa.int64()).is_valid
    scalar = partition_arrow_value("a", pa.dictionary(pa.int32(), pa.string()))
    assert scalar.as_py() == "a"
    with pytest.raises(InvalidArgument, match="does not fit"):
        partition_arrow_value(300, pa.int8())


# --- real tables -----------------------------------------------------------------------------


def _schema_types(metadata: dict[str, Any]) -> dict[str, str]:
    return {field["name"]: field["type"] for field in json.loads(metadata["schemaString"])["fields"]}


def test_partition_type_primitives_table() -> None:
    """delta-rs' "primitives" table: every partition column is declared ``string`` in its schema."""
    root = TESTDATA / "delta-rs" / "partition-type-primitives"
    log = root / "_delta_log" / "00000000000000000000.json"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    metadata = next(line["metaData"] for line in lines if "metaData" in line)
    types = _schema_types(metadata)
    adds = [line["add"] for line in lines if "add" in line]
    assert adds and set(metadata["partitionColumns"]) == {"year", "is_active", "event_date", "category"}
    for add in adds:
        directories = dict(segment.split("=", 1) for segment in add["path"].split("/")[:-1])
        for column, text in add["partitionValues"].items():
            value = parse_partition_value(text, types[column], context=add["path"])
            assert value == text  # string columns: no translation, "2021.0" stays "2021.0"
            assert unquote(directories[column]) == text
            assert serialize_partition_value(value, types[column]) == text
            assert partition_arrow_value(value, partition_arrow_type(types[column])).as_py() == text
    # the same strings read as the types their names suggest
    years = {parse_partition_value(add["partitionValues"]["year"], "double") for add in adds}
    assert years == {2020.0, 2021.0}
    dates = {parse_partition_value(add["partitionValues"]["event_date"], "date") for add in adds}
    assert dates == {dt.date(2023, 1, 1), dt.date(2023, 1, 2)}
    flags = {parse_partition_value(add["partitionValues"]["is_active"], "boolean") for add in adds}
    assert flags == {True, False}


TYPED_CHECKPOINTS = [
    "delta-rs/checkpoint-cdf-table/_delta_log/00000000000000000003.checkpoint.parquet",  # date
    "delta-rs/checkpoint_with_partitions/_delta_log/00000000000000000002.checkpoint.parquet",  # string + null
    "delta-kernel/v1-multi-part-partitioned-struct-stats-only/_delta_log/"
    "00000000000000000005.checkpoint.0000000001.0000000003.parquet",  # integer
]


@pytest.mark.parametrize("relative", TYPED_CHECKPOINTS, ids=lambda r: r.split("/")[1])
def test_parsed_values_match_writers_partition_values_parsed(relative: str) -> None:
    """Each writer also stored the typed value (``add.partitionValues_parsed``): ours must agree."""
    path = TESTDATA / relative
    table = pq.read_table(path, columns=["add"])
    parsed_type = table.schema.field("add").type.field("partitionValues_parsed").type
    log_dir = path.parent
    metadata = _find_metadata(log_dir)
    types = _schema_types(metadata)
    checked = 0
    for add in table.column("add").to_pylist():
        if add is None:
            continue
        for column, text in dict(add["partitionValues"]).items():
            expected = add["partitionValues_parsed"][column]
            value = parse_partition_value(text, types[column], context=f"{path}: {add['path']}")
            assert value == expected
            arrow_type = parsed_type.field(column).type
            assert partition_arrow_value(value, arrow_type) == pa.scalar(expected, arrow_type)
            assert partition_arrow_type(types[column]) == arrow_type
            checked += 1
    assert checked


def _find_metadata(log_dir: Path) -> dict[str, Any]:
    for candidate in sorted(log_dir.glob("*.checkpoint*.parquet")):
        for row in pq.read_table(candidate, columns=["metaData"]).column("metaData").to_pylist():
            if row is not None:
                return dict(row)
    raise AssertionError(f"no metaData in {log_dir}")
