"""Icechunk compaction (``lakeops compact REPO``): small chunk objects of a branch tip packed into
shared chunk files on the caller's executor, then one commit of the branch
(:mod:`lakeops.icechunk.maintenance.packing` for the seed format,
:mod:`lakeops.icechunk.maintenance.versioned_packing` for Icechunk formats 1 and 2). The run is
format-neutral compaction's (:func:`lakeops.ops.compaction.run`); what is Icechunk's here is the plan
from the handle's state and how the run is told (:data:`TELLING`: its progress lines and report)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from lakeops.icechunk.maintenance import packing, versioned_packing
from lakeops.icechunk.maintenance.options import IcechunkPackingOptions
from lakeops.icechunk.maintenance.packing import PackingPlan
from lakeops.ops.batches import Batch, Telling
from lakeops.ops.report import Report, version_text
from lakeops.ops.table import Table
from lakeops.units import format_size

__all__ = ["TELLING", "IcechunkCompactionReport", "PackingPlan", "plan"]


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


def plan(handle: Table, options: IcechunkPackingOptions) -> PackingPlan:
    """Plan the packing of ``options.branch``'s tip (``target_file_size`` None: the default pack size)
    from the handle's state, in whichever format the repository is."""
    state = handle.icechunk_state()
    storage, root, storage_options = handle.storage(), handle.root, handle.storage_options
    planner: Callable[..., PackingPlan]
    if state.format_version is None:
        planner = functools.partial(packing.plan_packing, repo=state.seed)
    else:
        planner = functools.partial(versioned_packing.plan_versioned_packing, repo=state.versioned)
    return planner(
        storage,
        root,
        storage_options,
        branch=options.branch,
        target_file_size=options.target_file_size,
        min_input_files=options.min_input_files,
    )


def _report(plan: PackingPlan, started: float, dry_run: bool) -> IcechunkCompactionReport:
    """The report of the plan before any commit (a dry run's whole report)."""
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


def _fold(report: IcechunkCompactionReport, batch: Batch[Any, Any], started: float) -> IcechunkCompactionReport:
    """``report`` with the plan's one commit (every bin) in it: the new chunk files and the snapshot."""
    return report.model_copy(
        update={
            "committed_version": batch.outcome.version,
            "committed_snapshot": batch.outcome.snapshot_id,
            "commit_attempts": batch.outcome.attempts,
            "files_added": len(batch.results),
            "bytes_added": sum(r.size for r in batch.results),
            "live_files_after": report.live_files_before - report.files_removed + len(batch.results),
            "duration_s": time.monotonic() - started,
        }
    )


def _planned(plan: PackingPlan) -> str:
    return (
        f"sequence {plan.read_version}: {plan.native_chunks} native chunks in {plan.live_files} objects; "
        f"{plan.input_files} objects ({format_size(plan.input_bytes)}) to pack into {len(plan.groups)} files"
    )


#: How a packing run is told: bins packed into chunk files, one commit of the branch (its sequence
#: number, not announced as a version: the report names the snapshot).
TELLING = Telling(action="packing chunk files", planned=_planned, report=_report, fold=_fold, announce=False)
