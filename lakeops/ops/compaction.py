r"""Compaction, format-neutral: plan by detected format, run and commit the plan, report.

:func:`plan` returns the format's plan (:class:`lakeops.delta.maintenance.compaction.CompactionPlan`,
:class:`lakeops.iceberg.maintenance.compaction.CompactionPlan`), both
:class:`~lakeops.plan.MaintenancePlan`\ s; :func:`run` executes it through :mod:`lakeops.ops.batches` and
folds each commit into one :class:`CompactionReport`. Delta commits once (``OPTIMIZE``) and Iceberg
once (a ``replace`` snapshot), or both every few groups (``partial_progress``), so a long compaction
keeps what it finished if it is interrupted (:class:`~lakeops.errors.PartiallyCommitted` says what).

A commit that loses a race retries on the new version, at most ``commit_retries`` times within
``commit_timeout``, dropping the groups the winning commits invalidated and committing the rest; the
report counts attempts, retries and dropped groups (with why), and the dropped groups' new files are
deleted once the commit landed.

Icechunk packing (:mod:`lakeops.ops.icechunk.compaction`, a :class:`~lakeops.plan.MaintenancePlan`
that commits every bin at once) runs through the same :func:`run`; a :class:`Telling` says how each
family of formats is told (its progress lines and its report: Delta and Iceberg a
:class:`CompactionReport`, Icechunk an ``IcechunkCompactionReport``).
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING, Any, TypeVar

from rich.console import Console

from lakeops.delta.maintenance.options import DeltaCompactionOptions
from lakeops.errors import LakeopsError, PartiallyCommitted
from lakeops.executors import Executor
from lakeops.iceberg.maintenance.options import IcebergCompactionOptions
from lakeops.icechunk.maintenance.options import IcechunkPackingOptions
from lakeops.ops.batches import Batch, Telling, run_batches
from lakeops.ops.bounded import first_groups
from lakeops.ops.options import CompactionOptions
from lakeops.ops.report import Report, label, version_text
from lakeops.ops.table import Table, as_table
from lakeops.ops.target import DeltaTarget, IcebergTarget, IcechunkTarget
from lakeops.plan import MaintenancePlan, RewritePlan
from lakeops.storage import StorageOptions
from lakeops.units import format_size

__all__ = ["CompactionOptions", "CompactionReport", "dry_run_report", "execute", "plan", "run"]

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from lakeops.delta.maintenance import compaction as delta_compaction
    from lakeops.iceberg.maintenance import compaction as iceberg_compaction
    from lakeops.icechunk.maintenance.packing import PackingPlan
    from lakeops.ops.icechunk.compaction import IcechunkCompactionReport

    Plan = delta_compaction.CompactionPlan | iceberg_compaction.CompactionPlan
    #: Any format's compaction plan (Icechunk's packs chunks).
    AnyPlan = Plan | PackingPlan
    Group = delta_compaction.RewriteGroup | iceberg_compaction.RewriteGroup
    Result = delta_compaction.RewriteResult | iceberg_compaction.RewriteResult


#: Report fields that only a run that wrote files fills in.
_RUN_ONLY = (
    "files_added",
    "bytes_added",
    "rows_read",
    "rows_written",
    "rows_dropped_by_dv",
    "rows_removed_by_deletes",
    "commit_attempts",
    "commit_retries",
    "commits",
    "groups_dropped_by_conflict",
)


class CompactionReport(Report):
    operation: str = "compact"
    target_file_size: int = 0
    live_files_before: int = 0
    live_bytes_before: int = 0
    candidate_files: int = 0
    groups: int = 0
    partitions_compacted: int = 0
    files_removed: int = 0
    bytes_removed: int = 0
    files_added: int = 0
    bytes_added: int = 0
    rows_read: int = 0
    rows_written: int = 0
    rows_dropped_by_dv: int = 0
    #: Iceberg: rows removed because position or equality deletes applied to them.
    rows_removed_by_deletes: int = 0
    delete_files_removed: int = 0
    live_files_after: int = 0
    commit_attempts: int = 0
    #: Attempts after a lost race (each rebased on the commits that landed first).
    commit_retries: int = 0
    commits: int = 0
    #: Groups left out of the commit because a commit landing first removed or changed their files;
    #: ``conflicts`` says why for each.
    groups_dropped_by_conflict: int = 0
    conflicts: list[str] = []
    snapshot_id: int | None = None
    #: Iceberg: the snapshot the plan read (``snapshot_id`` becomes the last one committed).
    base_snapshot_id: int | None = None
    #: A dry run's estimate of what the run would write (None after a real run: it wrote what it reports).
    files_added_estimate: int | None = None
    bytes_added_estimate: int | None = None

    def summary_lines(self) -> list[tuple[str, str]]:
        """A dry run's rows without the counts only a run has (rows read and written, commits)."""
        lines = super().summary_lines()
        if not self.dry_run:
            return lines
        run_only = {label(name) for name in _RUN_ONLY}
        return [(text, value) for text, value in lines if text not in run_only]

    @property
    def state_version(self) -> str | None:
        """Iceberg: the snapshot id (the last committed, else the one read); Delta: the version."""
        return version_text(self.snapshot_id) or super().state_version

    @property
    def row_count(self) -> int | None:
        return self.rows_written


