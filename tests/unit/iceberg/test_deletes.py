"""Row-level deletes ("Delete Formats"): position and equality delete files as written, read back, and
applied to data files read by field id."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from iceberg_merge_on_read import write_equality_deletes, write_position_deletes

from lakeops.errors import InvalidArgument, ProtocolError
from lakeops.iceberg.arrow_schema import field_id, to_arrow_schema
from lakeops.iceberg.data_reader import ParquetDataFile, iter_parquet, read_parquet
from lakeops.iceberg.data_writer import write_parquet
from lakeops.iceberg.deletes import (
    FILE_PATH_ID,
    POS_ID,
    apply_equality_deletes,
    apply_position_deletes,
    read_equality_deletes,
    read_position_deletes,
)
from lakeops.iceberg.single_values import from_bytes
from lakeops.iceberg.types import PrimitiveType, Schema, StructType
from lakeops.storage import LocalStorage


def schema_of(*fields: dict[str, Any]) -> Schema:
    return Schema.model_validate({"type": "struct", "fields": list(fields)})


def field(fid: int, name: str, type_: Any, required: bool = False) -> dict[str, Any]:
    return {"id": fid, "name": name, "required": required, "type": type_}


STORAGE = LocalStorage()
DATA_A = "s3://bucket/warehouse/db/events/data/00000-0-a-long-data-file-name.parquet"
DATA_B = "s3://bucket/warehouse/db/events/data/00001-0-b-long-data-file-name.parquet"


# --- position deletes ------------------------------------------------------------------------------


def test_position_delete_file_layout(tmp_path: Path) -> None:
    location = str(tmp_path / "pos-deletes.parquet")
    written = write_position_deletes(STORAGE, location, [(DATA_B, 3), (DATA_A, 9), (DATA_B, 0), (DATA_A, 2)])
    raw = pq.read_table(location)
    # sorted by file_path, then pos, as the spec requires
    assert raw.to_pylist() == [
        {"file_path": DATA_A, "pos": 2},
        {"file_path": DATA_A, "pos": 9},
        {"file_path": DATA_B, "pos": 0},
        {"file_path": DATA_B, "pos": 3},
    ]
    ids = {f.name: field_id(f) for f in pq.ParquetFile(location).schema_arrow}
    assert ids == {"file_path": FILE_PATH_ID, "pos": POS_ID} == {"file_path": 2147483546, "pos": 2147483545}
    assert [f.nullable for f in pq.ParquetFile(location).schema_arrow] == [False, False]
    # full (untruncated) file_path bounds, so planning can tell which data files are targeted
    string, long_ = PrimitiveType(name="string"), PrimitiveType(name="long")
    assert from_bytes(string, written.lower_bounds[FILE_PATH_ID]) == DATA_A
    assert from_bytes(string, written.upper_bounds[FILE_PATH_ID]) == DATA_B
    assert (from_bytes(long_, written.lower_bounds[POS_ID]), from_bytes(long_, written.upper_bounds[POS_ID])) == (0, 9)
    assert written.record_count == 4 and written.null_value_counts == {FILE_PATH_ID: 0, POS_ID: 0}
    with pytest.raises(InvalidArgument, match="positions must be >= 0"):
        write_position_deletes(STORAGE, str(tmp_path / "negative.parquet"), [(DATA_A, -1)])


def test_read_position_deletes_groups_by_data_file(tmp_path: Path) -> None:
    location = str(tmp_path / "pos-deletes.parquet")
    write_position_deletes(STORAGE, location, [(DATA_B, 7), (DATA_A, 5), (DATA_B, 1), (DATA_A, 0), (DATA_B, 4)])
    deletes = read_position_deletes(STORAGE, location)
    assert {path: positions.to_pylist() for path, positions in deletes.items()} == {DATA_A: [0, 5], DATA_B: [1, 4, 7]}
    assert all(positions.type == pa.int64() for positions in deletes.values())
    data = str(tmp_path / "data.parquet")
    schema = schema_of(field(1, "id", "long"))
    write_parquet(STORAGE, data, pa.table({"id": [1]}, schema=to_arrow_schema(schema)), schema)
    with pytest.raises(ProtocolError, match=r"data.parquet: a position delete file needs field ids"):
        read_position_deletes(STORAGE, data)


def test_position_deletes_apply_across_row_groups_and_batches(tmp_path: Path) -> None:
    schema = schema_of(field(1, "id", "long", True), field(2, "text", "string"))
    rows = 5_000
    table = pa.table({"id": range(rows), "text": [f"value {i}" for i in range(rows)]}, schema=to_arrow_schema(schema))
    data = str(tmp_path / "data.parquet")
    write_parquet(STORAGE, data, table, schema, properties={"write.parquet.row-group-size-bytes": "20000"})
    assert pq.ParquetFile(data).metadata.num_row_groups > 3
    deleted = {0, 1, 699, 700, 701, 2_345, 4_998, 4_999}
    location = str(tmp_path / "pos-deletes.parquet")
    write_position_deletes(STORAGE, location, [(data, p) for p in deleted] + [(DATA_A, 3)])
    positions = read_position_deletes(STORAGE, location)[data]
    kept, start = [], 0
    for batch in iter_parquet(STORAGE, data, schema, batch_rows=700):
        live = apply_position_deletes(batch, start, positions)
        assert isinstance(live, pa.RecordBatch)
        start += batch.num_rows
        kept += live.column(0).to_pylist()
    assert kept == [i for i in range(rows) if i not in deleted]
    whole = apply_position_deletes(read_parquet(STORAGE, data, schema), 0, positions)
    assert isinstance(whole, pa.Table) and whole.column("id").to_pylist() == kept
    untouched = table.slice(100, 50)
    assert apply_position_deletes(untouched, 100, positions) is untouched


# --- equality deletes ------------------------------------------------------------------------------

SPEC_TABLE = schema_of(field(1, "id", "int"), field(2, "category", "string"), field(3, "name", "string"))
SPEC_ROWS = pa.table(
    {"id": [1, 2, 3, 4], "category": ["marsupial", "toy", None, None], "name": ["Koala", "Teddy", "Grizzly", "Polar"]},
    schema=to_arrow_schema(SPEC_TABLE),
)


def equality_file(tmp_path: Path, name: str, rows: pa.Table, ids: list[int], schema: StructType) -> pa.Table:
    location = str(tmp_path / name)
    write_equality_deletes(STORAGE, location, rows, ids, schema)
    return read_equality_deletes(STORAGE, location, ids, schema)


def test_the_spec_examples(tmp_path: Path) -> None:
    """ "id = 3" with equality_ids [1] (the file may carry the whole row), and "id = 4 AND category IS
    NULL" with [1, 2]: row 3 also has a null category but a different id, so it stays."""
    by_id = equality_file(tmp_path, "by-id.parquet", SPEC_ROWS.slice(2, 1), [1], SPEC_TABLE)
    assert by_id.to_pylist() == [{"id": 3}]
    assert apply_equality_deletes(SPEC_ROWS, [([1], by_id)], SPEC_TABLE).column("name").to_pylist() == [
        "Koala",
        "Teddy",
        "Polar",
    ]
    both = equality_file(tmp_path, "both.parquet", SPEC_ROWS.slice(3, 1), [1, 2], SPEC_TABLE)
    assert both.to_pylist() == [{"id": 4, "category": None}]
    assert apply_equality_deletes(SPEC_ROWS, [([1, 2], both)], SPEC_TABLE).column("name").to_pylist() == [
        "Koala",
        "Teddy",
        "Grizzly",
    ]
    # both files at once: a row goes when any file deletes it
    result = apply_equality_deletes(SPEC_ROWS, [([1], by_id), ([1, 2], both)], SPEC_TABLE)
    assert result.column("id").to_pylist() == [1, 2]


