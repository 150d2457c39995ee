"""The planning columns of a manifest hold exactly what its validated entries say (inheritance
included) for every kind of manifest lakeops meets: PyIceberg's with DELETED entries, position and
equality delete manifests, and other engines' v1-upgraded, v3 and deletion-vector tables."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from iceberg_merge_on_read import add_equality_deletes, add_position_deletes
from modern_iceberg import CATALOG_ROWS, edit_avro, unpack
from pyiceberg_tables import small_file_table

from lakeops.errors import ProtocolError
from lakeops.iceberg.manifest import manifests_of, read_manifest
from lakeops.iceberg.manifest_columns import PATHS, read_planning_columns
from lakeops.iceberg.single_values import to_json
from lakeops.iceberg.table import IcebergTable, TableRef, load_table
from lakeops.storage import StorageOptions


def _compare_every_manifest(table: IcebergTable) -> int:
    """Assert the columns equal the entries of every manifest of every snapshot; return the rows seen."""
    metadata, storage, seen = table.metadata, table.storage, 0
    for snapshot in metadata.snapshots:
        for manifest in manifests_of(storage, snapshot):
            ptype = metadata.spec_by_id(manifest.partition_spec_id).partition_type(metadata.schemas_newest_first())
            for include_deleted in (False, True):
                entries = read_manifest(storage, manifest, include_deleted=include_deleted)
                expected = [
                    {
                        "file_path": e.data_file.file_path,
                        "status": int(e.status),
                        "content": int(e.data_file.content),
                        "file_format": e.data_file.file_format,
                        "record_count": e.data_file.record_count,
                        "file_size_in_bytes": e.data_file.file_size_in_bytes,
                        "data_sequence_number": e.sequence_number,
                        "first_row_id": e.data_file.first_row_id,
                        "spec_id": manifest.partition_spec_id,
                        "partition": json.dumps(
                            [to_json(f.type, e.data_file.partition.get(f.name)) for f in ptype.fields]
                        ),
                    }
                    for e in entries
                ]
                columns = read_planning_columns(storage, manifest, include_deleted=include_deleted)
                assert columns.to_pylist() == expected
                paths = read_planning_columns(storage, manifest, include_deleted=include_deleted, columns=PATHS)
                assert paths.to_pylist() == [{"file_path": r["file_path"], "status": r["status"]} for r in expected]
                seen += len(expected)
    return seen


def test_pyiceberg_manifests_with_deleted_and_delete_files(tmp_path: Path) -> None:
    made = small_file_table(tmp_path, "identity", appends=3, rows=12)
    made.table.delete("category == 'a'")  # copy-on-write: DELETED entries
    ref = TableRef(catalog_uri=made.catalog_uri, identifier=made.identifier)
    table = load_table(ref, StorageOptions())
    live = [
        e
        for m in manifests_of(table.storage, table.metadata.current_snapshot())
        for e in read_manifest(table.storage, m)
    ]
    target = next(e for e in live if e.data_file.partition["category"] == "b").data_file
    table = add_position_deletes(table, [(target.file_path, 0)], partition=dict(target.partition))
    rows = pa.table({"id": pa.array([1], pa.int64())})
    add_equality_deletes(table, rows, [1], partition=dict(target.partition))
    table = load_table(ref, StorageOptions())
    contents = {
        c
        for m in manifests_of(table.storage, table.metadata.current_snapshot())
        for c in read_planning_columns(table.storage, m, include_deleted=True).column("content").to_pylist()
    }
    assert contents == {0, 1, 2}
    assert _compare_every_manifest(table) > 0


@pytest.mark.parametrize("fixture", sorted(CATALOG_ROWS))
def test_other_engines_manifests(tmp_path: Path, fixture: str) -> None:
    name, catalog = unpack(fixture, tmp_path)
    ref = TableRef(catalog_uri=catalog.catalog_uri, identifier=name, catalog_name=catalog.catalog_name)
    assert _compare_every_manifest(load_table(ref, StorageOptions())) > 0


def test_existing_entry_without_sequence_number_is_refused(tmp_path: Path) -> None:
    made = small_file_table(tmp_path, "identity", appends=1, rows=6)
    table = load_table(TableRef(catalog_uri=made.catalog_uri, identifier=made.identifier), StorageOptions())
    manifest = manifests_of(table.storage, table.metadata.current_snapshot())[0]
    path = Path(manifest.manifest_path.removeprefix("file://"))
    edit_avro(path, lambda r: {**r, "status": 0, "sequence_number": None})
    with pytest.raises(ProtocolError, match=r"EXISTING entry for .* has no sequence_number"):
        read_planning_columns(table.storage, manifest)
