"""Delta schema JSON <-> Arrow, and column mapping (``lakeops.delta.schema``)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_schemas import from_arrow_schema, physical_paths, physical_schema
from lakeops_testdata import TESTDATA

from lakeops.delta.actions import Metadata, Protocol
from lakeops.delta.schema import (
    ArrayType,
    DecimalType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    column_id,
    column_mapping_mode,
    data_schema,
    from_arrow_type,
    logical_to_physical,
    parse_schema,
    parse_type,
    physical_arrow_schema,
    physical_name,
    read_data_file_as_logical,
    schema_to_json,
    schema_to_string,
    to_arrow_schema,
    to_arrow_type,
)
from lakeops.errors import InvalidArgument, ProtocolError, UnsupportedFeature

FIXTURE_TABLES = sorted(
    [p for p in (TESTDATA / "delta-rs").iterdir() if p.is_dir()]
    + [p for p in (TESTDATA / "delta-kernel").glob("v1-*") if p.is_dir()]
)


def first_actions(table: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The first ``metaData`` (and ``protocol``) of a table: commit files, else a checkpoint."""
    metadata: dict[str, Any] | None = None
    protocol: dict[str, Any] | None = None
    for commit in sorted((table / "_delta_log").glob("*.json")):
        if ".checkpoint." in commit.name:
            continue
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            metadata = metadata or action.get("metaData")
            protocol = protocol or action.get("protocol")
        if metadata:
            return metadata, protocol
    for checkpoint in sorted((table / "_delta_log").glob("*.checkpoint*.parquet")):
        actions = pq.read_table(checkpoint, columns=["metaData", "protocol"]).to_pylist()
        metadata = next((a["metaData"] for a in actions if a["metaData"]), None)
        protocol = next((a["protocol"] for a in actions if a["protocol"]), None)
        if metadata:
            return metadata, protocol
    raise AssertionError(f"no metaData action in {table}")


def as_metadata(raw: dict[str, Any]) -> Metadata:
    fixed = dict(raw)
    # Checkpoints store maps as lists of pairs.
    for key in ("configuration",):
        if isinstance(fixed.get(key), list):
            fixed[key] = dict(fixed[key])
    if isinstance(fixed.get("format"), dict) and isinstance(fixed["format"].get("options"), list):
        fixed["format"] = {**fixed["format"], "options": dict(fixed["format"]["options"])}
    return Metadata.model_validate(fixed)


# ---------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("table", FIXTURE_TABLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_schemas_round_trip(table: Path) -> None:
    raw, _ = first_actions(table)
    original = json.loads(raw["schemaString"])
    schema = parse_schema(raw["schemaString"])
    assert schema_to_json(schema) == original
    assert json.loads(schema_to_string(schema)) == original
    assert parse_schema(as_metadata(raw)) == schema
    assert from_arrow_schema(to_arrow_schema(schema)) == schema


def test_fixture_schemas_cover_the_interesting_shapes() -> None:
    schemas = {t.name: parse_schema(first_actions(t)[0]["schemaString"]) for t in FIXTURE_TABLES}
    vacuumed = schemas["checkpoints_vacuumed"]  # its metaData only survives in a checkpoint
    some_struct = vacuumed.get("some_struct")
    assert some_struct is not None and isinstance(some_struct.type, StructType)
    assert some_struct.type.names == ["some_struct_member", "some_struct_timestamp"]
    identity = schemas["checkpoint-v2-table"].get("id")
    assert identity is not None and identity.metadata["delta.identity.start"] == 1
    mapped = schemas["table_with_column_mapping"].get("Super Name")
    assert mapped is not None and column_id(mapped) == 2
    assert physical_name(mapped, "name") == "col-3877fd94-0973-4941-ac6b-646849a1ff65"


