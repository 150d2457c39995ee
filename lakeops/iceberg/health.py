"""An Iceberg table's health in numbers: what compaction, manifest rewriting, expiry and orphan
removal would act on ("Snapshots", "Snapshot References", "Scan Planning").

Read-only and driver-side: one scan plan of the chosen snapshot (manifests read concurrently) and
the metadata file. Time travel follows the spec: a snapshot by id, or the snapshot that was current
at a time according to ``snapshot-log``.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from lakeops.errors import VersionNotFound
from lakeops.iceberg.maintenance.compaction import DEFAULT_TARGET_FILE_SIZE
from lakeops.iceberg.manifest import FileContent, manifests_of
from lakeops.iceberg.metadata import Snapshot, TableMetadata
from lakeops.iceberg.properties import MANIFEST_TARGET_SIZE_BYTES, WRITE_TARGET_FILE_SIZE_BYTES
from lakeops.iceberg.scan import plan_scan
from lakeops.iceberg.table import IcebergTable

__all__ = ["DEFAULT_MANIFEST_TARGET_SIZE", "IcebergHealth", "snapshot_at", "table_health"]

#: ``commit.manifest.target-size-bytes`` default.
DEFAULT_MANIFEST_TARGET_SIZE = 8 * 1024 * 1024


class IcebergHealth(BaseModel):
    model_config = ConfigDict(frozen=True)

    format_version: int
    snapshot_id: int | None
    sequence_number: int
    snapshots: int
    branches: int
    tags: int
    oldest_snapshot_ms: int | None
    data_files: int
    data_bytes: int
    rows: int | None
    position_delete_files: int
    #: Of the position delete files, the v3 deletion vectors (Puffin blobs).
    deletion_vectors: int
    equality_delete_files: int
    small_files: int
    small_file_threshold_bytes: int
    partitions: int
    manifests: int
    small_manifests: int
    snapshots_since_manifest_rewrite: int
    metadata_log_entries: int
    partition_fields: list[str]


def snapshot_at(metadata: TableMetadata, timestamp: datetime) -> Snapshot:
    """The snapshot current at ``timestamp`` by the ``snapshot-log`` (the last entry at or before it)."""
    ms = int(timestamp.timestamp() * 1000)
    entries = [e for e in metadata.snapshot_log if e.timestamp_ms <= ms]
    if not entries:
        raise VersionNotFound(f"{metadata.location}: no snapshot was current at {timestamp.isoformat()}")
    return metadata.snapshot_by_id(entries[-1].snapshot_id)


def _since_manifest_rewrite(metadata: TableMetadata, snapshot: Snapshot | None) -> int:
    """Snapshots on the branch since the last one that rewrote manifests (or since the start)."""
    if snapshot is None:
        return 0
    count = 0
    for ancestor in metadata.ancestors(snapshot.snapshot_id):
        if ancestor.operation == "replace" and "manifests-created" in (ancestor.summary or {}):
            break
        count += 1
    return count


def table_health(table: IcebergTable, *, snapshot: Snapshot | None = None) -> IcebergHealth:
    """The numbers of the current snapshot (or ``snapshot``)."""
    metadata = table.metadata
    snapshot = snapshot if snapshot is not None else metadata.current_snapshot()
    storage = table.storage
    scan = plan_scan(storage, metadata, snapshot)
    target = metadata.int_property(WRITE_TARGET_FILE_SIZE_BYTES, DEFAULT_TARGET_FILE_SIZE)
    small = int(target * 0.75)
    data = [t.file for t in scan.tasks]
    small_per_partition = Counter(f.partition_key for f in data if f.file_size < small)
    manifests = manifests_of(storage, snapshot) if snapshot is not None else []
    manifest_target = metadata.int_property(MANIFEST_TARGET_SIZE_BYTES, DEFAULT_MANIFEST_TARGET_SIZE)
    deletes = Counter(d.content for d in scan.delete_files)
    vectors = [d for d in scan.delete_files if d.entry.data_file.deletion_vector() is not None]
    # Exact only when every delete file is a DV: each counts the rows it deletes, of one data file.
    rows = sum(f.entry.data_file.record_count for f in data) - sum(d.entry.data_file.record_count for d in vectors)
    return IcebergHealth(
        format_version=metadata.format_version,
        snapshot_id=snapshot.snapshot_id if snapshot else None,
        sequence_number=snapshot.sequence_number if snapshot else 0,
        snapshots=len(metadata.snapshots),
        branches=sum(1 for r in metadata.refs.values() if r.type == "branch"),
        tags=sum(1 for r in metadata.refs.values() if r.type == "tag"),
        oldest_snapshot_ms=min((s.timestamp_ms for s in metadata.snapshots), default=None),
        data_files=len(data),
        data_bytes=sum(f.file_size for f in data),
        rows=rows if len(vectors) == len(scan.delete_files) else None,
        position_delete_files=deletes[FileContent.POSITION_DELETES],
        deletion_vectors=len(vectors),
        equality_delete_files=deletes[FileContent.EQUALITY_DELETES],
        small_files=sum(n for n in small_per_partition.values() if n > 1),
        small_file_threshold_bytes=small,
        partitions=len({f.partition_key for f in data}),
        manifests=len(manifests),
        small_manifests=sum(1 for m in manifests if m.manifest_length < manifest_target),
        snapshots_since_manifest_rewrite=_since_manifest_rewrite(metadata, snapshot),
        metadata_log_entries=len(metadata.metadata_log),
        partition_fields=[f.name for f in metadata.default_spec().fields],
    )
