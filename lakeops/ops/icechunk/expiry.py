"""Icechunk expiry (``lakeops expire REPO``): superseded branch files removed from a seed-format
repository (:mod:`lakeops.icechunk.maintenance.expiry`), or the histories of an Icechunk format 1 or 2
repository shortened, deleting nothing (:mod:`lakeops.icechunk.maintenance.versioned_expiry`). It runs
on the driver: a few small ref, snapshot or repo files."""

from __future__ import annotations

import time
from datetime import timedelta

from rich.console import Console

from lakeops.icechunk.maintenance import expiry
from lakeops.icechunk.maintenance.expiry import IcechunkExpiryPlan
from lakeops.icechunk.maintenance.versioned_expiry import VersionedExpiryPlan, plan_versioned_expiry
from lakeops.icechunk.versioned import RepositoryState, load_repository_state
from lakeops.ops.icechunk.repository import removal_fields
from lakeops.ops.report import Report
from lakeops.ops.table import Table
from lakeops.storage import Storage, StorageOptions
from lakeops.units import format_size

__all__ = ["IcechunkExpiryReport", "Plan", "expire", "plan", "run"]

Plan = IcechunkExpiryPlan | VersionedExpiryPlan


class IcechunkExpiryReport(Report):
    """Branch files removed (seed format) or histories shortened (formats 1 and 2), or with ``dry_run``
    what would be, and the snapshots released. ``paths`` (dry run): the files that would go (seed
    format) or be rewritten (formats 1 and 2)."""

    operation: str = "expire"
    retention: str = ""
    cutoff: str = ""
    branches: int = 0
    tags: int = 0
    branch_files: int = 0
    deleted_branch_files: int = 0
    deleted_bytes: int = 0
    #: Snapshots on some branch's or tag's history (seed format: named by a ref file).
    snapshots_scanned: int = 0
    snapshots_expired: int = 0
    snapshots_retained: int = 0
    #: Formats 1 and 2: kept snapshots whose parent became the initial snapshot.
    snapshots_reparented: int = 0
    paths: list[str] = []


def plan(
    location: str,
    storage: Storage,
    storage_options: StorageOptions,
    *,
    retention: timedelta | None,
    force: bool,
    now_ms: int,
    state: RepositoryState | None = None,
) -> Plan:
    """The expiry of either kind of repository (``retention`` None: the default window), planned
    through ``state`` (the repository as already read) if given."""
    state = load_repository_state(storage, location) if state is None else state
    if state.format_version is None:
        return expiry.plan_expiry(storage, location, retention=retention, force=force, now_ms=now_ms, repo=state.seed)
    return plan_versioned_expiry(
        storage, location, retention=retention, force=force, now_ms=now_ms, repo=state.versioned
    )


def run(
    plan: Plan,
    storage_options: StorageOptions,
    *,
    dry_run: bool,
    quarantine_run: str | None = None,
    started: float | None = None,
) -> IcechunkExpiryReport:
    """Carry out (unless ``dry_run``) and report ``plan``; ``quarantine_run`` moves the files into that
    trash run instead of deleting them (formats 1 and 2: expiry deletes nothing, so nothing moves)."""
    started = time.monotonic() if started is None else started
    figures = plan.expire(storage_options, dry_run=dry_run, quarantine_run=quarantine_run)
    common = removal_fields(plan, started, dry_run=dry_run, quarantine_run=quarantine_run)
    return IcechunkExpiryReport.model_validate(common | figures)


def expire(
    handle: Table,
    *,
    retention: timedelta | None,
    force: bool,
    dry_run: bool,
    progress: Console,
    quarantine_run: str | None = None,
) -> IcechunkExpiryReport:
    """Plan (from the handle's state) and run the expiry of the handle's repository, telling
    ``progress`` what it did."""
    started = time.monotonic()
    root, storage_options = handle.root, handle.storage_options
    progress.print(f"planning snapshot expiry of Icechunk repository {root} ...")
    planned = plan(
        root,
        handle.storage(),
        storage_options,
        retention=retention,
        force=force,
        now_ms=int(time.time() * 1000),
        state=handle.icechunk_state(),
    )
    report = run(planned, storage_options, dry_run=dry_run, quarantine_run=quarantine_run, started=started)
    if isinstance(planned, VersionedExpiryPlan):
        progress.print(
            f"{report.snapshots_expired} of {report.snapshots_scanned} snapshots "
            f"{'would expire' if dry_run else 'expired'}, {report.snapshots_reparented} re-parented; "
            "lakeops orphans deletes their files"
        )
    else:
        progress.print(
            f"{report.deleted_branch_files} superseded branch files ({format_size(report.deleted_bytes)}) "
            f"{'would go' if dry_run else 'removed'}; {report.snapshots_expired} snapshots no longer retained"
        )
    return report
