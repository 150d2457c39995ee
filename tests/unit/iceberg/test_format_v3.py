"""Iceberg format version 3 on tables other engines wrote (duckdb-iceberg's, see
``tests/data/PROVENANCE.md``): v3 manifest fields, deletion vectors in Puffin files, default values,
a v1 table upgraded to v3, and the operations that refuse v3 by name.

PyIceberg 0.12 is the oracle where it reads the table; it cannot read the bare deletion-vector blob
of ``legacy_bare_deletion_vector`` (it expects a Puffin header), so that table is judged against its
documented content: rows ``id`` 1, 2, 3 (``source`` "legacy"), then a DV deleting position 1.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from modern_iceberg import edit_avro, relength, unpack
from pyiceberg.catalog.sql import SqlCatalog

from lakeops import api
from lakeops.errors import ProtocolError, UnsupportedFeature
from lakeops.executors import TaskFailed
from lakeops.iceberg.data_reader import read_parquet
from lakeops.iceberg.manifest import read_manifest
from lakeops.iceberg.manifest_list import read_manifest_list
from lakeops.iceberg.puffin import read_deletion_vector
from lakeops.iceberg.scan import DeleteIndex, plan_scan
from lakeops.iceberg.table import IcebergTable, TableRef, load_table
from lakeops.ops.cdc import CdcOptions
from lakeops.ops.checkpoint import CheckpointOptions
from lakeops.ops.compaction import CompactionOptions
from lakeops.ops.expiry import ExpiryOptions
from lakeops.ops.orphans import OrphansOptions
from lakeops.ops.target import CatalogOptions, IcebergTarget
from lakeops.ops.verify import checkpoint_matches_log, compaction_kept_rows
from lakeops.storage import StorageOptions, open_storage

DV_TABLE = "legacy_bare_deletion_vector"
DV_METADATA = "00002-legacy-bare-dv.metadata.json"  # its version-hint.text; the catalog row lags at 00001
DATA_FILE = "00000-0-cac6cfea-266f-44f8-9a3a-70dd8fb68014.parquet"
V1_TABLE = "iceberg_v1_repro"
V3_UPGRADE = "00004-v3-upgraded-v1-null-counts.metadata.json"


def _dv_table(tmp_path: Path) -> tuple[str, CatalogOptions, Path]:
    name, catalog = unpack(DV_TABLE, tmp_path, current=DV_METADATA)
    return name, catalog, tmp_path / DV_TABLE / "warehouse" / "default" / DV_TABLE


def _load(name: str, catalog: CatalogOptions) -> IcebergTable:
    ref = TableRef(catalog_uri=catalog.catalog_uri, identifier=name, catalog_name=catalog.catalog_name)
    return load_table(ref, StorageOptions())


def _changes(name: str, catalog: CatalogOptions, output: Path) -> list[tuple[object, ...]]:
    api.cdc(name, CdcOptions(from_version=0, output=str(output), **catalog.model_dump()))
    rows = DeltaTable(str(output)).to_pyarrow_table().to_pylist()
    return sorted(
        (r["_commit_sequence_number"], r["_change_type"], *(v for k, v in r.items() if not k.startswith("_")))
        for r in rows
    )


def _lakeops_rows(name: str, catalog: CatalogOptions) -> list[dict[str, object]]:
    """The current snapshot's rows as lakeops's data reader reads them (tables without deletes)."""
    table = _load(name, catalog)
    metadata = table.metadata
    scan = plan_scan(table.storage, metadata, metadata.current_snapshot())
    assert not scan.delete_files
    files = [read_parquet(table.storage, t.file.path, metadata.current_schema()) for t in scan.tasks]
    return sorted(pa.concat_tables(files).to_pylist(), key=repr)


def _pyiceberg_rows(name: str, catalog: CatalogOptions) -> list[dict[str, object]]:
    table = SqlCatalog(catalog.catalog_name, uri=catalog.catalog_uri).load_table(name)
    return sorted(table.scan().to_arrow().to_pylist(), key=repr)


# --- reading --------------------------------------------------------------------------------------


def test_inspect_reads_v3_with_its_deletion_vector(tmp_path: Path) -> None:
    name, catalog, _ = _dv_table(tmp_path)
    report = api.inspect(name, catalog)
    assert (report.format_version, report.snapshots, report.live_files) == (3, 2, 1)
    assert (report.position_delete_files, report.deletion_vectors, report.rows) == (1, 1, 2)
    assert report.supported_operations == ["read", "compact", "checkpoint", "expire", "orphans", "cdc"]
    table = _load(name, catalog)
    assert table.metadata.next_row_id == 3


def test_v3_manifest_fields_are_read(tmp_path: Path) -> None:
    name, catalog, root = _dv_table(tmp_path)
    table = _load(name, catalog)
    scan = plan_scan(table.storage, table.metadata, table.metadata.current_snapshot())
    (task,) = scan.tasks
    (dv,) = task.deletes
    data = dv.entry.data_file
    assert (data.file_format, data.content_offset, data.content_size_in_bytes, data.record_count) == (
        "PUFFIN",
        0,
        42,
        1,
    )
    assert data.referenced_data_file == task.file.path == str(root / "data" / DATA_FILE)
    assert task.file.entry.data_file.first_row_id is None  # its manifest has none: written before row lineage


def test_deletion_vector_blob_decodes(tmp_path: Path) -> None:
    name, catalog, root = _dv_table(tmp_path)
    table = _load(name, catalog)
    (dv,) = plan_scan(table.storage, table.metadata, table.metadata.current_snapshot()).delete_files
    ref = dv.entry.data_file.deletion_vector()
    assert ref is not None
    (positions,) = read_deletion_vector(table.storage, ref).items()
    assert positions[0] == str(root / "data" / DATA_FILE) and positions[1].to_pylist() == [1]


@pytest.mark.parametrize(
    ("offset", "damage", "problem"),
    [
        (41, b"\x00", "CRC-32"),  # the last CRC byte
        (3, b"\x21", "length field says 33 bytes"),
        (4, b"\x00", "CRC-32"),  # the magic changes, so the CRC no longer matches
    ],
)
def test_a_damaged_deletion_vector_is_named(tmp_path: Path, offset: int, damage: bytes, problem: str) -> None:
    name, catalog, root = _dv_table(tmp_path)
    puffin = root / "data" / "legacy-bare-deletion-vector.puffin"
    blob = bytearray(puffin.read_bytes())
    blob[offset : offset + 1] = damage
    puffin.write_bytes(bytes(blob))
    where = r"legacy-bare-deletion-vector\.puffin \(deletion vector at offset 0\)"
    with pytest.raises(TaskFailed, match=rf"CorruptFile: .*{where}: .*{problem}"):
        _changes(name, catalog, tmp_path / "changes")


def test_first_row_id_is_inherited_in_manifest_order(tmp_path: Path) -> None:
    """ "First Row ID Inheritance": a manifest's first_row_id plus the record counts of the data files
    before each one with a null first_row_id, deleted entries included."""
    name, catalog = unpack(V1_TABLE, tmp_path, current=V3_UPGRADE)
    table = _load(name, catalog)
    storage = open_storage(str(tmp_path / V1_TABLE))
    manifests = read_manifest_list(storage, table.metadata.current_snapshot().manifest_list)
    assert {m.first_row_id for m in manifests} == {None}  # snapshots before the upgrade have no row ids
    firsts = []
    for manifest in manifests:
        entries = read_manifest(storage, manifest.model_copy(update={"first_row_id": 100}), include_deleted=True)
        firsts.append([(e.status.name, e.data_file.record_count, e.data_file.first_row_id) for e in entries])
    assert firsts == [
        [("EXISTING", 2, 100), ("EXISTING", 2, 102)],
        [("DELETED", 3, 100), ("DELETED", 3, 103)],
    ]


def _in_a_puffin_file(root: Path) -> Path:
    """Move the fixture's bare DV blob into a complete Puffin file ("File structure": magic, blob,
    footer of magic, JSON payload, its length, flags, magic) at offset 4, and point the delete
    manifest at it: the layout Java and PyIceberg write, which PyIceberg can read."""
    blob = (root / "data" / "legacy-bare-deletion-vector.puffin").read_bytes()
    data_file = str(root / "data" / DATA_FILE)
    footer = {
        "blobs": [
            {
                "type": "deletion-vector-v1",
                "fields": [2147483645],
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": 4,
                "length": len(blob),
                "properties": {"referenced-data-file": data_file, "cardinality": "1"},
            }
        ],
        "properties": {"created-by": "lakeops tests"},
    }
    payload = json.dumps(footer).encode()
    puffin = root / "data" / "deletion-vectors.puffin"
    puffin.write_bytes(b"PFA1" + blob + b"PFA1" + payload + struct.pack("<i", len(payload)) + bytes(4) + b"PFA1")

    def repoint(record: dict[str, Any]) -> dict[str, Any]:
        data = {**record["data_file"], "file_path": str(puffin), "file_size_in_bytes": puffin.stat().st_size}
        return {**record, "data_file": {**data, "content_offset": 4}}

    manifest = root / "metadata" / "legacy-bare-deletion-vector-m0.avro"
    lengths = {str(manifest): edit_avro(manifest, repoint)}
    edit_avro(root / "metadata" / "snap-legacy-bare-deletion-vector.avro", relength(lengths))
    return puffin


def test_a_deletion_vector_in_a_puffin_file_reads_as_pyiceberg_reads_it(tmp_path: Path) -> None:
    name, catalog, root = _dv_table(tmp_path)
    puffin = _in_a_puffin_file(root)
    peer = _pyiceberg_rows(name, catalog)
    assert peer == [{"id": 1, "source": "legacy"}, {"id": 3, "source": "legacy"}]
    live = _changes(name, catalog, tmp_path / "changes")
    assert live == [
        (1, "insert", 1, "legacy"),
        (1, "insert", 2, "legacy"),
        (1, "insert", 3, "legacy"),
        (2, "delete", 2, "legacy"),
    ]
    assert api.inspect(name, catalog).rows == len(peer)
    _compact(name, catalog)
    assert _pyiceberg_rows(name, catalog) == peer and puffin.exists()  # expiry deletes it, not compaction


# --- deletion vectors in the change feed ----------------------------------------------------------


def test_cdc_applies_the_deletion_vector(tmp_path: Path) -> None:
    name, catalog, _ = _dv_table(tmp_path)
    assert _changes(name, catalog, tmp_path / "changes") == [
        (1, "insert", 1, "legacy"),
        (1, "insert", 2, "legacy"),
        (1, "insert", 3, "legacy"),
        (2, "delete", 2, "legacy"),  # position 1 of the data file
    ]


# --- default values, and a v1 table upgraded to v3 -------------------------------------------------


def test_initial_defaults_fill_columns_added_after_a_file_was_written(tmp_path: Path) -> None:
    """The data reader every operation uses (compaction, changelog) reads the file written before
    the columns were added with their initial-default (``add_columns_with_defaults``)."""
    name, catalog = unpack("add_columns_with_defaults", tmp_path)
    ours = _lakeops_rows(name, catalog)
    assert ours == _pyiceberg_rows(name, catalog)
    old = [row for row in ours if row["col_string"] == "HELLO"]
    assert len(old) == 2 and {(r["col_boolean"], r["col_integer"], r["col_long"]) for r in old} == {
        (True, 342342, -9223372036854775808)
    }
    assert {(r["col_fixed"], r["col_binary"], str(r["col_uuid"])) for r in old} == {
        (b"\x01\x02\x03\xff\x03", b"\x01\x02", "f79c3e09-677c-4bbd-a479-3f349cb785e7")
    }


def test_a_v1_table_upgraded_to_v3_reads_as_pyiceberg_reads_it(tmp_path: Path) -> None:
    name, catalog = unpack(V1_TABLE, tmp_path, current=V3_UPGRADE)
    report = api.inspect(name, catalog)
    assert (report.format_version, report.rows, report.supported_operations) == (
        3,
        4,
        ["read", "compact", "checkpoint", "expire", "orphans", "cdc"],
    )
    ours = _lakeops_rows(name, catalog)
    assert len(ours) == 4 and ours == _pyiceberg_rows(name, catalog)


# --- operations -----------------------------------------------------------------------------------


def _files(root: Path) -> dict[str, bytes]:
    """The table's files (not lakeops's audit records, which record refused runs too)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "_lakeops_audit" not in p.parts
    }


