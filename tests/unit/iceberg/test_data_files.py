"""Iceberg Parquet data files: write → read round trips, metrics ("Manifests" data_file fields, metrics
modes, Appendix D bounds) and reading by field id ("Column Projection", defaults, promotions, name
mapping), with PyIceberg's reader and metrics code as the oracle on the same files."""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import (
    ArrowScan,
    PyArrowFileIO,
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import DataFile as PyIcebergDataFile
from pyiceberg.manifest import DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionSpec as PyIcebergPartitionSpec
from pyiceberg.schema import Schema as PyIcebergSchema
from pyiceberg.table import FileScanTask
from pyiceberg.table.metadata import TableMetadataV2
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.typedef import Record

from lakeops.errors import AlreadyExists, CorruptFile, InvalidArgument, NotFound, ProtocolError, UnsupportedFeature
from lakeops.iceberg.arrow_schema import to_arrow_schema
from lakeops.iceberg.data_reader import ParquetDataFile, iter_parquet, read_parquet
from lakeops.iceberg.data_writer import ParquetDataWriter, WrittenFile, metrics_modes, write_parquet
from lakeops.iceberg.single_values import from_bytes, to_bytes
from lakeops.iceberg.types import PrimitiveType, Schema, StructType
from lakeops.storage import LocalStorage, open_storage


def schema_of(*fields: dict[str, Any]) -> Schema:
    return Schema.model_validate({"type": "struct", "fields": list(fields)})


def field(fid: int, name: str, type_: Any, required: bool = False, **extra: Any) -> dict[str, Any]:
    return {"id": fid, "name": name, "required": required, "type": type_, **extra}


EVERYTHING = schema_of(
    field(1, "flag", "boolean", True),
    field(2, "small", "int"),
    field(3, "big", "long", True),
    field(4, "ratio", "float"),
    field(5, "score", "double"),
    field(6, "price", "decimal(9,2)"),
    field(7, "wide", "decimal(18,4)"),
    field(8, "huge", "decimal(38,6)"),
    field(9, "day", "date"),
    field(10, "clock", "time"),
    field(11, "local", "timestamp"),
    field(12, "instant", "timestamptz"),
    field(13, "name", "string"),
    field(14, "key", "uuid"),
    field(15, "code", "fixed[3]"),
    field(16, "blob", "binary"),
    field(17, "point", {"type": "struct", "fields": [field(18, "x", "long", True), field(19, "label", "string")]}),
    field(20, "tags", {"type": "list", "element-id": 21, "element-required": False, "element": "double"}),
    field(
        22,
        "attrs",
        {"type": "map", "key-id": 23, "key": "string", "value-id": 24, "value-required": False, "value": "int"},
    ),
)
NANOS = schema_of(field(1, "local_ns", "timestamp_ns"), field(2, "instant_ns", "timestamptz_ns"))

U1, U2 = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), uuid.UUID("0000000a-0000-4000-8000-000000000001")
ROWS: dict[str, list[Any]] = {
    "flag": [True, False, True],
    "small": [-5, None, 7],
    "big": [2**40, -1, 0],
    "ratio": [1.5, float("nan"), -2.25],
    "score": [0.0, 2.5, None],
    "price": [Decimal("12.34"), None, Decimal("-0.01")],
    "wide": [Decimal("99999999999999.9999"), Decimal("0.0001"), None],
    "huge": [Decimal("12345678901234567890123456789012.123456"), None, Decimal("-1.000000")],
    "day": [19_000, -1, None],
    "clock": [0, 86_399_999_999, 12_345],
    "local": [1_700_000_000_123_456, None, -5],
    "instant": [1, 2, 3],
    "name": ["a" * 20, "b", None],
    "key": [U1, None, U2],
    "code": [b"abc", b"\x00\x00\x00", b"\xff\xfe\xfd"],
    "blob": [b"\x00", b"\xff" * 20, None],
    "point": [{"x": 1, "label": "p"}, None, {"x": -3, "label": None}],
    "tags": [[1.0, float("nan")], None, []],
    "attrs": [[("k", 1)], None, [("a", None), ("b", 2)]],
}


