"""Icechunk change capture (``lakeops cdc REPO``): every snapshot after ``--from`` diffed against its
parent on the caller's executor, the rows appended to a Delta table in one commit
(:mod:`lakeops.icechunk.maintenance.diff`; the seed format and Icechunk formats 1 and 2)."""

from __future__ import annotations

import time
from collections import Counter

from rich.console import Console

from lakeops.delta.writer import require_writable_location
from lakeops.executors import Executor
from lakeops.icechunk.maintenance import diff
from lakeops.icechunk.maintenance.diff import DiffOptions, DiffPlan
from lakeops.ops.batches import run_batches
from lakeops.ops.report import Report, version_text
from lakeops.ops.table import Table
from lakeops.storage import StorageOptions, open_storage

__all__ = ["IcechunkCdcReport", "dry_run_report", "extract", "plan", "run"]


class IcechunkCdcReport(Report):
    """``read_version``/``from_depth``/``to_depth`` are watermarks: snapshot depths (ancestors counted
    from the root) in the seed format, snapshots' ``flushed_at`` (microseconds) in formats 1 and 2."""

    operation: str = "cdc"
    watermark: str = "depth"
    output: str = ""
    from_snapshot: str = ""
    to_snapshot: str = ""
    requested_from_depth: int = 0
    from_depth: int = 0
    to_depth: int = 0
    already_extracted: bool = False
    output_created: bool = False
    snapshots_extracted: int = 0
    units: int = 0
    rows_added: int = 0
    rows_removed: int = 0
    rows_modified: int = 0
    rows_metadata_changed: int = 0
    rows_written: int = 0
    files_written: int = 0
    bytes_written: int = 0
    commit_attempts: int = 0

    @property
    def state_version(self) -> str | None:
        """The source snapshot extracted up to (``committed_version`` is the output's)."""
        return version_text(self.to_snapshot)

    @property
    def row_count(self) -> int | None:
        return self.rows_written


def plan(handle: Table, options: DiffOptions) -> DiffPlan:
    """Plan the diffs of the snapshots after ``options.from_snapshot`` up to ``options.to_snapshot``
    from the handle's state (the seed format, or Icechunk format 1 or 2:
    :func:`~lakeops.icechunk.maintenance.diff.plan_diff`)."""
    return diff.plan_diff(handle.root, options, handle.storage_options, state=handle.icechunk_state())


def _report(plan: DiffPlan, started: float, *, dry_run: bool) -> IcechunkCdcReport:
    return IcechunkCdcReport(
        format=plan.format,
        table=plan.table_root,
        dry_run=dry_run,
        watermark=plan.watermark,
        read_version=plan.to_version,
        output=plan.output_root,
        from_snapshot=plan.from_snapshot,
        to_snapshot=plan.to_snapshot,
        requested_from_depth=plan.requested_from,
        from_depth=plan.from_version,
        to_depth=plan.to_version,
        already_extracted=plan.already_extracted,
        output_created=plan.output_version is None and not dry_run and not plan.already_extracted,
        snapshots_extracted=plan.snapshots,
        units=len(plan.units),
        duration_s=time.monotonic() - started,
    )


def dry_run_report(plan: DiffPlan, started: float) -> IcechunkCdcReport:
    """What the run would extract, without writing anything."""
    return _report(plan, started, dry_run=True)


def run(
    plan: DiffPlan,
    storage_options: StorageOptions,
    *,
    executor: Executor,
    progress: Console,
    description: str,
    started: float | None = None,
) -> IcechunkCdcReport:
    """Diff the plan's snapshots on ``executor`` and commit them as one output version; nothing when the
    output already holds the range. An output this process cannot write is refused before any unit
    runs; on a definite conflict the new files are deleted and the error raised (a re-run extracts
    what is still missing); on any other failure nothing is deleted."""
    started = time.monotonic() if started is None else started
    if plan.already_extracted:
        return _report(plan, started, dry_run=False)
    require_writable_location(open_storage(plan.output_root, storage_options), plan.output_root)
    (batch,) = run_batches(
        plan, executor, storage_options, action="diffing units", description=description, progress=progress
    )
    rows: Counter[str] = Counter()
    for r in batch.results:
        rows.update(r.rows_by_change)
    written = [w for r in batch.results for w in r.written]
    report = _report(plan, started, dry_run=False).model_copy(
        update={
            "committed_version": batch.outcome.version,
            "commit_attempts": batch.outcome.attempts,
            "warnings": list(batch.outcome.warnings),
            "rows_added": rows["added"],
            "rows_removed": rows["removed"],
            "rows_modified": rows["modified"],
            "rows_metadata_changed": rows["metadata-changed"],
            "rows_written": sum(w.rows for w in written),
            "files_written": len(written),
            "bytes_written": sum(int(w.add["size"]) for w in written),
            "duration_s": time.monotonic() - started,
        }
    )
    progress.print(f"committed version {report.committed_version} of {plan.output_root}")
    return report


def extract(
    handle: Table,
    *,
    from_snapshot: str,
    to_snapshot: str | None,
    output: str,
    dry_run: bool,
    executor: Executor,
    progress: Console,
) -> IcechunkCdcReport:
    """Plan the diffs of the handle's repository after ``from_snapshot`` (from the handle's state) and,
    unless ``dry_run``, extract them on ``executor`` into ``output``."""
    started = time.monotonic()
    root, storage_options = handle.root, handle.storage_options
    progress.print(f"planning the snapshot diffs of {root} after {from_snapshot} ...")
    options = DiffOptions(from_snapshot=from_snapshot, to_snapshot=to_snapshot, output=output)
    planned = plan(handle, options)
    if planned.already_extracted:
        held = f"{planned.watermark} {planned.extracted_through}"
        progress.print(f"{planned.output_root} already holds the changes through {held}: nothing to do")
    else:
        progress.print(
            f"{planned.watermark} {planned.from_version}..{planned.to_version}: {planned.snapshots} snapshots"
        )
    if dry_run:
        return dry_run_report(planned, started)
    description = f"lakeops cdc {root} {planned.from_snapshot}..{planned.to_snapshot}"
    return run(planned, storage_options, executor=executor, progress=progress, description=description, started=started)