SPEC_EXAMPLE = {
    "type": "struct",
    "fields": [
        {"name": "a", "type": "integer", "nullable": False, "metadata": {}},
        {
            "name": "b",
            "type": {
                "type": "struct",
                "fields": [{"name": "d", "type": "integer", "nullable": False, "metadata": {}}],
            },
            "nullable": True,
            "metadata": {},
        },
        {
            "name": "c",
            "type": {"type": "array", "elementType": "integer", "containsNull": False},
            "nullable": True,
            "metadata": {},
        },
        {
            "name": "e",
            "type": {
                "type": "array",
                "elementType": {
                    "type": "struct",
                    "fields": [{"name": "d", "type": "integer", "nullable": False, "metadata": {}}],
                },
                "containsNull": True,
            },
            "nullable": True,
            "metadata": {},
        },
        {
            "name": "f",
            "type": {"type": "map", "keyType": "string", "valueType": "string", "valueContainsNull": True},
            "nullable": True,
            "metadata": {},
        },
    ],
}


def test_the_specs_example_schema() -> None:
    schema = parse_schema(json.dumps(SPEC_EXAMPLE))
    assert schema_to_json(schema) == SPEC_EXAMPLE
    arrow = to_arrow_schema(schema)
    assert arrow.field("a").nullable is False
    assert arrow.field("b").type == pa.struct([pa.field("d", pa.int32(), nullable=False)])
    assert arrow.field("c").type == pa.list_(pa.field("element", pa.int32(), nullable=False))
    element = pa.struct([pa.field("d", pa.int32(), nullable=False)])
    assert arrow.field("e").type == pa.list_(pa.field("element", element, nullable=True))
    f = arrow.field("f").type
    assert isinstance(f, pa.MapType) and f.key_type == pa.string() and f.item_field.nullable
    assert from_arrow_schema(arrow) == schema