def _compact(name: str, catalog: CatalogOptions) -> None:
    """Every file rewritten: two small ones merge, a file with a deletion vector is rewritten alone."""
    options = CompactionOptions(min_input_files=2, delete_file_threshold=1, **catalog.model_dump())
    assert api.compact(name, options).commits == 1


def test_compaction_purges_the_deletion_vector(tmp_path: Path) -> None:
    """The DV's rows are dropped and the DV removed with its data file ("a data file may have at most
    one DV"): PyIceberg, which cannot read the bare blob, now reads the table."""
    name, catalog, root = _dv_table(tmp_path)
    _compact(name, catalog)
    report = api.inspect(name, catalog)
    assert (report.format_version, report.rows, report.position_delete_files, report.deletion_vectors) == (3, 2, 0, 0)
    assert _pyiceberg_rows(name, catalog) == [{"id": 1, "source": "legacy"}, {"id": 3, "source": "legacy"}]
    table = _load(name, catalog)
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None and snapshot.operation == "replace"
    # The first snapshot after the upgrade gives every row an id from next-row-id (3), the one data
    # manifest assigned by its 2 rows; the rows copied had none ("Row Lineage for Upgraded Tables").
    assert (snapshot.first_row_id, snapshot.added_rows, table.metadata.next_row_id) == (3, 2, 5)
    (task,) = plan_scan(table.storage, table.metadata, snapshot).tasks
    written = pq.read_table(task.file.path)
    assert written.column("_row_id").null_count == written.column("_last_updated_sequence_number").null_count == 2


