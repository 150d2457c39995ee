"""Orphan-file removal, format-neutral: plan by detected format, re-check, delete on an executor, report.

Delta: VACUUM (:mod:`lakeops.delta.maintenance.orphans`); Iceberg
(:mod:`lakeops.iceberg.maintenance.orphans`). Either location is listed here, or as one unit per
second-level directory on the executor for large trees (:mod:`lakeops.listing`), then planned here.
:func:`plan` does either; :func:`run` re-checks the plan against commits that landed since (a file
a commit references again is kept) and deletes its batches with
:meth:`~lakeops.executors.Executor.delete`. Both plans name their shared figures alike and give
their own through ``report_fields()``, so nothing here asks which format a plan is.

The plans are not :class:`~lakeops.plan.MaintenancePlan`\\ s: their units delete instead of writing,
so there is nothing to commit and nothing a failure could discard, and the safety step (the
re-check) must come *before* the units run and may change them, where a maintenance plan's commit
comes after. Deleting has its executor method of its own (quarantine runs, the driver-or-Spark rule
for deletions). The listing units run on the executor too, but their results feed the planner,
not a commit.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from rich.console import Console

from lakeops.deletion import BatchResult, delete_batch, require_all_deleted
from lakeops.delta.maintenance.options import DeltaVacuumOptions
from lakeops.errors import UnsupportedFeature
from lakeops.executors import Executor
from lakeops.iceberg.maintenance.options import IcebergOrphanOptions
from lakeops.icechunk.maintenance.options import IcechunkGcOptions
from lakeops.listing import DEFAULT_LISTING_THRESHOLD, UnitListing, list_tree, list_unit
from lakeops.ops.options import OrphansOptions
from lakeops.ops.report import Report, show_paths
from lakeops.ops.table import Table, as_table
from lakeops.ops.target import CatalogOptions, DeltaTarget, IcebergTarget, IcechunkTarget
from lakeops.quarantine import new_run_id
from lakeops.storage import FileInfo, Storage, StorageOptions
from lakeops.units import format_duration, format_size, instant, parse_retention

if TYPE_CHECKING:
    from lakeops.delta.maintenance.orphans import VacuumOptions, VacuumPlan
    from lakeops.iceberg.maintenance.orphans import OrphanPlan
    from lakeops.ops.icechunk.orphans import IcechunkGcReport

    Plan = VacuumPlan | OrphanPlan

__all__ = [
    "BatchResult",
    "IcebergOrphansReport",
    "OrphansOptions",
    "OrphansReport",
    "describe",
    "dry_run_report",
    "execute",
    "finish",
    "plan",
    "plan_delta",
    "run",
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


#: Each format's report.
_REPORTS: dict[str, type[OrphansReport | IcebergOrphansReport]] = {
    "delta": OrphansReport,
    "iceberg": IcebergOrphansReport,
}


def execute(
    table: Table | str,
    options: OrphansOptions,
    storage_options: StorageOptions,
    *,
    dry_run: bool,
    quarantine: bool,
    executor: Executor,
    progress: Console,
) -> OrphansReport | IcebergOrphansReport | IcechunkGcReport:
    """List and plan (a large Iceberg tree listed on ``executor``), re-check, delete on ``executor``
    (``quarantine``: move into a new trash run instead), report; ``dry_run`` lists what would go.
    Icechunk repositories are garbage-collected by :mod:`lakeops.ops.icechunk.orphans`."""
    handle = as_table(table, options, storage_options)
    target = handle.target
    quarantine_run = new_run_id() if quarantine and not dry_run else None
    if isinstance(target, IcechunkTarget):
        own = options.for_format(IcechunkGcOptions, target.location)
        from lakeops.ops.icechunk import orphans as icechunk_orphans  # each format's code when it is met

        return icechunk_orphans.collect_garbage(
            handle,
            retention=parse_retention(own.older_than) if own.older_than is not None else None,
            force_short_retention=own.force_short_retention,
            dry_run=dry_run,
            executor=executor,
            progress=progress,
            quarantine_run=quarantine_run,
        )
    started = time.monotonic()
    planned = plan(handle, options, storage_options, executor=executor, progress=progress)
    progress.print(describe(planned))
    if dry_run:
        report = dry_run_report(planned, started)
        show_paths(progress, report.paths)
        return report
    return run(
        planned,
        executor=executor,
        progress=progress,
        description=f"lakeops orphans {target}",
        started=started,
        quarantine_run=quarantine_run,
    )


def plan(
    table: Table | str,
    options: OrphansOptions,
    storage_options: StorageOptions,
    *,
    executor: Executor,
    progress: Console,
    now_ms: int | None = None,
) -> Plan:
    """List the table and choose the files to delete (``now_ms`` pins the clock); a large Iceberg tree
    is listed by units on ``executor``. Options of another format are refused. The table's state is
    read through its handle."""
    handle = as_table(table, options, storage_options)
    target = handle.target
    now = int(time.time() * 1000) if now_ms is None else now_ms
    match target:
        case IcebergTarget(ref=ref):
            iceberg = options.for_format(IcebergOrphanOptions, str(target))
            progress.print(f"listing {ref} ...")
            return _plan_iceberg(handle, iceberg, executor=executor, progress=progress, now_ms=now)
        case DeltaTarget():
            vacuum = options.for_format(DeltaVacuumOptions, str(target))
            retention = parse_retention(vacuum.older_than) if vacuum.older_than is not None else None
            if vacuum.keep_from_version is not None:
                from lakeops.ops import consumers

                retention = consumers.vacuum_retention(
                    handle, vacuum.keep_from_version, retention, storage_options, now_ms=now
                )
            progress.print(f"listing {handle} ...")
            from lakeops.delta.maintenance.orphans import VacuumOptions

            vacuum_options = VacuumOptions(retention=retention, force_short_retention=vacuum.force_short_retention)
            return plan_delta(
                handle,
                vacuum_options,
                storage_options,
                now_ms=now,
                executor=executor,
                progress=progress,
                listing_threshold=vacuum.listing_threshold,
            )
        case IcechunkTarget():
            raise UnsupportedFeature(f"{target}: Icechunk repositories are garbage-collected by lakeops.ops.icechunk")


def plan_delta(
    location: Table | str,
    options: VacuumOptions,
    storage_options: StorageOptions,
    *,
    now_ms: int | None = None,
    executor: Executor | None = None,
    progress: Console | None = None,
    listing_threshold: int | None = None,
) -> VacuumPlan:
    """Delta VACUUM: read the latest version, list the table and plan the deletions (``now_ms`` pins
    the clock). With an ``executor``, a tree of more than ``listing_threshold`` second-level
    directories (None: :data:`~lakeops.listing.DEFAULT_LISTING_THRESHOLD`) is listed by units on it,
    as Iceberg's orphan removal lists (:mod:`lakeops.listing`); else the driver lists it in one pass.
    The snapshot is the handle's."""
    from lakeops.delta.maintenance import orphans as delta_orphans

    handle = as_table(location, CatalogOptions(), storage_options)
    handle.target.require("delta", operation="removing orphan files")
    location, storage = handle.root, handle.storage()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if executor is None:
        snapshot = handle.delta_snapshot("row_counts")  # VACUUM reads paths, not stats
        return delta_orphans.plan_vacuum(snapshot, storage, options, storage_options, now_ms=now)
    threshold = DEFAULT_LISTING_THRESHOLD if listing_threshold is None else listing_threshold
    # The listing and the log replay are independent reads, each waiting on storage or in pyarrow much of
    # the time: listed while the log is replayed (at 100,000 files, 0.9 s and 1.0 s on their own). Which
    # comes first does not matter: a file committed after the snapshot is young (the age floor keeps it)
    # and the plan is rechecked against newer versions before anything is deleted.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vacuum-listing") as pool:
        listing = pool.submit(
            _list_on, executor, storage, location, storage_options, threshold, progress or Console(quiet=True)
        )
        snapshot = handle.delta_snapshot("row_counts")  # VACUUM reads paths, not stats
        listed = listing.result()
    return delta_orphans.plan_vacuum(snapshot, storage, options, storage_options, now_ms=now, listed=listed)


