"""Orphan-file removal, format-neutral: plan by detected format, the unit task Spark runs, report.

Delta: VACUUM (:mod:`lakeops.delta.maintenance.vacuum`); Spark jobs call :func:`plan`. Iceberg
(:mod:`lakeops.iceberg.maintenance.orphans`): Spark jobs call :func:`plan_iceberg_listing`, run
:func:`list_unit` on its ``units`` (large trees), then :func:`plan_iceberg`. Both then call
:func:`recheck` just before deleting, run :func:`task_for` on every unit of ``plan.batches`` and
call :func:`finish`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from lakeops.delta.maintenance import vacuum
from lakeops.delta.maintenance.vacuum import BatchResult, DeleteBatch, VacuumOptions, VacuumPlan
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import InvalidArgument, UnsupportedFeature
from lakeops.iceberg.maintenance import orphans as iceberg_orphans
from lakeops.iceberg.maintenance.orphans import Listing, ListingUnit, OrphanOptions, OrphanPlan, UnitListing
from lakeops.iceberg.table import TableRef, load_table
from lakeops.ops.detect import detect_format
from lakeops.ops.report import Report
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize
from lakeops.units import format_duration, instant

__all__ = [
    "BatchResult",
    "IcebergOrphansReport",
    "Listing",
    "ListingUnit",
    "OrphanOptions",
    "OrphanPlan",
    "OrphansReport",
    "UnitListing",
    "VacuumOptions",
    "VacuumPlan",
    "dry_run_report",
    "finish",
    "list_unit",
    "plan",
    "plan_iceberg",
    "plan_iceberg_listing",
    "recheck",
    "task_for",
]

Plan = VacuumPlan | OrphanPlan


class OrphansReport(Report):
    """Files deleted (or, with ``dry_run``, that would be) by kind, and what the scan saw."""

    operation: str = "orphans"
    retention: str = ""
    cutoff: str = ""
    files_scanned: int = 0
    directories_scanned: int = 0
    live_files: int = 0
    tombstones_retained: int = 0
    files_too_recent: int = 0
    files_still_needed: int = 0
    batches: int = 0
    deleted_tombstoned_files: int = 0
    deleted_tombstoned_bytes: int = 0
    deleted_untracked_files: int = 0
    deleted_untracked_bytes: int = 0
    deleted_change_data_files: int = 0
    deleted_change_data_bytes: int = 0
    deleted_files: int = 0
    deleted_bytes: int = 0
    paths: list[str] = []


class IcebergOrphansReport(Report):
    """Iceberg: files deleted (or, with ``dry_run``, that would be) under ``data/``, ``metadata/`` and
    elsewhere in the location, what the metadata references and what the listing saw."""

    operation: str = "orphans"
    retention: str = ""
    cutoff: str = ""
    metadata_files: int = 0
    missing_metadata_files: int = 0
    snapshots: int = 0
    referenced_files: int = 0
    files_scanned: int = 0
    directories_scanned: int = 0
    listing_tasks: int = 0
    files_too_recent: int = 0
    files_still_needed: int = 0
    prefix_mismatches_kept: int = 0
    batches: int = 0
    deleted_data_files: int = 0
    deleted_data_bytes: int = 0
    deleted_metadata_files: int = 0
    deleted_metadata_bytes: int = 0
    deleted_other_files: int = 0
    deleted_other_bytes: int = 0
    deleted_files: int = 0
    deleted_bytes: int = 0
    paths: list[str] = []


def plan(
    location: str, options: VacuumOptions, storage_options: StorageOptions, *, now_ms: int | None = None
) -> VacuumPlan:
    """Read the latest version, list the table and plan the deletions (``now_ms`` pins the clock)."""
    location = normalize(location)
    storage = open_storage(location, storage_options)
    fmt = detect_format(storage, location)
    if fmt != "delta":
        raise UnsupportedFeature(f"{location}: removing orphan files of {fmt} tables is not available yet")
    snapshot = load_snapshot(storage, location)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return vacuum.plan_vacuum(snapshot, storage, options, storage_options, now_ms=now)


def plan_iceberg_listing(ref: TableRef, options: OrphanOptions, storage_options: StorageOptions) -> Listing:
    """Load the table's current metadata and list its location (or plan the listing tasks)."""
    return iceberg_orphans.plan_listing(load_table(ref, storage_options), options)


