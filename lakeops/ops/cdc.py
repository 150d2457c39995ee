"""Change data capture, format-neutral: plan by detected format, the unit task Spark runs, commit and report.

Spark jobs call :func:`plan`, run :func:`task_for` on every unit of ``plan.units``, then call
:func:`commit`; everything format-specific stays behind this module. Today only Delta sources are
supported (change data feed, :mod:`lakeops.delta.maintenance.cdf_export`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from lakeops.delta.maintenance import cdf_export
from lakeops.delta.maintenance.cdf_export import ExportOptions, ExportPlan, ExportResult, ExportUnit
from lakeops.delta.writer import require_writable_location
from lakeops.errors import CommitConflict, UnsupportedFeature
from lakeops.ops.detect import detect_format
from lakeops.ops.report import Report
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize, require_within

__all__ = [
    "CdcOptions",
    "CdcReport",
    "ExportPlan",
    "ExportResult",
    "commit",
    "discard",
    "dry_run_report",
    "plan",
    "require_output_writable",
    "task_for",
]

CdcOptions = ExportOptions


class CdcReport(Report):
    """``read_version`` is the last source version of the range, ``committed_version`` the output's new version."""

    operation: str = "cdc"
    output: str = ""
    requested_from_version: int = 0
    from_version: int = 0
    to_version: int = 0
    already_extracted: bool = False
    output_created: bool = False
    versions_extracted: int = 0
    versions_from_change_files: int = 0
    versions_from_file_actions: int = 0
    units: int = 0
    source_files: int = 0
    source_bytes: int = 0
    rows_insert: int = 0
    rows_delete: int = 0
    rows_update_preimage: int = 0
    rows_update_postimage: int = 0
    rows_written: int = 0
    files_written: int = 0
    bytes_written: int = 0
    commit_attempts: int = 0


def plan(location: str, options: CdcOptions, storage_options: StorageOptions) -> ExportPlan:
    """Plan the extraction of ``options.from_version..options.to_version`` into ``options.output``."""
    location = normalize(location)
    fmt = detect_format(open_storage(location, storage_options), location)
    if fmt != "delta":
        raise UnsupportedFeature(f"{location}: change capture of {fmt} tables is not available yet")
    return cdf_export.plan_export(location, options, storage_options)


def task_for(plan: ExportPlan) -> Callable[[ExportUnit], ExportResult]:
    """The pure function a Spark task applies to one unit of ``plan.units``."""
    return cdf_export.extract_unit


def _base_report(plan: ExportPlan, started: float, dry_run: bool) -> CdcReport:
    return CdcReport(
        format="delta",
        table=plan.table_root,
        dry_run=dry_run,
        read_version=plan.to_version,
        output=plan.output_root,
        requested_from_version=plan.requested_from,
        from_version=plan.from_version,
        to_version=plan.to_version,
        already_extracted=plan.already_extracted,
        output_created=plan.output_version is None and not dry_run,
        versions_extracted=plan.versions,
        versions_from_change_files=plan.versions_from_change_files,
        versions_from_file_actions=plan.versions_from_file_actions,
        units=len(plan.units),
        source_files=plan.source_files,
        source_bytes=plan.source_bytes,
        duration_s=time.monotonic() - started,
    )


def require_output_writable(plan: ExportPlan, storage_options: StorageOptions) -> None:
    """Refuse, before any Spark work, an output location this process cannot write."""
    require_writable_location(open_storage(plan.output_root, storage_options), plan.output_root)


def dry_run_report(plan: ExportPlan, started: float) -> CdcReport:
    """What the run would extract, without writing anything."""
    return _base_report(plan, started, dry_run=True)


def discard(plan: ExportPlan, results: list[ExportResult], storage_options: StorageOptions) -> int:
    """Delete the files this attempt wrote (never anything else, never outside the output table)."""
    storage = open_storage(plan.output_root, storage_options)
    paths = [require_within(plan.output_root, p) for p in cdf_export.written_locations(results)]
    return storage.delete_many(paths) if paths else 0


def commit(plan: ExportPlan, results: list[ExportResult], storage_options: StorageOptions, started: float) -> CdcReport:
    """Commit the extracted files. On a definite conflict the new files are deleted and the error
    re-raised (a re-run extracts what is still missing); on any other failure nothing is deleted."""
    try:
        outcome = cdf_export.commit_export(plan, results, storage_options)
    except CommitConflict:
        discard(plan, results, storage_options)
        raise
    report = _base_report(plan, started, dry_run=False)
    rows: Counter[str] = Counter()
    for r in results:
        rows.update(r.rows_by_change_type)
    written = [w for r in results for w in r.written]
    return report.model_copy(
        update={
            "committed_version": outcome.version if outcome else None,
            "commit_attempts": outcome.attempts if outcome else 0,
            "rows_insert": rows["insert"],
            "rows_delete": rows["delete"],
            "rows_update_preimage": rows["update_preimage"],
            "rows_update_postimage": rows["update_postimage"],
            "rows_written": sum(w.rows for w in written),
            "files_written": len(written),
            "bytes_written": sum(int(w.add["size"]) for w in written),
            "duration_s": time.monotonic() - started,
        }
    )