def test_compaction_copies_the_row_lineage_of_the_rows_it_moves(tmp_path: Path) -> None:
    """ "When an existing row is moved to a different data file ... its _row_id must be copied": after a
    checkpoint assigned ids (files at first_row_id 0 and 2), the merged file stores each row's id and
    last updated sequence number (0: the files came from v1), which its own first_row_id does not change."""
    name, catalog = unpack(V1_TABLE, tmp_path, current=V3_UPGRADE)
    rows = _pyiceberg_rows(name, catalog)
    api.checkpoint(name, CheckpointOptions(**catalog.model_dump()))
    before = _load(name, catalog)
    ids = {}
    for task in plan_scan(before.storage, before.metadata, before.metadata.current_snapshot()).tasks:
        first = task.file.entry.data_file.first_row_id
        assert first is not None
        for pos, row_id in enumerate(pq.read_table(task.file.path, columns=["id"]).column("id").to_pylist()):
            ids[row_id] = first + pos
    _compact(name, catalog)
    table = _load(name, catalog)
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None and (snapshot.first_row_id, snapshot.added_rows, table.metadata.next_row_id) == (
        4,
        4,
        8,
    )
    (task,) = plan_scan(table.storage, table.metadata, snapshot).tasks
    assert task.file.entry.data_file.first_row_id == 4  # inherited, but every row keeps its own
    written = pq.read_table(task.file.path).to_pylist()
    assert {r["id"]: r["_row_id"] for r in written} == ids and sorted(ids.values()) == [0, 1, 2, 3]
    assert {r["_last_updated_sequence_number"] for r in written} == {0}
    assert _pyiceberg_rows(name, catalog) == rows == _lakeops_rows(name, catalog)


