"""``inspect``: a table's health in numbers — what maintenance would act on."""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime

from lakeops.delta.actions import Add
from lakeops.delta.features import enabled_features
from lakeops.delta.maintenance.compaction import CompactionOptions, effective_target_size
from lakeops.delta.retention import (
    DEFAULT_DELETED_FILE_RETENTION,
    DELETED_FILE_RETENTION_PROPERTY,
    cutoff_ms,
    table_retention,
)
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import UnsupportedFeature
from lakeops.ops.detect import detect_format
from lakeops.ops.report import Report
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize


class InspectReport(Report):
    operation: str = "inspect"
    version: int = 0
    live_files: int = 0
    live_bytes: int = 0
    rows: int | None = None
    rows_deleted_by_dv: int = 0
    files_with_dv: int = 0
    small_files: int = 0
    small_file_threshold_bytes: int = 0
    partitions: int = 0
    tombstones: int = 0
    tombstone_bytes: int = 0
    reclaimable_tombstones: int = 0
    reclaimable_tombstone_bytes: int = 0
    oldest_log_version: int | None = None
    last_checkpoint_version: int | None = None
    commits_since_checkpoint: int = 0
    min_reader_version: int = 0
    min_writer_version: int = 0
    features: list[str] = []
    partition_columns: list[str] = []


def _mergeable_small_files(files: list[Add], threshold: int) -> int:
    """Files below the target size that share their partition with another such file: what
    compaction can merge (a partition's lone small file is as compact as it gets)."""
    per_partition = Counter(tuple(sorted(a.partition_values.items())) for a in files if a.size < threshold)
    return sum(n for n in per_partition.values() if n > 1)


def inspect_table(
    location: str,
    storage_options: StorageOptions | None = None,
    *,
    version: int | None = None,
    timestamp: datetime | None = None,
) -> InspectReport:
    """Summarise the latest version (or ``version``, or the one current at ``timestamp``): what each
    maintenance operation would act on. Small files are those compaction would consider (below
    ``delta.targetFileSize`` or 128 MiB); reclaimable tombstones are those VACUUM may delete (older
    than ``delta.deletedFileRetentionDuration``); the checkpoint lag is what ``checkpoint`` fixes."""
    started = time.monotonic()
    location = normalize(location)
    storage = open_storage(location, storage_options)
    fmt = detect_format(storage, location)
    if fmt != "delta":
        raise UnsupportedFeature(f"{location}: inspecting {fmt} tables is not available yet")
    snapshot = load_snapshot(storage, location, version=version, timestamp=timestamp)
    threshold = effective_target_size(snapshot, CompactionOptions())
    files = list(snapshot.files.values())
    retention = table_retention(
        snapshot.metadata, location, DELETED_FILE_RETENTION_PROPERTY, DEFAULT_DELETED_FILE_RETENTION
    )
    horizon_ms = cutoff_ms(retention, int(time.time() * 1000))
    reclaimable = [r for r in snapshot.tombstones.values() if (r.deletion_timestamp or 0) < horizon_ms]
    listed = list(snapshot.listing.commits) + list(snapshot.listing.checkpoints)
    counts = [a.num_records for a in files]
    dv_rows = sum(a.deletion_vector.cardinality for a in files if a.deletion_vector)
    return InspectReport(
        format=fmt,
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
        last_checkpoint_version=snapshot.segment.checkpoint_version,
        commits_since_checkpoint=snapshot.commits_since_checkpoint,
        min_reader_version=snapshot.protocol.min_reader_version,
        min_writer_version=snapshot.protocol.min_writer_version,
        features=sorted(enabled_features(snapshot.protocol)),
        partition_columns=snapshot.partition_columns,
        duration_s=time.monotonic() - started,
    )
