"""Manifests and manifest lists: what PyIceberg writes we read entry for entry, what we write PyIceberg
and fastavro read with the values, ids and layout the spec fixes; inheritance edge cases; damaged,
missing and clashing files."""

from __future__ import annotations

import io
import json
import math
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pytest
from iceberg_manifests import read_manifest_metadata
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import read_manifest_list as pyiceberg_read_manifest_list
from pyiceberg_tables import SPECS, entry_history_table

from lakeops.errors import AlreadyExists, CorruptFile, InvalidArgument, NotFound, ProtocolError
from lakeops.iceberg.avro_schema import avro_schema, from_avro, read_avro, to_avro
from lakeops.iceberg.manifest import (
    DEFAULT_BLOCK_SIZE,
    DataFile,
    EntryStatus,
    FileContent,
    ManifestEntry,
    iter_manifest,
    manifest_entry_type,
    manifests_of,
    read_manifest,
    write_manifest,
)
from lakeops.iceberg.manifest_list import (
    ManifestContent,
    ManifestFile,
    manifest_file_type,
    read_manifest_list,
    write_manifest_list,
)
from lakeops.iceberg.metadata import Snapshot, parse_metadata
from lakeops.iceberg.partitioning import PartitionSpec
from lakeops.iceberg.single_values import to_bytes
from lakeops.iceberg.types import DecimalType, PrimitiveType, Schema, StructType
from lakeops.storage import Storage, open_storage

#: The v3 fields PyIceberg 0.12 does not model (it writes v1 and v2 only); ours are None there.
V3_MANIFEST_FIELDS = ("first_row_id",)
V3_DATA_FILE_FIELDS = ("first_row_id", "referenced_data_file", "content_offset", "content_size_in_bytes")
#: The record fields both PyIceberg's models and ours carry by the spec's names (PyIceberg has no
#: ``distinct_counts``; partitions are compared separately, ``listed_in`` is ours only).
MANIFEST_FIELDS = [
    name for name in ManifestFile.model_fields if name not in ("partitions", "listed_in", *V3_MANIFEST_FIELDS)
]
DATA_FILE_FIELDS = [
    name for name in DataFile.model_fields if name not in ("partition", "distinct_counts", *V3_DATA_FILE_FIELDS)
]


def _plain(value: Any) -> Any:
    """A comparable form of our values and PyIceberg's (enums, lazy dicts, records, NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if hasattr(value, "value") and not isinstance(value, bytes | Decimal | uuid.UUID):
        return _plain(value.value)
    if isinstance(value, dict) or type(value).__name__ == "LazyDict":
        return {k: _plain(v) for k, v in dict(value).items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def manifest_view(manifest: Any) -> dict[str, Any]:
    """A manifest-list record, ours or PyIceberg's (they share the spec's field names)."""
    view = {name: _plain(getattr(manifest, name)) for name in MANIFEST_FIELDS}
    view["partitions"] = [
        (s.contains_null, s.contains_nan, s.lower_bound, s.upper_bound) for s in manifest.partitions or []
    ]
    return view


def entry_view(entry: Any) -> dict[str, Any]:
    """A manifest entry, ours or PyIceberg's, partition values in spec order."""
    data = entry.data_file
    partition = data.partition
    values = list(partition.values()) if isinstance(partition, dict) else [partition[i] for i in range(len(partition))]
    return {
        "status": int(entry.status),
        "snapshot_id": entry.snapshot_id,
        "sequence_number": entry.sequence_number,
        "file_sequence_number": entry.file_sequence_number,
        "partition": _plain(values),
        **{name: _plain(getattr(data, name)) for name in DATA_FILE_FIELDS},
    }


# --- PyIceberg writes, we read -----------------------------------------------------------------


@pytest.mark.parametrize("format_version", [1, 2])
@pytest.mark.parametrize("spec", sorted(SPECS))
def test_pyiceberg_manifests_read_exactly_as_pyiceberg_reads_them(
    tmp_path: Path, spec: str, format_version: int
) -> None:
    table = entry_history_table(tmp_path, spec, format_version=format_version)
    peer = table.table
    storage = open_storage(table.location)
    metadata = parse_metadata(storage.read(peer.metadata_location), peer.metadata_location)
    statuses: set[EntryStatus] = set()
    sequence_numbers: set[int] = set()
    for snapshot in metadata.snapshots:
        ours = manifests_of(storage, snapshot)
        theirs = peer.snapshot_by_id(snapshot.snapshot_id).manifests(peer.io)
        assert [manifest_view(m) for m in ours] == [manifest_view(m) for m in theirs]
        assert {m.first_row_id for m in ours} == {None}  # a v1/v2 table has no row lineage
        for mine, peer_manifest in zip(ours, theirs, strict=True):
            entries = read_manifest(storage, mine, include_deleted=True)
            expected = peer_manifest.fetch_manifest_entry(peer.io, discard_deleted=False)
            assert [entry_view(e) for e in entries] == [entry_view(e) for e in expected]
            assert {getattr(e.data_file, name) for e in entries for name in V3_DATA_FILE_FIELDS} == {None}
            assert read_manifest(storage, mine) == [e for e in entries if e.status != EntryStatus.DELETED]
            statuses.update(e.status for e in entries)
            sequence_numbers.update(e.sequence_number for e in entries if e.sequence_number is not None)
            file_metadata = read_manifest_metadata(storage, mine.manifest_path)
            assert file_metadata.format_version == format_version
            assert file_metadata.content == "data"
            assert file_metadata.spec.fields_json() == metadata.default_spec().fields_json()
            assert file_metadata.table_schema.fields == metadata.current_schema().fields
    assert statuses == set(EntryStatus)
    expected = (0, 0) if format_version == 1 else (1, metadata.last_sequence_number)
    assert (min(sequence_numbers), max(sequence_numbers)) == expected