def test_checkpoint_on_an_upgraded_table_assigns_row_ids(tmp_path: Path) -> None:
    """ "Row Lineage for Upgraded Tables": the first snapshot after the upgrade assigns row ids to the
    existing files: the snapshot's first-row-id is next-row-id (0), each data manifest gets a
    first_row_id, next-row-id advances by the ids assigned."""
    name, catalog = unpack(V1_TABLE, tmp_path, current=V3_UPGRADE)
    rows = _pyiceberg_rows(name, catalog)
    report = api.checkpoint(name, CheckpointOptions(**catalog.model_dump()))
    assert (report.manifests_before, report.manifests_after) == (2, 1)
    table = _load(name, catalog)
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None and snapshot.snapshot_id == report.snapshot_id
    assert (snapshot.first_row_id, snapshot.added_rows, table.metadata.next_row_id) == (0, 4, 4)
    (manifest,) = read_manifest_list(table.storage, snapshot.manifest_list or "")
    assert manifest.first_row_id == 0
    entries = read_manifest(table.storage, manifest)
    assert sorted((e.data_file.first_row_id, e.data_file.record_count) for e in entries) == [(0, 2), (2, 2)]
    assert _pyiceberg_rows(name, catalog) == rows == _lakeops_rows(name, catalog)
    peer = SqlCatalog(catalog.catalog_name, uri=catalog.catalog_uri or "").load_table(name)
    assert (peer.metadata.format_version, peer.metadata.next_row_id) == (3, 4)