def test_null_equals_null(tmp_path: Path) -> None:
    rows = pa.table(
        {"id": [1, None, 3, None], "category": ["a", "b", None, None], "name": ["w", "x", "y", "z"]},
        schema=to_arrow_schema(SPEC_TABLE),
    )
    deletes = equality_file(tmp_path, "nulls.parquet", pa.table({"category": [None], "id": [None]}), [2], SPEC_TABLE)
    assert apply_equality_deletes(rows, [([2], deletes)], SPEC_TABLE).column("name").to_pylist() == ["w", "x"]
    pair = equality_file(tmp_path, "pair.parquet", pa.table({"id": [None], "category": ["b"]}), [1, 2], SPEC_TABLE)
    assert apply_equality_deletes(rows, [([1, 2], pair)], SPEC_TABLE).column("name").to_pylist() == ["w", "y", "z"]


NESTED = schema_of(
    field(1, "id", "long"),
    field(2, "loc", {"type": "struct", "fields": [field(3, "lat", "decimal(8,3)"), field(4, "zone", "string")]}),
    field(5, "score", "double"),
    field(6, "tags", {"type": "list", "element-id": 7, "element-required": False, "element": "string"}),
)


LAT = Decimal("1.500")


def test_equality_columns_nested_in_structs(tmp_path: Path) -> None:
    rows = pa.table(
        {
            "id": [1, 2, 3, 4],
            "loc": [{"lat": LAT, "zone": "a"}, {"lat": LAT, "zone": "b"}, None, {"lat": None, "zone": "a"}],
            "score": [1.0, 2.0, 3.0, 4.0],
            "tags": [["x"], None, [], ["y"]],
        },
        schema=to_arrow_schema(NESTED),
    )
    delete_rows = pa.table({"loc": [{"lat": LAT, "zone": "a"}, {"lat": None, "zone": "ignored"}]})
    location = str(tmp_path / "nested.parquet")
    written = write_equality_deletes(STORAGE, location, delete_rows, [3], NESTED)
    # the file holds only the equality column, under its table ids, inside its struct
    assert ParquetDataFile(STORAGE, location).field_ids == {2, 3}
    assert written.record_count == 2
    deletes = read_equality_deletes(STORAGE, location, [3], NESTED)
    assert deletes.to_pylist() == [{"loc": {"lat": LAT}}, {"loc": {"lat": None}}]
    # lat = 1.5 deletes rows 1 and 2; lat IS NULL deletes row 4 and row 3, whose struct is null
    assert apply_equality_deletes(rows, [([3], deletes)], NESTED).num_rows == 0
    by_zone_and_lat = equality_file(tmp_path, "two.parquet", delete_rows, [3, 4], NESTED)
    assert apply_equality_deletes(rows, [([3, 4], by_zone_and_lat)], NESTED).column("id").to_pylist() == [2, 3, 4]


