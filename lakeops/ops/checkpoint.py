"""Checkpoint, format-neutral: plan by detected format, the unit task Spark runs, finalize and report.

Delta: ``n.checkpoint.parquet`` (or ``n.checkpoint.o.p.parquet`` parts) and ``_last_checkpoint``
(see :mod:`lakeops.delta.maintenance.checkpoint`). Iceberg: the current snapshot's small manifests
merged into few, committed as a ``replace`` snapshot (see
:mod:`lakeops.iceberg.maintenance.rewrite_manifests`). Icechunk has no checkpoints: its report says
"not applicable".

Spark jobs call :func:`plan`; :func:`needs_spark` says whether the units (:func:`units`) run as Spark
tasks (:func:`task_for`) or, a Delta checkpoint of one part, on the driver (:func:`write_on_driver`);
then :func:`finalize` writes the pointer (Delta) or commits (Iceberg) and reports.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lakeops.delta.maintenance import checkpoint as delta_checkpoint
from lakeops.delta.maintenance.checkpoint import (
    DEFAULT_PART_SIZE,
    CheckpointPart,
    CheckpointPlan,
    PartWritten,
)
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import InvalidArgument
from lakeops.iceberg.maintenance import rewrite_manifests
from lakeops.iceberg.maintenance.rewrite_manifests import (
    RewriteManifestsOptions,
    RewriteManifestsPlan,
    WrittenManifest,
)
from lakeops.iceberg.table import load_table
from lakeops.ops.report import Report, version_text
from lakeops.ops.target import CatalogOptions, resolve_target
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize

__all__ = [
    "CheckpointOptions",
    "CheckpointPart",
    "CheckpointPlan",
    "CheckpointReport",
    "PartWritten",
    "Plan",
    "RewriteManifestsPlan",
    "WrittenManifest",
    "discard",
    "finalize",
    "needs_spark",
    "not_applicable_report",
    "plan",
    "result_type",
    "task_for",
    "units",
    "unwritten_report",
    "write_on_driver",
]

Plan = CheckpointPlan | RewriteManifestsPlan
Written = PartWritten | WrittenManifest


class CheckpointOptions(CatalogOptions):
    """Every format's checkpoint options; each format reads its own.

    Delta: ``version`` (default the latest), ``part_size`` (most actions per part), ``force``
    (rewrite an existing checkpoint). Iceberg (names as its ``rewrite_manifests``):
    ``target_manifest_size`` (default ``commit.manifest.target-size-bytes``, else 8 MB),
    ``rewrite_all`` (manifests at or above the target too).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int | None = Field(default=None, ge=0)
    part_size: int = Field(default=DEFAULT_PART_SIZE, gt=0)
    force: bool = False
    target_manifest_size: int | None = Field(default=None, gt=0)
    rewrite_all: bool = False


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

    @property
    def state_version(self) -> str | None:
        """Iceberg: the snapshot id (the last committed, else the one read); Delta: the version."""
        return version_text(self.snapshot_id) or super().state_version


def plan(table: str, options: CheckpointOptions, storage_options: StorageOptions) -> Plan | None:
    """Plan the checkpoint: Delta at ``options.version`` (default the latest), Iceberg of its
    current snapshot; None for a format without checkpoints (Icechunk)."""
    target = resolve_target(table, options, storage_options)
    if target.format == "icechunk":
        return None
    target.require("delta", "iceberg", operation="checkpoint")
    if target.iceberg is not None:
        if options.version is not None:
            raise InvalidArgument(
                f"{target}: --version is Delta's; an Iceberg checkpoint rewrites the current snapshot"
            )
        iceberg_options = RewriteManifestsOptions(
            target_manifest_size=options.target_manifest_size, rewrite_all=options.rewrite_all
        )
        loaded = load_table(target.iceberg, storage_options)
        return rewrite_manifests.plan_rewrite_manifests(loaded, iceberg_options, storage_options)
    assert target.location is not None
    snapshot = load_snapshot(open_storage(target.location, storage_options), target.location, version=options.version)
    delta_options = delta_checkpoint.CheckpointOptions(
        version=options.version, part_size=options.part_size, force=options.force
    )
    return delta_checkpoint.plan_checkpoint(snapshot, delta_options, storage_options)


