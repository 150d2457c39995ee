"""Icechunk compaction (``lakeops compact REPO``): small chunk objects of a branch tip packed into
shared chunk files on the caller's executor, then one commit of the branch
(:mod:`lakeops.icechunk.maintenance.packing` for the seed format,
:mod:`lakeops.icechunk.maintenance.versioned_packing` for Icechunk formats 1 and 2)."""

from __future__ import annotations

import time

from rich.console import Console

from lakeops.executors import Executor
from lakeops.icechunk.maintenance import packing, versioned_packing
from lakeops.icechunk.maintenance.packing import PackingPlan
from lakeops.icechunk.versioned import format_version
from lakeops.ops.batches import run_batches
from lakeops.ops.bounded import first_groups
from lakeops.ops.report import Report, version_text
from lakeops.storage import Storage, StorageOptions, open_storage
from lakeops.storage.uri import normalize
from lakeops.units import format_size

__all__ = ["IcechunkCompactionReport", "compact", "dry_run_report", "plan", "run"]


class IcechunkCompactionReport(Report):
    """Chunk objects packed (``files_*``: chunk objects) and the snapshot committed."""

    operation: str = "compact"
    branch: str = "main"
    base_snapshot: str = ""
    committed_snapshot: str | None = None
    target_file_size: int = 0
    arrays: int = 0
    arrays_compacted: int = 0
    native_chunks: int = 0
    chunks_packed: int = 0
    live_files_before: int = 0
    live_bytes_before: int = 0
    candidate_files: int = 0
    groups: int = 0
    files_removed: int = 0
    bytes_removed: int = 0
    files_added: int = 0
    bytes_added: int = 0
    live_files_after: int = 0
    commit_attempts: int = 0

    @property
    def state_version(self) -> str | None:
        """The snapshot committed, else the one the plan read."""
        return version_text(self.committed_snapshot or self.base_snapshot)


def plan(
    location: str,
    storage: Storage,
    storage_options: StorageOptions,
    *,
    branch: str,
    target_file_size: int | None,
    min_input_files: int,
) -> PackingPlan:
    """Plan the packing of ``branch``'s tip (``target_file_size`` None: the default pack size), in
    whichever format the repository is."""
    planner = (
        packing.plan_packing if format_version(storage, location) is None else versioned_packing.plan_versioned_packing
    )
    return planner(
        storage,
        location,
        storage_options,
        branch=branch,
        target_file_size=target_file_size,
        min_input_files=min_input_files,
    )


def _report(plan: PackingPlan, started: float, *, dry_run: bool) -> IcechunkCompactionReport:
    return IcechunkCompactionReport(
        format=plan.format,
        table=plan.table_root,
        dry_run=dry_run,
        read_version=plan.read_version,
        branch=plan.branch,
        base_snapshot=plan.base_snapshot,
        target_file_size=plan.target_file_size,
        arrays=plan.arrays,
        arrays_compacted=plan.arrays_compacted,
        native_chunks=plan.native_chunks,
        chunks_packed=sum(len(u.chunks) for u in plan.groups),
        live_files_before=plan.live_files,
        live_bytes_before=plan.live_bytes,
        candidate_files=plan.candidate_files,
        groups=len(plan.groups),
        files_removed=plan.input_files,
        bytes_removed=plan.input_bytes,
        live_files_after=plan.live_files,
        duration_s=time.monotonic() - started,
    )


def dry_run_report(plan: PackingPlan, started: float) -> IcechunkCompactionReport:
    """What the run would pack, without writing anything."""
    return _report(plan, started, dry_run=True)


def run(
    plan: PackingPlan,
    storage_options: StorageOptions,
    *,
    executor: Executor,
    progress: Console,
    description: str,
    started: float | None = None,
) -> IcechunkCompactionReport:
    """Pack the plan's bins on ``executor`` and commit the branch (:mod:`lakeops.ops.batches`: on a definite
    conflict the new chunk files are deleted and the error raised; on any other failure nothing is
    deleted, ``orphans`` removes them past its floor). A plan without bins commits nothing."""
    started = time.monotonic() if started is None else started
    report = _report(plan, started, dry_run=False)
    for batch in run_batches(
        plan, executor, storage_options, action="packing chunk files", description=description, progress=progress
    ):
        report = report.model_copy(
            update={
                "committed_version": batch.outcome.version,
                "committed_snapshot": batch.outcome.snapshot_id,
                "commit_attempts": batch.outcome.attempts,
                "files_added": len(batch.results),
                "bytes_added": sum(r.size for r in batch.results),
                "live_files_after": plan.live_files - plan.input_files + len(batch.results),
                "duration_s": time.monotonic() - started,
            }
        )
    return report


def compact(
    location: str,
    *,
    branch: str,
    target_file_size: int | None,
    min_input_files: int,
    max_rewrite_bytes: int | None = None,
    dry_run: bool,
    storage_options: StorageOptions,
    executor: Executor,
    progress: Console,
) -> IcechunkCompactionReport:
    """Plan the packing of the repository at ``location`` and, unless ``dry_run``, run it on ``executor``."""
    started = time.monotonic()
    root = normalize(location)
    progress.print(f"planning chunk packing of {root} (branch {branch}) ...")
    planned = first_groups(
        plan(
            root,
            open_storage(root, storage_options),
            storage_options,
            branch=branch,
            target_file_size=target_file_size,
            min_input_files=min_input_files,
        ),
        max_rewrite_bytes,
    )
    progress.print(
        f"sequence {planned.read_version}: {planned.native_chunks} native chunks in {planned.live_files} objects; "
        f"{planned.input_files} objects ({format_size(planned.input_bytes)}) to pack into {len(planned.groups)} files"
    )
    if dry_run:
        return dry_run_report(planned, started)
    description = f"lakeops compact {root} @ {planned.branch}"
    return run(planned, storage_options, executor=executor, progress=progress, description=description, started=started)
