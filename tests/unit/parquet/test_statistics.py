"""Footer statistics by logical type (``lakeops.parquet.statistics``).

Files are written with pyarrow so the footers are real; the few annotations pyarrow cannot write
(DECIMAL on BYTE_ARRAY, ENUM, BSON, INTERVAL, ConvertedType-only schemas, NaN bounds from old
writers) go through small stand-ins with the same attributes as pyarrow's metadata objects.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lakeops_testdata import TESTDATA
from parquet_int96 import decode_int96

from lakeops.errors import CorruptFile
from lakeops.parquet.statistics import (
    ColumnType,
    FileStatistics,
    Kind,
    column_type,
    decode_raw,
    file_statistics,
    nan_counts,
)

UTC = dt.UTC


def write(tmp_path: Path, table: pa.Table, name: str = "f.parquet", **options: Any) -> pq.FileMetaData:
    path = tmp_path / name
    pq.write_table(table, path, **options)
    return pq.ParquetFile(path).metadata


def stats_of(tmp_path: Path, table: pa.Table, **options: Any) -> FileStatistics:
    return file_statistics(write(tmp_path, table, **options))


def bounds(fs: FileStatistics, *path: str) -> tuple[Any, Any, int | None]:
    column = fs.get(path)
    assert column is not None, path
    return column.min, column.max, column.null_count


# ---------------------------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------------------------


def test_signed_integers_of_every_width(tmp_path: Path) -> None:
    table = pa.table(
        {
            "i8": pa.array([-128, 5, None, 127], pa.int8()),
            "i16": pa.array([-32768, 5, None, 32767], pa.int16()),
            "i32": pa.array([-(2**31), 5, None, 2**31 - 1], pa.int32()),
            "i64": pa.array([-(2**63), 5, None, 2**63 - 1], pa.int64()),
        }
    )
    fs = stats_of(tmp_path, table)
    assert bounds(fs, "i8") == (-128, 127, 1)
    assert bounds(fs, "i16") == (-32768, 32767, 1)
    assert bounds(fs, "i32") == (-(2**31), 2**31 - 1, 1)
    assert bounds(fs, "i64") == (-(2**63), 2**63 - 1, 1)
    column = fs.get(("i8",))
    assert column is not None
    assert column.column.type == ColumnType(Kind.INT, "INT32", bit_width=8, signed=True)
    assert column.value_count == 4


def test_unsigned_integers_use_unsigned_order(tmp_path: Path) -> None:
    # Values above the signed maximum: a signed reading would swap min and max.
    table = pa.table(
        {
            "u8": pa.array([0, 200, None], pa.uint8()),
            "u16": pa.array([1, 65535, None], pa.uint16()),
            "u32": pa.array([3, 2**32 - 1, None], pa.uint32()),
            "u64": pa.array([3, 2**64 - 1, 2**63], pa.uint64()),
        }
    )
    fs = stats_of(tmp_path, table)
    assert bounds(fs, "u8") == (0, 200, 1)
    assert bounds(fs, "u16") == (1, 65535, 1)
    assert bounds(fs, "u32") == (3, 2**32 - 1, 1)
    assert bounds(fs, "u64") == (3, 2**64 - 1, 0)
    u64 = fs.get(("u64",))
    assert u64 is not None and u64.column.type.signed is False
    assert u64.column.type.physical_type == "INT64"


def test_floats_ignore_nan_and_widen_zeros(tmp_path: Path) -> None:
    table = pa.table(
        {
            "with_nan": pa.array([1.5, math.nan, -2.0, None], pa.float64()),
            "all_nan": pa.array([math.nan, None, math.nan, math.nan], pa.float64()),
            "zero_min": pa.array([0.0, 1.0, 2.0, 3.0], pa.float32()),
            "zero_max": pa.array([-1.0, -0.0, -3.0, None], pa.float32()),
            "f16": pa.array([1.0, -2.5, None, 0.5], pa.float16()),
        }
    )
    fs = stats_of(tmp_path, table)
    assert bounds(fs, "with_nan") == (-2.0, 1.5, 1)
    assert bounds(fs, "all_nan") == (None, None, 1)
    lo, hi, _ = bounds(fs, "zero_min")
    assert lo == 0.0 and math.copysign(1, lo) == -1 and hi == 3.0  # min 0 may hide -0.0
    lo, hi, _ = bounds(fs, "zero_max")
    assert lo == -3.0 and hi == 0.0 and math.copysign(1, hi) == 1  # max -0 may hide +0.0
    assert bounds(fs, "f16") == (-2.5, 1.0, 1)
    f16 = fs.get(("f16",))
    assert f16 is not None and f16.column.type.kind is Kind.FLOAT16


def test_decimals_on_int32_int64_and_fixed(tmp_path: Path) -> None:
    d = Decimal
    table = pa.table(
        {
            "p5": pa.array([d("-123.45"), d("0.01"), None, d("999.99")], pa.decimal128(5, 2)),
            "p15": pa.array([d("-1234567890.12345"), d("5"), None, d("1")], pa.decimal128(15, 5)),
            "p38": pa.array([d("-" + "9" * 36 + ".99"), d("12.30"), None, d("0")], pa.decimal128(38, 2)),
            "scale0": pa.array([d("-7"), d("7"), None, None], pa.decimal128(3, 0)),
        }
    )
    meta = write(tmp_path, table, store_decimal_as_integer=True)
    physical = {meta.schema.column(i).name: meta.schema.column(i).physical_type for i in range(4)}
    assert physical == {
        "p5": "INT32",
        "p15": "INT64",
        "p38": "FIXED_LEN_BYTE_ARRAY",
        "scale0": "INT32",
    }
    fs = file_statistics(meta)
    assert bounds(fs, "p5") == (d("-123.45"), d("999.99"), 1)
    assert bounds(fs, "p15") == (d("-1234567890.12345"), d("5.00000"), 1)
    assert bounds(fs, "p38") == (d("-" + "9" * 36 + ".99"), d("12.30"), 1)
    assert bounds(fs, "scale0") == (d(-7), d(7), 2)
    p38 = fs.get(("p38",))
    assert p38 is not None
    assert (p38.column.type.precision, p38.column.type.scale) == (38, 2)

    # Default writer settings put every decimal in FIXED_LEN_BYTE_ARRAY.
    fs = stats_of(tmp_path, table.select(["p5"]))
    assert bounds(fs, "p5") == (d("-123.45"), d("999.99"), 1)


# ---------------------------------------------------------------------------------------------
# Time
# ---------------------------------------------------------------------------------------------


def test_dates_before_and_after_the_epoch(tmp_path: Path) -> None:
    table = pa.table({"d": pa.array([dt.date(1969, 12, 31), None, dt.date(2024, 2, 29)])})
    assert bounds(stats_of(tmp_path, table), "d") == (dt.date(1969, 12, 31), dt.date(2024, 2, 29), 1)


def test_timestamps_by_unit_and_utc_adjustment(tmp_path: Path) -> None:
    lo = dt.datetime(1960, 1, 1, 0, 0, 0, 1000)
    hi = dt.datetime(2024, 1, 1, 12, 0, 0, 123000)
    table = pa.table(
        {
            "ms_utc": pa.array([hi, lo, None], pa.timestamp("ms", tz="UTC")),
            "us_ntz": pa.array([hi, lo, None], pa.timestamp("us")),
            "us_paris": pa.array([hi, lo, None], pa.timestamp("us", tz="Europe/Paris")),
            "ns_utc": pa.array([1_700_000_000_123_456_789, -1_001, None], pa.timestamp("ns", tz="UTC")),
            "ns_ntz": pa.array([1_999, 5_000, None], pa.timestamp("ns")),
        }
    )
    meta = write(tmp_path, table)
    fs = file_statistics(meta)
    assert bounds(fs, "ms_utc") == (lo.replace(tzinfo=UTC), hi.replace(tzinfo=UTC), 1)
    assert bounds(fs, "us_ntz") == (lo, hi, 1)
    # Arrow zone names do not reach Parquet: the values are instants, isAdjustedToUTC=true.
    assert bounds(fs, "us_paris") == (lo.replace(tzinfo=UTC), hi.replace(tzinfo=UTC), 1)
    # Nanoseconds widen outward to microseconds: the minimum floors, the maximum ceils.
    ns_lo, ns_hi, _ = bounds(fs, "ns_utc")
    assert ns_lo == dt.datetime(1969, 12, 31, 23, 59, 59, 999998, tzinfo=UTC)
    assert ns_hi == dt.datetime(2023, 11, 14, 22, 13, 20, 123457, tzinfo=UTC)
    assert bounds(fs, "ns_ntz")[:2] == (dt.datetime(1970, 1, 1, 0, 0, 0, 1), dt.datetime(1970, 1, 1, 0, 0, 0, 5))
    types = {c.column.path[0]: c.column.type for c in fs}
    assert types["ms_utc"] == ColumnType(Kind.TIMESTAMP, "INT64", unit="ms", utc_adjusted=True)
    assert types["us_ntz"] == ColumnType(Kind.TIMESTAMP, "INT64", unit="us", utc_adjusted=False)
    assert types["ns_utc"].unit == "ns"


def test_times_of_day(tmp_path: Path) -> None:
    table = pa.table(
        {
            "ms": pa.array([dt.time(1, 2, 3, 4000), None, dt.time(23, 59, 59, 999000)], pa.time32("ms")),
            "us": pa.array([dt.time(0, 0, 0, 1), dt.time(12), None], pa.time64("us")),
            # 1 ns and 2_001 ns: pyarrow's typed value would truncate both to 00:00:00.
            "ns": pa.array([1, 2_001, None], pa.time64("ns")),
        }
    )
    fs = stats_of(tmp_path, table)
    assert bounds(fs, "ms") == (dt.time(1, 2, 3, 4000), dt.time(23, 59, 59, 999000), 1)
    assert bounds(fs, "us") == (dt.time(0, 0, 0, 1), dt.time(12), 1)
    assert bounds(fs, "ns") == (dt.time(0), dt.time(0, 0, 0, 3), 1)


def test_int96_timestamps_have_no_bounds(tmp_path: Path) -> None:
    table = pa.table({"ts": pa.array([dt.datetime(2020, 1, 1), None], pa.timestamp("us"))})
    meta = write(tmp_path, table, use_deprecated_int96_timestamps=True)
    assert meta.schema.column(0).physical_type == "INT96"
    column = file_statistics(meta).get(("ts",))
    assert column is not None
    assert column.column.type.kind is Kind.INT96 and not column.column.type.ordered
    assert (column.min, column.max) == (None, None)


def test_decode_int96() -> None:
    # Julian day 2451545 is 2000-01-01; the first 8 bytes are nanoseconds of that day.
    nanos_of_day = ((1 * 60 + 2) * 60 + 3) * 1_000_000_000 + 456_789
    raw = struct.pack("<qi", nanos_of_day, 2_451_545)
    expected = dt.datetime(2000, 1, 1, 1, 2, 3, tzinfo=UTC) - dt.datetime(1970, 1, 1, tzinfo=UTC)
    assert decode_int96(raw) == expected // dt.timedelta(microseconds=1) * 1000 + 456_789
    assert decode_int96(struct.pack("<qi", 0, 2_440_588)) == 0
    assert decode_int96(struct.pack("<qi", 0, 2_440_587)) == -86_400 * 10**9
    with pytest.raises(CorruptFile, match="12 bytes"):
        decode_int96(b"\x00" * 8)


# ---------------------------------------------------------------------------------------------
# Bytes and text
# ---------------------------------------------------------------------------------------------


def test_strings_binary_json_uuid_bool(tmp_path: Path) -> None:
    u1, u2 = uuid.UUID(int=5), uuid.UUID(int=2**127)
    table = pa.table(
        {
            "s": pa.array(["b", "é", None, "a\U0010ffff"]),
            "ls": pa.array(["zz", "z", None, None], pa.large_string()),
            "b": pa.array([b"\x00", b"\xff\x00", None, b"\x7f"]),
            "fsb": pa.array([b"\x00\x01", b"\xff\x00", None, b"\x80\x80"], pa.binary(2)),
            "j": pa.array(['{"a":1}', "[]", None, "0"], pa.json_()),
            "u": pa.array([u2.bytes, u1.bytes, None, None], pa.uuid()),
            "flag": pa.array([True, None, True, True]),
            "nothing": pa.nulls(4),
        }
    )
    fs = stats_of(tmp_path, table)
    # Unsigned byte-wise order = code point order: "é" (0xC3...) sorts after "a\U0010ffff".
    assert bounds(fs, "s") == ("a\U0010ffff", "é", 1)
    assert bounds(fs, "ls") == ("z", "zz", 2)
    assert bounds(fs, "b") == (b"\x00", b"\xff\x00", 1)
    assert bounds(fs, "fsb") == (b"\x00\x01", b"\xff\x00", 1)
    assert bounds(fs, "j") == ("0", '{"a":1}', 1)
    assert bounds(fs, "u") == (u1, u2, 2)
    assert bounds(fs, "flag") == (True, True, 1)
    nothing = fs.get(("nothing",))
    assert nothing is not None and nothing.column.type.kind is Kind.UNKNOWN
    assert (nothing.min, nothing.max, nothing.null_count, nothing.all_null) == (None, None, 4, True)
    kinds = {c.column.path[0]: c.column.type.kind for c in fs}
    assert kinds == {
        "s": Kind.STRING,
        "ls": Kind.STRING,
        "b": Kind.BINARY,
        "fsb": Kind.BINARY,
        "j": Kind.JSON,
        "u": Kind.UUID,
        "flag": Kind.BOOLEAN,
        "nothing": Kind.UNKNOWN,
    }


# ---------------------------------------------------------------------------------------------
# Nesting, field ids, row groups
# ---------------------------------------------------------------------------------------------


def test_nested_columns_paths_and_repetition(tmp_path: Path) -> None:
    struct_type = pa.struct([("x", pa.int32()), ("y", pa.struct([("z", pa.string())]))])
    table = pa.table(
        {
            "st": pa.array([{"x": 1, "y": {"z": "q"}}, None, {"x": 2, "y": None}], struct_type),
            "lst": pa.array([[1, 2], None, [None, 9]], pa.list_(pa.int64())),
            "m": pa.array([[("k", 1.5)], None, [("a", -1.0)]], pa.map_(pa.string(), pa.float64())),
            "a.b": pa.array([1, 2, 3]),
        }
    )
    fs = stats_of(tmp_path, table)
    paths = [(c.column.path, c.column.repeated) for c in fs]
    assert paths == [
        (("st", "x"), False),
        (("st", "y", "z"), False),
        (("lst", "list", "element"), True),
        (("m", "key_value", "key"), True),
        (("m", "key_value", "value"), True),
        (("a.b",), False),  # a dot inside a name stays inside the name
    ]
    # A leaf under a null struct counts as null: x is null in 1 row, z in 2.
    assert bounds(fs, "st", "x") == (1, 2, 1)
    assert bounds(fs, "st", "y", "z") == ("q", "q", 2)
    assert bounds(fs, "lst", "list", "element")[:2] == (1, 9)
    assert bounds(fs, "m", "key_value", "key")[:2] == ("a", "k")
    assert bounds(fs, "a.b") == (1, 3, 0)


def test_field_ids_from_the_schema(tmp_path: Path) -> None:
    def fid(n: int) -> dict[bytes, bytes]:
        return {b"PARQUET:field_id": str(n).encode()}

    schema = pa.schema(
        [
            pa.field("a", pa.int32(), metadata=fid(1)),
            pa.field("s", pa.struct([pa.field("x", pa.int64(), metadata=fid(3))]), metadata=fid(2)),
            pa.field("l", pa.list_(pa.field("element", pa.string(), metadata=fid(5))), metadata=fid(4)),
            pa.field("plain", pa.int32()),
        ]
    )
    table = pa.table({"a": [1], "s": [{"x": 7}], "l": [["v"]], "plain": [0]}, schema=schema)
    fs = stats_of(tmp_path, table)
    assert [(c.column.path, c.column.field_id) for c in fs] == [
        (("a",), 1),
        (("s", "x"), 3),
        (("l", "list", "element"), 5),
        (("plain",), None),
    ]
    found = fs.get_by_field_id(3)
    assert found is not None and found.min == 7


def test_row_groups_are_aggregated(tmp_path: Path) -> None:
    table = pa.table(
        {
            "n": pa.array([5, 3, None, None, 9, -1], pa.int64()),
            "s": pa.array(["m", "n", None, None, "a", "z"]),
            "f": pa.array([1.0, math.nan, None, None, -4.0, 2.0]),
        }
    )
    meta = write(tmp_path, table, row_group_size=2)
    assert meta.num_row_groups == 3
    assert not meta.row_group(1).column(0).statistics.has_min_max  # the all-null row group
    fs = file_statistics(meta)
    assert fs.num_rows == 6
    assert bounds(fs, "n") == (-1, 9, 2)
    assert bounds(fs, "s") == ("a", "z", 2)
    assert bounds(fs, "f") == (-4.0, 2.0, 2)
    n = fs.get(("n",))
    assert n is not None and n.value_count == 6


def test_a_row_group_without_statistics_makes_bounds_unknown(tmp_path: Path) -> None:
    with_stats = write(tmp_path, pa.table({"n": [1, 2]}), "a.parquet")
    without = write(tmp_path, pa.table({"n": [0, 3]}), "b.parquet", write_statistics=False)
    assert without.row_group(0).column(0).statistics is None
    with_stats.append_row_groups(without)
    column = file_statistics(with_stats).get(("n",))
    assert column is not None
    assert (column.min, column.max, column.null_count, column.value_count) == (None, None, None, 4)


def test_statistics_for_some_columns_only(tmp_path: Path) -> None:
    table = pa.table({"kept": [1, 2], "dropped": [3, 4]})
    fs = stats_of(tmp_path, table, write_statistics=["kept"])
    assert bounds(fs, "kept") == (1, 2, 0)
    assert bounds(fs, "dropped") == (None, None, None)


def test_typed_and_raw_decoding_agree(tmp_path: Path) -> None:
    """Every bound pyarrow returns typed must equal the same bound decoded from the raw bytes."""
    d = Decimal
    table = pa.table(
        {
            "i8": pa.array([-5, 3], pa.int8()),
            "u32": pa.array([1, 2**32 - 1], pa.uint32()),
            "u64": pa.array([1, 2**64 - 1], pa.uint64()),
            "f": pa.array([-0.5, 2.25], pa.float32()),
            "dec_i32": pa.array([d("-1.23"), d("4.56")], pa.decimal128(5, 2)),
            "dec_i64": pa.array([d("-1.23"), d("4.56")], pa.decimal128(12, 2)),
            "dec_flba": pa.array([d("-1.23"), d("4.56")], pa.decimal128(30, 2)),
            "date": pa.array([dt.date(1900, 1, 1), dt.date(2100, 1, 1)]),
            "ts": pa.array([dt.datetime(1900, 1, 1, 0, 0, 0, 1), dt.datetime(2100, 1, 1)], pa.timestamp("us", "UTC")),
            "tsms": pa.array([dt.datetime(1900, 1, 1), dt.datetime(2100, 1, 1)], pa.timestamp("ms")),
            "time": pa.array([dt.time(1), dt.time(2, 0, 0, 5)], pa.time64("us")),
            "s": pa.array(["a", "ü"]),
            "flag": pa.array([False, True]),
        }
    )
    meta = write(tmp_path, table, store_decimal_as_integer=True)
    row_group = meta.row_group(0)
    checked = 0
    for column in file_statistics(meta):
        st = row_group.column(column.column.index).statistics
        assert column.min is not None and column.max is not None, column.column.path
        assert decode_raw(st.min_raw, column.column.type, "min") == column.min, column.column.path
        assert decode_raw(st.max_raw, column.column.type, "max") == column.max, column.column.path
        checked += 1
    assert checked == table.num_columns


def test_the_databricks_file_without_usable_string_bounds() -> None:
    """A Photon-written file whose string min/max pyarrow does not trust (legacy fields only)."""
    path = (
        TESTDATA
        / "delta-rs"
        / "table_with_column_mapping"
        / "BH"
        / "part-00000-4d6e745c-8e04-48d9-aa60-438228358f1a.c000.zstd.parquet"
    )
    fs = file_statistics(pq.ParquetFile(path).metadata)
    (column,) = fs.columns
    assert column.column.path == ("col-3877fd94-0973-4941-ac6b-646849a1ff65",)
    assert column.column.field_id == 2
    assert (column.min, column.max, column.null_count, column.value_count) == (None, None, 0, 4)


# ---------------------------------------------------------------------------------------------
# Annotations pyarrow does not write: stand-ins with pyarrow's attribute names
# ---------------------------------------------------------------------------------------------


class FakeLogical:
    def __init__(self, type_: str = "NONE", **params: Any) -> None:
        self.type = type_
        self._params = {"Type": type_.title(), **params}

    def to_json(self) -> str:
        return json.dumps(self._params)


class FakeColumn:
    def __init__(
        self,
        name: str,
        physical_type: str,
        logical: FakeLogical | None = None,
        converted_type: str = "NONE",
        precision: int = -1,
        scale: int = -1,
        length: int = 0,
    ) -> None:
        self.name = self.path = name
        self.physical_type = physical_type
        self.logical_type = logical or FakeLogical()
        self.converted_type = converted_type
        self.precision, self.scale, self.length = precision, scale, length
        self.max_repetition_level = 0


class FakeStats:
    def __init__(self, min_raw: Any, max_raw: Any, null_count: int = 0, typed: tuple[Any, Any] | None = None):
        self.has_min_max = True
        self.min_raw, self.max_raw = min_raw, max_raw
        self.has_null_count, self.null_count = True, null_count
        self._typed = typed if typed is not None else (min_raw, max_raw)

    @property
    def min(self) -> Any:
        if isinstance(self._typed[0], Exception):
            raise self._typed[0]
        return self._typed[0]

    @property
    def max(self) -> Any:
        return self._typed[1]


class FakeChunk:
    def __init__(self, stats: FakeStats, num_values: int) -> None:
        self.statistics, self.is_stats_set, self.num_values = stats, True, num_values


class FakeRowGroup:
    def __init__(self, chunks: list[FakeChunk]) -> None:
        self.chunks = chunks
        self.num_columns = len(chunks)

    def column(self, i: int) -> FakeChunk:
        return self.chunks[i]


class FakeSchema:
    def __init__(self, columns: list[FakeColumn]) -> None:
        self.columns = columns

    def column(self, i: int) -> FakeColumn:
        return self.columns[i]

    def to_arrow_schema(self) -> pa.Schema:
        raise NotImplementedError


class FakeFooter:
    def __init__(self, columns: list[FakeColumn], row_groups: list[list[FakeChunk]], num_rows: int) -> None:
        self.schema = FakeSchema(columns)
        self.num_columns = len(columns)
        self.num_row_groups = len(row_groups)
        self.num_rows = num_rows
        self._row_groups = [FakeRowGroup(chunks) for chunks in row_groups]

    def row_group(self, i: int) -> FakeRowGroup:
        return self._row_groups[i]


def fake_stats(columns: list[FakeColumn], stats: list[FakeStats]) -> FileStatistics:
    footer = FakeFooter(columns, [[FakeChunk(s, 3) for s in stats]], 3)
    return file_statistics(footer)


def test_decimal_on_byte_array_enum_bson_interval() -> None:
    def be(n: int) -> bytes:  # minimal two's complement, big-endian
        return n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True)

    columns = [
        FakeColumn("dec", "BYTE_ARRAY", FakeLogical("DECIMAL", precision=40, scale=3)),
        FakeColumn("enum", "BYTE_ARRAY", FakeLogical("ENUM")),
        FakeColumn("bson", "BYTE_ARRAY", FakeLogical("BSON")),
        FakeColumn("interval", "FIXED_LEN_BYTE_ARRAY", FakeLogical("INTERVAL"), length=12),
    ]
    stats = [
        # pyarrow's typed value for BYTE_ARRAY decimals is not relied on: give it garbage.
        FakeStats(be(-(10**39) + 1), be(1234), typed=(b"junk", b"junk")),
        FakeStats(b"APPLE", b"PEAR"),
        FakeStats(b"\x05\x00\x00\x00\x00", b"\x06\x00\x00\x00\x00"),
        FakeStats(b"\x00" * 12, b"\x01" * 12),
    ]
    fs = fake_stats(columns, stats)
    assert bounds(fs, "dec") == (Decimal("-999999999999999999999999999999999999.999"), Decimal("1.234"), 0)
    assert bounds(fs, "enum") == ("APPLE", "PEAR", 0)
    assert bounds(fs, "bson") == (b"\x05\x00\x00\x00\x00", b"\x06\x00\x00\x00\x00", 0)
    assert bounds(fs, "interval") == (None, None, 0)  # sort order undefined


def test_converted_type_only_schemas() -> None:
    columns = [
        FakeColumn("s", "BYTE_ARRAY", converted_type="UTF8"),
        FakeColumn("u", "INT32", converted_type="UINT_32"),
        FakeColumn("ts", "INT64", converted_type="TIMESTAMP_MILLIS"),
        FakeColumn("dec", "INT64", converted_type="DECIMAL", precision=10, scale=2),
        FakeColumn("d", "INT32", converted_type="DATE"),
    ]
    # Raw values only (typed = raw here), so the unsigned and temporal readings come from us.
    stats = [
        FakeStats(b"abc", b"abd"),
        FakeStats(5, -1),  # -1 as stored is 2**32 - 1 unsigned
        FakeStats(-1, 172_800_000),
        FakeStats(-12_345, 99),
        FakeStats(-1, 0),
    ]
    fs = fake_stats(columns, stats)
    assert bounds(fs, "s") == ("abc", "abd", 0)
    assert bounds(fs, "u") == (5, 2**32 - 1, 0)
    assert bounds(fs, "ts")[:2] == (
        dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
        dt.datetime(1970, 1, 3, tzinfo=UTC),
    )
    assert bounds(fs, "dec")[:2] == (Decimal("-123.45"), Decimal("0.99"))
    assert bounds(fs, "d")[:2] == (dt.date(1969, 12, 31), dt.date(1970, 1, 1))
    ts = fs.get(("ts",))
    assert ts is not None and ts.column.type == ColumnType(Kind.TIMESTAMP, "INT64", unit="ms", utc_adjusted=True)


def test_untrustworthy_footer_values_are_unknown() -> None:
    columns = [
        FakeColumn("nan_max", "DOUBLE"),  # an old writer that put NaN into max
        FakeColumn("bad_utf8", "BYTE_ARRAY", FakeLogical("STRING")),
        FakeColumn("future_unit", "INT64", FakeLogical("TIMESTAMP", isAdjustedToUTC=True, timeUnit="picos")),
        FakeColumn("geo", "BYTE_ARRAY", FakeLogical("GEOMETRY")),
    ]
    stats = [
        FakeStats(1.0, math.nan),
        FakeStats(b"\xff\xfe", b"\xff\xff", typed=(UnicodeDecodeError("utf-8", b"", 0, 1, "bad"), None)),
        FakeStats(1, 2),
        FakeStats(b"\x00", b"\x01"),
    ]
    fs = fake_stats(columns, stats)
    for name in ("nan_max", "bad_utf8", "future_unit", "geo"):
        assert bounds(fs, name) == (None, None, 0), name
    future = fs.get(("future_unit",))
    assert future is not None and future.column.type.kind is Kind.UNSUPPORTED


def test_column_type_of_real_schema_columns(tmp_path: Path) -> None:
    meta = write(tmp_path, pa.table({"d": pa.array([Decimal("1.5")], pa.decimal128(20, 4))}))
    assert column_type(meta.schema.column(0)) == ColumnType(
        Kind.DECIMAL, "FIXED_LEN_BYTE_ARRAY", precision=20, scale=4, length=9
    )


def test_row_group_with_fewer_chunks_is_corrupt() -> None:
    footer = FakeFooter([FakeColumn("a", "INT32"), FakeColumn("b", "INT32")], [[FakeChunk(FakeStats(1, 2), 1)]], 1)
    with pytest.raises(CorruptFile, match="row group 0 has 1 column chunks"):
        file_statistics(footer)


# ---------------------------------------------------------------------------------------------
# NaN counts
# ---------------------------------------------------------------------------------------------


def test_nan_counts_by_parquet_path() -> None:
    nan = math.nan
    struct_type = pa.struct([("x", pa.float32()), ("n", pa.int32())])
    table = pa.table(
        {
            "f": pa.chunked_array([[1.0, nan], [None]]),
            "st": pa.array([{"x": nan, "n": 1}, {"x": 1.0, "n": 2}, None], struct_type),
            "lst": pa.array([[nan, 1.0], None, [nan]], pa.list_(pa.float64())),
            "m": pa.array([[("a", nan)], [("b", 1.0)], None], pa.map_(pa.string(), pa.float64())),
            "h": pa.array([1.0, None], pa.float16()).take([0, 1, 0]),
            "i": pa.array([1, 2, 3]),
        }
    )
    assert nan_counts(table) == {
        ("f",): 1,
        ("st", "x"): 1,
        ("lst", "list", "element"): 2,
        ("m", "key_value", "value"): 1,
        ("h",): 0,
    }
    # Slices count only what they show, also through list offsets.
    sliced = table.slice(1)
    counts = nan_counts(sliced)
    assert counts[("f",)] == 1 and counts[("lst", "list", "element")] == 1
    assert counts[("m", "key_value", "value")] == 0
    # A NaN hidden under a null struct is no value at all.
    hidden = pa.StructArray.from_arrays([pa.array([nan, nan])], names=["x"], mask=pa.array([True, False]))
    assert nan_counts(pa.table({"s": hidden})) == {("s", "x"): 1}