@pytest.mark.parametrize("format_version", [1, 2])
@pytest.mark.parametrize("spec", sorted(SPECS))
def test_our_counts_and_partition_summaries_match_pyiceberg(tmp_path: Path, spec: str, format_version: int) -> None:
    """Rewriting each PyIceberg manifest's entries with our writer reproduces PyIceberg's counts and
    partition summaries (which, as Java's, cover deleted entries too)."""
    table = entry_history_table(tmp_path, spec, format_version=format_version)
    storage = open_storage(table.location)
    metadata = parse_metadata(storage.read(table.table.metadata_location), "metadata")
    out = tmp_path / "rewritten"
    manifests = {m.manifest_path: m for s in metadata.snapshots for m in manifests_of(storage, s)}
    for n, peer_manifest in enumerate(manifests.values()):
        entries = [
            e.model_copy(update={"file_sequence_number": None}) if e.status == EntryStatus.ADDED else e
            for e in read_manifest(storage, peer_manifest, include_deleted=True)
        ]
        file_metadata = read_manifest_metadata(storage, peer_manifest.manifest_path)
        ours = write_manifest(
            open_storage(str(out)),
            str(out / f"m{n}.avro"),
            entries,
            format_version=format_version,
            spec=file_metadata.spec,
            schema=file_metadata.table_schema,
            content="data",
            snapshot_id=peer_manifest.added_snapshot_id,
        )
        mine, theirs = manifest_view(ours), manifest_view(peer_manifest)
        for name in ("manifest_path", "manifest_length", "sequence_number", "min_sequence_number"):
            mine.pop(name), theirs.pop(name)
        assert mine == theirs
        if format_version == 2:  # a manifest with no live entry gets its own number from the list
            assigned = peer_manifest.sequence_number if ours.min_sequence_number is None else ours.min_sequence_number
            assert assigned == peer_manifest.min_sequence_number


# --- we write, PyIceberg and fastavro read -----------------------------------------------------

SCHEMA = Schema.model_validate(
    {
        "type": "struct",
        "schema-id": 3,
        "fields": [
            {"id": 1, "name": "id", "required": True, "type": "long"},
            {"id": 2, "name": "ts", "required": False, "type": "timestamp"},
            {"id": 3, "name": "category", "required": False, "type": "string"},
            {"id": 4, "name": "amount", "required": False, "type": "decimal(10,2)"},
            {"id": 5, "name": "score", "required": False, "type": "double"},
            {"id": 6, "name": "day", "required": False, "type": "date"},
            {"id": 7, "name": "uid", "required": False, "type": "uuid"},
            {"id": 8, "name": "code", "required": False, "type": "fixed[4]"},
            {"id": 9, "name": "flag", "required": False, "type": "boolean"},
            {"id": 10, "name": "my-col", "required": False, "type": "string"},
            {"id": 11, "name": "big", "required": False, "type": "decimal(38,6)"},
        ],
    }
)
#: Every partition value type: identity on date/decimal/uuid/fixed/string/boolean/double/timestamp,
#: the date, bucket, truncate and void transforms, and a name Avro must escape.
_PARTITION_FIELDS = [
    (6, "identity", "day"),
    (4, "identity", "amount"),
    (7, "identity", "uid"),
    (8, "identity", "code"),
    (3, "identity", "category"),
    (9, "identity", "flag"),
    (5, "identity", "score"),
    (2, "identity", "ts"),
    (2, "day", "ts_day"),
    (1, "bucket[4]", "id_bucket"),
    (3, "truncate[2]", "category_trunc"),
    (10, "identity", "my-col"),
    (6, "month", "day_month"),
    (11, "identity", "big"),
    (1, "void", "id_void"),
]
SPEC = PartitionSpec.model_validate(
    {
        "spec-id": 2,
        "fields": [
            {"source-id": s, "field-id": 1000 + i, "name": n, "transform": t}
            for i, (s, t, n) in enumerate(_PARTITION_FIELDS)
        ],
    }
)
UID = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
P1 = {
    "day": 19723,
    "amount": Decimal("12.34"),
    "uid": UID,
    "code": b"\x00\x01\x02\xff",
    "category": "b",
    "flag": True,
    "score": float("nan"),
    "ts": 1_704_067_200_000_001,
    "ts_day": 19723,
    "id_bucket": 3,
    "category_trunc": "b",
    "my-col": "x",
    "day_month": 648,
    "big": Decimal("-12345678901234567890123456789012.000001"),
    "id_void": None,
}
P2 = {
    **P1,
    "day": -1,
    "amount": Decimal("-0.50"),
    "uid": uuid.UUID(int=1),
    "code": b"\xff\xff\xff\xff",
    "category": "a",
    "flag": False,
    "score": 1.5,
    "ts": -1,
    "ts_day": -1,
    "id_bucket": 0,
    "category_trunc": "a",
    "my-col": "y",
    "day_month": -1,
    "big": Decimal("0.000000"),
}
P3 = dict.fromkeys(P1)
P4 = {**P2, "category": "0", "category_trunc": "0"}