def test_a_second_checkpoint_keeps_the_row_ids_files_were_given(tmp_path: Path) -> None:
    """ "When writing an existing data file into a new manifest, its first_row_id must be written into
    the manifest", and readers keep a non-null one: the new manifests get new ranges (the spec's
    estimate assigns one id per row they list), their files keep theirs."""
    name, catalog = unpack(V1_TABLE, tmp_path, current=V3_UPGRADE)
    api.checkpoint(name, CheckpointOptions(**catalog.model_dump()))
    report = api.checkpoint(name, CheckpointOptions(rewrite_all=True, target_manifest_size=1, **catalog.model_dump()))
    table = _load(name, catalog)
    latest = table.metadata.current_snapshot()
    assert latest is not None and latest.snapshot_id == report.snapshot_id
    assert (report.manifests_replaced, report.manifests_created) == (1, 2)  # one file per manifest
    assert (latest.first_row_id, latest.added_rows, table.metadata.next_row_id) == (4, 4, 8)
    rewritten = read_manifest_list(table.storage, latest.manifest_list or "")
    assert sorted(m.first_row_id or 0 for m in rewritten) == [4, 6]
    entries = [e for m in rewritten for e in read_manifest(table.storage, m)]
    assert sorted((e.data_file.first_row_id, e.data_file.record_count) for e in entries) == [(0, 2), (2, 2)]
    assert _pyiceberg_rows(name, catalog) == _lakeops_rows(name, catalog)


def test_compaction_of_the_upgraded_table_counts_what_its_v1_list_left_unknown(tmp_path: Path) -> None:
    """The upgrade's snapshot lists its manifests with null counts (a v1 manifest list): the manifest
    the compaction keeps is counted from its entries to be assigned its row ids."""
    name, catalog = unpack(V1_TABLE, tmp_path, current=V3_UPGRADE)
    rows = _pyiceberg_rows(name, catalog)
    _compact(name, catalog)
    table = _load(name, catalog)
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None and (snapshot.first_row_id, snapshot.added_rows, table.metadata.next_row_id) == (
        0,
        4,
        4,
    )
    manifests = read_manifest_list(table.storage, snapshot.manifest_list or "")
    assert all(m.added_files_count is not None and m.existing_rows_count is not None for m in manifests)
    assert _pyiceberg_rows(name, catalog) == rows == _lakeops_rows(name, catalog)


def test_expiry_keeps_the_live_deletion_vector_and_the_v3_fields(tmp_path: Path) -> None:
    name, catalog, root = _dv_table(tmp_path)
    options = ExpiryOptions(older_than="0d", retain_last=1, force=True, **catalog.model_dump())
    report = api.expire(name, options)
    assert (report.snapshots_expired, report.snapshots_retained) == (1, 1)
    assert report.deleted_manifest_lists == 1 and report.deleted_delete_files == report.deleted_data_files == 0
    assert not (root / "metadata" / "snap-8314182234503896325-0-cac6cfea-266f-44f8-9a3a-70dd8fb68014.avro").exists()
    assert (root / "data" / "legacy-bare-deletion-vector.puffin").exists() and (root / "data" / DATA_FILE).exists()
    table = _load(name, catalog)
    written = json.loads(Path(table.metadata_location).read_bytes())
    assert (written["format-version"], written["next-row-id"], len(written["snapshots"])) == (3, 3, 1)
    assert api.inspect(name, catalog).rows == 2
    peer = SqlCatalog(catalog.catalog_name, uri=catalog.catalog_uri).load_table(name)
    assert (peer.metadata.format_version, [s.snapshot_id for s in peer.metadata.snapshots]) == (
        3,
        [7777777777777777776],
    )


