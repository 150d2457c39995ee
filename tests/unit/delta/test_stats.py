"""Delta per-file statistics (``lakeops.delta.stats``), checked against what delta-rs writes.

Each comparison writes the same data with ``deltalake.write_deltalake`` (delta-rs 1.6) and compares
the parsed ``stats`` JSON: ours computed from delta-rs's own data file, and ours computed from a
file we write ourselves (``logical_to_physical`` + pyarrow), as a writer would.

Intentional differences from delta-rs 1.6, each asserted where it shows:

1. ``timestamp_ntz`` bounds: we write ``2024-01-01T12:00:00.123`` (ISO, always three fractional
   digits, like Delta Spark and delta-kernel); delta-rs writes ``2024-01-01 12:00:00.123`` and trims
   a zero fraction. Both parse to the same value; compared as datetimes.
2. Decimals: we write the exact decimal number; delta-rs goes through a double
   (``-1.2345678901234567e+19``). Compared numerically, and ours checked exact.
3. Strings longer than 32 characters: we cut the minimum to 32 characters and give the maximum a
   tie-breaker (Delta Spark's rule); delta-rs copies Parquet's 64-byte truncation. Both are checked to
   be valid bounds.
4. ``float``/``double`` maximum: we leave it out unless the caller proves there is no NaN
   (``nan_counts``); delta-rs writes the footer's maximum, which ignores NaN although Delta orders NaN
   above every number.
5. ``binary`` columns: we write their ``nullCount``; delta-rs leaves them out entirely.
6. ``delta.dataSkippingNumIndexedCols``: we count leaves as Delta Spark does (each field of a struct
   counts, and so does every array, map or binary column); delta-rs counts top-level columns and then
   takes every leaf of a struct it picked.
7. ``delta.dataSkippingStatsColumns`` naming a nested field: we honour it; delta-rs drops it.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake
from lakeops_testdata import TESTDATA

from lakeops.delta.actions import Metadata
from lakeops.delta.schema import (
    ArrayType,
    PrimitiveType,
    StructField,
    StructType,
    logical_to_physical,
    parse_schema,
)
from lakeops.delta.stats import (
    DataSkippingConfig,
    delta_stats,
    delta_stats_json,
    indexed_columns,
    parse_column_list,
    truncate_max_string,
    truncate_min_string,
)
from lakeops.errors import ProtocolError
from lakeops.parquet.statistics import file_statistics, nan_counts

UTC = dt.UTC


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


class Written:
    """A delta-rs table with one data file: its metadata, its add action, and the file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        actions = [
            json.loads(line)
            for commit in sorted((root / "_delta_log").glob("*.json"))
            for line in commit.read_text().splitlines()
        ]
        self.metadata = Metadata.model_validate(next(a["metaData"] for a in actions if "metaData" in a))
        self.adds = [a["add"] for a in actions if "add" in a]

    @property
    def schema(self) -> StructType:
        return parse_schema(self.metadata)

    def theirs(self, index: int = 0) -> dict[str, Any]:
        return json.loads(self.adds[index]["stats"])

    def file(self, index: int = 0) -> Path:
        return self.root / self.adds[index]["path"]

    def ours(self, index: int = 0, *, with_nan_counts: bool = True, **kwargs: Any) -> dict[str, Any]:
        """Our stats of delta-rs's own data file."""
        path = self.file(index)
        counts = nan_counts(pq.read_table(path)) if with_nan_counts else None
        return json.loads(
            delta_stats_json(
                pq.ParquetFile(path).metadata,
                self.schema,
                partition_columns=self.metadata.partition_columns,
                config=DataSkippingConfig.from_configuration(self.metadata),
                nan_counts=counts,
                **kwargs,
            )
        )

    def ours_rewritten(self, data: pa.Table, tmp: Path, **write_options: Any) -> dict[str, Any]:
        """Our stats of a file we write ourselves from the same logical data."""
        physical = logical_to_physical(data, self.schema, "none", partition_columns=self.metadata.partition_columns)
        path = tmp / "ours.parquet"
        pq.write_table(physical, path, **write_options)
        return json.loads(
            delta_stats_json(
                pq.ParquetFile(path).metadata,
                self.schema,
                partition_columns=self.metadata.partition_columns,
                config=DataSkippingConfig.from_configuration(self.metadata),
                nan_counts=nan_counts(physical),
            )
        )