@pytest.mark.parametrize(
    ("name", "arrow_type"),
    [
        ("string", pa.string()),
        ("long", pa.int64()),
        ("integer", pa.int32()),
        ("short", pa.int16()),
        ("byte", pa.int8()),
        ("float", pa.float32()),
        ("double", pa.float64()),
        ("boolean", pa.bool_()),
        ("binary", pa.binary()),
        ("date", pa.date32()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestamp_ntz", pa.timestamp("us")),
        ("decimal(38,10)", pa.decimal128(38, 10)),
        ("decimal(1,0)", pa.decimal128(1, 0)),
    ],
)
def test_primitive_types(name: str, arrow_type: pa.DataType) -> None:
    parsed = parse_type(name)
    assert to_arrow_type(parsed) == arrow_type
    assert from_arrow_type(arrow_type) == parsed
    assert schema_to_json(StructType((StructField("x", parsed),)))["fields"][0]["type"] == name


def test_type_parsing_details() -> None:
    assert parse_type("decimal( 12 , 3 )") == DecimalType(12, 3)
    assert parse_type({"type": "map", "keyType": "string", "valueType": "long"}) == MapType(
        PrimitiveType("string"), PrimitiveType("long"), True
    )
    with pytest.raises(ProtocolError, match=r"decimal\(39,0\)"):
        parse_type("decimal(39,0)")
    with pytest.raises(ProtocolError, match=r"decimal\(5,6\)"):
        parse_type("decimal(5,6)")
    assert parse_type("variant", "x") == PrimitiveType("variant")
    with pytest.raises(UnsupportedFeature, match="column x: Delta type 'geography'"):
        parse_type("geography", "x")
    with pytest.raises(UnsupportedFeature, match="'interval'"):
        parse_schema('{"type":"struct","fields":[{"name":"i","type":{"type":"interval"},"nullable":true}]}')
    with pytest.raises(ProtocolError, match="not valid JSON"):
        parse_schema("{nope")
    with pytest.raises(ProtocolError, match="must describe a struct"):
        parse_schema('"long"')
    with pytest.raises(ProtocolError, match="column s: struct field needs 'name' and 'type'"):
        parse_schema({"type": "struct", "fields": [{"name": "s", "type": {"type": "struct", "fields": [{}]}}]})
    with pytest.raises(ProtocolError, match="column a: array type lacks 'elementType'"):
        parse_schema({"type": "struct", "fields": [{"name": "a", "type": {"type": "array"}}]})
    with pytest.raises(ProtocolError, match="duplicate column name 'A'"):
        parse_schema({"type": "struct", "fields": [{"name": "a", "type": "long"}, {"name": "A", "type": "long"}]})


def test_from_arrow_type_rules() -> None:
    assert from_arrow_type(pa.uint8()) == PrimitiveType("short")
    assert from_arrow_type(pa.uint16()) == PrimitiveType("integer")
    assert from_arrow_type(pa.uint32()) == PrimitiveType("long")
    assert from_arrow_type(pa.large_string()) == PrimitiveType("string")
    assert from_arrow_type(pa.dictionary(pa.int8(), pa.string())) == PrimitiveType("string")
    assert from_arrow_type(pa.timestamp("ns", tz="Europe/Paris")) == PrimitiveType("timestamp")
    assert from_arrow_type(pa.timestamp("s")) == PrimitiveType("timestamp_ntz")
    assert from_arrow_type(pa.large_list(pa.field("x", pa.int8(), nullable=False))) == ArrayType(
        PrimitiveType("byte"), False
    )
    with pytest.raises(UnsupportedFeature, match="column c: Arrow type uint64"):
        from_arrow_type(pa.uint64(), "c")
    with pytest.raises(UnsupportedFeature, match="time64"):
        from_arrow_schema(pa.schema([pa.field("t", pa.time64("us"))]))
    with pytest.raises(UnsupportedFeature, match="precision of 38"):
        from_arrow_type(pa.decimal256(40, 2))


def test_field_metadata_survives_arrow_with_its_json_types() -> None:
    metadata = {"delta.columnMapping.id": 7, "comment": "7", "delta.invariants": '{"x": 1}', "flag": True}
    schema = StructType((StructField("x", PrimitiveType("long"), True, metadata),))
    arrow = to_arrow_schema(schema)
    assert arrow.field("x").metadata[b"delta.columnMapping.id"] == b"7"
    assert arrow.field("x").metadata[b"comment"] == b'"7"'
    assert from_arrow_schema(arrow) == schema
    assert to_arrow_schema(schema, include_metadata=False).field("x").metadata is None
    # Arrow's own keys never become Delta metadata; plain text that is not JSON stays text.
    foreign = pa.schema([pa.field("y", pa.int8(), metadata={b"PARQUET:field_id": b"3", b"note": b"hi"})])
    assert from_arrow_schema(foreign).fields[0].metadata == {"note": "hi"}


# ---------------------------------------------------------------------------------------------
# Column mapping
# ---------------------------------------------------------------------------------------------


def mapped(name: str, dtype: Any, cid: int, physical: str | None = None, nullable: bool = True) -> StructField:
    metadata = {"delta.columnMapping.id": cid, "delta.columnMapping.physicalName": physical or f"col-{cid}"}
    return StructField(name, dtype, nullable, metadata)


#: a (long), s struct<x long, inner struct<y string>>, l array<struct<z int>>, m map<string, struct<v double>>
MAPPED = StructType(
    (
        mapped("a", PrimitiveType("long"), 1),
        mapped(
            "s",
            StructType(
                (
                    mapped("x", PrimitiveType("long"), 3),
                    mapped("inner", StructType((mapped("y", PrimitiveType("string"), 5),)), 4),
                )
            ),
            2,
        ),
        mapped("l", ArrayType(StructType((mapped("z", PrimitiveType("integer"), 7),))), 6),
        mapped("m", MapType(PrimitiveType("string"), StructType((mapped("v", PrimitiveType("double"), 9),))), 8),
        mapped("part", PrimitiveType("string"), 10),
    )
)


def test_column_mapping_mode() -> None:
    assert column_mapping_mode({}) == "none"
    assert column_mapping_mode({"delta.columnMapping.mode": "Name"}) == "name"
    assert column_mapping_mode({"delta.columnMapping.mode": "id"}) == "id"
    with pytest.raises(ProtocolError, match="delta.columnMapping.mode='bogus'"):
        column_mapping_mode({"delta.columnMapping.mode": "bogus"})
    props = {"delta.columnMapping.mode": "name"}
    v1 = Protocol(minReaderVersion=1, minWriterVersion=2)
    v2 = Protocol(minReaderVersion=2, minWriterVersion=5)
    v3_without = Protocol(minReaderVersion=3, minWriterVersion=7, readerFeatures=["deletionVectors"])
    v3_with = Protocol(minReaderVersion=3, minWriterVersion=7, readerFeatures=["columnMapping"])
    assert column_mapping_mode(props, v1) == "none"  # the property is not honoured
    assert column_mapping_mode(props, v2) == "name"
    assert column_mapping_mode(props, v3_without) == "none"
    assert column_mapping_mode(props, v3_with) == "name"
    raw, protocol = first_actions(TESTDATA / "delta-rs" / "table_with_column_mapping")
    assert protocol is not None
    assert column_mapping_mode(as_metadata(raw), Protocol.model_validate(protocol)) == "name"


def test_physical_paths_of_every_nested_field() -> None:
    assert physical_paths(MAPPED, "name") == {
        ("a",): ("col-1",),
        ("s",): ("col-2",),
        ("s", "x"): ("col-2", "col-3"),
        ("s", "inner"): ("col-2", "col-4"),
        ("s", "inner", "y"): ("col-2", "col-4", "col-5"),
        ("l",): ("col-6",),
        ("l", "element", "z"): ("col-6", "element", "col-7"),
        ("m",): ("col-8",),
        ("m", "value", "v"): ("col-8", "value", "col-9"),
        ("part",): ("col-10",),
    }
    assert physical_paths(MAPPED, "none")[("s", "inner", "y")] == ("s", "inner", "y")
    renamed = physical_schema(MAPPED, "id")
    assert renamed.names == ["col-1", "col-2", "col-6", "col-8", "col-10"]
    inner = renamed.fields[1].type
    assert isinstance(inner, StructType) and inner.names == ["col-3", "col-4"]


def test_physical_names_are_required_under_mapping() -> None:
    schema = StructType((StructField("plain", PrimitiveType("long")),))
    assert physical_name(schema.fields[0], "none") == "plain"
    with pytest.raises(ProtocolError, match="column 'plain' has no delta.columnMapping.physicalName"):
        physical_schema(schema, "name")
    with_name_only = StructType(
        (StructField("p", PrimitiveType("long"), True, {"delta.columnMapping.physicalName": "c"}),)
    )
    with pytest.raises(ProtocolError, match="column 'p' has no delta.columnMapping.id"):
        physical_arrow_schema(with_name_only, "id")


def test_physical_arrow_schema_carries_field_ids() -> None:
    arrow = physical_arrow_schema(MAPPED, "id", partition_columns=["part"])
    assert arrow.names == ["col-1", "col-2", "col-6", "col-8"]

    def fid(f: pa.Field) -> bytes:
        return f.metadata[b"PARQUET:field_id"]

    assert [fid(f) for f in arrow] == [b"1", b"2", b"6", b"8"]
    s = arrow.field("col-2").type
    assert [fid(s.field(i)) for i in range(s.num_fields)] == [b"3", b"4"]
    z = arrow.field("col-6").type.value_type.field(0)
    assert (z.name, fid(z)) == ("col-7", b"7")
    v = arrow.field("col-8").type.item_type.field(0)
    assert (v.name, fid(v)) == ("col-9", b"9")
    # Name mode writes the ids too (writer requirement, and what Spark does); no mapping, no ids.
    assert fid(physical_arrow_schema(MAPPED, "name").field("col-1")) == b"1"
    assert physical_arrow_schema(MAPPED, "none").field("a").metadata is None


def test_data_schema_drops_partition_columns_case_insensitively() -> None:
    assert data_schema(MAPPED, ["PART"]).names == ["a", "s", "l", "m"]


# ---------------------------------------------------------------------------------------------
# Data files
# ---------------------------------------------------------------------------------------------


def test_the_column_mapping_fixture_reads_as_logical() -> None:
    table_dir = TESTDATA / "delta-rs" / "table_with_column_mapping"
    raw, protocol = first_actions(table_dir)
    metadata = as_metadata(raw)
    assert protocol is not None
    schema = parse_schema(metadata)
    mode = column_mapping_mode(metadata, Protocol.model_validate(protocol))
    adds = [
        json.loads(line)["add"]
        for line in (table_dir / "_delta_log" / "00000000000000000000.json").read_text().splitlines()
        if "add" in json.loads(line)
    ]
    assert len(adds) == 2
    for add in adds:
        data = pq.read_table(table_dir / add["path"])
        logical = read_data_file_as_logical(
            data, schema, mode, partition_columns=metadata.partition_columns, file_path=add["path"]
        )
        assert logical.schema == pa.schema([pa.field("Super Name", pa.string())])
        names = logical.column("Super Name").to_pylist()
        stats = json.loads(add["stats"])
        physical = "col-3877fd94-0973-4941-ac6b-646849a1ff65"
        assert len(names) == stats["numRecords"]
        assert min(names) == stats["minValues"][physical]
        assert max(names) == stats["maxValues"][physical]
    assert "Timothy Lamb" in names


def test_the_renamed_column_fixture() -> None:
    """table_with_partitioning_mapping: name mode switched on later, then ``id`` renamed ``newid``."""
    table_dir = TESTDATA / "delta-rs" / "table_with_partitioning_mapping"
    commit = (table_dir / "_delta_log" / "00000000000000000003.json").read_text().splitlines()
    metadata = as_metadata(next(json.loads(line)["metaData"] for line in commit if "metaData" in line))
    schema = parse_schema(metadata)
    assert metadata.partition_columns == ["newid"]
    assert physical_name(schema.fields[0], "name") == "id"
    files = sorted(table_dir.rglob("*.parquet"))
    assert files
    for path in files:
        logical = read_data_file_as_logical(
            pq.read_table(path), schema, "name", partition_columns=metadata.partition_columns
        )
        assert logical.column_names == ["description"]
        assert logical.num_rows == 1


def test_name_mode_renames_nested_fields_fills_missing_and_casts() -> None:
    s_type = pa.struct(
        [
            pa.field("col-3", pa.int32()),  # int32 in the file, long in the schema
            pa.field("gone", pa.string()),  # a dropped field: ignored
        ]
    )
    l_type = pa.list_(pa.struct([pa.field("col-7", pa.int64())]))  # wider than the schema's int
    data = pa.table(
        {
            "col-1": pa.array([1, None, 3], pa.int32()).dictionary_encode(),
            "col-2": pa.array([{"col-3": 5, "gone": "x"}, None, {"col-3": None, "gone": None}], s_type),
            "col-6": pa.array([[{"col-7": 1}], None, []], l_type),
            "extra": pa.array(["dropped column", None, None]),
        }
    )
    logical = read_data_file_as_logical(data, MAPPED, "name", partition_columns=["part"])
    assert logical.schema == to_arrow_schema(data_schema(MAPPED, ["part"]), include_metadata=False)
    assert logical.to_pylist() == [
        {"a": 1, "s": {"x": 5, "inner": None}, "l": [{"z": 1}], "m": None},
        {"a": None, "s": None, "l": None, "m": None},
        {"a": 3, "s": {"x": None, "inner": None}, "l": [], "m": None},
    ]


def test_id_mode_resolves_by_field_id_not_name() -> None:
    def fid(n: int) -> dict[bytes, bytes]:
        return {b"PARQUET:field_id": str(n).encode()}

    schema = StructType(
        (
            mapped("ts", PrimitiveType("timestamp"), 1, physical="whatever"),
            mapped("st", StructType((mapped("x", PrimitiveType("string"), 3),)), 2),
            mapped("missing", PrimitiveType("date"), 4),
        )
    )
    file_schema = pa.schema(
        [
            pa.field("renamed_ts", pa.timestamp("ns", tz="Asia/Tokyo"), metadata=fid(1)),
            pa.field("col-x", pa.struct([pa.field("zzz", pa.large_string(), metadata=fid(3))]), metadata=fid(2)),
            pa.field("whatever", pa.int64()),  # the physical name, but no id: not used in id mode
        ]
    )
    data = pa.table(
        {"renamed_ts": [1_500_000_999], "col-x": [{"zzz": "hello"}], "whatever": [9]},
        schema=file_schema,
    )
    logical = read_data_file_as_logical(data, schema, "id")
    assert logical.to_pylist() == [
        {
            "ts": dt.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=dt.UTC),  # ns truncated to us
            "st": {"x": "hello"},
            "missing": None,
        }
    ]
    assert logical.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    no_ids = pa.table({"whatever": [1]})
    with pytest.raises(ProtocolError, match="data file part-0.parquet has no Parquet field ids"):
        read_data_file_as_logical(no_ids, schema, "id", file_path="part-0.parquet")


