"""Checkpoint, format-neutral: plan by detected format, run and commit the plan, report.

Delta: ``n.checkpoint.parquet`` (or ``n.checkpoint.o.p.parquet`` parts) and ``_last_checkpoint``
(see :mod:`lakeops.delta.maintenance.checkpoint`). Iceberg: the current snapshot's small manifests
merged into few, committed as a ``replace`` snapshot (see
:mod:`lakeops.iceberg.maintenance.rewrite_manifests`). Icechunk has no checkpoints: its report says
"not applicable". Both plans are :class:`~lakeops.plan.MaintenancePlan`\\ s that :func:`run` drives
through :mod:`lakeops.ops.batches`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Console

from lakeops.delta.maintenance.options import DeltaCheckpointOptions
from lakeops.errors import InvalidArgument
from lakeops.executors import Executor
from lakeops.iceberg.maintenance.options import IcebergManifestOptions
from lakeops.ops.batches import run_batches
from lakeops.ops.options import CheckpointOptions
from lakeops.ops.report import Report, label, version_text
from lakeops.ops.table import Table, as_table
from lakeops.ops.target import DeltaTarget, IcebergTarget, IcechunkTarget
from lakeops.plan import CommitOutcome
from lakeops.storage import StorageOptions
from lakeops.storage.uri import normalize

if TYPE_CHECKING:
    from lakeops.delta.maintenance.checkpoint import CheckpointPlan
    from lakeops.iceberg.maintenance.rewrite_manifests import RewriteManifestsPlan

    Plan = CheckpointPlan | RewriteManifestsPlan

__all__ = [
    "CheckpointOptions",
    "CheckpointReport",
    "execute",
    "not_applicable_report",
    "plan",
    "run",
    "unwritten_report",
]

NOT_APPLICABLE = "not applicable"


#: The report's fields that only a Delta checkpoint has.
_DELTA_ONLY = (
    "latest_version",
    "previous_checkpoint_version",
    "parts",
    "actions",
    "add_files",
    "remove_tombstones",
    "expired_tombstones",
    "txns",
    "expired_txns",
    "last_checkpoint_updated",
)


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
    #: Iceberg (None for Delta): the current snapshot's manifests before and after, those replaced
    #: (and their bytes; ``bytes`` is what the new manifests take) and created, and the entries moved.
    snapshot_id: int | None = None
    manifests_before: int | None = None
    manifests_after: int | None = None
    manifests_replaced: int | None = None
    manifests_created: int | None = None
    entries: int | None = None
    replaced_bytes: int | None = None
    commit_attempts: int | None = None

    #: Why nothing was checkpointed, when ``status`` is ``not applicable``.
    reason: str | None = None

    @property
    def state_version(self) -> str | None:
        """Iceberg: the snapshot id (the last committed, else the one read); Delta: the version."""
        return version_text(self.snapshot_id) or super().state_version

    def summary_lines(self) -> list[tuple[str, str]]:
        """Only the format's own rows (an Iceberg manifest rewrite has no parts, transactions or
        ``_last_checkpoint``); without a checkpoint to describe, why instead of zero counts."""
        lines = super().summary_lines()
        if self.format != "delta":
            delta_only = {label(name) for name in _DELTA_ONLY}
            lines = [(text, value) for text, value in lines if text not in delta_only]
        if self.status != NOT_APPLICABLE:
            return lines
        counts = {label(name) for name in self.metrics()} - {"duration"}
        return [(text, value) for text, value in lines if text not in counts]


def plan(table: Table | str, options: CheckpointOptions, storage_options: StorageOptions) -> Plan | None:
    """Plan the checkpoint: Delta at ``options.version`` (default the latest), Iceberg of its
    current snapshot; None for a format without checkpoints (Icechunk). Each format's code is imported
    when its table is met; the table's state is read through its handle."""
    handle = as_table(table, options, storage_options)
    target = handle.target
    match target:
        case IcechunkTarget():
            options.refuse_foreign(str(target))
            return None
        case IcebergTarget():
            if options.version is not None:
                raise InvalidArgument(
                    f"{target}: --version is Delta's; an Iceberg checkpoint rewrites the current snapshot"
                )
            from lakeops.iceberg.maintenance import rewrite_manifests

            manifests = options.for_format(IcebergManifestOptions, str(target))
            iceberg_options = rewrite_manifests.RewriteManifestsOptions(
                target_manifest_size=manifests.target_manifest_size, rewrite_all=manifests.rewrite_all
            )
            return rewrite_manifests.plan_rewrite_manifests(handle.iceberg_table(), iceberg_options, storage_options)
        case DeltaTarget(location=location):
            from lakeops.delta.maintenance import checkpoint as delta_checkpoint

            own = options.for_format(DeltaCheckpointOptions, location)
            # A large table's snapshot holds keys only: its checkpoint reads the full rows again, part by
            # part (two passes). A full snapshot the handle holds already serves either way.
            listing = handle.delta_listing()
            two = delta_checkpoint.two_passes(listing, location, own.version)
            if own.version is None:
                snapshot = handle.delta_snapshot("keys" if two else "full")
            else:
                from lakeops.delta.snapshot import load_snapshot

                snapshot = load_snapshot(
                    handle.storage(), location, version=own.version, listing=listing, keys_only=two
                )
            delta_options = delta_checkpoint.CheckpointOptions(
                version=own.version, part_size=own.part_size, force=own.force
            )
            return delta_checkpoint.plan_checkpoint(snapshot, delta_options, storage_options)


