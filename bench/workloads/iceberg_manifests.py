"""A metadata-only Iceberg table of millions of manifest entries (issue 23 part 4): no data file exists,
only the metadata planning reads.

A file-system table (``metadata/v1.metadata.json``, "File System Tables"), format version 2,
partitioned by ``identity(day)`` on a ``date`` column, with two snapshots: the first adds the first
half of the manifests, the second (a fast append) lists them all ("Snapshots", "Manifest Lists").
Each manifest holds ``entries_per_manifest`` ADDED entries of one day, written streaming with
fastavro in the spec's ``manifest_entry`` schema ("Manifests"): snapshot id and sequence numbers null
so they are inherited from the manifest list ("Sequence Number Inheritance"). One file in a hundred
is small (1 MiB), the rest are within the default target's bounds (512 MB, kept 384-921 MB), so
compaction has real but bounded work: 10,000 files in 100 groups per million entries.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import fastavro

from bench.workloads.model import Workload, tree_bytes
from lakeops.iceberg.avro_schema import avro_schema
from lakeops.iceberg.manifest import ManifestMetadata, manifest_entry_type
from lakeops.iceberg.manifest_list import ManifestContent, ManifestFile, PartitionFieldSummary, write_manifest_list
from lakeops.iceberg.partitioning import PartitionSpec
from lakeops.iceberg.single_values import to_bytes
from lakeops.iceberg.types import PrimitiveType, Schema
from lakeops.storage import open_storage

#: A file of this size is rewritten (below 75 % of the 512 MB default target), one in ``SMALL_EVERY``.
SMALL_SIZE = 1 << 20
BIG_SIZE = 500 << 20
SMALL_EVERY = 100
ROWS_PER_FILE = 1000
#: Snapshot times: old enough for every retention floor.
TIMESTAMP_MS = 1_700_000_000_000

SCHEMA_JSON = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "required": False, "type": "long"},
        {"id": 2, "name": "day", "required": False, "type": "date"},
    ],
}
SPEC_JSON = {"spec-id": 0, "fields": [{"source-id": 2, "field-id": 1000, "name": "day", "transform": "identity"}]}


def _write_manifest(
    path: Path, location: str, index: int, entries: int, entry_schema: fastavro.types.Schema, kv: dict[str, str]
) -> None:
    """Manifest ``index``: ``entries`` ADDED data files of day ``index``, streamed to ``path``."""

    def records():
        for i in range(entries):
            small = i % SMALL_EVERY == 0
            yield {
                "status": 1,
                "snapshot_id": None,
                "sequence_number": None,
                "file_sequence_number": None,
                "data_file": {
                    "content": 0,
                    "file_path": f"{location}/data/day={index}/{index:05d}-{i:06d}-{uuid.uuid4().hex[:12]}.parquet",
                    "file_format": "PARQUET",
                    "partition": {"day": index},
                    "record_count": ROWS_PER_FILE,
                    "file_size_in_bytes": SMALL_SIZE if small else BIG_SIZE,
                    "column_sizes": None,
                    "value_counts": None,
                    "null_value_counts": None,
                    "nan_value_counts": None,
                    "lower_bounds": None,
                    "upper_bounds": None,
                    "key_metadata": None,
                    "split_offsets": None,
                    "equality_ids": None,
                    "sort_order_id": 0,
                },
            }

    with path.open("wb") as out:
        fastavro.writer(out, entry_schema, records(), metadata=kv, codec="deflate")


def manifest_set(root: Path, *, entries: int, entries_per_manifest: int = 10_000) -> Workload:
    """A table of ``entries`` manifest entries in manifests of ``entries_per_manifest``."""
    location = str(root / "table")
    metadata_dir = root / "table" / "metadata"
    metadata_dir.mkdir(parents=True)
    schema = Schema.model_validate(SCHEMA_JSON)
    spec = PartitionSpec.model_validate(SPEC_JSON)
    ptype = spec.partition_type(schema)
    entry_schema = fastavro.parse_schema(avro_schema(manifest_entry_type(2, ptype), "manifest_entry"))
    kv = ManifestMetadata.model_validate(
        {"schema": schema, "schema-id": 0, "partition-spec": spec, "format-version": 2, "content": "data"}
    ).to_avro_metadata()
    date = PrimitiveType(name="date")
    count = -(-entries // entries_per_manifest)
    first_id, second_id = 1001, 1002
    manifests: list[ManifestFile] = []
    for index in range(count):
        n = min(entries_per_manifest, entries - index * entries_per_manifest)
        path = metadata_dir / f"manifest-{index:05d}.avro"
        _write_manifest(path, location, index, n, entry_schema, kv)
        snapshot_id, sequence = (first_id, 1) if index < count // 2 or count == 1 else (second_id, 2)
        manifests.append(
            ManifestFile(
                manifest_path=str(path),
                manifest_length=path.stat().st_size,
                partition_spec_id=0,
                content=ManifestContent.DATA,
                sequence_number=sequence,
                min_sequence_number=sequence,
                added_snapshot_id=snapshot_id,
                added_files_count=n,
                existing_files_count=0,
                deleted_files_count=0,
                added_rows_count=n * ROWS_PER_FILE,
                existing_rows_count=0,
                deleted_rows_count=0,
                partitions=[
                    PartitionFieldSummary(
                        contains_null=False,
                        contains_nan=False,
                        lower_bound=to_bytes(date, index),
                        upper_bound=to_bytes(date, index),
                    )
                ],
            )
        )
    storage = open_storage(location)
    half = [m for m in manifests if m.added_snapshot_id == first_id]
    lists = {first_id: f"{metadata_dir}/snap-{first_id}.avro", second_id: f"{metadata_dir}/snap-{second_id}.avro"}
    write_manifest_list(
        storage,
        lists[first_id],
        half,
        format_version=2,
        snapshot_id=first_id,
        parent_snapshot_id=None,
        sequence_number=1,
    )
    write_manifest_list(
        storage,
        lists[second_id],
        manifests,
        format_version=2,
        snapshot_id=second_id,
        parent_snapshot_id=first_id,
        sequence_number=2,
    )

    def snapshot(snapshot_id: int, parent: int | None, sequence: int, listed: list[ManifestFile]) -> dict:
        files = sum(m.added_files_count or 0 for m in listed)
        return {
            "snapshot-id": snapshot_id,
            **({"parent-snapshot-id": parent} if parent is not None else {}),
            "sequence-number": sequence,
            "timestamp-ms": TIMESTAMP_MS + sequence,
            "manifest-list": lists[snapshot_id],
            "summary": {"operation": "append", "total-data-files": str(files)},
            "schema-id": 0,
        }

    metadata = {
        "format-version": 2,
        "table-uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, location)),
        "location": location,
        "last-sequence-number": 2,
        "last-updated-ms": TIMESTAMP_MS + 2,
        "last-column-id": 2,
        "current-schema-id": 0,
        "schemas": [SCHEMA_JSON],
        "default-spec-id": 0,
        "partition-specs": [SPEC_JSON],
        "last-partition-id": 1000,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": {},
        "current-snapshot-id": second_id,
        "refs": {"main": {"snapshot-id": second_id, "type": "branch"}},
        "snapshots": [snapshot(first_id, None, 1, half), snapshot(second_id, first_id, 2, manifests)],
        "snapshot-log": [
            {"snapshot-id": first_id, "timestamp-ms": TIMESTAMP_MS + 1},
            {"snapshot-id": second_id, "timestamp-ms": TIMESTAMP_MS + 2},
        ],
        "metadata-log": [],
    }
    (metadata_dir / "v1.metadata.json").write_text(json.dumps(metadata))
    (metadata_dir / "version-hint.text").write_text("1")
    return Workload(root=root, target=location, size=entries, unit="manifest entries", bytes=tree_bytes(root))
