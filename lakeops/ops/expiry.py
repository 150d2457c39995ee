"""Expiry, format-neutral: plan by detected format, execute, report.

Delta: log expiry (:mod:`lakeops.delta.maintenance.log_expiry`), on the driver. Iceberg: snapshot
expiry (:mod:`lakeops.iceberg.maintenance.expire`): :func:`plan_snapshots` applies the retention
policy, :func:`commit_snapshots` commits the new metadata and returns the deletion batches (one
Spark task each, :func:`lakeops.deletion.delete_batch`), :func:`snapshots_report` reports. Icechunk
expiry lives in :mod:`lakeops.ops.icechunk`.
"""

from __future__ import annotations

import time
from datetime import timedelta

from lakeops.deletion import BatchResult
from lakeops.delta.maintenance import log_expiry
from lakeops.delta.maintenance.log_expiry import ExpiryOptions, ExpiryPlan
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import InvalidArgument, UnsupportedFeature
from lakeops.iceberg.maintenance import expire as snapshot_expiry
from lakeops.iceberg.maintenance.expire import ExpireOptions, ExpirePlan, ExpiryCommit
from lakeops.iceberg.table import TableRef, load_table
from lakeops.ops.detect import detect_format
from lakeops.ops.report import Report
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize
from lakeops.units import format_duration, instant, parse_retention

__all__ = [
    "ExpireOptions",
    "ExpiryOptions",
    "ExpiryPlan",
    "ExpiryReport",
    "SnapshotExpiryReport",
    "commit_snapshots",
    "dry_run_report",
    "execute",
    "parse_retention",
    "plan",
    "plan_snapshots",
    "snapshots_report",
]


class ExpiryReport(Report):
    """Log files removed (or, with ``dry_run``, that would be) and what stays."""

    operation: str = "expire"
    retention: str = ""
    cutoff: str = ""
    cutoff_version: int | None = None
    checkpoint_kept: int | None = None
    #: The lowest version kept readable for a change-feed consumer or ``retain_last``, if any.
    floor_version: int | None = None
    deleted_files: int = 0
    deleted_bytes: int = 0
    deleted_commits: int = 0
    deleted_checkpoint_files: int = 0
    deleted_checksum_files: int = 0
    deleted_other_files: int = 0
    last_checkpoint_rewritten: bool = False
    note: str | None = None
    paths: list[str] = []


def plan(
    location: str, options: ExpiryOptions, storage_options: StorageOptions, *, now_ms: int | None = None
) -> ExpiryPlan:
    """Read the latest version and plan which log files go (``now_ms`` pins the clock for tests)."""
    location = normalize(location)
    storage = open_storage(location, storage_options)
    fmt = detect_format(storage, location)
    if fmt != "delta":
        raise UnsupportedFeature(f"{location}: expiry of {fmt} tables is not available yet")
    snapshot = load_snapshot(storage, location)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return log_expiry.plan_expiry(snapshot, storage, options, now_ms=now)


def _report(plan: ExpiryPlan, started: float, *, dry_run: bool) -> ExpiryReport:
    kinds = [f.kind for f in plan.files]
    return ExpiryReport(
        format="delta",
        table=plan.table_root,
        dry_run=dry_run,
        read_version=plan.read_version,
        retention=format_duration(plan.retention),
        cutoff=instant(plan.cutoff_ms).isoformat(timespec="seconds"),
        cutoff_version=plan.cutoff_version,
        checkpoint_kept=plan.checkpoint_version,
        floor_version=plan.floor_version,
        deleted_files=len(plan.files),
        deleted_bytes=plan.bytes,
        deleted_commits=kinds.count("commit"),
        deleted_checkpoint_files=kinds.count("checkpoint"),
        deleted_checksum_files=kinds.count("checksum") + kinds.count("hadoop-checksum"),
        deleted_other_files=kinds.count("compacted"),
        last_checkpoint_rewritten=plan.last_checkpoint_target is not None,
        note=plan.note,
        paths=[f.path for f in plan.files] if dry_run else [],
        duration_s=time.monotonic() - started,
    )


def dry_run_report(plan: ExpiryPlan, started: float) -> ExpiryReport:
    """What the run would delete (paths listed), deleting nothing."""
    return _report(plan, started, dry_run=True)


