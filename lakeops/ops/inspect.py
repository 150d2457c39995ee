"""``inspect``: a table's health in numbers — what maintenance would act on."""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING

from lakeops.delta.actions import Add, Protocol
from lakeops.delta.features import (
    ALL_OPERATIONS,
    check_readable,
    check_writable,
    enabled_features,
    supported_operations,
)
from lakeops.delta.maintenance.defaults import table_target_file_size
from lakeops.delta.properties import DELETED_FILE_RETENTION_DURATION
from lakeops.delta.retention import DEFAULT_DELETED_FILE_RETENTION, table_retention
from lakeops.delta.version_checksum import check_version_checksum
from lakeops.errors import UnsupportedFeature, UsageError
from lakeops.ops.report import InspectionReport, TableState
from lakeops.ops.table import Table, as_table
from lakeops.ops.target import CatalogOptions, DeltaTarget, IcebergTarget, IcechunkTarget
from lakeops.storage import StorageOptions
from lakeops.units import cutoff_ms

if TYPE_CHECKING:
    from lakeops.ops.icechunk.inspect import IcechunkInspectReport


class InspectReport(InspectionReport):
    """Delta and Iceberg: shared numbers first; a format's own numbers are None for the other format (not shown)."""

    version: int = 0
    live_files: int = 0
    live_bytes: int = 0
    rows: int | None = None
    small_files: int = 0
    small_file_threshold_bytes: int = 0
    partitions: int = 0
    partition_columns: list[str] = []
    # Delta
    rows_deleted_by_dv: int | None = None
    files_with_dv: int | None = None
    tombstones: int | None = None
    tombstone_bytes: int | None = None
    reclaimable_tombstones: int | None = None
    reclaimable_tombstone_bytes: int | None = None
    oldest_log_version: int | None = None
    #: Age of the oldest commit still in the log: how far back time travel reaches (log expiry's horizon).
    oldest_commit_age_s: float | None = None
    last_checkpoint_version: int | None = None
    commits_since_checkpoint: int | None = None
    min_reader_version: int | None = None
    min_writer_version: int | None = None
    features: list[str] = []
    #: Each enabled feature and the operations lakeops runs on a table with it ([] for one it does not know).
    feature_operations: dict[str, list[str]] = {}
    #: The operations lakeops runs on this table (every feature honoured), and why it refuses the others.
    supported_operations: list[str] | None = None
    refused_operations: dict[str, str] = {}
    #: The version checksum file (``n.crc``) of the version inspected against the replayed state:
    #: ``absent``, ``matches``, ``mismatch`` (which fields: ``checksum_mismatches``) or ``invalid`` (not a
    #: checksum file: a warning, as readers skip it).
    checksum: str | None = None
    checksum_mismatches: list[str] | None = None
    # Iceberg
    format_version: int | None = None
    snapshot_id: int | None = None
    snapshots: int | None = None
    branches: int | None = None
    tags: int | None = None
    oldest_snapshot_age_s: float | None = None
    position_delete_files: int | None = None
    #: Of the position delete files, the v3 deletion vectors.
    deletion_vectors: int | None = None
    equality_delete_files: int | None = None
    manifests: int | None = None
    small_manifests: int | None = None
    snapshots_since_manifest_rewrite: int | None = None
    metadata_log_entries: int | None = None

    def summary_lines(self) -> list[tuple[str, str]]:
        """The numbers, then (Delta) one line per feature with the operations that honour it, and the
        operations lakeops runs or refuses (why)."""
        lines = super().summary_lines()
        if self.supported_operations is not None:
            if self.format == "delta":
                lines.append(("features", ", ".join(self.features) or "none"))
                lines += [
                    (f"feature {name}", ", ".join(ops) or "unknown") for name, ops in self.feature_operations.items()
                ]
            lines.append(("supported operations", ", ".join(self.supported_operations) or "none"))
            lines += [(f"refused {op}", why) for op, why in self.refused_operations.items()]
        return lines

    @property
    def state_version(self) -> str:
        """The Iceberg snapshot id (the sequence number of a table without snapshots), or the Delta version."""
        return str(self.snapshot_id if self.snapshot_id is not None else self.version)

    @property
    def row_count(self) -> int | None:
        return self.rows

    def table_state(self) -> TableState:
        if self.format == "iceberg":
            return TableState(
                format="iceberg",
                small_files=self.small_files,
                live_files=self.live_files,
                checkpoint_lag=self.snapshots_since_manifest_rewrite,
                manifests=self.manifests,
                snapshots=self.snapshots,
                oldest_snapshot_age_s=self.oldest_snapshot_age_s,
            )
        oldest = self.oldest_log_version
        return TableState(
            format="delta",
            small_files=self.small_files,
            live_files=self.live_files,
            checkpoint_lag=self.commits_since_checkpoint,
            snapshots=self.version - oldest + 1 if oldest is not None else None,
            oldest_snapshot_age_s=self.oldest_commit_age_s,
            reclaimable_bytes=self.reclaimable_tombstone_bytes,
        )


