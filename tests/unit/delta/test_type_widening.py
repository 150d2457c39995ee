"""``typeWidening``: files written before a widening read as the current type, rewrites keep the
recorded type changes, unsupported changes refused ("Type Widening" and its reader and writer
requirements).

delta-rs 1.6 reads neither ``typeWidening`` nor ``typeWidening-preview`` tables, so the oracle is the
fixture's documented content (``type-widening-nested``: one row written with ``integer`` fields, one
after they were widened to ``long``) or the rows a test wrote itself.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_rs_sql import delta_rs_rows
from deltalake import write_deltalake
from lakeops_testdata import TESTDATA

from lakeops import api
from lakeops.delta.scan import read_snapshot
from lakeops.delta.schema import parse_type
from lakeops.delta.snapshot import load_snapshot
from lakeops.delta.type_widening import is_supported_widening
from lakeops.errors import ProtocolError, UnsupportedFeature
from lakeops.ops.cdc import CdcOptions
from lakeops.ops.compaction import CompactionOptions
from lakeops.storage import open_storage

NESTED = TESTDATA / "modern" / "delta" / "type-widening-nested"
LONG_MAX, LONG_MIN = 2**63 - 1, -(2**63)
NESTED_ROWS = [  # the fixture's rows, oldest first: the first written while the fields were integers
    {"struct": {"a": 1}, "map": [(2, 3)], "array": [4, 5]},
    {"struct": {"a": LONG_MAX}, "map": [(LONG_MAX, LONG_MAX)], "array": [LONG_MAX, LONG_MIN]},
]


@pytest.mark.parametrize(
    ("source", "target", "supported"),
    [
        ("byte", "short", True),
        ("short", "long", True),
        ("integer", "long", True),
        ("float", "double", True),
        ("integer", "double", True),
        ("date", "timestamp_ntz", True),
        ("decimal(6,2)", "decimal(10,4)", True),
        ("integer", "decimal(12,2)", True),
        ("long", "decimal(20,0)", True),
        ("long", "integer", False),
        ("long", "double", False),
        ("date", "timestamp", False),
        ("decimal(6,2)", "decimal(7,4)", False),  # the scale grows more than the precision
        ("integer", "decimal(10,1)", False),  # 10 + k1 with k1 >= k2: decimal(11,1) at least
        ("long", "decimal(19,0)", False),
        ("string", "binary", False),
    ],
)
def test_supported_type_changes_are_the_specs(source: str, target: str, supported: bool) -> None:
    assert is_supported_widening(parse_type(source), parse_type(target)) is supported


def _rows(root: Path) -> list[dict[str, Any]]:
    storage = open_storage(str(root))
    return read_snapshot(load_snapshot(storage, str(root)), storage).to_pylist()


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "nested"
    shutil.copytree(NESTED, root)
    return root


def _schema_strings(root: Path) -> list[str]:
    return [
        json.loads(line)["metaData"]["schemaString"]
        for log in sorted((root / "_delta_log").glob("*.json"))
        for line in log.read_text().splitlines()
        if "metaData" in line
    ]


def test_nested_fields_written_before_the_widening_read_as_long() -> None:
    assert _rows(NESTED) == NESTED_ROWS
    first = pq.read_schema(NESTED / "part-00000-138244f1-b939-40db-a4bd-d57cf3d214d2-c000.snappy.parquet")
    assert first.field("array").type.value_type == pa.int32()  # the file really holds the old type


def test_compaction_rewrites_in_the_current_type_and_keeps_the_type_changes(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    schema = _schema_strings(root)[-1]
    report = api.compact(str(root), CompactionOptions(min_input_files=2))
    assert (report.files_removed, report.files_added, report.rows_written) == (2, 1, 2)
    (written,) = [p for p in root.glob("*.parquet") if not p.name.startswith("part-00000-")]
    physical = pq.read_schema(written)
    assert physical.field("struct").type.field("a").type == pa.int64()
    assert (physical.field("map").type.key_type, physical.field("array").type.value_type) == (pa.int64(), pa.int64())
    assert _schema_strings(root)[-1] == schema and "delta.typeChanges" in schema  # no metaData committed
    assert api.checkpoint(str(root)).status == "written"
    storage = open_storage(str(root))
    assert load_snapshot(storage, str(root)).metadata.schema_string == schema  # the checkpoint kept it
    assert sorted(_rows(root), key=lambda r: r["struct"]["a"]) == NESTED_ROWS


def test_cdc_exports_old_files_in_the_current_type(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    output = tmp_path / "changes"
    assert api.cdc(str(root), CdcOptions(from_version=0, output=str(output))).rows_insert == 2
    changes = delta_rs_rows(output)  # the change table has no type history: delta-rs reads it
    assert changes.schema.field("struct").type.field("a").type == pa.int64()
    assert sorted(changes.select(["struct", "map", "array"]).to_pylist(), key=lambda r: r["struct"]["a"]) == [
        {**row, "map": [tuple(kv) for kv in row["map"]]} for row in NESTED_ROWS
    ]
    assert "delta.typeChanges" not in _schema_strings(output)[-1]


def _widened(tmp_path: Path) -> Path:
    """A delta-rs table of narrow types, then a commit widening every column (``typeWidening``)."""
    root = tmp_path / "widened"
    write_deltalake(
        str(root),
        pa.table(
            {
                "b": pa.array([1, -2], pa.int8()),
                "i": pa.array([3, 4], pa.int32()),
                "d": pa.array([dt.date(2024, 2, 29), None], pa.date32()),
                "m": pa.array([Decimal("1.25"), Decimal("-3.50")], pa.decimal128(5, 2)),
                "x": pa.array([7, None], pa.int32()),
            }
        ),
    )
    _commit_widening(
        root,
        {
            "b": ("byte", "long"),
            "i": ("integer", "double"),
            "d": ("date", "timestamp_ntz"),
            "m": ("decimal(5,2)", "decimal(10,4)"),
            "x": ("integer", "decimal(12,2)"),
        },
    )
    return root


def _commit_widening(root: Path, changes: dict[str, tuple[str, str]]) -> None:
    """Commit version 1 of a delta-rs table: ``typeWidening`` (and ``timestampNtz``) enabled and each
    named column widened, its change recorded in ``delta.typeChanges``."""
    first = (root / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    metadata = next(json.loads(line) for line in first if '"metaData"' in line)
    schema = json.loads(metadata["metaData"]["schemaString"])
    for field in schema["fields"]:
        if field["name"] in changes:
            source, target = changes[field["name"]]
            field.update(type=target, metadata={"delta.typeChanges": [{"fromType": source, "toType": target}]})
    metadata["metaData"]["schemaString"] = json.dumps(schema)
    metadata["metaData"]["configuration"] = {"delta.enableTypeWidening": "true"}
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["timestampNtz", "typeWidening"],
        "writerFeatures": ["appendOnly", "invariants", "timestampNtz", "typeWidening"],
    }
    (root / "_delta_log" / f"{1:020d}.json").write_text(
        json.dumps({"protocol": protocol}) + "\n" + json.dumps(metadata) + "\n"
    )


WIDENED_ROWS = [
    {"b": 1, "i": 3.0, "d": dt.datetime(2024, 2, 29), "m": Decimal("1.2500"), "x": Decimal("7.00")},
    {"b": -2, "i": 4.0, "d": None, "m": Decimal("-3.5000"), "x": None},
]


def test_every_kind_of_widening_reads_and_compacts(tmp_path: Path) -> None:
    root = _widened(tmp_path)
    assert _rows(root) == WIDENED_ROWS
    # A second file written before the widening, for compaction to merge (delta-rs cannot append to
    # a typeWidening table): the same file under another name.
    old = next(root.glob("*.parquet"))
    shutil.copy(old, root / "copy.parquet")
    add = next(
        json.loads(line)
        for line in (root / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
        if '"add"' in line
    )
    add["add"]["path"] = "copy.parquet"
    (root / "_delta_log" / f"{2:020d}.json").write_text(json.dumps(add) + "\n")

    report = api.compact(str(root), CompactionOptions(min_input_files=2))
    assert (report.files_removed, report.files_added) == (2, 1)
    assert _rows(root) == WIDENED_ROWS * 2
    assert api.checkpoint(str(root)).status == "written"


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"fromType": "long", "toType": "integer"}, UnsupportedFeature, "column b: type change long -> integer"),
        ({"fromType": "integer"}, ProtocolError, "column b: delta.typeChanges entry needs fromType and toType"),
    ],
)
def test_unsupported_or_malformed_type_changes_are_refused(
    tmp_path: Path, change: dict[str, str], error: type[Exception], message: str
) -> None:
    root = _widened(tmp_path)
    log = root / "_delta_log" / f"{1:020d}.json"
    protocol, metadata = (json.loads(line) for line in log.read_text().splitlines())
    schema = json.loads(metadata["metaData"]["schemaString"])
    schema["fields"][0]["metadata"]["delta.typeChanges"].append(change)
    metadata["metaData"]["schemaString"] = json.dumps(schema)
    log.write_text(json.dumps(protocol) + "\n" + json.dumps(metadata) + "\n")
    with pytest.raises(error, match=message) as info:
        api.inspect(str(root))
    assert str(root) in str(info.value)


def test_partition_column_widened_from_date_reads_its_old_values_as_midnight(tmp_path: Path) -> None:
    root = tmp_path / "partitioned"
    write_deltalake(str(root), pa.table({"id": [1], "day": [dt.date(2024, 2, 29)]}), partition_by=["day"])
    _commit_widening(root, {"day": ("date", "timestamp_ntz")})
    assert _rows(root) == [{"id": 1, "day": dt.datetime(2024, 2, 29)}]
