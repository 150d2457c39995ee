"""The Icechunk side of the commands: ``lakeops expire|orphans|compact|cdc REPO``.

Each command module hands an Icechunk location here after detecting the format. The flow is the
same as for tables: plan on the driver (:mod:`lakeops.ops.icechunk`), run the heavy units as Spark
tasks (garbage-collection deletes, chunk packing, snapshot diffs), commit on the driver, report.
Expiry removes a few branch files and runs on the driver; repositories in the ``icechunk``
package's format run their expiry and garbage collection inside that package.
"""

from __future__ import annotations

import time
from datetime import timedelta

from rich.console import Console

from lakeops.errors import UsageError
from lakeops.execution import TaskFailed
from lakeops.icechunk.maintenance import diff, packing
from lakeops.icechunk.maintenance.diff import DiffOptions
from lakeops.icechunk.maintenance.gc import GcPlan
from lakeops.ops import icechunk as ops
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize
from lakeops.units import format_size, parse_retention
from spark_jobs.operations import SparkSettings

__all__ = ["cdc", "compact", "expire", "orphans"]


def _retention(older_than: str | None) -> timedelta | None:
    return parse_retention(older_than) if older_than is not None else None


def expire(
    table: str,
    *,
    older_than: str | None,
    force: bool,
    dry_run: bool,
    storage_options: StorageOptions,
    progress: Console,
    quarantine_run: str | None = None,
) -> ops.IcechunkExpiryReport:
    """Remove branch files superseded for longer than the retention (on the driver: a few small files)."""
    started = time.monotonic()
    root = normalize(table)
    progress.print(f"planning snapshot expiry of Icechunk repository {root} ...")
    plan = ops.plan_expiry(
        root,
        open_storage(root, storage_options),
        storage_options,
        retention=_retention(older_than),
        force=force,
        now_ms=int(time.time() * 1000),
    )
    report = ops.expiry_report(
        plan, started, dry_run=dry_run, storage_options=storage_options, quarantine_run=quarantine_run
    )
    if report.delegated_to is not None:
        progress.print(f"{report.delegated_to}: {report.snapshots_expired} snapshots expired")
    else:
        progress.print(
            f"{report.deleted_branch_files} superseded branch files ({format_size(report.deleted_bytes)}) "
            f"{'would go' if dry_run else 'removed'}; {report.snapshots_expired} snapshots no longer retained"
        )
    return report


def orphans(
    table: str,
    *,
    older_than: str | None,
    force_short_retention: bool,
    dry_run: bool,
    storage_options: StorageOptions,
    spark: SparkSettings,
    progress: Console,
    quarantine_run: str | None = None,
) -> ops.IcechunkGcReport:
    """Garbage collection: list, compute reachability, re-check, delete in Spark tasks."""
    started = time.monotonic()
    root = normalize(table)
    progress.print(f"listing Icechunk repository {root} ...")
    plan = ops.plan_gc(
        root,
        open_storage(root, storage_options),
        storage_options,
        retention=_retention(older_than),
        force=force_short_retention,
        batch_size=1000,
        now_ms=int(time.time() * 1000),
    )
    if not dry_run and quarantine_run is not None and not isinstance(plan, GcPlan):
        raise UsageError(
            f"{root}: --quarantine is not available for repositories in the Icechunk package's format: "
            "the icechunk package deletes the files itself"
        )
    if dry_run or not isinstance(plan, GcPlan):
        return ops.gc_report(plan, started, dry_run=dry_run)
    plan = ops.recheck_gc(plan, storage_options)
    progress.print(
        f"{plan.objects_scanned} objects scanned, {plan.objects_reachable} reachable; "
        f"{len(plan.candidates)} unreachable objects older than the floor to delete"
    )
    results = spark.delete(
        plan.batches,
        label=f"deleting in {len(plan.batches)} batches",
        description=f"lakeops orphans {root}",
        progress=progress,
        quarantine_run=quarantine_run,
        operation="orphans",
    )
    return ops.gc_finish(plan, results, started).model_copy(update={"quarantine_run": quarantine_run})


def compact(
    table: str,
    *,
    branch: str,
    target_file_size: int | None,
    min_input_files: int,
    dry_run: bool,
    storage_options: StorageOptions,
    spark: SparkSettings,
    progress: Console,
) -> ops.IcechunkCompactionReport:
    """Pack small chunk objects into shared chunk files (Spark tasks), then commit the branch."""
    started = time.monotonic()
    root = normalize(table)
    progress.print(f"planning chunk packing of {root} (branch {branch}) ...")
    plan = ops.plan_packing(
        root,
        open_storage(root, storage_options),
        storage_options,
        branch=branch,
        target_file_size=target_file_size,
        min_input_files=min_input_files,
    )
    progress.print(
        f"sequence {plan.read_version}: {plan.native_chunks} native chunks in {plan.live_files} objects; "
        f"{plan.input_files} objects ({format_size(plan.input_bytes)}) to pack into {len(plan.groups)} files"
    )
    if dry_run or not plan.groups:
        return ops.packing_report(plan, started, dry_run=dry_run)
    try:
        results = spark.run_units(
            plan.groups,
            packing.pack_unit,
            packing.PackResult,
            label=f"packing {len(plan.groups)} chunk files",
            description=f"lakeops compact {root} @ {plan.branch}",
            progress=progress,
            work_bytes=plan.input_bytes,
        )
    except TaskFailed as failure:
        finished = [r for r in failure.completed.values() if isinstance(r, packing.PackResult)]
        ops.discard_packs(plan, finished, storage_options)
        raise
    progress.print(f"committing branch {plan.branch} ...")
    return ops.commit_packing(plan, results, storage_options, started)


def cdc(
    table: str,
    *,
    from_snapshot: str,
    to_snapshot: str | None,
    output: str,
    dry_run: bool,
    storage_options: StorageOptions,
    spark: SparkSettings,
    progress: Console,
) -> ops.IcechunkCdcReport:
    """Diff every snapshot after ``from_snapshot`` against its parent (Spark tasks), append to ``output``."""
    started = time.monotonic()
    root = normalize(table)
    progress.print(f"planning the snapshot diffs of {root} after {from_snapshot} ...")
    options = DiffOptions(from_snapshot=from_snapshot, to_snapshot=to_snapshot, output=output)
    plan = ops.plan_diff(root, open_storage(root, storage_options), options, storage_options)
    if plan.already_extracted:
        progress.print(f"{plan.output_root} already holds depths through {plan.extracted_through}: nothing to do")
    else:
        progress.print(f"depths {plan.from_version}..{plan.to_version}: {plan.snapshots} snapshots")
    if dry_run or plan.already_extracted:
        return ops.diff_report(plan, started, dry_run=dry_run)
    ops.require_output_writable(plan, storage_options)
    results: list[diff.DiffResult] = []
    if plan.units:
        try:
            results = spark.run_units(
                plan.units,
                diff.extract_unit,
                diff.DiffResult,
                label=f"diffing {plan.snapshots} snapshots in {len(plan.units)} units",
                description=f"lakeops cdc {root} {plan.from_snapshot}..{plan.to_snapshot}",
                progress=progress,
            )
        except TaskFailed as failure:
            finished = [r for r in failure.completed.values() if isinstance(r, diff.DiffResult)]
            ops.discard_diff(plan, finished, storage_options)
            raise
    report = ops.commit_diff(plan, results, storage_options, started)
    progress.print(f"committed version {report.committed_version} of {plan.output_root}")
    return report