def _mergeable_small_files(files: list[Add], threshold: int) -> int:
    """Files below the target size that share their partition with another such file: what
    compaction can merge (a partition's lone small file is as compact as it gets)."""
    per_partition = Counter(tuple(sorted(a.partition_values.items())) for a in files if a.size < threshold)
    return sum(n for n in per_partition.values() if n > 1)


def _refused_operations(protocol: Protocol, table: str) -> dict[str, str]:
    """Each operation lakeops refuses on a table with ``protocol``, with the refusal it would raise."""
    refused: dict[str, str] = {}
    for operation in sorted(ALL_OPERATIONS):
        try:
            if operation in ("read", "cdc"):
                check_readable(protocol, table, operation)
            else:
                check_writable(protocol, table, operation)
        except UnsupportedFeature as exc:
            refused[operation] = str(exc)
    return refused


def _inspect_iceberg(handle: Table, snapshot_id: int | None, timestamp: datetime | None) -> InspectReport:
    from lakeops.iceberg.health import snapshot_at, table_health

    started = time.monotonic()
    table = handle.iceberg_table()
    metadata = table.metadata
    snapshot = (
        metadata.snapshot_by_id(snapshot_id)
        if snapshot_id is not None
        else snapshot_at(metadata, timestamp)
        if timestamp is not None
        else None
    )
    health = table_health(table, snapshot=snapshot)
    now_ms = int(time.time() * 1000)
    return InspectReport(
        format="iceberg",
        table=table.name,
        read_version=health.sequence_number,
        version=health.sequence_number,
        live_files=health.data_files,
        live_bytes=health.data_bytes,
        rows=health.rows,
        small_files=health.small_files,
        small_file_threshold_bytes=health.small_file_threshold_bytes,
        partitions=health.partitions,
        partition_columns=health.partition_fields,
        format_version=health.format_version,
        snapshot_id=health.snapshot_id,
        snapshots=health.snapshots,
        branches=health.branches,
        tags=health.tags,
        oldest_snapshot_age_s=(now_ms - health.oldest_snapshot_ms) / 1000 if health.oldest_snapshot_ms else None,
        position_delete_files=health.position_delete_files,
        deletion_vectors=health.deletion_vectors,
        equality_delete_files=health.equality_delete_files,
        manifests=health.manifests,
        small_manifests=health.small_manifests,
        snapshots_since_manifest_rewrite=health.snapshots_since_manifest_rewrite,
        metadata_log_entries=health.metadata_log_entries,
        supported_operations=list(metadata.supported_operations()),
        refused_operations=metadata.refused_operations(),
        duration_s=time.monotonic() - started,
    )