def _list_on(
    executor: Executor,
    storage: Storage,
    location: str,
    storage_options: StorageOptions,
    threshold: int,
    progress: Console,
) -> list[FileInfo]:
    """Every file under ``location`` but lakeops' own, sorted by path as the storage lists them: the
    top two levels listed here, the directories below them by units on ``executor`` when there are
    more than ``threshold``, else here too."""
    tree = list_tree(storage, location, storage_options, threshold=threshold)
    found = tree.files
    if tree.units:
        listings = executor.run_units(
            tree.units,
            list_unit,
            UnitListing,
            label=f"listing {len(tree.units)} directories",
            description=f"lakeops orphans {location}: listing",
            progress=progress,
        )
        found += [f.info() for listing in listings for f in listing.files]
    return sorted(found, key=lambda info: info.path)


def _plan_iceberg(
    handle: Table,
    options: IcebergOrphanOptions,
    *,
    executor: Executor,
    progress: Console,
    now_ms: int,
) -> OrphanPlan:
    """Load the current metadata, list the location (units of a large tree on ``executor``), plan."""
    from lakeops.iceberg.maintenance import orphans as iceberg_orphans
    from lakeops.iceberg.maintenance.orphans import OrphanOptions

    given = {
        "older_than": parse_retention(options.older_than) if options.older_than is not None else None,
        "force_short_retention": options.force_short_retention,
        "prefix_mismatch_mode": options.prefix_mismatch_mode,
        "listing_threshold": options.listing_threshold,
    }
    settings = OrphanOptions.model_validate({name: value for name, value in given.items() if value is not None})
    listing = iceberg_orphans.plan_listing(handle.iceberg_table(), settings)
    listed: list[UnitListing] = []
    if listing.units:
        listed = executor.run_units(
            listing.units,
            iceberg_orphans.list_unit,
            UnitListing,
            label=f"listing {len(listing.units)} directories",
            description=f"lakeops orphans {handle.target}: listing",
            progress=progress,
        )
    return iceberg_orphans.plan_orphans(listing, listed, settings, now_ms=now_ms)