def test_incompatible_file_types_are_refused_with_the_column_named() -> None:
    schema = StructType((StructField("n", PrimitiveType("integer")), StructField("s", PrimitiveType("string"))))
    with pytest.raises(ProtocolError, match=r"data file f.parquet: column n is string, cannot be read as int32"):
        read_data_file_as_logical(pa.table({"n": ["1"]}), schema, "none", file_path="f.parquet")
    with pytest.raises(ProtocolError, match=r"column n \(int64\) does not fit int32"):
        read_data_file_as_logical(pa.table({"n": [2**40]}), schema, "none")
    with pytest.raises(ProtocolError, match="column s is struct<.*>, cannot be read as string"):
        read_data_file_as_logical(pa.table({"s": [{"a": 1}]}), schema, "none")
    # Binary without the UTF8 annotation reads as string (Spark wrote such files).
    assert read_data_file_as_logical(pa.table({"s": [b"ok"]}), schema, "none").column("s").to_pylist() == ["ok"]


def test_no_data_columns_keeps_the_row_count() -> None:
    schema = StructType((StructField("p", PrimitiveType("string")),))
    out = read_data_file_as_logical(pa.table({"other": [1, 2, 3]}), schema, "none", partition_columns=["p"])
    assert (out.num_columns, out.num_rows) == (0, 3)