def plan(
    table: Table | str,
    options: CompactionOptions,
    storage_options: StorageOptions,
    *,
    executor: Executor | None = None,
    progress: Console | None = None,
) -> AnyPlan:
    """Read the table at its latest version and plan the rewrite (each format's code imported when
    its table is met). Iceberg: more than ``options.manifest_threshold`` data manifests are read by
    ``executor`` (:mod:`lakeops.iceberg.manifest_reads`); without one, all in driver threads. The
    table's state is read through its handle (once per handle)."""
    handle = as_table(table, options, storage_options)
    target = handle.target
    match target:
        case IcebergTarget(ref=ref):
            from lakeops.iceberg.maintenance import compaction as iceberg_compaction

            iceberg_options = options.for_format(IcebergCompactionOptions, str(target))
            loaded = handle.iceberg_table()
            reader = None
            if executor is not None:
                from lakeops.iceberg.manifest_reads import DEFAULT_MANIFEST_THRESHOLD, executor_reader

                threshold = iceberg_options.manifest_threshold
                reader = executor_reader(
                    executor,
                    location=loaded.metadata.location,
                    storage_options=storage_options,
                    threshold=DEFAULT_MANIFEST_THRESHOLD if threshold is None else threshold,
                    label=f"lakeops compact {ref}",
                    progress=progress or Console(quiet=True),
                )
            return first_groups(
                iceberg_compaction.plan_compaction(loaded, iceberg_options, storage_options, reader=reader),
                options.max_rewrite_bytes,
                lambda group: (group.spec_id, json.dumps(group.partition, sort_keys=True, default=str)),
            )
        case DeltaTarget(location=location):
            from lakeops.delta.maintenance import compaction as delta_compaction

            # Planning reads no statistic but numRecords (rows per output file, DV purges).
            snapshot = handle.delta_snapshot("row_counts")
            return first_groups(
                delta_compaction.plan_compaction(
                    snapshot, options.for_format(DeltaCompactionOptions, location), storage_options
                ),
                options.max_rewrite_bytes,
                lambda group: tuple(sorted(group.partition_values.items())),
            )
        case IcechunkTarget(location=location):
            from lakeops.ops.icechunk import compaction as icechunk_compaction  # each format's code when it is met

            packing = icechunk_compaction.plan(handle, options.for_format(IcechunkPackingOptions, location))
            return first_groups(packing, options.max_rewrite_bytes)


