"""Reports of ``lakeops restore`` and ``lakeops purge-trash``: the quarantine (:mod:`lakeops.quarantine`)
seen from the command line."""

from __future__ import annotations

import time
from datetime import timedelta

from lakeops import quarantine
from lakeops.ops.report import Report
from lakeops.ops.target import Target, table_root
from lakeops.storage import StorageOptions

__all__ = ["PurgeReport", "RestoreReport", "purge_trash", "restore_run"]


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


def restore_run(target: Target, run_id: str, storage_options: StorageOptions) -> RestoreReport:
    started = time.monotonic()
    result = quarantine.restore(table_root(target, storage_options), run_id, storage_options)
    return RestoreReport(
        format=target.format,
        table=str(target),
        run_id=run_id,
        restored_files=result.files,
        restored_bytes=result.bytes,
        already_restored=result.already_restored,
        duration_s=time.monotonic() - started,
    )


def purge_trash(
    target: Target, older_than: timedelta, storage_options: StorageOptions, *, dry_run: bool
) -> PurgeReport:
    started = time.monotonic()
    result = quarantine.purge(table_root(target, storage_options), older_than, storage_options, dry_run=dry_run)
    return PurgeReport(
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