# ---------------------------------------------------------------------------------------------
# Writing: logical -> physical
# ---------------------------------------------------------------------------------------------


def logical_sample() -> pa.Table:
    arrow = to_arrow_schema(MAPPED, include_metadata=False)
    rows = [
        {
            "a": 1,
            "s": {"x": 10, "inner": {"y": "é"}},
            "l": [{"z": 1}, None],
            "m": [("k", {"v": 1.5})],
            "part": "p1",
        },
        {"a": None, "s": None, "l": None, "m": None, "part": "p1"},
        {"a": 3, "s": {"x": None, "inner": None}, "l": [], "m": [("k2", None)], "part": "p2"},
    ]
    return pa.Table.from_pylist(rows, schema=arrow)


@pytest.mark.parametrize("mode", ["none", "name", "id"])
def test_write_then_read_round_trip(tmp_path: Path, mode: Any) -> None:
    logical = logical_sample()
    chunked = pa.concat_tables([logical.slice(0, 1), logical.slice(1)])  # several chunks
    physical = logical_to_physical(chunked, MAPPED, mode, partition_columns=["part"])
    assert physical.schema == physical_arrow_schema(MAPPED, mode, partition_columns=["part"])
    path = tmp_path / "part-0.parquet"
    pq.write_table(physical, path)
    parquet_schema = pq.ParquetFile(path).schema
    if mode == "none":
        assert parquet_schema.column(0).name == "a"
    else:
        assert parquet_schema.column(0).name == "col-1"
        assert "field_id=5 col-5" in str(parquet_schema)
    back = read_data_file_as_logical(pq.read_table(path), MAPPED, mode, partition_columns=["part"])
    assert back.to_pylist() == logical.drop_columns(["part"]).to_pylist()