def list_unit(unit: ListingUnit) -> UnitListing:
    """The pure function a Spark task applies to one unit of ``listing.units``."""
    return iceberg_orphans.list_unit(unit)


def plan_iceberg(
    listing: Listing, unit_listings: list[UnitListing], options: OrphanOptions, *, now_ms: int | None = None
) -> OrphanPlan:
    """The files to delete, from the listing and the listing tasks' results (``now_ms`` pins the clock)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return iceberg_orphans.plan_orphans(listing, unit_listings, options, now_ms=now)


def recheck(plan: Plan) -> Plan:
    """The plan re-validated against commits that landed since it was made."""
    if isinstance(plan, OrphanPlan):
        return iceberg_orphans.recheck(plan)
    return vacuum.recheck(plan, open_storage(plan.table_root, plan.storage))


def task_for(plan: Plan) -> Callable[[DeleteBatch], BatchResult]:
    """The pure function a Spark task applies to one unit of ``plan.batches``."""
    return vacuum.delete_batch


def _total(plan: Plan, kind: str) -> tuple[int, int]:
    chosen = [c.size for c in plan.candidates if c.kind == kind]
    return len(chosen), sum(chosen)


def _common(plan: Plan, started: float, *, dry_run: bool) -> dict[str, Any]:
    """The report fields both formats fill the same way."""
    candidates = plan.candidates
    older_than = plan.older_than if isinstance(plan, OrphanPlan) else plan.retention
    return {
        "dry_run": dry_run,
        "retention": format_duration(older_than),
        "cutoff": instant(plan.cutoff_ms).isoformat(timespec="seconds"),
        "files_scanned": plan.files_scanned,
        "directories_scanned": plan.directories_scanned,
        "files_too_recent": plan.files_too_recent,
        "files_still_needed": plan.files_still_needed,
        "batches": len(plan.batches),
        "deleted_files": len(candidates),
        "deleted_bytes": sum(c.size for c in candidates),
        "paths": [c.path for c in candidates] if dry_run else [],
        "duration_s": time.monotonic() - started,
    }


def _report(plan: Plan, started: float, *, dry_run: bool) -> OrphansReport | IcebergOrphansReport:
    common = _common(plan, started, dry_run=dry_run)
    if isinstance(plan, OrphanPlan):
        data, metadata, other = (_total(plan, kind) for kind in ("data", "metadata", "other"))
        return IcebergOrphansReport(
            format="iceberg",
            table=plan.table_name,
            read_version=plan.sequence_number,
            metadata_files=plan.metadata_files,
            missing_metadata_files=plan.missing_metadata_files,
            snapshots=plan.snapshots,
            referenced_files=plan.referenced_files,
            listing_tasks=plan.listing_tasks,
            prefix_mismatches_kept=plan.prefix_mismatches_kept,
            deleted_data_files=data[0],
            deleted_data_bytes=data[1],
            deleted_metadata_files=metadata[0],
            deleted_metadata_bytes=metadata[1],
            deleted_other_files=other[0],
            deleted_other_bytes=other[1],
            **common,
        )
    tombstoned, untracked, change_data = (_total(plan, kind) for kind in ("tombstoned", "untracked", "change_data"))
    return OrphansReport(
        format="delta",
        table=plan.table_root,
        read_version=plan.read_version,
        live_files=plan.live_files,
        tombstones_retained=plan.tombstones_retained,
        deleted_tombstoned_files=tombstoned[0],
        deleted_tombstoned_bytes=tombstoned[1],
        deleted_untracked_files=untracked[0],
        deleted_untracked_bytes=untracked[1],
        deleted_change_data_files=change_data[0],
        deleted_change_data_bytes=change_data[1],
        **common,
    )


def dry_run_report(plan: Plan, started: float) -> OrphansReport | IcebergOrphansReport:
    """What the run would delete (paths listed), deleting nothing."""
    return _report(plan, started, dry_run=True)


def finish(plan: Plan, results: list[BatchResult], started: float) -> OrphansReport | IcebergOrphansReport:
    """The report of a run whose every batch was deleted (``results`` one per batch)."""
    if sorted(r.batch_id for r in results) != [b.batch_id for b in plan.batches]:
        table = plan.table_name if isinstance(plan, OrphanPlan) else plan.table_root
        raise InvalidArgument(f"{table}: delete results do not match the plan's batches")
    return _report(plan, started, dry_run=False)