def data_file(name: str, partition: dict[str, Any], content: FileContent = FileContent.DATA, **extra: Any) -> DataFile:
    return DataFile(
        content=content,
        file_path=f"s3://bucket/table/data/{name}.parquet",
        file_format="PARQUET",
        partition=partition,
        record_count=10 + len(name),
        file_size_in_bytes=1000 + len(name),
        column_sizes={1: 80, 3: 40},
        value_counts={1: 10, 3: 10},
        null_value_counts={1: 0, 3: 2},
        nan_value_counts={5: 1},
        lower_bounds={1: to_bytes(PrimitiveType(name="long"), -5), 3: b"a"},
        upper_bounds={1: to_bytes(PrimitiveType(name="long"), 99), 3: b"c"},
        split_offsets=[4, 1 << 40],
        sort_order_id=0 if content != FileContent.POSITION_DELETES else None,
        **extra,
    )


V2_ENTRIES = [
    ManifestEntry(status=EntryStatus.ADDED, data_file=data_file("added", P1)),
    ManifestEntry(status=EntryStatus.ADDED, sequence_number=4, data_file=data_file("compacted", P2)),
    ManifestEntry(
        status=EntryStatus.EXISTING,
        snapshot_id=5,
        sequence_number=3,
        file_sequence_number=3,
        data_file=data_file("kept", P3),
    ),
    ManifestEntry(
        status=EntryStatus.DELETED, sequence_number=2, file_sequence_number=2, data_file=data_file("gone", P4)
    ),
]
#: After commit by snapshot 11 with sequence number 9: (status, snapshot id, data seq, file seq).
V2_TRACKING = [(1, 11, 9, 9), (1, 11, 4, 9), (0, 5, 3, 3), (2, 11, 2, 2)]


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return open_storage(str(tmp_path))


def _write(storage: Storage, path: Path, entries: list[ManifestEntry], **options: Any) -> ManifestFile:
    settings = {"format_version": 2, "spec": SPEC, "schema": SCHEMA, "content": "data", "snapshot_id": 11, **options}
    return write_manifest(storage, str(path), entries, **settings)


def _commit(
    storage: Storage, path: Path, manifests: list[ManifestFile], *, format_version: int = 2
) -> list[ManifestFile]:
    write_manifest_list(
        storage,
        str(path),
        manifests,
        format_version=format_version,
        snapshot_id=11,
        parent_snapshot_id=7,
        sequence_number=9,
    )
    return read_manifest_list(storage, str(path))


def _pyiceberg_entries(list_path: Path) -> tuple[list[Any], list[list[Any]]]:
    io = PyArrowFileIO()
    manifests = list(pyiceberg_read_manifest_list(io.new_input(str(list_path))))
    return manifests, [m.fetch_manifest_entry(io, discard_deleted=False) for m in manifests]


