"""Expiry, format-neutral: plan by detected format, commit, delete on an executor, report.

Delta: log expiry (:mod:`lakeops.delta.maintenance.expiry`). Iceberg: snapshot expiry
(:mod:`lakeops.iceberg.maintenance.expiry`). Icechunk expiry lives in :mod:`lakeops.ops.icechunk`.
Both plans take the same two steps, which :func:`run` drives without asking which format a plan is:
``commit`` makes the deletions safe and returns them as batches (Iceberg: the new metadata is
committed, and the batches are what the committed metadata no longer reaches, so an unknown commit
outcome raises before anything is deleted; Delta: the checkpoint the plan keeps is re-checked and a
``_last_checkpoint`` that would dangle is repaired, and the expired log files are one batch, deleted
oldest first), then the batches are deleted with :meth:`~lakeops.executors.Executor.delete`.

The plans are not :class:`~lakeops.plan.MaintenancePlan`\\ s: a maintenance plan runs its units and
then commits their results, where expiry commits first and its units, deletions, exist only once the
commit says what it freed; nothing they do could be discarded.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from rich.console import Console

from lakeops.deletion import require_all_deleted
from lakeops.delta.maintenance.options import DeltaLogExpiryOptions
from lakeops.errors import UnsupportedFeature
from lakeops.executors import Executor
from lakeops.iceberg.maintenance.options import IcebergSnapshotExpiryOptions
from lakeops.icechunk.maintenance.options import IcechunkExpiryOptions
from lakeops.ops.options import ExpiryOptions
from lakeops.ops.report import Report, show_paths
from lakeops.ops.table import Table, as_table
from lakeops.ops.target import CatalogOptions, DeltaTarget, IcebergTarget, IcechunkTarget
from lakeops.quarantine import new_run_id
from lakeops.retention_options import ExpiryAge
from lakeops.storage import StorageOptions
from lakeops.units import parse_retention

if TYPE_CHECKING:
    from lakeops.delta.maintenance import expiry as log_expiry
    from lakeops.delta.maintenance.expiry import ExpiryPlan
    from lakeops.iceberg.maintenance.expiry import ExpirePlan
    from lakeops.ops.icechunk.expiry import IcechunkExpiryReport

    Plan = ExpiryPlan | ExpirePlan

__all__ = [
    "ExpiryOptions",
    "ExpiryReport",
    "SnapshotExpiryReport",
    "dry_run_report",
    "execute",
    "plan",
    "plan_log",
    "run",
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


#: Each format's report.
_REPORTS: dict[str, type[ExpiryReport | SnapshotExpiryReport]] = {
    "delta": ExpiryReport,
    "iceberg": SnapshotExpiryReport,
}


def execute(
    table: Table | str,
    options: ExpiryOptions,
    storage_options: StorageOptions,
    *,
    dry_run: bool,
    quarantine: bool,
    executor: Executor,
    progress: Console,
) -> ExpiryReport | SnapshotExpiryReport | IcechunkExpiryReport:
    """Plan, commit, delete on ``executor`` (``quarantine``: move into a new trash run instead), report;
    ``dry_run`` lists what would go. Icechunk snapshots are expired by :mod:`lakeops.ops.icechunk.expiry`."""
    handle = as_table(table, options, storage_options)
    target = handle.target
    quarantine_run = new_run_id() if quarantine and not dry_run else None
    if isinstance(target, IcechunkTarget):
        own = options.for_format(IcechunkExpiryOptions, target.location)
        from lakeops.ops.icechunk import expiry as icechunk_expiry  # each format's code when it is met

        return icechunk_expiry.expire(
            handle,
            retention=_retention(options),
            force=own.force,
            dry_run=dry_run,
            progress=progress,
            quarantine_run=quarantine_run,
        )
    started = time.monotonic()
    planned = plan(handle, options, storage_options, progress=progress)
    progress.print(planned.describe())
    if dry_run:
        report = dry_run_report(planned, started)
        show_paths(progress, report.paths)
        return report
    return run(
        planned,
        storage_options,
        executor=executor,
        progress=progress,
        description=f"lakeops expire {target}",
        started=started,
        quarantine_run=quarantine_run,
    )


def plan(
    table: Table | str,
    options: ExpiryOptions,
    storage_options: StorageOptions,
    *,
    progress: Console,
    now_ms: int | None = None,
) -> Plan:
    """Apply the retention policy to the table as it is now (``now_ms`` pins the clock). Options of
    another format are refused. The table's state is read through its handle."""
    handle = as_table(table, options, storage_options)
    target = handle.target
    now = int(time.time() * 1000) if now_ms is None else now_ms
    match target:
        case IcebergTarget(ref=ref):
            from lakeops.iceberg.maintenance import expiry as snapshot_expiry

            snapshots = options.for_format(IcebergSnapshotExpiryOptions, str(target))
            retention = _retention(snapshots)
            iceberg_options = snapshot_expiry.ExpireOptions(
                older_than_ms=int(retention.total_seconds() * 1000) if retention is not None else None,
                retain_last=snapshots.retain_last,
                snapshot_ids=tuple(snapshots.snapshot_id or ()),
                keep_from_sequence_number=snapshots.keep_from_version,
                force=snapshots.force,
            )
            progress.print(f"planning snapshot expiry of {ref} ...")
            return snapshot_expiry.plan_expiry(handle.iceberg_table(), iceberg_options, now_ms=now)
        case DeltaTarget():
            log = options.for_format(DeltaLogExpiryOptions, str(target))
            retention = _retention(log)
            progress.print(f"planning log expiry of {handle} ...")
            from lakeops.delta.maintenance import expiry as log_expiry

            delta_options = log_expiry.ExpiryOptions(
                retention=retention,
                force=log.force,
                keep_from_version=log.keep_from_version,
                retain_last=log.retain_last,
            )
            return plan_log(handle, delta_options, storage_options, now_ms=now)
        case IcechunkTarget():
            raise UnsupportedFeature(f"{target}: Icechunk snapshots are expired by lakeops.ops.icechunk")