def test_expiry_deletes_a_deletion_vector_only_expired_snapshots_reached(tmp_path: Path) -> None:
    name, catalog, root = _dv_table(tmp_path)
    _compact(name, catalog)
    puffin = root / "data" / "legacy-bare-deletion-vector.puffin"
    assert puffin.exists()  # the snapshots before the compaction still reach it
    options = ExpiryOptions(older_than="0d", retain_last=1, force=True, **catalog.model_dump())
    report = api.expire(name, options)
    assert (report.snapshots_expired, report.deleted_delete_files, report.deleted_data_files) == (2, 1, 1)
    assert not puffin.exists() and not (root / "data" / DATA_FILE).exists()
    assert _pyiceberg_rows(name, catalog) == [{"id": 1, "source": "legacy"}, {"id": 3, "source": "legacy"}]


def test_orphans_keeps_live_puffin_files_and_removes_stray_ones(tmp_path: Path) -> None:
    name, catalog, root = _dv_table(tmp_path)
    stray = root / "data" / "left-by-a-failed-writer.puffin"
    stray.write_bytes((root / "data" / "legacy-bare-deletion-vector.puffin").read_bytes())
    week_ago = stray.stat().st_mtime - 7 * 86400
    for path in root.rglob("*"):
        os.utime(path, (week_ago, week_ago))
    report = api.orphans(name, OrphansOptions(older_than="3d", **catalog.model_dump()))
    assert not stray.exists() and report.deleted_data_files == 1
    assert (root / "data" / "legacy-bare-deletion-vector.puffin").exists() and (root / "data" / DATA_FILE).exists()
    assert api.inspect(name, catalog).rows == 2


# --- v3 types --------------------------------------------------------------------------------------

NEW_TYPES = {
    "v": "variant",
    "g": "geometry(srid:4326)",
    "geo": "geography(srid:4326, spherical)",
    "u": "unknown",
    "ns": "timestamp_ns",
    "nstz": "timestamptz_ns",
}


def _add_columns(name: str, catalog: CatalogOptions, types: dict[str, str]) -> dict[str, object]:
    """Add optional columns to the current schema (a new schema, as an ALTER TABLE would) by editing
    the current metadata file of the tmp copy; returns the new schema's JSON."""
    table = _load(name, catalog)
    path = Path(table.metadata_location)
    document = json.loads(path.read_text())
    (schema,) = document["schemas"]
    last = document["last-column-id"]
    added = [
        {"id": last + i, "name": column, "required": False, "type": type_}
        for i, (column, type_) in enumerate(types.items(), start=1)
    ]
    new = {**schema, "schema-id": 1, "fields": [*schema["fields"], *added]}
    document |= {"schemas": [schema, new], "current-schema-id": 1, "last-column-id": last + len(added)}
    path.write_text(json.dumps(document))
    return new


def test_new_types_are_passed_through_and_refused_where_rows_are_decoded(tmp_path: Path) -> None:
    name, catalog, root = _dv_table(tmp_path)
    schema = _add_columns(name, catalog, NEW_TYPES)
    inspected = api.inspect(name, catalog)
    assert inspected.supported_operations == ["read", "checkpoint", "expire", "orphans"]
    assert sorted(inspected.refused_operations) == ["cdc", "compact"]
    assert "columns of type variant" in inspected.refused_operations["compact"]
    refused = r"lakeops {} does not support columns of type variant yet \(v is variant"
    with pytest.raises(UnsupportedFeature, match=refused.format("compact")):
        _compact(name, catalog)
    with pytest.raises(UnsupportedFeature, match=refused.format("cdc")):
        _changes(name, catalog, tmp_path / "changes")
    report = api.expire(name, ExpiryOptions(older_than="0d", retain_last=1, force=True, **catalog.model_dump()))
    assert report.snapshots_expired == 1
    written = json.loads(Path(_load(name, catalog).metadata_location).read_text())
    assert written["schemas"][1] == schema  # every type written back as it was spelled