def write_delta(tmp_path: Path, data: pa.Table, name: str = "t", **kwargs: Any) -> Written:
    root = tmp_path / name
    write_deltalake(str(root), data, **kwargs)
    return Written(root)


def parse_ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def same_value(ours: Any, theirs: Any, column: str) -> None:
    if isinstance(theirs, dict):
        assert isinstance(ours, dict), column
        assert ours.keys() == theirs.keys(), column
        for key in theirs:
            same_value(ours[key], theirs[key], f"{column}.{key}")
    elif isinstance(ours, str) and column.split(".")[-1].startswith("ntz"):  # difference 1
        assert ours.count("T") == 1 and len(ours) == 23, ours
        assert parse_ts(ours) == parse_ts(theirs), column
    elif column.split(".")[-1].startswith("dec"):  # difference 2: compare as numbers
        assert math.isclose(float(ours), float(theirs), rel_tol=1e-15), column
    else:
        assert ours == theirs and type(ours) is type(theirs), (column, ours, theirs)


def assert_same_stats(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert ours["numRecords"] == theirs["numRecords"]
    for section in ("minValues", "maxValues", "nullCount"):
        same_value(ours[section], theirs[section], section)


def exact_numbers(stats_json: str) -> dict[str, Any]:
    return json.loads(stats_json, parse_float=Decimal)


# ---------------------------------------------------------------------------------------------
# Against delta-rs
# ---------------------------------------------------------------------------------------------


def primitives() -> pa.Table:
    d = Decimal
    return pa.table(
        {
            "i8": pa.array([-5, 3, None, 7], pa.int8()),
            "i16": pa.array([-300, 3, None, 7], pa.int16()),
            "i32": pa.array([-(2**31), 3, None, 2**31 - 1], pa.int32()),
            "i64": pa.array([-(2**63), 3, None, 2**63 - 1], pa.int64()),
            "f32": pa.array([1.5, -0.25, None, 3.0], pa.float32()),
            "f64": pa.array([-1e300, 0.1, None, 2.5], pa.float64()),
            "zero": pa.array([0.0, 1.0, None, 2.0], pa.float64()),
            "dec_small": pa.array([d("-1.23"), d("4.56"), None, d("0")], pa.decimal128(5, 2)),
            "dec_big": pa.array(
                [d("-12345678901234567890.12"), d("4.50"), None, d("99999999999999999999.99")],
                pa.decimal128(30, 2),
            ),
            "date": pa.array([dt.date(2020, 1, 1), dt.date(1969, 12, 31), None, dt.date(1, 1, 1)]),
            "ts": pa.array(
                [
                    dt.datetime(2024, 1, 1, 12, 0, 0, 123456),
                    dt.datetime(1960, 1, 1, 0, 0, 0, 999),
                    None,
                    dt.datetime(2000, 2, 29, 23, 59, 59, 999999),
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "ntz": pa.array(
                [dt.datetime(2024, 1, 1, 12, 0, 0, 123456), dt.datetime(1960, 1, 1), None, None],
                pa.timestamp("us"),
            ),
            "s": pa.array(["b", "é", None, "a\U0010ffff"]),
            "flag": pa.array([True, None, False, True]),
            "nulls": pa.array([None, None, None, None], pa.int64()),
        }
    )


def test_primitives_match_delta_rs(tmp_path: Path) -> None:
    data = primitives()
    written = write_delta(tmp_path, data)
    theirs = written.theirs()
    ours = written.ours()
    assert_same_stats(ours, theirs)
    # Our own file, in several row groups, gives the very same statistics.
    assert written.ours_rewritten(data, tmp_path, row_group_size=2) == ours
    # The all-null column has a nullCount and no bounds, in both.
    assert ours["nullCount"]["nulls"] == 4 and "nulls" not in ours["minValues"]


def test_values_are_encoded_exactly(tmp_path: Path) -> None:
    written = write_delta(tmp_path, primitives())
    path = written.file()
    text = delta_stats_json(
        pq.ParquetFile(path).metadata,
        written.schema,
        nan_counts=nan_counts(pq.read_table(path)),
    )
    exact = exact_numbers(text)
    assert exact["minValues"]["dec_big"] == Decimal("-12345678901234567890.12")
    assert exact["maxValues"]["dec_big"] == Decimal("99999999999999999999.99")
    assert '"dec_small":-1.23' in text and '"dec_small":4.56' in text
    assert exact["minValues"]["zero"] == 0 and '"zero":-0.0' in text  # min 0 read as -0.0
    assert exact["minValues"]["ts"] == "1960-01-01T00:00:00.000Z"  # 999 us truncated down
    assert exact["maxValues"]["ts"] == "2024-01-01T12:00:00.123Z"
    assert exact["minValues"]["ntz"] == "1960-01-01T00:00:00.000"
    assert exact["minValues"]["date"] == "0001-01-01"
    assert exact["maxValues"]["i64"] == 2**63 - 1
    assert exact["minValues"]["flag"] is False and exact["maxValues"]["flag"] is True


def test_nested_structs_lists_maps_and_binary(tmp_path: Path) -> None:
    inner = pa.struct([("q", pa.int64())])
    data = pa.table(
        {
            "st": pa.array(
                [{"x": 1, "y": "a", "z": {"q": 5}}, None, {"x": 2, "y": None, "z": None}],
                pa.struct([("x", pa.int32()), ("y", pa.string()), ("z", inner)]),
            ),
            "lst": pa.array([[1, 2], [3], None], pa.list_(pa.int32())),
            "m": pa.array([[("a", 1)], None, [("b", 2)]], pa.map_(pa.string(), pa.int64())),
            "bin": pa.array([b"\x00", b"\xff", None]),
        }
    )
    written = write_delta(tmp_path, data)
    theirs, ours = written.theirs(), written.ours()
    assert ours["nullCount"].pop("bin") == 1  # difference 5
    assert_same_stats(ours, theirs)
    assert ours["nullCount"] == {"st": {"x": 1, "y": 2, "z": {"q": 2}}}
    assert ours["minValues"] == {"st": {"x": 1, "y": "a", "z": {"q": 5}}}
    assert written.ours_rewritten(data, tmp_path)["maxValues"] == ours["maxValues"]


def test_float_maximum_needs_proof_of_no_nan(tmp_path: Path) -> None:
    data = pa.table(
        {
            "with_nan": pa.array([1.5, math.nan, -0.0], pa.float32()),
            "all_nan": pa.array([math.nan, None, math.nan]),
            "clean": pa.array([1.0, -2.0, None]),
        }
    )
    written = write_delta(tmp_path, data)
    theirs = written.theirs()
    assert theirs["maxValues"] == {"with_nan": 1.5, "clean": 1.0}  # delta-rs ignores the NaN
    ours = written.ours()
    assert ours["maxValues"] == {"clean": 1.0}  # difference 4
    assert ours["minValues"] == theirs["minValues"] == {"with_nan": -0.0, "clean": -2.0}
    assert ours["nullCount"] == theirs["nullCount"]
    blind = written.ours(with_nan_counts=False)  # no proof at all: no float maximum
    assert blind["maxValues"] == {} and blind["minValues"] == ours["minValues"]


def test_long_strings_are_truncated_to_valid_bounds(tmp_path: Path) -> None:
    values = ["b" * 40, "é" * 40 + "z", "\U0010ffff" * 40, "a" * 32 + "\U0010ffff" * 80 + "b", "short"]
    data = pa.table({f"s{i}": pa.array([v, v]) for i, v in enumerate(values)})
    written = write_delta(tmp_path, data)
    theirs, ours = written.theirs(), written.ours()
    for i, value in enumerate(values):
        column = f"s{i}"
        lo = ours["minValues"][column]
        # A prefix of at most 32 characters (of the footer's minimum, which may be shorter already).
        assert value.startswith(lo) and len(lo) <= 32 and theirs["minValues"][column] <= value
        if column in ours["maxValues"]:
            assert ours["maxValues"][column] >= value and theirs["maxValues"][column] >= value
    # difference 3, by example
    assert ours["maxValues"]["s0"] == "b" * 32 + "\x7f"
    assert ours["maxValues"]["s1"] == "é" * 31 + "ê"  # delta-rs's file already holds this bound
    assert ours["maxValues"]["s2"] == "\U0010ffff" * 40  # nothing sorts above: kept whole
    # delta-rs's footer already holds a 64-byte bound for s3 ("a" * 31 + "b"), which we keep.
    assert ours["maxValues"]["s3"] == theirs["maxValues"]["s3"] == "a" * 31 + "b"
    assert ours["maxValues"]["s4"] == theirs["maxValues"]["s4"] == "short"
    # From an untruncated footer (pyarrow's), s3 has no upper bound within 64 characters: omitted.
    mine = written.ours_rewritten(data, tmp_path)
    assert "s3" not in mine["maxValues"] and mine["minValues"]["s3"] == "a" * 32
    assert mine["maxValues"]["s1"] == "é" * 32 + "\U0010ffff"


@pytest.mark.parametrize(
    ("configuration", "partition_by"),
    [
        ({"delta.dataSkippingNumIndexedCols": "2"}, None),
        ({"delta.dataSkippingNumIndexedCols": "2"}, ["p"]),
        ({"delta.dataSkippingNumIndexedCols": "-1"}, None),
        ({"delta.dataSkippingNumIndexedCols": "0"}, None),
        ({"delta.dataSkippingStatsColumns": "d,a"}, ["p"]),
        ({"delta.dataSkippingStatsColumns": "d,`a`"}, None),
        ({}, ["p"]),
    ],
)
def test_indexed_columns_match_delta_rs(
    tmp_path: Path, configuration: dict[str, str], partition_by: list[str] | None
) -> None:
    data = pa.table(
        {
            "p": pa.array([1, 1], pa.int32()),
            "a": pa.array([1, 2], pa.int32()),
            "c": pa.array(["x", "y"]),
            "d": pa.array([1, 2], pa.int64()),
        }
    )
    written = write_delta(tmp_path, data, partition_by=partition_by, configuration=configuration)
    assert_same_stats(written.ours(), written.theirs())


def test_indexed_columns_where_we_follow_delta_spark(tmp_path: Path) -> None:
    data = pa.table(
        {
            "p": pa.array([1, 1], pa.int32()),
            "a": pa.array([1, 2], pa.int32()),
            "st": pa.array(
                [{"x": 1, "y": "a"}, {"x": 2, "y": "b"}], pa.struct([("x", pa.int32()), ("y", pa.string())])
            ),
            "l": pa.array([[1], [2]], pa.list_(pa.int32())),
            "b": pa.array([b"1", b"2"]),
            "c": pa.array([1, 2], pa.int64()),
        }
    )
    # difference 6: the first two leaves are a and st.x; delta-rs takes a and all of st.
    written = write_delta(
        tmp_path, data, "two", partition_by=["p"], configuration={"delta.dataSkippingNumIndexedCols": "2"}
    )
    assert written.theirs()["minValues"] == {"a": 1, "st": {"x": 1, "y": "a"}}
    assert written.ours()["minValues"] == {"a": 1, "st": {"x": 1}}
    # Five leaves are a, st.x, st.y, l and b; c is the sixth. delta-rs counts a, st, l, b, c.
    written = write_delta(
        tmp_path, data, "five", partition_by=["p"], configuration={"delta.dataSkippingNumIndexedCols": "5"}
    )
    assert "c" in written.theirs()["minValues"]
    ours = written.ours()
    assert set(ours["minValues"]) == {"a", "st"} and set(ours["nullCount"]) == {"a", "st", "b"}
    # difference 7: the nested field is kept; the partition column is never indexed.
    written = write_delta(
        tmp_path, data, "nested", partition_by=["p"], configuration={"delta.dataSkippingStatsColumns": "st.y,c,p"}
    )
    assert written.theirs()["minValues"] == {"c": 1}
    assert written.ours()["minValues"] == {"st": {"y": "a"}, "c": 1}


# ---------------------------------------------------------------------------------------------
# Column mapping
# ---------------------------------------------------------------------------------------------


def test_the_column_mapping_fixture_uses_physical_names() -> None:
    table_dir = TESTDATA / "delta-rs" / "table_with_column_mapping"
    written = Written(table_dir)
    for index, add in enumerate(written.adds):
        recorded = json.loads(add["stats"])
        ours = delta_stats(
            pq.ParquetFile(written.file(index)).metadata,
            written.schema,
            mode="name",
            partition_columns=written.metadata.partition_columns,
        )
        physical = "col-3877fd94-0973-4941-ac6b-646849a1ff65"
        assert ours["numRecords"] == recorded["numRecords"]
        assert ours["nullCount"] == recorded["nullCount"] == {physical: 0}
        # The Photon-written footer holds only legacy string min/max, which are not trustworthy:
        # we say nothing rather than guess (Databricks computed its bounds from the data).
        assert ours["minValues"] == ours["maxValues"] == {}


def test_id_mode_stats_are_nested_by_physical_name(tmp_path: Path) -> None:
    def field(name: str, dtype: Any, cid: int) -> StructField:
        meta = {"delta.columnMapping.id": cid, "delta.columnMapping.physicalName": f"col-{cid}"}
        return StructField(name, dtype, True, meta)

    schema = StructType(
        (
            field("part", PrimitiveType("string"), 1),
            field("s", StructType((field("x", PrimitiveType("long"), 3), field("y", PrimitiveType("double"), 4))), 2),
            field("l", ArrayType(PrimitiveType("long")), 5),
        )
    )
    data = pa.table(
        {
            "part": ["a", "a", "a"],
            "s": pa.array(
                [{"x": 1, "y": 0.5}, None, {"x": -4, "y": math.nan}],
                pa.struct([("x", pa.int64()), ("y", pa.float64())]),
            ),
            "l": [[1], [], None],
        }
    )
    physical = logical_to_physical(data, schema, "id", partition_columns=["part"])
    path = tmp_path / "f.parquet"
    pq.write_table(physical, path)
    stats = delta_stats(
        pq.ParquetFile(path).metadata,
        schema,
        mode="id",
        partition_columns=["part"],
        nan_counts=nan_counts(physical),
        tight_bounds=True,
    )
    assert stats == {
        "numRecords": 3,
        "minValues": {"col-2": {"col-3": -4, "col-4": 0.5}},
        "maxValues": {"col-2": {"col-3": 1}},  # y holds a NaN: no maximum
        "nullCount": {"col-2": {"col-3": 1, "col-4": 1}},
        "tightBounds": True,
    }


def test_a_column_absent_from_the_file_gets_no_stats(tmp_path: Path) -> None:
    schema = StructType((StructField("a", PrimitiveType("long")), StructField("later", PrimitiveType("long"))))
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), path)
    stats = delta_stats(pq.ParquetFile(path).metadata, schema)
    assert stats["nullCount"] == {"a": 0} and stats["minValues"] == {"a": 1}


def test_accepts_precomputed_file_statistics(tmp_path: Path) -> None:
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"a": [3, 1]}), path)
    schema = StructType((StructField("a", PrimitiveType("long")),))
    footer = pq.ParquetFile(path).metadata
    assert delta_stats(file_statistics(footer), schema) == delta_stats(footer, schema)
    assert delta_stats_json(footer, schema) == (
        '{"numRecords":2,"minValues":{"a":1},"maxValues":{"a":3},"nullCount":{"a":0}}'
    )