def execute(
    plan: ExpiryPlan, storage_options: StorageOptions, started: float, *, quarantine_run: str | None = None
) -> ExpiryReport:
    """Repair ``_last_checkpoint`` if it would dangle, delete (``quarantine_run``: move to the trash) the
    planned files, report."""
    storage = open_storage(plan.table_root, storage_options)
    rewritten = log_expiry.execute_expiry(plan, storage, quarantine_run=quarantine_run)
    return _report(plan, started, dry_run=False).model_copy(
        update={
            "quarantine_run": quarantine_run,
            "last_checkpoint_rewritten": rewritten,
            "duration_s": time.monotonic() - started,
        }
    )


class SnapshotExpiryReport(Report):
    """Iceberg: snapshots and refs the policy removed and the files only they reached, by kind
    (with ``dry_run``: what a run now would remove; ``paths`` lists the files)."""

    operation: str = "expire"
    format: str = "iceberg"
    #: The age limit every branch got from --older-than; None: each branch's own policy.
    older_than: str | None = None
    retain_last: int | None = None
    snapshots_before: int = 0
    snapshots_expired: int = 0
    snapshots_retained: int = 0
    refs_dropped: int = 0
    commit_attempts: int = 0
    deleted_files: int = 0
    deleted_bytes: int = 0
    deleted_manifest_lists: int = 0
    deleted_manifests: int = 0
    deleted_data_files: int = 0
    deleted_delete_files: int = 0
    deleted_statistics_files: int = 0
    #: Unreachable files outside the table location: never deleted, reported for the operator.
    files_outside_location: int = 0
    batches: int = 0
    metadata_location: str = ""
    expired_snapshot_ids: list[int] = []
    dropped_refs: list[str] = []
    paths: list[str] = []


def plan_snapshots(
    table: TableRef, options: ExpireOptions, storage_options: StorageOptions, *, now_ms: int
) -> ExpirePlan:
    """Load the Iceberg table and apply the retention policy at ``now_ms``."""
    return snapshot_expiry.plan_expiry(load_table(table, storage_options), options, now_ms=now_ms)


def commit_snapshots(plan: ExpirePlan, storage_options: StorageOptions) -> ExpiryCommit:
    """Commit the expiry; the result's ``batches`` are the deletions to run (after the commit only)."""
    return snapshot_expiry.commit_expiry(plan, storage_options)


def snapshots_report(
    plan: ExpirePlan,
    started: float,
    *,
    committed: ExpiryCommit | None = None,
    results: list[BatchResult] | None = None,
) -> SnapshotExpiryReport:
    """The dry-run report of ``plan`` (no ``committed``), or the report of a run whose every batch was
    deleted (``results`` one per batch of ``committed``)."""
    if committed is not None:
        expected = sorted(b.batch_id for b in committed.batches)
        if sorted(r.batch_id for r in results or []) != expected:
            raise InvalidArgument(f"{plan.table_name}: delete results do not match the expiry's batches")
    decision = committed.decision if committed is not None else plan.decision
    deletion = committed.deletion if committed is not None else plan.deletion
    kinds = [c.kind for c in deletion.files]
    options = plan.options
    return SnapshotExpiryReport(
        table=plan.table_name,
        dry_run=committed is None,
        read_version=plan.sequence_number,
        older_than=format_duration(timedelta(milliseconds=options.older_than_ms))
        if options.older_than_ms is not None
        else None,
        retain_last=options.retain_last,
        snapshots_before=committed.snapshots_before if committed is not None else plan.snapshots,
        snapshots_expired=len(decision.expired),
        snapshots_retained=len(decision.retained),
        refs_dropped=len(decision.dropped_refs),
        commit_attempts=committed.attempts if committed is not None else 0,
        deleted_files=len(deletion.files),
        deleted_bytes=sum(c.size for c in deletion.files),
        deleted_manifest_lists=kinds.count(snapshot_expiry.MANIFEST_LIST),
        deleted_manifests=kinds.count(snapshot_expiry.MANIFEST),
        deleted_data_files=kinds.count(snapshot_expiry.DATA_FILE),
        deleted_delete_files=kinds.count(snapshot_expiry.DELETE_FILE),
        deleted_statistics_files=kinds.count(snapshot_expiry.STATISTICS_FILE),
        files_outside_location=len(deletion.outside_location),
        batches=len(committed.batches) if committed is not None else 0,
        metadata_location=committed.metadata_location if committed is not None else plan.metadata_location,
        expired_snapshot_ids=list(decision.expired),
        dropped_refs=list(decision.dropped_refs),
        paths=[c.path for c in deletion.files] if committed is None else [],
        duration_s=time.monotonic() - started,
    )
