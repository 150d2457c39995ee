"""``lakeops restore`` and ``lakeops purge-trash``: the quarantine (:mod:`lakeops.quarantine`) of any
table, by name or location. Both run in this process: a restore is as many moves as the run made, a
purge one listing and a batched delete per run; no executor is needed."""

from __future__ import annotations

import time

from rich.console import Console

from lakeops import quarantine
from lakeops.ops.options import PurgeOptions, RestoreOptions
from lakeops.ops.report import Report
from lakeops.ops.table import Table, as_table
from lakeops.quarantine import DEFAULT_PURGE_AFTER
from lakeops.storage import StorageOptions
from lakeops.units import parse_retention

__all__ = ["PurgeOptions", "PurgeReport", "RestoreOptions", "RestoreReport", "purge", "restore"]


class RestoreReport(Report):
    """The files of one quarantine run put back at their original paths."""

    operation: str = "restore"
    run_id: str = ""
    restored_files: int = 0
    restored_bytes: int = 0
    already_restored: int = 0


class PurgeReport(Report):
    """Trash runs older than the retention, deleted (with ``dry_run``: what would be)."""

    operation: str = "purge-trash"
    older_than: str = ""
    purged_runs: int = 0
    purged_files: int = 0
    purged_bytes: int = 0
    runs: list[str] = []


def restore(
    table: Table | str, options: RestoreOptions, storage_options: StorageOptions, *, progress: Console
) -> RestoreReport:
    """Put back every file quarantine run ``options.run_id`` moved to the table's trash. Nothing is
    restored if any of them exists again at its original path (the error names it)."""
    handle = as_table(table, options, storage_options)
    target = handle.target
    progress.print(f"restoring quarantine run {options.run_id} of {target} ...")
    started = time.monotonic()
    result = quarantine.restore(handle.root, options.run_id, storage_options)
    return RestoreReport(
        format=target.format,
        table=str(target),
        run_id=options.run_id,
        restored_files=result.files,
        restored_bytes=result.bytes,
        already_restored=result.already_restored,
        duration_s=time.monotonic() - started,
    )


def purge(
    table: Table | str, options: PurgeOptions, storage_options: StorageOptions, *, dry_run: bool, progress: Console
) -> PurgeReport:
    """Delete the table's quarantine runs older than ``options.older_than`` (``dry_run``: list them,
    deleting nothing); a run's age is its run id's timestamp (when it quarantined), not the files'
    modification times."""
    handle = as_table(table, options, storage_options)
    target = handle.target
    older_than = parse_retention(options.older_than) if options.older_than is not None else DEFAULT_PURGE_AFTER
    started = time.monotonic()
    root = handle.root
    result = quarantine.purge(root, older_than, storage_options, dry_run=dry_run)
    report = PurgeReport(
        format=target.format,
        table=str(target),
        dry_run=dry_run,
        older_than=str(older_than),
        purged_runs=len(result.runs),
        purged_files=result.files,
        purged_bytes=result.bytes,
        runs=result.runs,
        duration_s=time.monotonic() - started,
    )
    verb = "would purge" if dry_run else "purged"
    progress.print(f"{target}: {verb} {report.purged_runs} trash runs ({report.purged_files} files)")
    return report