def everything() -> pa.Table:
    return pa.table(ROWS, schema=to_arrow_schema(EVERYTHING))


def same(left: list[Any], right: list[Any]) -> bool:
    """Python values equal, NaN equal to NaN (the spec's values, not IEEE comparison)."""

    def norm(value: Any) -> Any:
        if isinstance(value, float) and math.isnan(value):
            return "NaN"
        if isinstance(value, dict):
            return {k: norm(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [norm(v) for v in value]
        return value

    return bool(norm(left) == norm(right))


def write(tmp_path: Path, table: pa.Table, schema: StructType, name: str = "data.parquet", **props: str) -> WrittenFile:
    location = str(tmp_path / name)
    return write_parquet(open_storage(str(tmp_path)), location, table, schema, properties=props)


# --- PyIceberg as the oracle -----------------------------------------------------------------------


def pyiceberg_schema(schema: StructType) -> PyIcebergSchema:
    return PyIcebergSchema.model_validate_json(json.dumps(Schema(fields=schema.fields).to_json()))


def pyiceberg_read(written: WrittenFile, table_schema: StructType, projection: StructType) -> pa.Table:
    """The file as PyIceberg's own scan reads it with ``projection`` (by field id)."""
    theirs = pyiceberg_schema(table_schema)
    metadata = TableMetadataV2(
        location=str(Path(written.location).parent),
        table_uuid=uuid.uuid4(),
        last_updated_ms=int(time.time() * 1000),
        last_column_id=Schema(fields=table_schema.fields).highest_field_id(),
        schemas=[theirs],
        current_schema_id=0,
        partition_specs=[PyIcebergPartitionSpec()],
        default_spec_id=0,
        last_partition_id=999,
        sort_orders=[UNSORTED_SORT_ORDER],
        default_sort_order_id=0,
    )
    data_file = PyIcebergDataFile.from_args(
        content=DataFileContent.DATA,
        file_path=written.location,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=written.record_count,
        file_size_in_bytes=written.file_size_in_bytes,
    )
    data_file.spec_id = 0
    scan = ArrowScan(metadata, PyArrowFileIO(), pyiceberg_schema(projection), AlwaysTrue())
    return scan.to_table([FileScanTask(data_file)])


def test_every_type_round_trips(tmp_path: Path) -> None:
    written = write(tmp_path, everything(), EVERYTHING)
    back = read_parquet(LocalStorage(), written.location, EVERYTHING)
    assert back.schema.equals(to_arrow_schema(EVERYTHING), check_metadata=True)
    assert same(back.to_pylist(), everything().to_pylist())
    assert written.record_count == 3 and written.file_format == "parquet"
    assert written.file_size_in_bytes == (tmp_path / "data.parquet").stat().st_size


def test_nanosecond_timestamps_round_trip_with_widened_bounds(tmp_path: Path) -> None:
    rows = pa.table({"local_ns": [1_001, 2_002], "instant_ns": [-7, None]}, schema=to_arrow_schema(NANOS))
    written = write(tmp_path, rows, NANOS)
    assert read_parquet(LocalStorage(), written.location, NANOS).equals(rows)
    long_ = PrimitiveType(name="long")
    # the statistics reader widens nanoseconds to whole microseconds: still bounds of every value
    assert from_bytes(long_, written.lower_bounds[1]) == 1_000
    assert from_bytes(long_, written.upper_bounds[1]) == 3_000
    assert from_bytes(long_, written.lower_bounds[2]) == -1_000
    assert from_bytes(long_, written.upper_bounds[2]) == 0


def test_pyiceberg_reads_our_file_and_agrees(tmp_path: Path) -> None:
    written = write(tmp_path, everything(), EVERYTHING)
    theirs = pyiceberg_read(written, EVERYTHING, EVERYTHING)
    assert same(theirs.to_pylist(), read_parquet(LocalStorage(), written.location, EVERYTHING).to_pylist())


def test_metrics_agree_with_pyiceberg(tmp_path: Path) -> None:
    written = write(tmp_path, everything(), EVERYTHING)
    theirs_schema = pyiceberg_schema(EVERYTHING)
    theirs = data_file_statistics_from_parquet_metadata(
        pq.ParquetFile(written.location).metadata,
        compute_statistics_plan(theirs_schema, {}),
        parquet_path_to_id_mapping(theirs_schema),
    ).to_serialized_dict()
    assert written.record_count == theirs["record_count"]
    assert written.column_sizes == theirs["column_sizes"]
    assert written.value_counts == theirs["value_counts"]
    assert written.null_value_counts == theirs["null_value_counts"]
    assert written.split_offsets == theirs["split_offsets"]
    # PyIceberg keeps no bounds for fields inside structs (18, 19); Java and the spec do.
    in_struct = {18, 19}
    assert {k: v for k, v in written.lower_bounds.items() if k not in in_struct} == theirs["lower_bounds"]
    assert {k: v for k, v in written.upper_bounds.items() if k not in in_struct} == theirs["upper_bounds"]
    long_, string = PrimitiveType(name="long"), PrimitiveType(name="string")
    assert (written.lower_bounds[18], written.upper_bounds[18]) == (to_bytes(long_, -3), to_bytes(long_, 1))
    assert written.lower_bounds[19] == written.upper_bounds[19] == to_bytes(string, "p")


def test_counts_nans_and_bounds_follow_the_spec(tmp_path: Path) -> None:
    written = write(tmp_path, everything(), EVERYTHING)
    # NaN counts for every float/double leaf, inside lists too; NaN is never a bound
    assert written.nan_value_counts == {4: 1, 5: 0, 21: 1}
    float_, double = PrimitiveType(name="float"), PrimitiveType(name="double")
    assert (from_bytes(float_, written.lower_bounds[4]), from_bytes(float_, written.upper_bounds[4])) == (-2.25, 1.5)
    # a zero minimum is -0.0, which precedes +0.0 (note 2)
    assert written.lower_bounds[5] == struct.pack("<d", -0.0)
    assert from_bytes(double, written.upper_bounds[5]) == 2.5
    # counts inside lists and maps are Parquet's leaf counts (a null or empty list is one null slot),
    # as Java and PyIceberg report them; no bounds there
    assert written.value_counts[21] == 4 and written.null_value_counts[21] == 2
    assert written.value_counts[23] == 4 and written.null_value_counts[24] == 2
    assert not {21, 23, 24} & (set(written.lower_bounds) | set(written.upper_bounds))
    # truncate(16): a 16-character prefix below, the prefix incremented above
    string, binary = PrimitiveType(name="string"), PrimitiveType(name="binary")
    assert from_bytes(string, written.lower_bounds[13]) == "a" * 16
    assert from_bytes(string, written.upper_bounds[13]) == "b"
    # 20 bytes of 0xFF have no 16-byte upper bound: none is written
    assert from_bytes(binary, written.lower_bounds[16]) == b"\x00"
    assert 16 not in written.upper_bounds
    assert from_bytes(PrimitiveType(name="uuid"), written.lower_bounds[14]) == U2


def test_metrics_modes_from_table_properties(tmp_path: Path) -> None:
    written = write(
        tmp_path,
        everything(),
        EVERYTHING,
        **{
            "write.metadata.metrics.default": "counts",
            "write.metadata.metrics.column.name": "full",
            "write.metadata.metrics.column.blob": "truncate(2)",
            "write.metadata.metrics.column.point.x": "none",
        },
    )
    assert set(written.lower_bounds) == {13, 16}
    assert from_bytes(PrimitiveType(name="string"), written.lower_bounds[13]) == "a" * 20
    assert written.lower_bounds[16] == b"\x00" and 16 not in written.upper_bounds
    assert 18 not in written.value_counts and 18 not in written.column_sizes
    assert written.value_counts[19] == 3 and written.value_counts[2] == 3


def test_max_inferred_column_defaults() -> None:
    wide = schema_of(*(field(i + 1, f"c{i}", "long") for i in range(101)))
    modes = metrics_modes(wide, {})
    assert modes[100].kind == "truncate" and modes[101].kind == "none"
    assert metrics_modes(wide, {"write.metadata.metrics.max-inferred-column-defaults": "101"})[101].kind == "truncate"
    explicit = metrics_modes(wide, {"write.metadata.metrics.default": "full"})
    assert {m.kind for m in explicit.values()} == {"full"}
    with pytest.raises(InvalidArgument, match="write.metadata.metrics.column.c3"):
        metrics_modes(wide, {"write.metadata.metrics.column.c3": "truncate(0)"})


def test_row_groups_fill_by_size_and_split_offsets(tmp_path: Path) -> None:
    schema = schema_of(field(1, "id", "long", True), field(2, "text", "string"))
    rows = pa.table({"id": range(20_000), "text": [f"row {i}" for i in range(20_000)]}, schema=to_arrow_schema(schema))
    location = str(tmp_path / "groups.parquet")
    writer = ParquetDataWriter(
        LocalStorage(), location, schema, properties={"write.parquet.row-group-size-bytes": "50000"}
    )
    for start in range(0, 20_000, 1_500):
        writer.write(rows.slice(start, 1_500).to_batches()[0])
    assert writer.rows == 20_000
    written = writer.finish()
    footer = pq.ParquetFile(location).metadata
    assert footer.num_row_groups > 3
    assert written.split_offsets == sorted(written.split_offsets)
    assert written.split_offsets[0] == 4
    assert written.split_offsets == [
        min(c.data_page_offset, c.dictionary_page_offset or c.data_page_offset)
        for c in (footer.row_group(g).column(0) for g in range(footer.num_row_groups))
    ]
    batches = list(iter_parquet(LocalStorage(), location, schema, batch_rows=4_000))
    assert max(b.num_rows for b in batches) <= 4_000
    assert pa.Table.from_batches(batches).equals(rows)


def test_parquet_settings_from_table_properties(tmp_path: Path) -> None:
    schema = schema_of(field(1, "id", "long"))
    rows = pa.table({"id": range(100)}, schema=to_arrow_schema(schema))
    default = write(tmp_path, rows, schema, "zstd.parquet")
    gzip = write(tmp_path, rows, schema, "gzip.parquet", **{"write.parquet.compression-codec": "gzip"})
    plain = write(tmp_path, rows, schema, "plain.parquet", **{"write.parquet.compression-codec": "uncompressed"})
    codecs = [pq.ParquetFile(w.location).metadata.row_group(0).column(0).compression for w in (default, gzip, plain)]
    assert codecs == ["ZSTD", "GZIP", "UNCOMPRESSED"]
    with pytest.raises(UnsupportedFeature, match="write.parquet.compression-codec"):
        write(tmp_path, rows, schema, "lzo.parquet", **{"write.parquet.compression-codec": "lzo"})
    with pytest.raises(InvalidArgument, match="write.parquet.row-group-size-bytes"):
        write(tmp_path, rows, schema, "bad.parquet", **{"write.parquet.row-group-size-bytes": "big"})


def test_never_overwrites_and_abort_stores_nothing(tmp_path: Path) -> None:
    schema = schema_of(field(1, "id", "long"))
    rows = pa.table({"id": [1]}, schema=to_arrow_schema(schema))
    first = write(tmp_path, rows, schema)
    before = (tmp_path / "data.parquet").read_bytes()
    with pytest.raises(AlreadyExists):
        write(tmp_path, pa.table({"id": [2, 3]}, schema=to_arrow_schema(schema)), schema)
    assert (tmp_path / "data.parquet").read_bytes() == before and first.record_count == 1
    writer = ParquetDataWriter(LocalStorage(), str(tmp_path / "aborted.parquet"), schema)
    writer.write(rows)
    writer.abort()
    assert not (tmp_path / "aborted.parquet").exists()
    with pytest.raises(InvalidArgument, match="aborted.parquet"):
        writer.write(rows)


def test_input_must_fit_the_schema(tmp_path: Path) -> None:
    schema = schema_of(field(1, "id", "long", True), field(2, "name", "string"))
    with pytest.raises(InvalidArgument, match=r"lacks column\(s\) \['name'\]"):
        write(tmp_path, pa.table({"id": [1]}), schema)
    with pytest.raises(InvalidArgument, match="id"):
        write(tmp_path, pa.table({"id": [1, None], "name": ["a", "b"]}), schema)
    # columns are taken by name and cast to the Iceberg type (int64 → long, large_string → string)
    written = write(tmp_path, pa.table({"name": pa.array(["x"], pa.large_string()), "id": [7]}), schema)
    assert read_parquet(LocalStorage(), written.location, schema).to_pylist() == [{"id": 7, "name": "x"}]


def test_written_file_travels_as_json(tmp_path: Path) -> None:
    written = write(tmp_path, everything(), EVERYTHING)
    text = written.model_dump_json()
    assert WrittenFile.model_validate_json(text) == written
    assert json.loads(text)["lower_bounds"]["16"] == "AA=="  # base64 of b"\x00"


# --- reading by field id ---------------------------------------------------------------------------

SPEC_EXAMPLE_FILE = schema_of(field(1, "a", "int"), field(2, "b", "string"), field(3, "c", "double"))


def spec_example(tmp_path: Path) -> WrittenFile:
    rows = pa.table({"a": [1, 2], "b": ["x", None], "c": [0.5, 1.5]}, schema=to_arrow_schema(SPEC_EXAMPLE_FILE))
    return write(tmp_path, rows, SPEC_EXAMPLE_FILE)


def test_projection_by_id_renames_reorders_and_nulls_new_ids(tmp_path: Path) -> None:
    """The spec's example: written as 1: a, 2: b, 3: c and read as 3: measurement, 2: name, 4: a;
    ``a`` was dropped and re-added with a new id, so it reads as null."""
    written = spec_example(tmp_path)
    projection = schema_of(field(3, "measurement", "double"), field(2, "name", "string"), field(4, "a", "int"))
    back = read_parquet(LocalStorage(), written.location, projection)
    assert back.schema.equals(to_arrow_schema(projection), check_metadata=True)
    assert back.to_pylist() == [
        {"measurement": 0.5, "name": "x", "a": None},
        {"measurement": 1.5, "name": None, "a": None},
    ]
    assert pyiceberg_read(written, projection, projection).to_pylist() == back.to_pylist()


def test_type_promotions(tmp_path: Path) -> None:
    written_schema = schema_of(field(1, "n", "int"), field(2, "f", "float"), field(3, "d", "decimal(5,2)"))
    rows = pa.table(
        {"n": [1, None], "f": [1.5, 2.0], "d": [Decimal("123.45"), None]}, schema=to_arrow_schema(written_schema)
    )
    written = write(tmp_path, rows, written_schema)
    promoted = schema_of(field(1, "n", "long"), field(2, "f", "double"), field(3, "d", "decimal(10,2)"))
    back = read_parquet(LocalStorage(), written.location, promoted)
    assert back.schema.equals(to_arrow_schema(promoted), check_metadata=True)
    assert back.to_pylist() == [{"n": 1, "f": 1.5, "d": Decimal("123.45")}, {"n": None, "f": 2.0, "d": None}]
    assert pyiceberg_read(written, promoted, promoted).to_pylist() == back.to_pylist()
    with pytest.raises(ProtocolError, match=r"data.parquet: column n \(id 1\)"):
        read_parquet(LocalStorage(), written.location, schema_of(field(1, "n", "string")))
    with pytest.raises(ProtocolError, match="column d"):
        read_parquet(LocalStorage(), written.location, schema_of(field(3, "d", "decimal(10,3)")))


def test_initial_defaults_fill_absent_fields(tmp_path: Path) -> None:
    written = spec_example(tmp_path)
    projection = schema_of(
        field(1, "a", "int"),
        field(5, "level", "long", True, **{"initial-default": 42}),
        field(6, "day", "date", **{"initial-default": "2024-02-29"}),
        field(7, "label", "string", **{"initial-default": "none"}),
        field(8, "note", "string"),
        field(9, "key", "uuid", **{"initial-default": str(U1)}),
        field(
            10,
            "origin",
            {"type": "struct", "fields": [field(11, "x", "long"), field(12, "at", "timestamptz")]},
            **{"initial-default": {"11": 7, "12": "2024-01-01T00:00:00+00:00"}},
        ),
    )
    back = read_parquet(LocalStorage(), written.location, projection)
    assert back.schema.equals(to_arrow_schema(projection), check_metadata=True)
    assert back.column("key").to_pylist() == [U1, U1]
    assert back.column("origin").to_pylist() == [{"x": 7, "at": dt.datetime(2024, 1, 1, tzinfo=dt.UTC)}] * 2
    assert back.column("level").to_pylist() == [42, 42]
    assert back.column("day").to_pylist() == [dt.date(2024, 2, 29)] * 2
    assert back.column("label").to_pylist() == ["none", "none"]
    assert back.column("note").to_pylist() == [None, None]
    with pytest.raises(ProtocolError, match=r"data.parquet: required field level \(id 5\)"):
        read_parquet(LocalStorage(), written.location, schema_of(field(5, "level", "long", True)))


NESTED_V1 = schema_of(
    field(1, "id", "long", True),
    field(2, "loc", {"type": "struct", "fields": [field(3, "lat", "double"), field(4, "lon", "double")]}),
    field(
        5,
        "points",
        {
            "type": "list",
            "element-id": 6,
            "element-required": False,
            "element": {"type": "struct", "fields": [field(7, "v", "int"), field(8, "w", "string")]},
        },
    ),
    field(
        9,
        "props",
        {"type": "map", "key-id": 10, "key": "string", "value-id": 11, "value-required": False, "value": "int"},
    ),
)
NESTED_ROWS = {
    "id": [1, 2, 3],
    "loc": [{"lat": 1.0, "lon": 2.0}, None, {"lat": None, "lon": 4.0}],
    "points": [[{"v": 1, "w": "a"}, None], None, []],
    "props": [[("k", 1)], None, [("z", None)]],
}


def test_nested_projection_by_id(tmp_path: Path) -> None:
    written = write(tmp_path, pa.table(NESTED_ROWS, schema=to_arrow_schema(NESTED_V1)), NESTED_V1)
    evolved = schema_of(
        field(
            2,
            "where",
            {"type": "struct", "fields": [field(4, "longitude", "double"), field(12, "alt", "double")]},
        ),
        field(
            5,
            "pts",
            {
                "type": "list",
                "element-id": 6,
                "element-required": False,
                "element": {"type": "struct", "fields": [field(7, "value", "long")]},
            },
        ),
        field(
            9,
            "props",
            {"type": "map", "key-id": 10, "key": "string", "value-id": 11, "value-required": False, "value": "long"},
        ),
    )
    back = read_parquet(LocalStorage(), written.location, evolved)
    assert back.schema.equals(to_arrow_schema(evolved), check_metadata=True)
    assert back.to_pylist() == [
        {"where": {"longitude": 2.0, "alt": None}, "pts": [{"value": 1}, None], "props": [("k", 1)]},
        {"where": None, "pts": None, "props": None},
        {"where": {"longitude": 4.0, "alt": None}, "pts": [], "props": [("z", None)]},
    ]
    theirs = pyiceberg_read(written, evolved, evolved)
    assert theirs.select(["where", "props"]).to_pylist() == back.select(["where", "props"]).to_pylist()
    # PyIceberg reads the null list of row 2 as []; the file says null (pyarrow's own reading):
    assert pq.read_table(written.location).column("points").to_pylist()[1] is None
    # a struct none of whose projected children are in the file still knows which rows are null
    only_new = schema_of(field(2, "loc", {"type": "struct", "fields": [field(13, "new", "int")]}))
    assert read_parquet(LocalStorage(), written.location, only_new).column("loc").to_pylist() == [
        {"new": None},
        None,
        {"new": None},
    ]


def test_files_without_ids_read_through_the_name_mapping(tmp_path: Path) -> None:
    path = tmp_path / "imported.parquet"
    pq.write_table(
        pa.table(
            {
                "record_id": [10, 20],
                "location": [{"lat": 1.5, "long": 2.5}, None],
                "tags": [["a"], ["b", "c"]],
                "extra": ["ignored", "ignored"],
            }
        ),
        path,
    )
    table_schema = schema_of(
        field(1, "id", "long"),
        field(
            3,
            "location",
            {"type": "struct", "fields": [field(4, "latitude", "double"), field(5, "longitude", "double")]},
        ),
        field(6, "tags", {"type": "list", "element-id": 7, "element-required": False, "element": "string"}),
        field(8, "data", "string"),
    )
    mapping = [
        {"field-id": 1, "names": ["id", "record_id"]},
        {"field-id": 2, "names": ["data"]},
        {
            "field-id": 3,
            "names": ["location"],
            "fields": [{"field-id": 4, "names": ["latitude", "lat"]}, {"field-id": 5, "names": ["longitude", "long"]}],
        },
        {"field-id": 6, "names": ["tags"], "fields": [{"field-id": 7, "names": ["element"]}]},
        {"names": ["extra"]},
    ]
    back = read_parquet(LocalStorage(), str(path), table_schema, name_mapping=mapping)
    assert back.to_pylist() == [
        {"id": 10, "location": {"latitude": 1.5, "longitude": 2.5}, "tags": ["a"], "data": None},
        {"id": 20, "location": None, "tags": ["b", "c"], "data": None},
    ]
    assert ParquetDataFile(LocalStorage(), str(path), name_mapping=mapping).field_ids == {1, 3, 4, 5, 6, 7}
    with pytest.raises(UnsupportedFeature, match=r"imported.parquet.*no field ids.*schema.name-mapping.default"):
        read_parquet(LocalStorage(), str(path), table_schema)
    with pytest.raises(InvalidArgument, match="schema.name-mapping.default"):
        read_parquet(LocalStorage(), str(path), table_schema, name_mapping=[{"field-id": "x"}])


def test_missing_and_corrupt_files(tmp_path: Path) -> None:
    schema = schema_of(field(1, "a", "int"))
    with pytest.raises(NotFound, match="absent.parquet"):
        read_parquet(LocalStorage(), str(tmp_path / "absent.parquet"), schema)
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all" * 10)
    with pytest.raises(CorruptFile, match="junk.parquet"):
        read_parquet(LocalStorage(), str(tmp_path / "junk.parquet"), schema)


class CountingStorage(LocalStorage):
    """Local storage that counts the bytes range reads return."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes_read = 0

    def read_range(self, path: str, start: int, length: int) -> bytes:
        data = super().read_range(path, start, length)
        self.bytes_read += len(data)
        return data


def test_only_projected_columns_are_read(tmp_path: Path) -> None:
    schema = schema_of(field(1, "id", "long"), field(2, "payload", "binary"))
    rows = pa.table(
        {"id": range(2_000), "payload": [bytes([i % 251]) * 2_000 for i in range(2_000)]},
        schema=to_arrow_schema(schema),
    )
    written = write(tmp_path, rows, schema, **{"write.parquet.compression-codec": "uncompressed"})
    storage = CountingStorage()
    ids = read_parquet(storage, written.location, schema_of(field(1, "id", "long")))
    assert ids.column("id").to_pylist() == list(range(2_000))
    assert storage.bytes_read < written.column_sizes[2] / 4


def test_rows_of_a_file_whose_projected_columns_are_all_absent(tmp_path: Path) -> None:
    written = spec_example(tmp_path)
    batches = list(iter_parquet(LocalStorage(), written.location, schema_of(field(9, "z", "int")), batch_rows=1))
    assert [b.num_rows for b in batches] == [1, 1]
    assert pa.Table.from_batches(batches).column("z").to_pylist() == [None, None]