def test_nanosecond_timestamps_are_read_and_compacted(tmp_path: Path) -> None:
    """A column added later reads as nulls of its type ("Default values": no initial-default), here
    nanosecond timestamps, which compaction writes as Parquet timestamps in nanoseconds."""
    name, catalog, _ = _dv_table(tmp_path)
    _add_columns(name, catalog, {"ns": "timestamp_ns", "nstz": "timestamptz_ns"})
    _compact(name, catalog)
    table = _load(name, catalog)
    (task,) = plan_scan(table.storage, table.metadata, table.metadata.current_snapshot()).tasks
    written = pq.read_table(task.file.path)
    assert (written.schema.field("ns").type, written.schema.field("nstz").type) == (
        pa.timestamp("ns"),
        pa.timestamp("ns", tz="UTC"),
    )
    assert written.column("id").to_pylist() == [1, 3] and written.column("ns").null_count == 2
    assert _pyiceberg_rows(name, catalog) == [
        {"id": 1, "source": "legacy", "ns": None, "nstz": None},
        {"id": 3, "source": "legacy", "ns": None, "nstz": None},
    ]


def test_the_checkpoint_check_accepts_assigned_row_ids_and_compaction_check_counts_dv_rows(tmp_path: Path) -> None:
    """The Dagster checks after a run (lakeops.ops.verify) on v3: a manifest rewrite may assign row
    ids where none were, and compaction kept the live rows a deletion vector left."""
    name, catalog = unpack(V1_TABLE, tmp_path / "v1", current=V3_UPGRADE)
    ref = TableRef(catalog_uri=catalog.catalog_uri, identifier=name, catalog_name=catalog.catalog_name)
    report = api.checkpoint(name, CheckpointOptions(**catalog.model_dump()))
    assert checkpoint_matches_log(IcebergTarget(ref), report).passed
    name, catalog, _ = _dv_table(tmp_path / "dv")
    ref = TableRef(catalog_uri=catalog.catalog_uri, identifier=name, catalog_name=catalog.catalog_name)
    options = CompactionOptions(min_input_files=2, delete_file_threshold=1, **catalog.model_dump())
    compacted = api.compact(name, options)
    check = compaction_kept_rows(IcebergTarget(ref), compacted)
    assert check.passed, check.summary


def test_two_deletion_vectors_for_one_data_file_are_refused(tmp_path: Path) -> None:
    """ "At most one deletion vector is allowed per data file in a snapshot": a second one (here the
    fixture's, listed again at another offset) makes the table's deletes ambiguous."""
    name, catalog, root = _dv_table(tmp_path)
    table = _load(name, catalog)
    scan = plan_scan(table.storage, table.metadata, table.metadata.current_snapshot())
    (task,) = scan.tasks
    (dv,) = scan.delete_files
    copy = dataclasses.replace(
        dv,
        entry=dv.entry.model_copy(update={"data_file": dv.entry.data_file.model_copy(update={"content_offset": 42})}),
    )
    index = DeleteIndex([dv, copy], {0})
    with pytest.raises(ProtocolError, match=rf"{DATA_FILE} has 2 deletion vectors .*at most one"):
        index.for_data_file(task.file)


@pytest.mark.parametrize("next_row_id", [2**63 - 1, 2**63 - 3])
def test_row_ids_that_would_pass_the_largest_long_are_refused_naming_the_table(
    tmp_path: Path, next_row_id: int
) -> None:
    """ "Row Lineage": row ids are longs. The upgraded table's first snapshot assigns 4 of them from
    ``next-row-id``; past 2^63-1 the Avro writer failed with ``OverflowError`` (issue 34, nearby)."""
    name, catalog = unpack(V1_TABLE, tmp_path, current=V3_UPGRADE)
    metadata = Path(_load(name, catalog).metadata_location.removeprefix("file://"))
    document = json.loads(metadata.read_text())
    metadata.write_text(json.dumps({**document, "next-row-id": next_row_id}))
    rows = _pyiceberg_rows(name, catalog)

    with pytest.raises(ProtocolError, match=rf"next-row-id is {next_row_id}: 4 more row ids would pass the largest"):
        api.checkpoint(name, CheckpointOptions(**catalog.model_dump()))
    assert _load(name, catalog).metadata_location.endswith(V3_UPGRADE) and _pyiceberg_rows(name, catalog) == rows
