"""Checkpoint, format-neutral: plan by detected format, the part task Spark runs, finalize and report.

Delta: ``n.checkpoint.parquet`` (or ``n.checkpoint.o.p.parquet`` parts) and ``_last_checkpoint``
(see :mod:`lakeops.delta.maintenance.checkpoint`). Icechunk has no checkpoints: its report says
"not applicable". Iceberg (manifest rewriting) is not available yet.

Spark jobs call :func:`plan`; a plan of one part is written on the driver (:func:`write_on_driver`,
no Spark needed), several parts run :func:`task_for` on every unit of ``plan.parts``; then
:func:`finalize` writes the pointer and reports.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lakeops.delta.maintenance import checkpoint as delta_checkpoint
from lakeops.delta.maintenance.checkpoint import (
    CheckpointOptions,
    CheckpointPart,
    CheckpointPlan,
    PartWritten,
)
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import UnsupportedFeature
from lakeops.ops.detect import detect_format
from lakeops.ops.report import Report
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize

__all__ = [
    "CheckpointOptions",
    "CheckpointPart",
    "CheckpointPlan",
    "CheckpointReport",
    "PartWritten",
    "finalize",
    "not_applicable_report",
    "plan",
    "task_for",
    "unwritten_report",
    "write_on_driver",
]


class CheckpointReport(Report):
    operation: str = "checkpoint"
    #: ``written``, ``already checkpointed``, ``planned`` (dry run) or ``not applicable``.
    status: str = "written"
    version: int | None = None
    latest_version: int | None = None
    previous_checkpoint_version: int | None = None
    parts: int = 0
    actions: int = 0
    add_files: int = 0
    remove_tombstones: int = 0
    expired_tombstones: int = 0
    txns: int = 0
    expired_txns: int = 0
    bytes: int = 0
    last_checkpoint_updated: bool = False


def plan(location: str, options: CheckpointOptions, storage_options: StorageOptions) -> CheckpointPlan | None:
    """Read the table at ``options.version`` (default the latest) and plan its checkpoint; None for
    a format without checkpoints (Icechunk)."""
    location = normalize(location)
    storage = open_storage(location, storage_options)
    fmt = detect_format(storage, location)
    if fmt == "icechunk":
        return None
    if fmt != "delta":
        raise UnsupportedFeature(f"{location}: checkpoints of {fmt} tables are not available yet")
    snapshot = load_snapshot(storage, location, version=options.version)
    return delta_checkpoint.plan_checkpoint(snapshot, options, storage_options)


def task_for(plan: CheckpointPlan) -> Callable[[CheckpointPart], PartWritten]:
    """The pure function a Spark task applies to one unit of ``plan.parts``."""
    return delta_checkpoint.write_part


def write_on_driver(plan: CheckpointPlan) -> list[PartWritten]:
    """Write every part in this process, without Spark (what one part needs)."""
    return delta_checkpoint.write_parts_on_driver(plan)


def _report(plan: CheckpointPlan, started: float, *, status: str, dry_run: bool) -> CheckpointReport:
    return CheckpointReport(
        format="delta",
        table=plan.table_root,
        dry_run=dry_run,
        read_version=plan.version,
        status=status,
        version=plan.version,
        latest_version=plan.latest_version,
        previous_checkpoint_version=plan.previous_checkpoint_version,
        parts=len(plan.parts),
        actions=plan.actions,
        add_files=plan.add_files,
        remove_tombstones=plan.remove_tombstones,
        expired_tombstones=plan.expired_tombstones,
        txns=plan.txns,
        expired_txns=plan.expired_txns,
        duration_s=time.monotonic() - started,
    )


def unwritten_report(plan: CheckpointPlan, started: float, *, dry_run: bool) -> CheckpointReport:
    """What a dry run would write, or why nothing was written (a complete checkpoint exists)."""
    status = "already checkpointed" if not plan.parts else "planned"
    return _report(plan, started, status=status, dry_run=dry_run)


def not_applicable_report(location: str, started: float, *, dry_run: bool = False) -> CheckpointReport:
    """Icechunk has no checkpoints: each commit writes a complete snapshot."""
    return CheckpointReport(
        format="icechunk",
        table=normalize(location),
        dry_run=dry_run,
        status="not applicable",
        duration_s=time.monotonic() - started,
    )


def finalize(
    plan: CheckpointPlan, written: list[PartWritten], storage_options: StorageOptions, started: float
) -> CheckpointReport:
    """Point ``_last_checkpoint`` at the parts just written and report."""
    pointer = delta_checkpoint.finalize_checkpoint(plan, written, storage_options)
    return _report(plan, started, status="written", dry_run=False).model_copy(
        update={
            "bytes": sum(w.bytes for w in written),
            "last_checkpoint_updated": pointer is not None,
            "duration_s": time.monotonic() - started,
        }
    )