# ---------------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------------


def test_string_bounds_rules() -> None:
    assert truncate_min_string("x" * 40) == "x" * 32
    assert truncate_max_string("x" * 32) == "x" * 32
    assert truncate_max_string("x" * 32 + "a") == "x" * 32 + "\x7f"
    assert truncate_max_string("x" * 32 + "\x7f") == "x" * 32 + "\U0010ffff"
    assert truncate_max_string("x" * 32 + "é") == "x" * 32 + "\U0010ffff"
    assert truncate_max_string("x" * 32 + "\U0010ffff" * 3 + "a") == "x" * 32 + "\U0010ffff" * 3 + "\x7f"
    assert truncate_max_string("x" * 32 + "\U0010ffff" * 40) is None
    assert truncate_max_string("ab", 0) is None
    # Property: the bound is >= the value, hence >= everything the value bounds.
    rng = random.Random(7)
    alphabet = ["a", "\x7e", "\x7f", "\x80", "é", "\uffff", "\U00010000", "\U0010ffff"]
    for _ in range(2000):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        upper = truncate_max_string(value, 8)
        assert upper is None or (upper >= value and len(upper) <= 17)
        assert upper is None or upper.encode() >= value.encode()  # UTF-8 byte order agrees
        assert truncate_min_string(value, 8) <= value