def test_equality_ids_must_be_usable(tmp_path: Path) -> None:
    rows = pa.table({"score": [1.0], "id": [1]})
    with pytest.raises(InvalidArgument, match=r"float and double columns cannot be equality columns \(score"):
        write_equality_deletes(STORAGE, str(tmp_path / "f.parquet"), rows, [5], NESTED)
    with pytest.raises(InvalidArgument, match=r"tags.element \(id 7\) is not a primitive outside lists and maps"):
        write_equality_deletes(STORAGE, str(tmp_path / "l.parquet"), rows, [7], NESTED)
    with pytest.raises(InvalidArgument, match="equality field id 99 is not in the schema"):
        write_equality_deletes(STORAGE, str(tmp_path / "u.parquet"), rows, [99], NESTED)
    written = write_equality_deletes(STORAGE, str(tmp_path / "ok.parquet"), rows, [1], NESTED)
    with pytest.raises(ProtocolError, match=r"ok.parquet: equality delete file lacks .* \[2\]"):
        read_equality_deletes(STORAGE, written.location, [1, 2], NESTED)


def test_a_dropped_delete_column_still_applies(tmp_path: Path) -> None:
    """The delete file was written on column 2, since dropped: the reader projects id 2 from the data
    file by id (an extra read field) and the deletes still apply."""
    old = schema_of(field(1, "id", "long"), field(2, "region", "string"))
    data = str(tmp_path / "data.parquet")
    write_parquet(STORAGE, data, pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"]}), old)
    deletes = equality_file(tmp_path, "eq.parquet", pa.table({"region": ["eu"]}), [2], old)
    current = schema_of(field(1, "ident", "long"))
    projection = StructType(fields=(*current.fields, *old.fields[1:]))
    table = read_parquet(STORAGE, data, projection)
    live = apply_equality_deletes(table, [([2], deletes)], projection).select(["ident"])
    assert live.to_pylist() == [{"ident": 2}]


def test_vectorised_matching_agrees_with_row_by_row(tmp_path: Path) -> None:
    schema = schema_of(field(1, "a", "int"), field(2, "b", "string"), field(3, "c", "long"))
    generator = random.Random(7)

    def value(options: list[Any]) -> Any:
        return generator.choice([*options, None])

    data_rows = [{"a": value([1, 2, 3]), "b": value(["x", "y"]), "c": value([10, 20, 30, 40])} for _ in range(2_000)]
    delete_rows = [{"a": value([1, 2, 3]), "b": value(["x", "y"]), "c": value([10, 20])} for _ in range(12)]
    data = pa.Table.from_pylist(data_rows, schema=to_arrow_schema(schema))
    deletes = equality_file(tmp_path, "eq.parquet", pa.Table.from_pylist(delete_rows), [1, 2, 3], schema)
    doomed = {(r["a"], r["b"], r["c"]) for r in delete_rows}
    expected = [r for r in data_rows if (r["a"], r["b"], r["c"]) not in doomed]
    assert apply_equality_deletes(data, [([1, 2, 3], deletes)], schema).to_pylist() == expected
    assert len(expected) < len(data_rows)
