"""Compaction, format-neutral: plan by detected format, the unit task Spark runs, commit and report.

Spark jobs call :func:`plan`, run :func:`task_for` on every unit of ``plan.groups``, then call
:func:`commit`; everything format-specific stays behind this module.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lakeops.delta.maintenance import compaction as delta_compaction
from lakeops.delta.maintenance.compaction import (
    CompactionOptions,
    CompactionPlan,
    RewriteGroup,
    RewriteResult,
)
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import CommitConflict, UnsupportedFeature
from lakeops.ops.detect import detect_format
from lakeops.ops.report import Report
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize, require_within

__all__ = [
    "CompactionOptions",
    "CompactionPlan",
    "CompactionReport",
    "RewriteResult",
    "commit",
    "discard",
    "dry_run_report",
    "plan",
    "task_for",
]


class CompactionReport(Report):
    operation: str = "compact"
    target_file_size: int = 0
    live_files_before: int = 0
    live_bytes_before: int = 0
    candidate_files: int = 0
    groups: int = 0
    partitions_compacted: int = 0
    files_removed: int = 0
    bytes_removed: int = 0
    files_added: int = 0
    bytes_added: int = 0
    rows_read: int = 0
    rows_written: int = 0
    rows_dropped_by_dv: int = 0
    live_files_after: int = 0
    commit_attempts: int = 0


def plan(location: str, options: CompactionOptions, storage_options: StorageOptions) -> CompactionPlan:
    """Read the table at its latest version and plan the rewrite."""
    location = normalize(location)
    storage = open_storage(location, storage_options)
    fmt = detect_format(storage, location)
    if fmt != "delta":
        raise UnsupportedFeature(f"{location}: compaction of {fmt} tables is not available yet")
    snapshot = load_snapshot(storage, location)
    return delta_compaction.plan_compaction(snapshot, options, storage_options)


def task_for(plan: CompactionPlan) -> Callable[[RewriteGroup], RewriteResult]:
    """The pure function a Spark task applies to one unit of ``plan.groups``."""
    return delta_compaction.rewrite_group


def _base_report(plan: CompactionPlan, started: float, dry_run: bool) -> CompactionReport:
    return CompactionReport(
        format="delta",
        table=plan.table_root,
        dry_run=dry_run,
        read_version=plan.read_version,
        target_file_size=plan.target_file_size,
        live_files_before=plan.live_files,
        live_bytes_before=plan.live_bytes,
        candidate_files=plan.candidate_files,
        groups=len(plan.groups),
        partitions_compacted=plan.partitions_compacted,
        files_removed=plan.input_files,
        bytes_removed=plan.input_bytes,
        live_files_after=plan.live_files,
        duration_s=time.monotonic() - started,
    )


def dry_run_report(plan: CompactionPlan, started: float) -> CompactionReport:
    """What the run would rewrite, without writing anything."""
    return _base_report(plan, started, dry_run=True)


def discard(plan: CompactionPlan, results: list[RewriteResult], storage_options: StorageOptions) -> int:
    """Delete the files this attempt wrote (never anything else, never outside the table root)."""
    storage = open_storage(plan.table_root, storage_options)
    paths = [require_within(plan.table_root, p) for p in delta_compaction.written_locations(results)]
    return storage.delete_many(paths) if paths else 0


def commit(
    plan: CompactionPlan, results: list[RewriteResult], storage_options: StorageOptions, started: float
) -> CompactionReport:
    """Commit the rewritten files. On a definite conflict the new files are deleted and the error
    re-raised; on any other failure nothing is deleted (the outcome may be unknown; ``orphans``
    removes unreferenced files later, past its age floor)."""
    try:
        outcome = delta_compaction.commit_compaction(plan, results, storage_options)
    except CommitConflict:
        discard(plan, results, storage_options)
        raise
    report = _base_report(plan, started, dry_run=False)
    added = [w for r in results for w in r.written]
    return report.model_copy(
        update={
            "committed_version": outcome.version if outcome else None,
            "commit_attempts": outcome.attempts if outcome else 0,
            "files_added": len(added),
            "bytes_added": sum(w.add["size"] for w in added),
            "rows_read": sum(r.rows_read for r in results),
            "rows_written": sum(w.rows for w in added),
            "rows_dropped_by_dv": sum(r.rows_dropped_by_dv for r in results),
            "live_files_after": plan.live_files - plan.input_files + len(added),
            "duration_s": time.monotonic() - started,
        }
    )