def test_v2_manifest_and_list_are_read_back_by_pyiceberg_and_us(storage: Storage, tmp_path: Path) -> None:
    written = _write(storage, tmp_path / "m.avro", V2_ENTRIES)
    assert (written.sequence_number, written.min_sequence_number) == (None, 3)  # assigned by the list
    assert (written.added_files_count, written.existing_files_count, written.deleted_files_count) == (2, 1, 1)
    rows = [e.data_file.record_count for e in V2_ENTRIES]
    assert (written.added_rows_count, written.existing_rows_count, written.deleted_rows_count) == (
        rows[0] + rows[1],
        rows[2],
        rows[3],
    )
    assert written.manifest_length == (tmp_path / "m.avro").stat().st_size

    ours = _commit(storage, tmp_path / "snap.avro", [written])
    assert ours[0].sequence_number == 9 and ours[0].min_sequence_number == 3
    assert manifest_view(ours[0]) == {**manifest_view(written), "sequence_number": 9}
    peer_manifests, peer_entries = _pyiceberg_entries(tmp_path / "snap.avro")
    assert [manifest_view(m) for m in peer_manifests] == [manifest_view(m) for m in ours]

    entries = read_manifest(storage, ours[0], include_deleted=True)
    assert [entry_view(e) for e in entries] == [entry_view(e) for e in peer_entries[0]]
    assert [(e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in entries] == V2_TRACKING
    # canonical values round-trip (NaN made comparable)
    assert [_plain(e.data_file.model_dump()) for e in entries] == [_plain(e.data_file.model_dump()) for e in V2_ENTRIES]
    assert [entry_view(e)["partition"] for e in peer_entries[0]] == [_plain(list(p.values())) for p in (P1, P2, P3, P4)]


def test_partition_summaries_cover_all_entries_with_appendix_d_bounds(storage: Storage, tmp_path: Path) -> None:
    written = _write(storage, tmp_path / "m.avro", V2_ENTRIES)
    summaries = dict(zip([f.name for f in SPEC.fields], written.partitions or [], strict=True))
    decimal = DecimalType(precision=10, scale=2)
    amount = summaries["amount"]
    assert (amount.contains_null, amount.contains_nan) == (True, False)
    assert (amount.lower_bound, amount.upper_bound) == (
        to_bytes(decimal, Decimal("-0.50")),
        to_bytes(decimal, Decimal("12.34")),
    )
    score = summaries["score"]  # NaN and 1.5: NaN is flagged, not a bound
    assert (score.contains_nan, score.lower_bound, score.upper_bound) == (
        True,
        to_bytes(PrimitiveType(name="double"), 1.5),
        to_bytes(PrimitiveType(name="double"), 1.5),
    )
    assert (summaries["uid"].lower_bound, summaries["uid"].upper_bound) == (uuid.UUID(int=1).bytes, UID.bytes)
    assert summaries["id_void"].contains_null and summaries["id_void"].lower_bound is None
    # only the DELETED entry has category "0": the summary still covers it
    assert (summaries["category"].lower_bound, summaries["category"].upper_bound) == (b"0", b"b")


def test_negative_zero_sorts_below_positive_zero_in_summaries(storage: Storage, tmp_path: Path) -> None:
    entries = [
        ManifestEntry(status=EntryStatus.ADDED, data_file=data_file(f"z{i}", {**P1, "score": value}))
        for i, value in enumerate([0.0, -0.0])
    ]
    written = _write(storage, tmp_path / "m.avro", entries)
    summary = dict(zip([f.name for f in SPEC.fields], written.partitions or [], strict=True))["score"]
    double = PrimitiveType(name="double")
    assert (summary.lower_bound, summary.upper_bound) == (to_bytes(double, -0.0), to_bytes(double, 0.0))


def test_manifest_avro_layout_has_the_ids_and_types_of_appendix_a(storage: Storage, tmp_path: Path) -> None:
    _write(storage, tmp_path / "m.avro", V2_ENTRIES)
    with open(tmp_path / "m.avro", "rb") as f:
        reader = fastavro.reader(f)
        schema, records, metadata = reader.writer_schema, list(reader), reader.metadata
    assert schema["name"] == "manifest_entry"
    top = {f["name"]: f for f in schema["fields"]}
    assert {n: f["field-id"] for n, f in top.items()} == {
        "status": 0,
        "snapshot_id": 1,
        "sequence_number": 3,
        "file_sequence_number": 4,
        "data_file": 2,
    }
    data = top["data_file"]["type"]
    assert data["name"] == "r2"
    fields = {f["name"]: f for f in data["fields"]}
    assert "block_size_in_bytes" not in fields and "distinct_counts" not in fields
    assert fields["content"]["field-id"] == 134 and fields["equality_ids"]["type"][1]["element-id"] == 136
    assert fields["split_offsets"]["type"][1] == {"type": "array", "items": "long", "element-id": 133}
    column_sizes = fields["column_sizes"]["type"][1]
    assert column_sizes["logicalType"] == "map" and column_sizes["items"]["name"] == "k117_v118"
    assert [(f["name"], f["field-id"]) for f in column_sizes["items"]["fields"]] == [("key", 117), ("value", 118)]
    assert fields["lower_bounds"]["type"][1]["items"]["fields"][1] == {
        "name": "value",
        "type": "bytes",
        "field-id": 127,
    }
    partition = fields["partition"]["type"]
    assert partition["name"] == "r102"
    by_id = {f["field-id"]: f for f in partition["fields"]}
    assert [f["field-id"] for f in partition["fields"]] == list(range(1000, 1000 + len(_PARTITION_FIELDS)))
    assert by_id[1000]["type"] == ["null", {"type": "int", "logicalType": "date"}] and by_id[1000]["default"] is None
    assert by_id[1001]["type"][1] == {
        "type": "fixed",
        "name": "decimal_10_2",
        "size": 5,
        "logicalType": "decimal",
        "precision": 10,
        "scale": 2,
    }
    assert by_id[1002]["type"][1] == {"type": "fixed", "name": "uuid_fixed", "size": 16, "logicalType": "uuid"}
    assert by_id[1003]["type"][1] == {"type": "fixed", "name": "fixed_4", "size": 4}
    assert by_id[1007]["type"][1] == {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": False}
    assert by_id[1011]["name"] == "my_x2Dcol"
    assert by_id[1013]["type"][1]["size"] == 16  # decimal(38, 6)
    # ADDED entries leave their numbers to inheritance; the others carry both
    assert [(r["snapshot_id"], r["sequence_number"], r["file_sequence_number"]) for r in records] == [
        (11, None, None),
        (11, 4, None),
        (5, 3, 3),
        (11, 2, 2),
    ]
    assert metadata["format-version"] == "2" and metadata["content"] == "data"
    assert json.loads(metadata["schema"]) == SCHEMA.to_json() and metadata["schema-id"] == "3"
    assert json.loads(metadata["partition-spec"]) == SPEC.fields_json() and metadata["partition-spec-id"] == "2"


def test_manifest_list_avro_layout_and_metadata(storage: Storage, tmp_path: Path) -> None:
    _commit(storage, tmp_path / "snap.avro", [_write(storage, tmp_path / "m.avro", V2_ENTRIES)])
    with open(tmp_path / "snap.avro", "rb") as f:
        reader = fastavro.reader(f)
        schema, metadata = reader.writer_schema, reader.metadata
    ids = {f["name"]: f["field-id"] for f in schema["fields"]}
    assert ids == {
        "manifest_path": 500,
        "manifest_length": 501,
        "partition_spec_id": 502,
        "content": 517,
        "sequence_number": 515,
        "min_sequence_number": 516,
        "added_snapshot_id": 503,
        "added_files_count": 504,
        "existing_files_count": 505,
        "deleted_files_count": 506,
        "added_rows_count": 512,
        "existing_rows_count": 513,
        "deleted_rows_count": 514,
        "partitions": 507,
        "key_metadata": 519,
    }
    partitions = next(f for f in schema["fields"] if f["name"] == "partitions")["type"][1]
    assert partitions["element-id"] == 508 and partitions["items"]["name"] == "r508"
    assert [f["field-id"] for f in partitions["items"]["fields"]] == [509, 518, 510, 511]
    assert {k: v for k, v in metadata.items() if not k.startswith("avro.")} == {
        "snapshot-id": "11",
        "parent-snapshot-id": "7",
        "sequence-number": "9",
        "format-version": "2",
    }


def test_v1_manifest_and_list(storage: Storage, tmp_path: Path) -> None:
    entries = [
        ManifestEntry(status=EntryStatus.ADDED, data_file=data_file("added", P1)),
        ManifestEntry(status=EntryStatus.EXISTING, snapshot_id=5, data_file=data_file("kept", P3)),
        ManifestEntry(status=EntryStatus.DELETED, data_file=data_file("gone", P2)),
    ]
    written = _write(storage, tmp_path / "m.avro", entries, format_version=1)
    ours = _commit(storage, tmp_path / "snap.avro", [written], format_version=1)
    assert (ours[0].content, ours[0].sequence_number, ours[0].min_sequence_number) == (ManifestContent.DATA, 0, 0)
    peer_manifests, peer_entries = _pyiceberg_entries(tmp_path / "snap.avro")
    assert [manifest_view(m) for m in peer_manifests] == [manifest_view(m) for m in ours]
    read = read_manifest(storage, ours[0], include_deleted=True)
    assert [entry_view(e) for e in read] == [entry_view(e) for e in peer_entries[0]]
    assert [(e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in read] == [
        (1, 11, 0, 0),
        (0, 5, 0, 0),
        (2, 11, 0, 0),
    ]
    with open(tmp_path / "m.avro", "rb") as f:
        reader = fastavro.reader(f)
        names = {f["name"] for f in reader.writer_schema["fields"]}
        data_fields = {f["name"]: f for f in reader.writer_schema["fields"][2]["type"]["fields"]}
        records, metadata = list(reader), reader.metadata
    assert names == {"status", "snapshot_id", "data_file"}
    assert reader.writer_schema["fields"][1] == {"name": "snapshot_id", "type": "long", "field-id": 1}  # required
    assert "content" not in data_fields and "equality_ids" not in data_fields
    assert data_fields["block_size_in_bytes"]["field-id"] == 105
    assert {r["data_file"]["block_size_in_bytes"] for r in records} == {DEFAULT_BLOCK_SIZE}
    assert metadata["format-version"] == "1" and "content" not in metadata
    with open(tmp_path / "snap.avro", "rb") as f:
        reader = fastavro.reader(f)
        list_ids = {f["field-id"] for f in reader.writer_schema["fields"]}
    assert not list_ids & {515, 516, 517} and "sequence-number" not in reader.metadata


def test_delete_manifests_with_equality_ids(storage: Storage, tmp_path: Path) -> None:
    entries = [
        ManifestEntry(status=EntryStatus.ADDED, data_file=data_file("pos", P1, FileContent.POSITION_DELETES)),
        ManifestEntry(
            status=EntryStatus.ADDED, data_file=data_file("eq", P2, FileContent.EQUALITY_DELETES, equality_ids=[1, 3])
        ),
    ]
    written = _write(storage, tmp_path / "d.avro", entries, content="deletes")
    data = _write(storage, tmp_path / "m.avro", V2_ENTRIES[:1])
    ours = _commit(storage, tmp_path / "snap.avro", [data, written])
    assert [m.content for m in ours] == [ManifestContent.DATA, ManifestContent.DELETES]
    peer_manifests, peer_entries = _pyiceberg_entries(tmp_path / "snap.avro")
    assert [int(m.content) for m in peer_manifests] == [0, 1]
    read = read_manifest(storage, ours[1])
    assert [entry_view(e) for e in read] == [entry_view(e) for e in peer_entries[1]]
    assert [(e.data_file.content, e.data_file.equality_ids) for e in read] == [
        (FileContent.POSITION_DELETES, None),
        (FileContent.EQUALITY_DELETES, [1, 3]),
    ]
    assert read_manifest_metadata(storage, str(tmp_path / "d.avro")).content == "deletes"


def test_manifest_metadata_round_trips(storage: Storage, tmp_path: Path) -> None:
    _write(storage, tmp_path / "m.avro", V2_ENTRIES)
    metadata = read_manifest_metadata(storage, str(tmp_path / "m.avro"))
    assert (metadata.table_schema, metadata.schema_id, metadata.spec) == (SCHEMA, 3, SPEC)
    assert (metadata.format_version, metadata.content) == (2, "data")


def test_manifest_file_survives_json_with_bytes_as_base64(storage: Storage, tmp_path: Path) -> None:
    written = _write(storage, tmp_path / "m.avro", V2_ENTRIES)
    payload = written.model_dump_json()
    assert UID.bytes.hex() not in payload and ManifestFile.model_validate_json(payload) == written


def test_avro_schema_of_nested_types_round_trips_through_fastavro(storage: Storage, tmp_path: Path) -> None:
    struct = StructType.model_validate(
        {
            "type": "struct",
            "fields": [
                {"id": 1, "name": "a", "required": False, "type": "decimal(9,2)"},
                {"id": 2, "name": "b", "required": True, "type": "decimal(9,2)"},  # the same named fixed again
                {
                    "id": 3,
                    "name": "tags",
                    "required": False,
                    "type": {
                        "type": "map",
                        "key-id": 4,
                        "key": "string",
                        "value-id": 5,
                        "value-required": False,
                        "value": "uuid",
                    },
                },
                {
                    "id": 6,
                    "name": "points",
                    "required": True,
                    "type": {
                        "type": "list",
                        "element-id": 7,
                        "element-required": False,
                        "element": {
                            "type": "struct",
                            "fields": [{"id": 8, "name": "at", "required": True, "type": "timestamptz"}],
                        },
                    },
                },
                {
                    "id": 9,
                    "name": "by_day",
                    "required": True,
                    "type": {
                        "type": "map",
                        "key-id": 10,
                        "key": "date",
                        "value-id": 11,
                        "value-required": True,
                        "value": "binary",
                    },
                },
            ],
        }
    )
    schema = avro_schema(struct, "row")
    fields = {f["name"]: f for f in schema["fields"]}
    assert fields["b"]["type"] == "decimal_9_2"  # defined once, then referenced
    assert fields["tags"]["type"][1] == {
        "type": "map",
        "values": ["null", {"type": "fixed", "name": "uuid_fixed", "size": 16, "logicalType": "uuid"}],
        "key-id": 4,
        "value-id": 5,
    }
    assert fields["points"]["type"]["element-id"] == 7 and fields["points"]["type"]["items"][1]["name"] == "r7"
    assert fields["by_day"]["type"]["items"]["name"] == "k10_v11"
    value = {
        "a": None,
        "b": Decimal("-1.05"),
        "tags": {"x": UID, "y": None},
        "points": [{"at": -1}, None],
        "by_day": {-3: b"\x00", 20000: b""},
    }
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(schema), [to_avro(struct, value)])
    storage.put_if_absent(str(tmp_path / "row.avro"), buffer.getvalue())
    stored = {f["name"]: f for f in fastavro.reader(io.BytesIO(buffer.getvalue())).writer_schema["fields"]}
    assert (stored["tags"]["type"][1]["key-id"], stored["tags"]["type"][1]["value-id"]) == (4, 5)
    avro = read_avro(storage, str(tmp_path / "row.avro"), "row file")
    assert [from_avro(struct, avro.schema, r, avro.named) for r in avro.records] == [value]


def test_reads_resolve_columns_by_field_id_not_name(storage: Storage, tmp_path: Path) -> None:
    """Java's v1 manifest lists name id 504 ``added_data_files_count``; ids decide, not names."""
    type_ = manifest_file_type(1)
    schema = avro_schema(type_, "manifest_file")
    renamed = {"added_files_count": "added_data_files_count", "existing_files_count": "existing_data_files_count"}
    for field in schema["fields"]:
        field["name"] = renamed.get(field["name"], field["name"])
    record = {"manifest_path": "m.avro", "manifest_length": 10, "partition_spec_id": 0, "added_snapshot_id": 4}
    record |= {"added_data_files_count": 2, "existing_data_files_count": 1, "deleted_files_count": None}
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(schema), [to_avro(type_, {}) | record])
    storage.put_if_absent(str(tmp_path / "java.avro"), buffer.getvalue())
    [manifest] = read_manifest_list(storage, str(tmp_path / "java.avro"))
    assert (manifest.added_files_count, manifest.existing_files_count, manifest.deleted_files_count) == (2, 1, None)
    assert (manifest.sequence_number, manifest.min_sequence_number, manifest.content) == (0, 0, ManifestContent.DATA)


def test_v1_snapshot_with_inline_manifests(storage: Storage, tmp_path: Path) -> None:
    entries = [
        ManifestEntry(status=EntryStatus.ADDED, data_file=data_file("added", P1)),
        ManifestEntry(status=EntryStatus.DELETED, data_file=data_file("gone", P2)),
    ]
    written = _write(storage, tmp_path / "m.avro", entries, format_version=1, snapshot_id=5)
    snapshot = Snapshot.model_validate({"snapshot-id": 5, "timestamp-ms": 1, "manifests": [str(tmp_path / "m.avro")]})
    [manifest] = manifests_of(storage, snapshot)
    assert manifest_view(manifest) == {**manifest_view(written), "sequence_number": 0, "min_sequence_number": 0}
    assert [e.data_file.file_path for e in read_manifest(storage, manifest)] == [entries[0].data_file.file_path]


# --- inheritance -------------------------------------------------------------------------------


def _raw_manifest(storage: Storage, path: Path, records: list[dict[str, Any]]) -> None:
    """A v2 manifest holding exactly ``records`` (written with fastavro, bypassing our writer's checks)."""
    type_ = manifest_entry_type(2, SPEC.partition_type(SCHEMA))
    buffer = io.BytesIO()
    metadata = {"schema": json.dumps(SCHEMA.to_json()), "partition-spec": json.dumps(SPEC.fields_json())}
    metadata |= {"partition-spec-id": "2", "format-version": "2", "content": "data"}
    fastavro.writer(
        buffer,
        fastavro.parse_schema(avro_schema(type_, "manifest_entry")),
        [to_avro(type_, r) for r in records],
        metadata=metadata,
    )
    storage.put_if_absent(str(path), buffer.getvalue())


def _record(status: int, sequence_number: int | None, file_sequence_number: int | None) -> dict[str, Any]:
    data = dict(data_file("f", P1))
    return {
        "status": status,
        "snapshot_id": None,
        "sequence_number": sequence_number,
        "file_sequence_number": file_sequence_number,
        "data_file": data,
    }


def _listed(path: Path, sequence_number: int | None = 6) -> ManifestFile:
    return ManifestFile(
        manifest_path=str(path),
        manifest_length=1,
        partition_spec_id=2,
        sequence_number=sequence_number,
        min_sequence_number=sequence_number,
        added_snapshot_id=21,
        listed_in="manifest list snap-21.avro",
    )


def test_added_entries_inherit_and_explicit_numbers_win(storage: Storage, tmp_path: Path) -> None:
    _raw_manifest(storage, tmp_path / "m.avro", [_record(1, None, None), _record(1, 2, None), _record(1, 2, 5)])
    entries = read_manifest(storage, _listed(tmp_path / "m.avro"))
    assert [(e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in entries] == [
        (21, 6, 6),
        (21, 2, 6),
        (21, 2, 5),
    ]


@pytest.mark.parametrize("status", [EntryStatus.EXISTING, EntryStatus.DELETED])
@pytest.mark.parametrize("numbers", [(None, None), (3, None), (None, 3)])
def test_existing_or_deleted_entry_without_numbers_is_a_protocol_error(
    storage: Storage, tmp_path: Path, status: EntryStatus, numbers: tuple[int | None, int | None]
) -> None:
    _raw_manifest(storage, tmp_path / "m.avro", [_record(status, *numbers)])
    with pytest.raises(ProtocolError, match=rf"m\.avro.*snap-21\.avro.*{status.name} entry for .*/f\.parquet"):
        read_manifest(storage, _listed(tmp_path / "m.avro"), include_deleted=True)


def test_v1_manifest_numbers_are_zero_even_in_a_v2_list(storage: Storage, tmp_path: Path) -> None:
    entries = [
        ManifestEntry(status=EntryStatus.ADDED, data_file=data_file("a", P1)),
        ManifestEntry(status=EntryStatus.EXISTING, snapshot_id=3, data_file=data_file("b", P2)),
    ]
    v1 = _write(storage, tmp_path / "m.avro", entries, format_version=1)
    [listed] = _commit(storage, tmp_path / "snap.avro", [v1])
    assert listed.sequence_number == 9
    assert [(e.sequence_number, e.file_sequence_number) for e in read_manifest(storage, listed)] == [(0, 0), (0, 0)]


def test_uncommitted_manifest_leaves_inherited_numbers_unassigned(storage: Storage, tmp_path: Path) -> None:
    written = _write(storage, tmp_path / "m.avro", V2_ENTRIES)
    entries = list(iter_manifest(storage, written, include_deleted=True))
    assert [(e.sequence_number, e.file_sequence_number) for e in entries] == [(None, None), (4, None), (3, 3), (2, 2)]


# --- refused writes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "content", "problem"),
    [
        (
            ManifestEntry(status=EntryStatus.EXISTING, snapshot_id=5, data_file=data_file("x", P1)),
            "data",
            "sequence numbers",
        ),
        (
            ManifestEntry(
                status=EntryStatus.EXISTING, sequence_number=1, file_sequence_number=1, data_file=data_file("x", P1)
            ),
            "data",
            "snapshot",
        ),
        (
            ManifestEntry(status=EntryStatus.DELETED, sequence_number=1, data_file=data_file("x", P1)),
            "data",
            "sequence numbers",
        ),
        (ManifestEntry(status=EntryStatus.ADDED, snapshot_id=3, data_file=data_file("x", P1)), "data", "EXISTING"),
        (
            ManifestEntry(status=EntryStatus.ADDED, file_sequence_number=3, data_file=data_file("x", P1)),
            "data",
            "assigned at commit",
        ),
        (
            ManifestEntry(status=EntryStatus.ADDED, data_file=data_file("x", P1, FileContent.POSITION_DELETES)),
            "data",
            "POSITION_DELETES",
        ),
        (ManifestEntry(status=EntryStatus.ADDED, data_file=data_file("x", P1)), "deletes", "DATA"),
        (
            ManifestEntry(status=EntryStatus.ADDED, data_file=data_file("x", P1, FileContent.EQUALITY_DELETES)),
            "deletes",
            "equality_ids",
        ),
        (ManifestEntry(status=EntryStatus.ADDED, data_file=data_file("x", {"day": 1})), "data", "partition fields"),
        (
            ManifestEntry(status=EntryStatus.ADDED, data_file=data_file("x", {**P1, "amount": Decimal("1.234")})),
            "data",
            "digits",
        ),
    ],
)
def test_write_refuses_entries_that_break_the_spec(
    storage: Storage, tmp_path: Path, entry: ManifestEntry, content: str, problem: str
) -> None:
    with pytest.raises(InvalidArgument, match=rf"m\.avro.*x\.parquet.*{problem}"):
        _write(storage, tmp_path / "m.avro", [entry], content=content)
    assert not (tmp_path / "m.avro").exists()


def test_v1_manifests_hold_no_delete_files(storage: Storage, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"m\.avro: v1"):
        _write(storage, tmp_path / "m.avro", [], format_version=1, content="deletes")


def test_list_assigns_numbers_only_to_manifests_of_the_committing_snapshot(storage: Storage, tmp_path: Path) -> None:
    other = _write(storage, tmp_path / "m.avro", V2_ENTRIES[:1], snapshot_id=10)
    with pytest.raises(InvalidArgument, match=r"m\.avro.*added by snapshot 10.*no sequence number.*11"):
        _commit(storage, tmp_path / "snap.avro", [other])
    assert not (tmp_path / "snap.avro").exists()


def test_v2_list_requires_every_count_and_v1_list_no_deletes(storage: Storage, tmp_path: Path) -> None:
    unknown = _listed(tmp_path / "m.avro").model_copy(update={"added_snapshot_id": 11})
    with pytest.raises(InvalidArgument, match=r"m\.avro.*requires added_files_count"):
        _commit(storage, tmp_path / "snap.avro", [unknown])
    # v1 lists may leave counts unknown: they read back as None ("assume non-zero")
    [read] = _commit(storage, tmp_path / "snap.avro", [unknown], format_version=1)
    assert (read.added_files_count, read.deleted_rows_count) == (None, None)
    deletes = unknown.model_copy(update={"content": ManifestContent.DELETES})
    with pytest.raises(InvalidArgument, match="v1 manifest list cannot hold delete manifests"):
        _commit(storage, tmp_path / "snap-v1.avro", [deletes], format_version=1)


def test_a_manifest_or_list_is_never_overwritten(storage: Storage, tmp_path: Path) -> None:
    written = _write(storage, tmp_path / "m.avro", V2_ENTRIES)
    before = (tmp_path / "m.avro").read_bytes()
    with pytest.raises(AlreadyExists):
        _write(storage, tmp_path / "m.avro", V2_ENTRIES[:1])
    _commit(storage, tmp_path / "snap.avro", [written])
    with pytest.raises(AlreadyExists):
        _commit(storage, tmp_path / "snap.avro", [written])
    assert (tmp_path / "m.avro").read_bytes() == before


# --- damaged and missing files -----------------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncated", "header only", "not avro", "empty", "flipped block"])
def test_damaged_manifest_is_corrupt_file_naming_it(storage: Storage, tmp_path: Path, damage: str) -> None:
    _write(storage, tmp_path / "good.avro", V2_ENTRIES)
    payload = (tmp_path / "good.avro").read_bytes()
    damaged = {
        "truncated": payload[: len(payload) - 40],
        "header only": payload[:30],
        "not avro": b'{"not": "avro"}',
        "empty": b"",
        "flipped block": payload[:-60] + bytes(b ^ 0xFF for b in payload[-60:-20]) + payload[-20:],
    }[damage]
    (tmp_path / "bad.avro").write_bytes(damaged)
    with pytest.raises(CorruptFile, match=r"manifest .*bad\.avro \(manifest list snap-21\.avro\)"):
        read_manifest(storage, _listed(tmp_path / "bad.avro"))


def test_missing_manifest_names_it_and_its_list(storage: Storage, tmp_path: Path) -> None:
    with pytest.raises(NotFound, match=r"manifest .*gone\.avro \(manifest list snap-21\.avro\) does not exist"):
        read_manifest(storage, _listed(tmp_path / "gone.avro"))
    written = _write(storage, tmp_path / "m.avro", V2_ENTRIES)
    [listed] = _commit(storage, tmp_path / "snap.avro", [written])
    (tmp_path / "m.avro").unlink()
    with pytest.raises(NotFound, match=r"manifest .*m\.avro \(manifest list .*snap\.avro\) does not exist"):
        read_manifest(storage, listed)


def test_missing_manifest_list_or_inline_manifest_names_the_snapshot(storage: Storage, tmp_path: Path) -> None:
    listed = Snapshot.model_validate(
        {"snapshot-id": 8, "timestamp-ms": 1, "manifest-list": str(tmp_path / "snap.avro")}
    )
    with pytest.raises(NotFound, match=r"snapshot 8: manifest list .*snap\.avro does not exist"):
        manifests_of(storage, listed)
    inline = Snapshot.model_validate({"snapshot-id": 9, "timestamp-ms": 1, "manifests": [str(tmp_path / "m.avro")]})
    with pytest.raises(NotFound, match=r"manifest .*m\.avro \(listed in snapshot 9\) does not exist"):
        manifests_of(storage, inline)
