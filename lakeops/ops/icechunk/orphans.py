"""Icechunk garbage collection (``lakeops orphans REPO``): objects no retained snapshot reaches, listed
and re-checked on the driver and deleted in batches on the caller's executor: seed format
(:mod:`lakeops.icechunk.maintenance.orphans`), Icechunk format 1 and 2
(:mod:`lakeops.icechunk.maintenance.versioned_orphans`)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from datetime import timedelta

from rich.console import Console

from lakeops.deletion import BatchResult, DeleteBatch
from lakeops.executors import Executor
from lakeops.icechunk.maintenance import orphans as repository_orphans
from lakeops.icechunk.maintenance.orphans import GcPlan
from lakeops.icechunk.maintenance.versioned_orphans import VersionedGcPlan, plan_versioned_gc
from lakeops.icechunk.versioned import RepositoryState, load_repository_state
from lakeops.ops.icechunk.repository import removal_fields
from lakeops.ops.report import Report
from lakeops.ops.table import Table
from lakeops.storage import Storage, StorageOptions

__all__ = ["IcechunkGcReport", "Plan", "collect_garbage", "plan", "run"]

Plan = GcPlan | VersionedGcPlan


class IcechunkGcReport(Report):
    """Objects deleted (or, with ``dry_run``, that would be) by kind, and what the scan saw."""

    operation: str = "orphans"
    retention: str = ""
    cutoff: str = ""
    retained_snapshots: int = 0
    objects_scanned: int = 0
    objects_reachable: int = 0
    files_too_recent: int = 0
    unrecognised_files: int = 0
    batches: int = 0
    deleted_snapshots: int = 0
    deleted_manifests: int = 0
    deleted_attribute_files: int = 0
    deleted_chunks: int = 0
    deleted_transaction_logs: int = 0
    #: Abandoned lakeops temporary files (a local write killed before its rename).
    deleted_temp_files: int = 0
    deleted_files: int = 0
    deleted_bytes: int = 0
    paths: list[str] = []


def plan(
    location: str,
    storage: Storage,
    storage_options: StorageOptions,
    *,
    retention: timedelta | None,
    force: bool,
    batch_size: int = repository_orphans.DEFAULT_BATCH_SIZE,
    now_ms: int,
    state: RepositoryState | None = None,
) -> Plan:
    """The garbage collection of any kind of repository (``retention`` None: the default window),
    planned through ``state`` (the repository as already read) if given; its run re-checks it."""
    state = load_repository_state(storage, location) if state is None else state
    planner: Callable[..., Plan]
    if state.format_version is None:
        planner = functools.partial(repository_orphans.plan_gc, repo=state.seed)
    else:
        planner = functools.partial(plan_versioned_gc, repo=state.versioned)
    return planner(
        storage, location, storage_options, retention=retention, force=force, now_ms=now_ms, batch_size=batch_size
    )


def run(
    plan: Plan,
    storage_options: StorageOptions,
    *,
    executor: Executor,
    dry_run: bool,
    progress: Console,
    description: str,
    quarantine_run: str | None = None,
    started: float | None = None,
) -> IcechunkGcReport:
    """Carry out (unless ``dry_run``) and report ``plan``: it is re-checked just before its batches are
    deleted on ``executor`` (``quarantine_run``: moved into that trash run instead)."""
    started = time.monotonic() if started is None else started

    def delete(batches: Sequence[DeleteBatch]) -> list[BatchResult]:
        return executor.delete(
            batches,
            label=f"deleting in {len(batches)} batches",
            description=description,
            progress=progress,
            quarantine_run=quarantine_run,
            operation="orphans",
        )

    figures = plan.collect_garbage(storage_options, delete, dry_run=dry_run, note=progress.print)
    common = removal_fields(plan, started, dry_run=dry_run, quarantine_run=quarantine_run)
    return IcechunkGcReport.model_validate(common | figures)


def collect_garbage(
    handle: Table,
    *,
    retention: timedelta | None,
    force_short_retention: bool,
    dry_run: bool,
    executor: Executor,
    progress: Console,
    quarantine_run: str | None = None,
) -> IcechunkGcReport:
    """List the handle's repository, plan (from the handle's state), re-check and delete (on ``executor``)."""
    started = time.monotonic()
    root, storage_options = handle.root, handle.storage_options
    progress.print(f"listing Icechunk repository {root} ...")
    planned = plan(
        root,
        handle.storage(),
        storage_options,
        retention=retention,
        force=force_short_retention,
        now_ms=int(time.time() * 1000),
        state=handle.icechunk_state(),
    )
    return run(
        planned,
        storage_options,
        executor=executor,
        dry_run=dry_run,
        progress=progress,
        description=f"lakeops orphans {root}",
        quarantine_run=quarantine_run,
        started=started,
    )