def execute(
    table: Table | str,
    options: CompactionOptions,
    storage_options: StorageOptions,
    *,
    dry_run: bool,
    executor: Executor,
    progress: Console,
) -> CompactionReport | IcechunkCompactionReport:
    """Plan, rewrite the groups (Icechunk: pack the bins) on ``executor``, commit (in batches with
    partial progress), report; ``dry_run`` stops after the plan. The plan is made from the handle's
    state, with the format detected once."""
    handle = as_table(table, options, storage_options)
    target = handle.target
    started = time.monotonic()
    if isinstance(target, IcechunkTarget):
        branch = options.for_format(IcechunkPackingOptions, target.location).branch
        progress.print(f"planning chunk packing of {handle.root} (branch {branch}) ...")
        description = f"lakeops compact {handle.root} @ {branch}"
    else:
        progress.print(f"planning compaction of {handle} ...")
        description = f"lakeops compact {handle}"
    planned = plan(handle, options, storage_options, executor=executor, progress=progress)
    if _packs(planned):
        from lakeops.ops.icechunk import compaction as icechunk_compaction

        telling = icechunk_compaction.TELLING
        return _run(planned, telling, storage_options, executor, progress, description, started, execute=dry_run)
    return _run(planned, REWRITES, storage_options, executor, progress, description, started, execute=dry_run)


def run(
    plan: AnyPlan,
    storage_options: StorageOptions,
    *,
    executor: Executor,
    progress: Console,
    description: str,
    started: float | None = None,
) -> CompactionReport | IcechunkCompactionReport:
    """Rewrite the plan's groups (Icechunk: pack its bins) on ``executor`` and commit them (in batches
    with partial progress); ``started``: when the run began (``time.monotonic()``), for the report's
    duration."""
    started = time.monotonic() if started is None else started
    if _packs(plan):
        from lakeops.ops.icechunk import compaction as icechunk_compaction

        return _run(plan, icechunk_compaction.TELLING, storage_options, executor, progress, description, started)
    return _run(plan, REWRITES, storage_options, executor, progress, description, started)


PlanT = TypeVar("PlanT", bound=MaintenancePlan[Any, Any])
ReportT = TypeVar("ReportT", bound="CompactionReport | IcechunkCompactionReport")


def _packs(plan: AnyPlan) -> TypeIs[PackingPlan]:
    """Whether ``plan`` is Icechunk's packing (told by :mod:`lakeops.ops.icechunk.compaction`)."""
    return plan.format == "icechunk"


def _run(
    plan: PlanT,
    telling: Telling[PlanT, ReportT],
    storage_options: StorageOptions,
    executor: Executor,
    progress: Console,
    description: str,
    started: float,
    *,
    execute: bool | None = None,
) -> ReportT:
    """:func:`run`, told as ``telling`` says; a failure after some batches committed is
    :class:`~lakeops.errors.PartiallyCommitted`, with the report of those. ``execute`` (from
    :func:`execute`: whether it is a dry run) prints the plan's line first, and a dry run stops there."""
    if execute is not None:
        progress.print(telling.planned(plan))
        if execute:
            return telling.report(plan, started, True)
    report = telling.report(plan, started, False)
    versions: list[str] = []
    try:
        for batch in run_batches(
            plan, executor, storage_options, action=telling.action, description=description, progress=progress
        ):
            report = telling.fold(report, batch, started)
            if batch.outcome.committed:
                versions.append(str(report.state_version))
                if telling.announce:
                    progress.print(f"committed version {report.committed_version}")
    except LakeopsError as exc:
        if not versions:
            raise
        batches = len(plan.commit_batches())
        raise PartiallyCommitted(
            f"{plan.table_label()}: {len(versions)} of {batches} commit batches landed "
            f"({plan.version_noun} {', '.join(versions)}; "
            f"{report.files_removed} files rewritten into {report.files_added}) "
            f"before a later batch failed: {exc}",
            report,
        ) from exc
    return report