def test_write_casts_to_the_schema_types() -> None:
    schema = StructType(
        (
            StructField("n", PrimitiveType("long")),
            StructField("d", DecimalType(10, 2)),
            StructField("ts", PrimitiveType("timestamp")),
            StructField("ntz", PrimitiveType("timestamp_ntz")),
        )
    )
    data = pa.table(
        {
            "n": pa.array([1], pa.int8()),
            "d": pa.array([Decimal("1.5")], pa.decimal128(3, 1)),
            "ts": pa.array([1_000], pa.timestamp("ms", tz="America/New_York")),
            "ntz": pa.array([dt.date(2020, 1, 2)]),  # date -> timestamp_ntz is a Delta widening
        }
    )
    out = logical_to_physical(data, schema, "none")
    assert out.schema == pa.schema(
        [("n", pa.int64()), ("d", pa.decimal128(10, 2)), ("ts", pa.timestamp("us", "UTC")), ("ntz", pa.timestamp("us"))]
    )
    assert out.to_pylist() == [
        {
            "n": 1,
            "d": Decimal("1.50"),
            "ts": dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC),
            "ntz": dt.datetime(2020, 1, 2),
        }
    ]


def test_write_enforces_schema_and_nullability() -> None:
    schema = StructType(
        (
            StructField("id", PrimitiveType("long"), nullable=False),
            StructField("s", StructType((StructField("x", PrimitiveType("long"), nullable=False),))),
            StructField("l", ArrayType(PrimitiveType("long"), contains_null=False)),
            StructField("m", MapType(PrimitiveType("string"), PrimitiveType("long"), value_contains_null=False)),
            StructField("opt", PrimitiveType("string")),
        )
    )
    ok = pa.table(
        {
            "id": [1, 2],
            "s": pa.array([{"x": 1}, None], pa.struct([("x", pa.int64())])),  # null parent: fine
            "l": [[1], None],
            "m": pa.array([[("a", 1)], None], pa.map_(pa.string(), pa.int64())),
        }
    )
    out = logical_to_physical(ok, schema, "none")
    assert out.column("opt").to_pylist() == [None, None]  # a nullable column may be absent
    with pytest.raises(InvalidArgument, match="non-nullable column id contains nulls"):
        logical_to_physical(ok.set_column(0, "id", pa.array([1, None])), schema, "none")
    with pytest.raises(InvalidArgument, match="non-nullable column id is missing"):
        logical_to_physical(ok.drop_columns(["id"]), schema, "none")
    bad_struct = pa.array([{"x": None}, None], pa.struct([("x", pa.int64())]))
    with pytest.raises(InvalidArgument, match=r"non-nullable column s\.x contains nulls"):
        logical_to_physical(ok.set_column(1, "s", bad_struct), schema, "none")
    with pytest.raises(InvalidArgument, match=r"column l\.element does not allow nulls"):
        logical_to_physical(ok.set_column(2, "l", pa.array([[1, None], None])), schema, "none")
    bad_map = pa.array([[("a", None)], None], pa.map_(pa.string(), pa.int64()))
    with pytest.raises(InvalidArgument, match=r"column m\.value does not allow nulls"):
        logical_to_physical(ok.set_column(3, "m", bad_map), schema, "none")
    with pytest.raises(InvalidArgument, match=r"columns the table schema does not know: \['surprise'\]"):
        logical_to_physical(ok.append_column("surprise", pa.array([1, 2])), schema, "none")