def test_parse_column_list() -> None:
    assert parse_column_list("a, b.c ,`d.e`.f, `x``y`") == (("a",), ("b", "c"), ("d.e", "f"), ("x`y",))
    assert parse_column_list("` spaced `") == ((" spaced ",),)
    with pytest.raises(ProtocolError, match="unclosed backtick"):
        parse_column_list("`a")
    with pytest.raises(ProtocolError, match="empty column name"):
        parse_column_list("a,,b")


def test_data_skipping_config() -> None:
    assert DataSkippingConfig.from_configuration({}) == DataSkippingConfig(32, None)
    config = DataSkippingConfig.from_configuration(
        {"delta.dataSkippingNumIndexedCols": "-1", "delta.dataSkippingStatsColumns": "a.b"}
    )
    assert config == DataSkippingConfig(-1, (("a", "b"),))
    with pytest.raises(ProtocolError, match="delta.dataSkippingNumIndexedCols='-2'"):
        DataSkippingConfig.from_configuration({"delta.dataSkippingNumIndexedCols": "-2"})
    with pytest.raises(ProtocolError, match="delta.dataSkippingNumIndexedCols='many'"):
        DataSkippingConfig.from_configuration({"delta.dataSkippingNumIndexedCols": "many"})


def test_indexed_columns_count_struct_leaves() -> None:
    long = PrimitiveType("long")
    schema = StructType(
        (
            StructField("a", long),
            StructField("s", StructType((StructField("x", long), StructField("y", long)))),
            StructField("z", long),
        )
    )

    def names(config: DataSkippingConfig) -> list[str]:
        return [".".join(f.name for f in leaf) for leaf in indexed_columns(schema, [], config)]

    assert names(DataSkippingConfig(2)) == ["a", "s.x"]
    assert names(DataSkippingConfig(3)) == ["a", "s.x", "s.y"]
    assert names(DataSkippingConfig(-1)) == ["a", "s.x", "s.y", "z"]
    assert names(DataSkippingConfig(0)) == []
    assert names(DataSkippingConfig(1, (("S",), ("z",)))) == ["s.x", "s.y", "z"]  # case-insensitive
    leaves = indexed_columns(schema, ["A"], DataSkippingConfig(2))  # partition columns never count
    assert [".".join(f.name for f in leaf) for leaf in leaves] == ["s.x", "s.y"]