def _retention(options: ExpiryAge) -> timedelta | None:
    return parse_retention(options.older_than) if options.older_than is not None else None


def plan_log(
    location: Table | str,
    options: log_expiry.ExpiryOptions,
    storage_options: StorageOptions,
    *,
    now_ms: int | None = None,
) -> ExpiryPlan:
    """Delta: read the latest version (the handle's) and plan which log files go (``now_ms`` pins the clock)."""
    from lakeops.delta.maintenance import expiry as log_expiry

    handle = as_table(location, CatalogOptions(), storage_options)
    handle.target.require("delta", operation="expiry")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return log_expiry.plan_expiry(handle.delta_snapshot(), handle.storage(), options, now_ms=now)


def _report(
    plan: Plan, started: float, fields: dict[str, Any], *, dry_run: bool
) -> ExpiryReport | SnapshotExpiryReport:
    common = {
        "format": plan.format,
        "table": plan.table_label(),
        "dry_run": dry_run,
        "paths": plan.paths() if dry_run else [],
        "duration_s": time.monotonic() - started,
    }
    return _REPORTS[plan.format].model_validate(plan.report_fields() | fields | common)


def dry_run_report(plan: Plan, started: float) -> ExpiryReport | SnapshotExpiryReport:
    """What the run would delete (paths listed), deleting nothing."""
    return _report(plan, started, {}, dry_run=True)


def run(
    plan: Plan,
    storage_options: StorageOptions,
    *,
    executor: Executor,
    progress: Console,
    description: str,
    started: float | None = None,
    quarantine_run: str | None = None,
) -> ExpiryReport | SnapshotExpiryReport:
    """Commit the plan, then delete the batches the commit freed on ``executor`` (``quarantine_run``:
    move them into that trash run instead) and report. A commit that fails deletes nothing; a batch
    that fails raises, the batches already deleted stay deleted."""
    started = time.monotonic() if started is None else started
    committed = plan.commit(storage_options)
    if (line := committed.describe()) is not None:
        progress.print(line)
    batches = committed.batches
    results = executor.delete(
        batches,
        task=plan.delete_task(),
        label=f"deleting {sum(len(b.files) for b in batches)} files in {len(batches)} batches",
        description=description,
        progress=progress,
        quarantine_run=quarantine_run,
        operation="expire",
    )
    require_all_deleted(plan.table_label(), batches, results)
    report = _report(plan, started, committed.report_fields(), dry_run=False)
    return report.model_copy(update={"quarantine_run": quarantine_run})