def _report(plan: Plan, started: float, *, status: str, dry_run: bool) -> CheckpointReport:
    common = {
        "format": plan.format,
        "table": plan.table_label(),
        "dry_run": dry_run,
        "status": status,
        "duration_s": time.monotonic() - started,
    }
    return CheckpointReport.model_validate(common | plan.report_fields())


def unwritten_report(plan: Plan, started: float, *, dry_run: bool) -> CheckpointReport:
    """What a dry run would write, or why nothing was written (a complete checkpoint exists; no
    Iceberg manifests to merge)."""
    return _report(plan, started, status=plan.idle_status, dry_run=dry_run)


def not_applicable_report(location: str, started: float, *, dry_run: bool = False) -> CheckpointReport:
    """Icechunk has no checkpoints: each commit writes a complete snapshot."""
    return CheckpointReport(
        format="icechunk",
        table=normalize(location),
        dry_run=dry_run,
        status=NOT_APPLICABLE,
        reason="an Icechunk snapshot is complete in itself: there is no log to checkpoint",
        duration_s=time.monotonic() - started,
    )


def run(
    plan: Plan,
    storage_options: StorageOptions,
    *,
    executor: Executor,
    progress: Console,
    description: str,
    started: float | None = None,
) -> CheckpointReport:
    """Write the units (in this process or on ``executor``), then ``_last_checkpoint`` (Delta) or the
    ``replace`` commit (Iceberg; a conflict deletes the new manifests and is raised); report."""
    started = time.monotonic() if started is None else started
    (batch,) = run_batches(
        plan,
        executor,
        storage_options,
        action=f"writing {plan.unit_noun}",
        description=description,
        progress=progress,
    )
    return _committed_report(plan, batch.outcome, started, progress)


def _committed_report(plan: Plan, outcome: CommitOutcome, started: float, progress: Console) -> CheckpointReport:
    if not outcome.committed:
        return unwritten_report(plan, started, dry_run=False)
    progress.print(plan.describe_commit(outcome))
    committed = (
        {"committed_version": outcome.version, "commit_attempts": outcome.attempts}
        if outcome.version is not None
        else {}
    )
    return _report(plan, started, status=plan.done_status, dry_run=False).model_copy(
        update={
            **committed,
            **({"snapshot_id": outcome.snapshot_id} if outcome.snapshot_id is not None else {}),
            **outcome.metrics,
            "duration_s": time.monotonic() - started,
        }
    )


def execute(
    table: Table | str,
    options: CheckpointOptions,
    storage_options: StorageOptions,
    *,
    dry_run: bool,
    executor: Executor,
    progress: Console,
) -> CheckpointReport:
    """Plan, write the units (in this process or on ``executor``), then ``_last_checkpoint`` (Delta) or
    the commit (Iceberg); Icechunk says "not applicable"."""
    started = time.monotonic()
    handle = as_table(table, options, storage_options)
    progress.print(f"planning checkpoint of {handle} ...")
    planned = plan(handle, options, storage_options)
    if planned is None:
        return not_applicable_report(handle.address, started, dry_run=dry_run)
    progress.print(planned.describe())
    if dry_run or not planned.has_work:
        return unwritten_report(planned, started, dry_run=dry_run)
    return run(
        planned,
        storage_options,
        executor=executor,
        progress=progress,
        description=f"lakeops checkpoint {handle}",
        started=started,
    )