def _base_report(plan: RewritePlan, started: float, dry_run: bool) -> CompactionReport:
    return CompactionReport(
        format=plan.format,
        table=plan.table_label(),
        dry_run=dry_run,
        read_version=plan.read_version,
        snapshot_id=plan.snapshot_id,
        base_snapshot_id=plan.snapshot_id,
        target_file_size=plan.target_file_size,
        live_files_before=plan.live_files,
        live_bytes_before=plan.live_bytes,
        candidate_files=plan.candidate_files,
        groups=len(plan.groups),
        partitions_compacted=plan.partitions_compacted,
        files_removed=plan.input_files,
        bytes_removed=plan.input_bytes,
        live_files_after=plan.live_files,
        duration_s=time.monotonic() - started,
    )


def _started_report(plan: RewritePlan, started: float) -> CompactionReport:
    """The report before any batch committed: nothing removed yet."""
    return _base_report(plan, started, dry_run=False).model_copy(update={"files_removed": 0, "bytes_removed": 0})


def dry_run_report(plan: RewritePlan, started: float) -> CompactionReport:
    """What the run would rewrite, without writing anything, and what it would write: an estimate,
    as each group writes at least one file and none beyond the target size (deletes applied on the
    way may make the output smaller)."""
    report = _base_report(plan, started, dry_run=True)
    files = max(len(plan.groups), math.ceil(plan.input_bytes / plan.target_file_size)) if plan.groups else 0
    return report.model_copy(
        update={
            "delete_files_removed": len(plan.dangling_deletes),
            "files_added_estimate": files,
            "bytes_added_estimate": plan.input_bytes if plan.groups else 0,
            "live_files_after": plan.live_files - plan.input_files + files,
        }
    )


def _rewrite_report(plan: RewritePlan, started: float, dry_run: bool) -> CompactionReport:
    return dry_run_report(plan, started) if dry_run else _started_report(plan, started)


def _planned(plan: RewritePlan) -> str:
    return (
        f"{plan.input_files} of {plan.live_files} files ({format_size(plan.input_bytes)}) "
        f"in {len(plan.groups)} groups to rewrite"
    )


def _fold(report: CompactionReport, batch: Batch[Any, Any], started: float) -> CompactionReport:
    """``report`` with one committed batch added: what it removed and wrote, its attempts and drops."""
    outcome = batch.outcome
    groups, results = batch.kept()
    removed_files = sum(len(g.files) for g in groups)
    files_added = sum(len(r.written) for r in results)
    committed = outcome.committed
    return report.model_copy(
        update={
            "committed_version": outcome.version if committed else report.committed_version,
            "snapshot_id": outcome.snapshot_id if committed else report.snapshot_id,
            "delete_files_removed": report.delete_files_removed + outcome.metrics.get("delete_files_removed", 0),
            "commits": report.commits + (1 if committed else 0),
            "commit_attempts": report.commit_attempts + outcome.attempts,
            "commit_retries": report.commit_retries + max(outcome.attempts - 1, 0),
            "groups_dropped_by_conflict": report.groups_dropped_by_conflict + len(outcome.dropped),
            "conflicts": report.conflicts + [outcome.dropped[i] for i in sorted(outcome.dropped)],
            "warnings": report.warnings + list(outcome.warnings),
            "files_removed": report.files_removed + removed_files,
            "bytes_removed": report.bytes_removed + sum(g.bytes for g in groups),
            "files_added": report.files_added + files_added,
            "bytes_added": report.bytes_added + sum(r.bytes_written for r in results),
            "rows_read": report.rows_read + sum(r.rows_read for r in results),
            "rows_written": report.rows_written + sum(r.rows_written for r in results),
            "rows_dropped_by_dv": report.rows_dropped_by_dv + sum(r.rows_dropped_by_dv for r in results),
            "rows_removed_by_deletes": report.rows_removed_by_deletes + sum(r.rows_deleted for r in results),
            "live_files_after": report.live_files_after - removed_files + files_added,
            "duration_s": time.monotonic() - started,
        }
    )


#: How Delta and Iceberg compaction is told: file groups rewritten, each commit's version announced.
REWRITES: Telling[Plan, CompactionReport] = Telling(
    action="rewriting groups", planned=_planned, report=_rewrite_report, fold=_fold
)
