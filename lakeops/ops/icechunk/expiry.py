"""Icechunk expiry (``lakeops expire REPO``): superseded branch files removed
(:mod:`lakeops.icechunk.maintenance.expiry`), or, for a repository in the icechunk package's format,
snapshots expired by that package (:mod:`lakeops.icechunk.maintenance.delegated`). It runs on the
driver: a few small ref files."""

from __future__ import annotations

import time
from datetime import timedelta

from rich.console import Console

from lakeops.icechunk.maintenance import expiry
from lakeops.icechunk.maintenance.delegated import DelegatedPlan
from lakeops.icechunk.maintenance.expiry import IcechunkExpiryPlan
from lakeops.ops.icechunk.repository import delegated_plan, refuse_quarantine, removal_fields
from lakeops.ops.report import Report
from lakeops.storage import Storage, StorageOptions, open_storage
from lakeops.storage.uri import normalize
from lakeops.units import format_size

__all__ = ["IcechunkExpiryReport", "Plan", "expire", "plan", "run"]

Plan = IcechunkExpiryPlan | DelegatedPlan


class IcechunkExpiryReport(Report):
    """Branch files removed (or, with ``dry_run``, that would be) and the snapshots they released."""

    operation: str = "expire"
    retention: str = ""
    cutoff: str = ""
    branches: int = 0
    tags: int = 0
    branch_files: int = 0
    deleted_branch_files: int = 0
    deleted_bytes: int = 0
    snapshots_expired: int = 0
    snapshots_retained: int = 0
    delegated_to: str | None = None
    paths: list[str] = []


def plan(
    location: str,
    storage: Storage,
    storage_options: StorageOptions,
    *,
    retention: timedelta | None,
    force: bool,
    now_ms: int,
) -> Plan:
    """The expiry of either kind of repository (``retention`` None: the default window)."""
    return delegated_plan(
        storage, location, storage_options, retention=retention, force=force, now_ms=now_ms
    ) or expiry.plan_expiry(storage, location, retention=retention, force=force, now_ms=now_ms)


def run(
    plan: Plan,
    storage_options: StorageOptions,
    *,
    dry_run: bool,
    quarantine_run: str | None = None,
    started: float | None = None,
) -> IcechunkExpiryReport:
    """Carry out (unless ``dry_run``) and report ``plan``; ``quarantine_run`` moves the files into that
    trash run instead of deleting them (refused for the package format: the package deletes)."""
    started = time.monotonic() if started is None else started
    refuse_quarantine(plan, quarantine_run, dry_run=dry_run)
    figures = plan.expire(storage_options, dry_run=dry_run, quarantine_run=quarantine_run)
    common = removal_fields(plan, started, dry_run=dry_run, quarantine_run=quarantine_run)
    return IcechunkExpiryReport.model_validate(common | figures)


def expire(
    location: str,
    *,
    retention: timedelta | None,
    force: bool,
    dry_run: bool,
    storage_options: StorageOptions,
    progress: Console,
    quarantine_run: str | None = None,
) -> IcechunkExpiryReport:
    """Plan and run the expiry of the repository at ``location``, telling ``progress`` what it did."""
    started = time.monotonic()
    root = normalize(location)
    progress.print(f"planning snapshot expiry of Icechunk repository {root} ...")
    planned = plan(
        root,
        open_storage(root, storage_options),
        storage_options,
        retention=retention,
        force=force,
        now_ms=int(time.time() * 1000),
    )
    report = run(planned, storage_options, dry_run=dry_run, quarantine_run=quarantine_run, started=started)
    if report.delegated_to is not None:
        progress.print(f"{report.delegated_to}: {report.snapshots_expired} snapshots expired")
    else:
        progress.print(
            f"{report.deleted_branch_files} superseded branch files ({format_size(report.deleted_bytes)}) "
            f"{'would go' if dry_run else 'removed'}; {report.snapshots_expired} snapshots no longer retained"
        )
    return report