def inspect_table(
    location: Table | str,
    storage_options: StorageOptions | None = None,
    *,
    version: int | None = None,
    timestamp: datetime | None = None,
    snapshot_id: int | None = None,
    catalog: CatalogOptions | None = None,
) -> InspectReport | IcechunkInspectReport:
    """Summarise the latest version (or ``version``, or the one current at ``timestamp``): what each
    maintenance operation would act on. Small files are those compaction would consider (below
    ``delta.targetFileSize`` or 128 MiB); reclaimable tombstones are those VACUUM may delete (older
    than ``delta.deletedFileRetentionDuration``); the checkpoint lag is what ``checkpoint`` fixes.
    ``location`` may be a handle (:class:`~lakeops.ops.table.Table`), whose state is then read once."""
    started = time.monotonic()
    handle = as_table(location, catalog or CatalogOptions(), storage_options or StorageOptions())
    target = handle.target
    match target:
        case IcechunkTarget():
            if version is not None or snapshot_id is not None or timestamp is not None:
                raise UsageError(f"{target}: Icechunk repositories are inspected at their branch tips only")
            from lakeops.ops.icechunk.inspect import inspect_repository  # each format's code when it is met

            return inspect_repository(handle, started)
        case IcebergTarget():
            if version is not None:
                raise UsageError(f"{target}: Iceberg tables are inspected at a --snapshot-id, not a --version")
            return _inspect_iceberg(handle, snapshot_id, timestamp)
        case DeltaTarget():
            if snapshot_id is not None:
                raise UsageError(f"{target}: --snapshot-id is for Iceberg tables; Delta tables have --version")
            return _inspect_delta(handle, version, timestamp, started)


def _inspect_delta(handle: Table, version: int | None, timestamp: datetime | None, started: float) -> InspectReport:
    location, storage = handle.root, handle.storage()
    snapshot = handle.delta_snapshot_at(version=version, timestamp=timestamp)
    threshold = table_target_file_size(snapshot.metadata.configuration)
    files = list(snapshot.files.values())
    retention = table_retention(
        snapshot.metadata, location, DELETED_FILE_RETENTION_DURATION, DEFAULT_DELETED_FILE_RETENTION
    )
    now_ms = int(time.time() * 1000)
    horizon_ms = cutoff_ms(retention, now_ms)
    reclaimable = [r for r in snapshot.tombstones.values() if (r.deletion_timestamp or 0) < horizon_ms]
    listed = list(snapshot.listing.commits) + list(snapshot.listing.checkpoints)
    oldest = min(snapshot.listing.commits, default=None)
    oldest_ms = snapshot.clock(storage).timestamp(oldest) if oldest is not None else None
    counts = [a.num_records for a in files]
    dv_rows = sum(a.deletion_vector.cardinality for a in files if a.deletion_vector)
    refused = _refused_operations(snapshot.protocol, location)
    checksum = check_version_checksum(storage, snapshot)
    return InspectReport(
        format="delta",
        table=location,
        read_version=snapshot.version,
        version=snapshot.version,
        live_files=len(files),
        live_bytes=sum(a.size for a in files),
        rows=sum(c for c in counts if c is not None) - dv_rows if all(c is not None for c in counts) else None,
        rows_deleted_by_dv=dv_rows,
        files_with_dv=sum(1 for a in files if a.deletion_vector),
        small_files=_mergeable_small_files(files, threshold),
        small_file_threshold_bytes=threshold,
        partitions=len({tuple(sorted(a.partition_values.items(), key=lambda kv: kv[0])) for a in files}),
        tombstones=len(snapshot.tombstones),
        tombstone_bytes=sum(r.size or 0 for r in snapshot.tombstones.values()),
        reclaimable_tombstones=len(reclaimable),
        reclaimable_tombstone_bytes=sum(r.size or 0 for r in reclaimable),
        oldest_log_version=min(listed) if listed else None,
        oldest_commit_age_s=(now_ms - oldest_ms) / 1000 if oldest_ms is not None else None,
        last_checkpoint_version=snapshot.segment.checkpoint_version,
        commits_since_checkpoint=snapshot.commits_since_checkpoint,
        min_reader_version=snapshot.protocol.min_reader_version,
        min_writer_version=snapshot.protocol.min_writer_version,
        features=sorted(enabled_features(snapshot.protocol)),
        feature_operations=supported_operations(snapshot.protocol),
        supported_operations=sorted(set(ALL_OPERATIONS) - set(refused)),
        refused_operations=refused,
        checksum=checksum.status,
        checksum_mismatches=checksum.mismatches or None,
        warnings=[f"{m}; ignored (the file is optional)" for m in checksum.mismatches if checksum.status == "invalid"],
        partition_columns=snapshot.partition_columns,
        duration_s=time.monotonic() - started,
    )
