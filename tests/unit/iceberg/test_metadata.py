"""Table metadata: PyIceberg's files round-trip unchanged; v1 reads as v2 (Appendix E) and writes
back as v1; unsupported versions and malformed files fail with the file named."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from iceberg_fixtures import minimal_metadata
from pyiceberg_tables import batch, create_table, small_file_table

from lakeops.errors import CorruptFile, ProtocolError, UnsupportedFeature, VersionNotFound
from lakeops.iceberg.metadata import TableMetadata, parse_metadata, serialize_metadata
from lakeops.iceberg.partitioning import PartitionSpec


def _spec_spelling(raw: bytes) -> object:
    """The JSON with decimals spelled as Appendix C does (``decimal(10,2)``); PyIceberg and Java write
    ``decimal(10, 2)``, which both parse, as do we."""
    return json.loads(re.sub(rb"decimal\((\d+), (\d+)\)", rb"decimal(\1,\2)", raw))


def _metadata_files(location: str) -> list[Path]:
    return sorted(Path(location, "metadata").glob("*.metadata.json"))


def test_every_pyiceberg_metadata_file_round_trips_unchanged(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "day", appends=3)
    table.table.delete("id == 1")
    snapshot = table.reload().current_snapshot()
    assert snapshot is not None
    table.table.manage_snapshots().create_tag(snapshot.snapshot_id, "release").create_branch(
        snapshot.snapshot_id, "audit", max_ref_age_ms=86_400_000, min_snapshots_to_keep=2
    ).commit()
    files = _metadata_files(table.location)
    assert len(files) >= 5
    for path in files:
        raw = path.read_bytes()
        metadata = parse_metadata(raw, str(path))
        assert metadata.to_json() == _spec_spelling(raw), path.name
    last = parse_metadata(files[-1].read_bytes(), str(files[-1]))
    assert last.refs["audit"].max_ref_age_ms == 86_400_000 and last.refs["audit"].min_snapshots_to_keep == 2
    assert last.refs["release"].type == "tag"
    assert last.current_snapshot() is not None and last.current_snapshot().operation == "overwrite"  # type: ignore[union-attr]  # a row delete rewrites a file
    assert [s.snapshot_id for s in last.ancestors(last.current_snapshot_id or 0)] == [
        s.snapshot_id for s in reversed(last.snapshots)
    ]


def test_our_serialisation_is_what_pyiceberg_loads(tmp_path: Path) -> None:
    from pyiceberg.table import StaticTable

    table = small_file_table(tmp_path, "identity", appends=2)
    source = _metadata_files(table.location)[-1]
    metadata = parse_metadata(source.read_bytes(), str(source))
    ours = source.with_name("ours.metadata.json")
    ours.write_bytes(serialize_metadata(metadata))
    static = StaticTable.from_metadata(f"file://{ours}")
    assert static.metadata.current_snapshot_id == metadata.current_snapshot_id
    assert static.scan().to_arrow().num_rows == 40


def test_v1_metadata_reads_as_v2_and_writes_back_as_v1(tmp_path: Path) -> None:
    table = create_table(tmp_path, "identity", properties={"format-version": "1"})
    table.table.append(batch(0, 10))
    table.reload()
    path = _metadata_files(table.location)[-1]
    raw = json.loads(path.read_bytes())
    assert raw["format-version"] == 1
    metadata = parse_metadata(path.read_bytes(), str(path))
    assert metadata.last_sequence_number == 0
    assert all(s.sequence_number == 0 for s in metadata.snapshots)
    # A minimal v1 file with only the deprecated fields still reads: Appendix E defaults.
    legacy = {
        k: v for k, v in raw.items() if k not in ("schemas", "partition-specs", "last-partition-id", "sort-orders")
    }
    legacy.pop("current-schema-id", None)
    legacy.pop("default-spec-id", None)
    legacy.pop("default-sort-order-id", None)
    old = TableMetadata.model_validate(legacy)
    assert old.current_schema() == metadata.current_schema()
    assert old.default_spec().fields == metadata.default_spec().fields
    assert old.last_partition_id == 1000 and old.default_sort_order().is_unsorted
    written = json.loads(serialize_metadata(old))
    assert written["format-version"] == 1
    assert "last-sequence-number" not in written
    assert written["schema"] == old.current_schema().to_json()
    assert written["partition-spec"] == old.default_spec().fields_json()
    assert all("sequence-number" not in s for s in written["snapshots"])


def test_v1_partition_fields_without_ids_are_numbered_from_1000() -> None:
    spec = PartitionSpec.from_v1_fields(
        [{"source-id": 1, "name": "a", "transform": "identity"}, {"source-id": 2, "name": "b", "transform": "void"}]
    )
    assert [f.field_id for f in spec.fields] == [1000, 1001]
    assert spec.fields[0].transform != "void" and not spec.is_unpartitioned


def test_v3_fields_are_read_and_snapshot_writers_refused_by_name() -> None:
    doc = minimal_metadata(3)
    doc["schemas"][0]["fields"].append(  # type: ignore[index]
        {"id": 2, "name": "y", "required": True, "type": "long", "initial-default": 7, "write-default": 8}
    )
    doc["next-row-id"] = 5
    doc["encryption-keys"] = []  # a v3 field lakeops does not model is kept
    metadata = parse_metadata(json.dumps(doc).encode(), "s3://b/wh/t/metadata/v3.metadata.json")
    field = metadata.current_schema().fields[1]
    assert (field.initial_default, field.write_default) == (7, 8)
    assert metadata.next_row_id == 5
    written = json.loads(serialize_metadata(metadata))
    assert (written["next-row-id"], written["encryption-keys"]) == (5, [])
    assert metadata.supported_operations() == ["read", "compact", "checkpoint", "expire", "orphans", "cdc"]
    metadata.check_writable("expire")
    refused = "lakeops commit does not support Iceberg format-version 3 tables yet: row lineage .* deletion vectors"
    with pytest.raises(UnsupportedFeature, match=refused):
        metadata.check_writable("commit")


def test_unknown_format_version_is_named() -> None:
    with pytest.raises(UnsupportedFeature, match=r"v9\.metadata\.json: Iceberg format-version 9 is not supported"):
        parse_metadata(json.dumps(minimal_metadata(9)).encode(), "/t/metadata/v9.metadata.json")


@pytest.mark.parametrize(
    ("payload", "error", "message"),
    [
        (b"{not json", CorruptFile, "not a JSON metadata file"),
        (b"[1, 2]", CorruptFile, "metadata is a JSON list"),
        (json.dumps({**minimal_metadata(2), "current-schema-id": 5}).encode(), ProtocolError, "current-schema-id 5"),
        (json.dumps({**minimal_metadata(2), "location": None}).encode(), ProtocolError, "location"),
        (
            json.dumps({**minimal_metadata(2), "refs": {"t": {"snapshot-id": 4, "type": "tag"}}}).encode(),
            ProtocolError,
            "ref 't' points at snapshot 4",
        ),
        (
            json.dumps(
                {
                    **minimal_metadata(2),
                    "schemas": [
                        {"type": "struct", "fields": [{"id": 1, "name": "x", "required": True, "type": "int128"}]}
                    ],
                }
            ).encode(),
            ProtocolError,
            "unknown Iceberg type 'int128'",
        ),
    ],
)
def test_malformed_metadata_names_the_file(payload: bytes, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message) as info:
        parse_metadata(payload, "/t/metadata/v2.metadata.json")
    assert "/t/metadata/v2.metadata.json" in str(info.value)


def test_gzip_metadata_and_missing_snapshot() -> None:
    metadata = parse_metadata(
        gzip.compress(json.dumps(minimal_metadata(2)).encode()), "/t/metadata/v1.gz.metadata.json"
    )
    assert metadata.current_snapshot() is None and metadata.snapshot_for_ref("main") is None
    with pytest.raises(VersionNotFound, match="no snapshot 42"):
        metadata.snapshot_by_id(42)
    with pytest.raises(VersionNotFound, match="no branch or tag named 'dev'"):
        metadata.snapshot_for_ref("dev")


def test_v3_source_ids_of_one_column_read_as_source_id_and_more_are_refused() -> None:
    """Appendix C: v3 partition and sort fields may give their source as ``source-ids``; a single
    one is written back as ``source-id`` (what the spec asks for single-argument transforms)."""
    spec = {
        "spec-id": 0,
        "fields": [{"source-ids": [1], "field-id": 1000, "name": "x_bucket", "transform": "bucket[4]"}],
    }
    doc = minimal_metadata(3, specs=[spec])
    doc["sort-orders"] = [
        {
            "order-id": 1,
            "fields": [{"source-ids": [1], "transform": "identity", "direction": "asc", "null-order": "nulls-first"}],
        }
    ]
    metadata = parse_metadata(json.dumps(doc).encode(), "/t/metadata/v3.metadata.json")
    assert metadata.default_spec().fields[0].source_id == metadata.sort_order_by_id(1).fields[0].source_id == 1
    assert json.loads(serialize_metadata(metadata))["partition-specs"][0]["fields"][0]["source-id"] == 1
    spec["fields"][0]["source-ids"] = [1, 1]
    with pytest.raises(ProtocolError, match=r"source-ids \[1, 1\]: multi-argument transforms are not supported"):
        parse_metadata(json.dumps(minimal_metadata(3, specs=[spec])).encode(), "/t/metadata/v3.metadata.json")
