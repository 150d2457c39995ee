"""Orphan-file removal, format-neutral: plan by detected format, the unit task Spark runs, report.

Delta: VACUUM (:mod:`lakeops.delta.maintenance.vacuum`). Spark jobs call :func:`plan`, then
:func:`recheck` just before deleting, run :func:`task_for` on every unit of ``plan.batches`` and
call :func:`finish`. Other formats are refused for now.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from lakeops.delta.maintenance import vacuum
from lakeops.delta.maintenance.vacuum import BatchResult, DeleteBatch, VacuumOptions, VacuumPlan
from lakeops.delta.retention import format_duration
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import InvalidArgument, UnsupportedFeature
from lakeops.ops.detect import detect_format
from lakeops.ops.report import Report
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize

__all__ = [
    "BatchResult",
    "OrphansReport",
    "VacuumOptions",
    "VacuumPlan",
    "dry_run_report",
    "finish",
    "plan",
    "recheck",
    "task_for",
]


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


def recheck(plan: VacuumPlan) -> VacuumPlan:
    """The plan re-validated against commits that landed since it was made."""
    return vacuum.recheck(plan, open_storage(plan.table_root, plan.storage))


def task_for(plan: VacuumPlan) -> Callable[[DeleteBatch], BatchResult]:
    """The pure function a Spark task applies to one unit of ``plan.batches``."""
    return vacuum.delete_batch


def _report(plan: VacuumPlan, started: float, *, dry_run: bool) -> OrphansReport:
    candidates = plan.candidates

    def total(kind: str) -> tuple[int, int]:
        chosen = [c.size for c in candidates if c.kind == kind]
        return len(chosen), sum(chosen)

    tombstoned, untracked, change_data = total("tombstoned"), total("untracked"), total("change_data")
    return OrphansReport(
        format="delta",
        table=plan.table_root,
        dry_run=dry_run,
        read_version=plan.read_version,
        retention=format_duration(plan.retention),
        cutoff=datetime.fromtimestamp(plan.cutoff_ms / 1000, UTC).isoformat(timespec="seconds"),
        files_scanned=plan.files_scanned,
        directories_scanned=plan.directories_scanned,
        live_files=plan.live_files,
        tombstones_retained=plan.tombstones_retained,
        files_too_recent=plan.files_too_recent,
        files_still_needed=plan.files_still_needed,
        batches=len(plan.batches),
        deleted_tombstoned_files=tombstoned[0],
        deleted_tombstoned_bytes=tombstoned[1],
        deleted_untracked_files=untracked[0],
        deleted_untracked_bytes=untracked[1],
        deleted_change_data_files=change_data[0],
        deleted_change_data_bytes=change_data[1],
        deleted_files=len(candidates),
        deleted_bytes=sum(c.size for c in candidates),
        paths=[c.path for c in candidates] if dry_run else [],
        duration_s=time.monotonic() - started,
    )


def dry_run_report(plan: VacuumPlan, started: float) -> OrphansReport:
    """What the run would delete (paths listed), deleting nothing."""
    return _report(plan, started, dry_run=True)


def finish(plan: VacuumPlan, results: list[BatchResult], started: float) -> OrphansReport:
    """The report of a run whose every batch was deleted (``results`` one per batch)."""
    if sorted(r.batch_id for r in results) != [b.batch_id for b in plan.batches]:
        raise InvalidArgument(f"{plan.table_root}: delete results do not match the plan's batches")
    return _report(plan, started, dry_run=False)