def units(plan: Plan) -> Sequence[CheckpointPart] | Sequence[rewrite_manifests.OutputManifest]:
    """What the tasks write: Delta's part files, Iceberg's new manifests."""
    return plan.outputs if isinstance(plan, RewriteManifestsPlan) else plan.parts


def needs_spark(plan: Plan) -> bool:
    """Whether the units run as Spark tasks: a Delta checkpoint of one part is written on the driver."""
    if isinstance(plan, RewriteManifestsPlan):
        return bool(plan.outputs)
    return len(plan.parts) > 1


def task_for(plan: Plan) -> Callable[[Any], BaseModel]:
    """The pure function a Spark task applies to one unit of :func:`units`."""
    if isinstance(plan, RewriteManifestsPlan):
        return rewrite_manifests.write_output
    return delta_checkpoint.write_part


def result_type(plan: Plan) -> type[BaseModel]:
    return WrittenManifest if isinstance(plan, RewriteManifestsPlan) else PartWritten


def write_on_driver(plan: CheckpointPlan) -> list[PartWritten]:
    """Write every part in this process, without Spark (what one part needs)."""
    return delta_checkpoint.write_parts_on_driver(plan)


def discard(plan: Plan, written: Sequence[Written], storage_options: StorageOptions) -> int:
    """After a failed task: Iceberg deletes the manifests the other tasks wrote. Delta keeps its parts:
    an incomplete set is invisible to readers, a rerun rewrites the same names with the same content,
    and deleting them could break an identical set a concurrent run has just completed."""
    if not isinstance(plan, RewriteManifestsPlan):
        return 0
    manifests = [w for w in written if isinstance(w, WrittenManifest)]
    return rewrite_manifests.discard(plan, manifests, storage_options)


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


def _iceberg_report(plan: RewriteManifestsPlan, started: float, *, status: str, dry_run: bool) -> CheckpointReport:
    return CheckpointReport(
        format="iceberg",
        table=plan.table_name,
        dry_run=dry_run,
        status=status,
        snapshot_id=plan.snapshot_id,
        manifests_before=plan.manifests_before,
        manifests_after=plan.manifests_after,
        manifests_replaced=len(plan.replaced),
        manifests_created=len(plan.outputs),
        entries=plan.entries,
        replaced_bytes=plan.replaced_bytes,
        duration_s=time.monotonic() - started,
    )


def unwritten_report(plan: Plan, started: float, *, dry_run: bool) -> CheckpointReport:
    """What a dry run would write, or why nothing was written (a complete checkpoint exists; no
    Iceberg manifests to merge)."""
    if isinstance(plan, RewriteManifestsPlan):
        status = "planned" if plan.replaced else "nothing to rewrite"
        return _iceberg_report(plan, started, status=status, dry_run=dry_run)
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
    plan: Plan, written: Sequence[Written], storage_options: StorageOptions, started: float
) -> CheckpointReport:
    """Delta: point ``_last_checkpoint`` at the parts just written. Iceberg: commit the new
    manifests (a conflict deletes them and is raised). Then report."""
    if isinstance(plan, RewriteManifestsPlan):
        manifests = [w for w in written if isinstance(w, WrittenManifest)]
        outcome = rewrite_manifests.commit_rewrite(plan, manifests, storage_options)
        if outcome is None:
            return unwritten_report(plan, started, dry_run=False)
        committed = outcome.metadata.current_snapshot()
        assert committed is not None  # the snapshot just committed
        return _iceberg_report(plan, started, status="committed", dry_run=False).model_copy(
            update={
                "committed_version": committed.sequence_number,
                "snapshot_id": committed.snapshot_id,
                "manifests_after": int((committed.summary or {}).get("manifests-kept", 0)) + len(manifests),
                "bytes": sum(w.manifest.manifest_length for w in manifests),
                "commit_attempts": outcome.attempts,
                "duration_s": time.monotonic() - started,
            }
        )
    parts = [w for w in written if isinstance(w, PartWritten)]
    pointer = delta_checkpoint.finalize_checkpoint(plan, parts, storage_options)
    return _report(plan, started, status="written", dry_run=False).model_copy(
        update={
            "bytes": sum(w.bytes for w in parts),
            "last_checkpoint_updated": pointer is not None,
            "duration_s": time.monotonic() - started,
        }
    )
