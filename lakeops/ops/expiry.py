"""Expiry, format-neutral: plan by detected format, execute on the driver, report.

Delta: log expiry (:mod:`lakeops.delta.maintenance.log_expiry`). Other formats are refused for now.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from lakeops.delta.maintenance import log_expiry
from lakeops.delta.maintenance.log_expiry import ExpiryOptions, ExpiryPlan
from lakeops.delta.retention import format_duration, parse_retention
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import UnsupportedFeature
from lakeops.ops.detect import detect_format
from lakeops.ops.report import Report
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize

__all__ = ["ExpiryOptions", "ExpiryPlan", "ExpiryReport", "dry_run_report", "execute", "parse_retention", "plan"]


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
        cutoff=datetime.fromtimestamp(plan.cutoff_ms / 1000, UTC).isoformat(timespec="seconds"),
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


def execute(plan: ExpiryPlan, storage_options: StorageOptions, started: float) -> ExpiryReport:
    """Repair ``_last_checkpoint`` if it would dangle, delete the planned files, report."""
    rewritten = log_expiry.execute_expiry(plan, open_storage(plan.table_root, storage_options))
    return _report(plan, started, dry_run=False).model_copy(
        update={
            "last_checkpoint_rewritten": rewritten,
            "duration_s": time.monotonic() - started,
        }
    )