def describe(plan: Plan) -> str:
    """The plan in one progress line: what was scanned and what is to be deleted."""
    candidates = plan.candidates
    size = format_size(sum(c.size for c in candidates))
    return f"{plan.describe()}; {len(candidates)} files ({size}) to delete"


def _report(plan: Plan, started: float, *, dry_run: bool) -> OrphansReport | IcebergOrphansReport:
    candidates = plan.candidates
    common: dict[str, Any] = {
        "format": plan.format,
        "table": plan.table_label(),
        "dry_run": dry_run,
        "retention": format_duration(plan.retention),
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
    return _REPORTS[plan.format].model_validate(common | plan.report_fields())


def dry_run_report(plan: Plan, started: float) -> OrphansReport | IcebergOrphansReport:
    """What the run would delete (paths listed), deleting nothing."""
    return _report(plan, started, dry_run=True)


def finish(plan: Plan, results: list[BatchResult], started: float) -> OrphansReport | IcebergOrphansReport:
    """The report of a run whose every batch was deleted (``results`` one per batch)."""
    require_all_deleted(plan.table_label(), plan.batches, results)
    return _report(plan, started, dry_run=False)


def run(
    plan: Plan,
    *,
    executor: Executor,
    progress: Console,
    description: str,
    started: float | None = None,
    quarantine_run: str | None = None,
) -> OrphansReport | IcebergOrphansReport:
    """Re-check the plan against the table as it is now, delete its batches on ``executor``
    (``quarantine_run``: move them into that trash run instead) and report. A batch that fails raises;
    the batches already deleted stay deleted and a rerun plans only what is left. The plan carries its
    storage options: its batches hand them to the tasks that delete."""
    started = time.monotonic() if started is None else started
    plan = plan.rechecked()
    if not plan.batches:
        return finish(plan, [], started)
    results = executor.delete(
        plan.batches,
        task=delete_batch,
        label=f"deleting in {len(plan.batches)} batches",
        description=description,
        progress=progress,
        quarantine_run=quarantine_run,
        operation="orphans",
    )
    return finish(plan, results, started).model_copy(update={"quarantine_run": quarantine_run})
