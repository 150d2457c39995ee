"""Change data capture, format-neutral: plan by detected format, the unit task Spark runs, commit and report.

Spark jobs call :func:`plan`, run :func:`task_for` on every unit of ``plan.units``, then call
:func:`commit`; everything format-specific stays behind this module. Delta sources export their
change data feed (:mod:`lakeops.changefeed.cdf_export`; ``--from``/``--to`` are versions),
Iceberg tables their changelog (:mod:`lakeops.iceberg.maintenance.changelog`; ``--from``/``--to``
are snapshot ids, branches or tags, and the report's versions are sequence numbers). ``--from 0``
starts at the table's creation in both: Delta's version 0 is included, and Iceberg's ``0`` (never a
snapshot id) is the empty table before sequence number 1, so a consumer gets the initial load. Icechunk
repositories are diffed by :mod:`lakeops.ops.icechunk`.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING

from rich.console import Console

from lakeops.changefeed import cdf_export
from lakeops.changefeed.cdf_export import ExportPlan, ExportResult
from lakeops.delta.writer import require_writable_location
from lakeops.errors import UnsupportedFeature
from lakeops.executors import Executor
from lakeops.iceberg.maintenance import changelog
from lakeops.iceberg.maintenance.changelog import ChangelogPlan, SnapshotChanges
from lakeops.ops.batches import run_batches
from lakeops.ops.options import CdcOptions
from lakeops.ops.report import Report, version_text
from lakeops.ops.table import Table, as_table
from lakeops.ops.target import DeltaTarget, IcebergTarget, IcechunkTarget
from lakeops.storage import StorageOptions, open_storage
from lakeops.units import format_size

if TYPE_CHECKING:
    from lakeops.ops.icechunk.cdc import IcechunkCdcReport

__all__ = [
    "CdcOptions",
    "CdcReport",
    "ExportPlan",
    "ExportResult",
    "Plan",
    "dry_run_report",
    "execute",
    "plan",
    "require_output_writable",
    "run",
]

Plan = ExportPlan | ChangelogPlan


class CdcReport(Report):
    """``read_version`` is the last source position of the range (Delta: version; Iceberg: sequence
    number of the ``--to`` snapshot), ``committed_version`` the output's new version;
    ``from_creation``: the range starts at the table's creation (``--from 0``). Iceberg only: the
    snapshot ids of the range's ends (``from_snapshot_id`` None from the creation) and what the plan
    found in each snapshot extracted."""

    operation: str = "cdc"
    output: str = ""
    requested_from_version: int = 0
    from_version: int = 0
    to_version: int = 0
    from_creation: bool = False
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
    from_snapshot_id: int | None = None
    to_snapshot_id: int | None = None
    snapshots: list[SnapshotChanges] = []

    @property
    def state_version(self) -> str | None:
        """The source's position extracted up to: Iceberg snapshot id, else the version (not the output's)."""
        return version_text(self.to_snapshot_id if self.to_snapshot_id is not None else self.read_version)

    @property
    def row_count(self) -> int | None:
        return self.rows_written


def plan(table: Table | str, options: CdcOptions, storage_options: StorageOptions) -> Plan:
    """Plan the extraction of ``options.from_version..options.to_version`` of a Delta or Iceberg table
    into ``options.output``, from the handle's state (a Delta range ending before the latest version
    reads its end version; the latest is not read for it unless the handle holds it already)."""
    handle = as_table(table, options, storage_options)
    target = handle.target
    match target:
        case IcebergTarget():
            return changelog.plan_changelog(handle.iceberg_table(), options.for_iceberg(), storage_options)
        case DeltaTarget(location=location):
            latest = handle.delta_snapshot() if options.to_version is None or handle.holds_state else None
            return cdf_export.plan_export(location, options.for_delta(handle.address), storage_options, latest=latest)
        case IcechunkTarget():
            raise UnsupportedFeature(f"{target}: Icechunk changes are extracted by lakeops.ops.icechunk")


def _base_report(plan: Plan, started: float, dry_run: bool) -> CdcReport:
    return CdcReport(
        format=plan.format,
        table=plan.table_label(),
        dry_run=dry_run,
        read_version=plan.to_version,
        output=plan.output_root,
        requested_from_version=plan.requested_from,
        from_version=plan.from_version,
        to_version=plan.to_version,
        already_extracted=plan.already_extracted,
        output_created=plan.output_version is None and not dry_run,
        units=len(plan.units),
        source_files=plan.source_files,
        source_bytes=plan.source_bytes,
        duration_s=time.monotonic() - started,
        from_creation=plan.from_creation,
        versions_extracted=plan.versions_extracted,
        versions_from_change_files=plan.versions_from_change_files,
        versions_from_file_actions=plan.versions_from_file_actions,
        from_snapshot_id=plan.from_snapshot_id,
        to_snapshot_id=plan.to_snapshot_id,
        snapshots=plan.snapshots,
    )


def require_output_writable(plan: Plan, storage_options: StorageOptions) -> None:
    """Refuse, before any Spark work, an output location this process cannot write."""
    require_writable_location(open_storage(plan.output_root, storage_options), plan.output_root)


def dry_run_report(plan: Plan, started: float) -> CdcReport:
    """What the run would extract, without writing anything."""
    return _base_report(plan, started, dry_run=True)


def execute(
    table: Table | str,
    options: CdcOptions,
    storage_options: StorageOptions,
    *,
    dry_run: bool,
    executor: Executor,
    progress: Console,
) -> CdcReport | IcechunkCdcReport:
    """Plan, extract the units on ``executor``, commit them as one version of ``options.output``,
    report; ``dry_run`` stops after the plan. Icechunk repositories are diffed by
    :mod:`lakeops.ops.icechunk.cdc`."""
    handle = as_table(table, options, storage_options)
    target = handle.target
    if isinstance(target, IcechunkTarget):
        from lakeops.ops.icechunk import cdc as icechunk_cdc  # each format's code when it is met

        return icechunk_cdc.extract(
            handle,
            from_snapshot=str(options.from_version),
            to_snapshot=None if options.to_version is None else str(options.to_version),
            output=options.output,
            dry_run=dry_run,
            executor=executor,
            progress=progress,
        )
    started = time.monotonic()
    iceberg = target.format == "iceberg"
    positions = "sequence numbers" if iceberg else "versions"
    since = f"after snapshot {options.from_version}" if iceberg else f"from version {options.from_version}"
    if str(options.from_version) == "0":
        since = "since the table's creation"
    progress.print(f"planning the changes of {target} {since} ...")
    planned = plan(handle, options, storage_options)
    if planned.already_extracted:
        progress.print(
            f"{planned.output_root} already holds {positions} through {planned.extracted_through}: nothing to do"
        )
        if dry_run:
            return dry_run_report(planned, started)
        return run(planned, storage_options, executor=executor, progress=progress, description="", started=started)
    progress.print(
        f"{positions} {planned.from_version}..{planned.to_version}: {planned.source_files} files "
        f"({format_size(planned.source_bytes)}) in {len(planned.units)} units"
    )
    if dry_run:
        return dry_run_report(planned, started)
    report = run(
        planned,
        storage_options,
        executor=executor,
        progress=progress,
        description=f"lakeops cdc {target} {positions} {planned.from_version}..{planned.to_version}",
        started=started,
    )
    progress.print(f"committed version {report.committed_version} of {planned.output_root}")
    return report


def run(
    plan: Plan,
    storage_options: StorageOptions,
    *,
    executor: Executor,
    progress: Console,
    description: str,
    started: float | None = None,
) -> CdcReport:
    """Extract the plan's units on ``executor`` and commit them as one output version. On a definite
    conflict the new files are deleted and the error re-raised (a re-run extracts what is still
    missing); on any other failure nothing is deleted."""
    started = time.monotonic() if started is None else started
    if not plan.already_extracted:
        require_output_writable(plan, storage_options)
    (batch,) = run_batches(
        plan, executor, storage_options, action="extracting units", description=description, progress=progress
    )
    report = _base_report(plan, started, dry_run=False)
    rows: Counter[str] = Counter()
    for r in batch.results:
        rows.update(r.rows_by_change_type)
    written = [w for r in batch.results for w in r.written]
    return report.model_copy(
        update={
            "committed_version": batch.outcome.version,
            "commit_attempts": batch.outcome.attempts,
            "warnings": list(batch.outcome.warnings),
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
