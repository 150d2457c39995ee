"""Compaction, format-neutral: plan by detected format, the unit task Spark runs, commit and report.

Spark jobs call :func:`plan`, run :func:`task_for` on the units of each of :func:`batches`, then
:func:`commit` each batch; everything format-specific stays behind this module. Delta commits once
(``OPTIMIZE``); Iceberg can commit every few groups (``partial_progress``), each a ``replace``
snapshot, so a long compaction keeps what it finished if it is interrupted.

A commit that loses a race retries on the new version, at most ``commit_retries`` times within
``commit_timeout``, dropping the groups the winning commits invalidated and committing the rest; the
report counts attempts, retries and dropped groups (with why), and the dropped groups' new files are
deleted once the commit landed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lakeops.delta.maintenance import compaction as delta_compaction
from lakeops.delta.maintenance.compaction import DEFAULT_DV_PURGE_RATIO
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import CommitConflict, InvalidArgument, StorageError
from lakeops.iceberg.maintenance import compaction as iceberg_compaction
from lakeops.iceberg.table import load_table
from lakeops.ops.report import Report, version_text
from lakeops.ops.target import CatalogOptions, resolve_target
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize
from lakeops.units import parse_duration

__all__ = [
    "CompactionOptions",
    "CompactionReport",
    "batches",
    "commit",
    "discard",
    "dry_run_report",
    "plan",
    "result_type",
    "task_for",
]

Plan = delta_compaction.CompactionPlan | iceberg_compaction.CompactionPlan
Group = delta_compaction.RewriteGroup | iceberg_compaction.RewriteGroup
Result = delta_compaction.RewriteResult | iceberg_compaction.RewriteResult


class CompactionOptions(CatalogOptions):
    """Every format's compaction options; each format reads the ones it has.

    Shared: ``target_file_size`` (None: table property, else the format's default), ``min_input_files``,
    ``where`` (a partition predicate). Delta: ``dv_purge_ratio``. Iceberg (names as its
    ``rewrite_data_files``): ``min_file_size``/``max_file_size`` (default 75%/180% of the target),
    ``delete_file_threshold``, ``max_file_group_size``, ``sort`` (by the table's sort order),
    ``partial_progress`` (commit every that many groups), ``remove_dangling_deletes``. Retries of a
    commit that lost a race: ``commit_retries`` and ``commit_timeout`` (a duration such as ``"10m"``);
    None: Iceberg's ``commit.retry.num-retries`` / ``commit.retry.total-timeout-ms``, else 10 retries
    within 30 minutes (Delta).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    target_file_size: int | None = Field(default=None, gt=0)
    min_input_files: int = Field(default=5, ge=1)
    where: str | None = None
    dv_purge_ratio: float = Field(default=DEFAULT_DV_PURGE_RATIO, ge=0.0, le=1.0)
    min_file_size: int | None = Field(default=None, ge=0)
    max_file_size: int | None = Field(default=None, gt=0)
    delete_file_threshold: int | None = Field(default=None, ge=1)
    max_file_group_size: int = Field(default=iceberg_compaction.DEFAULT_MAX_FILE_GROUP_SIZE, gt=0)
    sort: bool = False
    partial_progress: int | None = Field(default=None, ge=1)
    remove_dangling_deletes: bool = True
    commit_retries: int | None = Field(default=None, ge=0)
    commit_timeout: timedelta | None = None

    @field_validator("commit_timeout", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        """``"10m"`` as the CLI and the registry write durations."""
        if not isinstance(value, str):
            return value
        try:
            return parse_duration(value)
        except InvalidArgument as exc:
            raise ValueError(str(exc)) from None

    @field_validator("commit_timeout")
    @classmethod
    def _positive(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError(f"expected a positive duration, got {value}")
        return value

    def for_format(self, model: type[BaseModel]) -> Any:
        """The subset a format's planner takes."""
        return model.model_validate({k: v for k, v in self.model_dump().items() if k in model.model_fields})


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

    @property
    def state_version(self) -> str | None:
        """Iceberg: the snapshot id (the last committed, else the one read); Delta: the version."""
        return version_text(self.snapshot_id) or super().state_version

    @property
    def row_count(self) -> int | None:
        return self.rows_written


def plan(table: str, options: CompactionOptions, storage_options: StorageOptions) -> Plan:
    """Read the table at its latest version and plan the rewrite."""
    target = resolve_target(table, options, storage_options)
    target.require("delta", "iceberg", operation="compaction")
    if target.iceberg is not None:
        loaded = load_table(target.iceberg, storage_options)
        return iceberg_compaction.plan_compaction(
            loaded, options.for_format(iceberg_compaction.IcebergCompactionOptions), storage_options
        )
    assert target.location is not None
    snapshot = load_snapshot(open_storage(target.location, storage_options), target.location)
    return delta_compaction.plan_compaction(
        snapshot, options.for_format(delta_compaction.CompactionOptions), storage_options
    )


def task_for(plan: Plan) -> Callable[[Any], BaseModel]:
    """The pure function a Spark task applies to one unit of ``plan.groups``."""
    if isinstance(plan, iceberg_compaction.CompactionPlan):
        return iceberg_compaction.rewrite_group
    return delta_compaction.rewrite_group


def result_type(plan: Plan) -> type[BaseModel]:
    if isinstance(plan, iceberg_compaction.CompactionPlan):
        return iceberg_compaction.RewriteResult
    return delta_compaction.RewriteResult


def batches(plan: Plan, partial_progress: int | None) -> list[list[Any]]:
    """The groups in commit order: all at once, or (Iceberg) ``partial_progress`` at a time."""
    groups: list[Any] = list(plan.groups)
    if not groups:
        return [[]]
    if partial_progress is None or isinstance(plan, delta_compaction.CompactionPlan):
        return [groups]
    return [groups[i : i + partial_progress] for i in range(0, len(groups), partial_progress)]


def _table_location(plan: Plan, storage_options: StorageOptions) -> str:
    if isinstance(plan, iceberg_compaction.CompactionPlan):  # an Iceberg path: literal
        return normalize(load_table(plan.table, storage_options).metadata.location, literal=True)
    return plan.table_root


def _base_report(plan: Plan, started: float, dry_run: bool) -> CompactionReport:
    common: dict[str, Any] = {
        "dry_run": dry_run,
        "target_file_size": plan.target_file_size,
        "live_files_before": plan.live_files,
        "live_bytes_before": plan.live_bytes,
        "candidate_files": plan.candidate_files,
        "groups": len(plan.groups),
        "partitions_compacted": plan.partitions_compacted,
        "files_removed": plan.input_files,
        "bytes_removed": plan.input_bytes,
        "live_files_after": plan.live_files,
        "duration_s": time.monotonic() - started,
    }
    if isinstance(plan, iceberg_compaction.CompactionPlan):
        return CompactionReport(
            format="iceberg",
            table=plan.table_name,
            read_version=plan.sequence_number,
            snapshot_id=plan.snapshot_id,
            base_snapshot_id=plan.snapshot_id,
            **common,
        )
    return CompactionReport(format="delta", table=plan.table_root, read_version=plan.read_version, **common)


def dry_run_report(plan: Plan, started: float) -> CompactionReport:
    """What the run would rewrite, without writing anything."""
    report = _base_report(plan, started, dry_run=True)
    if isinstance(plan, iceberg_compaction.CompactionPlan):
        return report.model_copy(update={"delete_files_removed": len(plan.dangling_deletes)})
    return report


def _written(plan: Plan, results: Sequence[Result]) -> list[str]:
    if isinstance(plan, iceberg_compaction.CompactionPlan):
        return iceberg_compaction.written_locations(results)  # type: ignore[arg-type]
    return delta_compaction.written_locations(results)  # type: ignore[arg-type]


def discard(plan: Plan, results: Sequence[Result], storage_options: StorageOptions) -> int:
    """Delete the files this attempt wrote (never anything else, never outside the table root)."""
    paths = _written(plan, results)
    if not paths:
        return 0
    root = _table_location(plan, storage_options)
    return open_storage(root, storage_options).delete_many(paths)


def commit(
    plan: Plan,
    groups: Sequence[Group],
    results: Sequence[Result],
    storage_options: StorageOptions,
    started: float,
    *,
    previous: CompactionReport | None = None,
    final: bool = True,
) -> CompactionReport:
    """Commit the rewritten ``groups`` (one batch) and fold the outcome into ``previous``.

    On a definite conflict the batch's new files are deleted and the error re-raised; on any other
    failure nothing is deleted (the outcome may be unknown; ``orphans`` removes unreferenced files
    later, past its age floor). Once the commit landed, the new files of groups it dropped are deleted.
    """
    report = previous or _base_report(plan, started, dry_run=False).model_copy(
        update={"files_removed": 0, "bytes_removed": 0}
    )
    try:
        if isinstance(plan, iceberg_compaction.CompactionPlan):
            # Delete files planned as dangling may still apply to the files of a group dropped earlier.
            dangling = final and not report.groups_dropped_by_conflict
            commit_fields, attempts, dropped = _commit_iceberg(
                plan, groups, results, storage_options, report, final=dangling
            )
        else:
            commit_fields, attempts, dropped = _commit_delta(plan, results, storage_options)
    except CommitConflict:
        discard(plan, results, storage_options)
        raise
    with contextlib.suppress(StorageError):  # the commit landed: orphan removal takes what is left
        discard(plan, [r for r in results if r.group_id in dropped], storage_options)
    groups = [g for g in groups if g.group_id not in dropped]
    results = [r for r in results if r.group_id not in dropped]
    removed_files = sum(len(g.files) for g in groups)
    files_added = sum(len(r.written) for r in results)
    return report.model_copy(
        update={
            **commit_fields,
            "commits": report.commits + (1 if attempts else 0),
            "commit_attempts": report.commit_attempts + attempts,
            "commit_retries": report.commit_retries + max(attempts - 1, 0),
            "groups_dropped_by_conflict": report.groups_dropped_by_conflict + len(dropped),
            "conflicts": report.conflicts + [dropped[i] for i in sorted(dropped)],
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


def _commit_iceberg(
    plan: iceberg_compaction.CompactionPlan,
    groups: Sequence[Group],
    results: Sequence[Result],
    storage_options: StorageOptions,
    report: CompactionReport,
    *,
    final: bool,
) -> tuple[dict[str, Any], int, dict[int, str]]:
    """One ``replace`` snapshot for this batch (dangling deletes go with the last one)."""
    done = iceberg_compaction.commit_groups(
        plan,
        cast(Sequence[iceberg_compaction.RewriteGroup], groups),
        cast(Sequence[iceberg_compaction.RewriteResult], results),
        storage_options,
        include_dangling=final,
    )
    if done is None:
        return {}, 0, {}
    committed = done.outcome.metadata.current_snapshot()
    assert committed is not None
    return (
        {
            "committed_version": committed.sequence_number,
            "snapshot_id": committed.snapshot_id,
            "delete_files_removed": report.delete_files_removed + done.delete_files_removed,
        },
        done.outcome.attempts,
        done.dropped,
    )


def _commit_delta(
    plan: delta_compaction.CompactionPlan, results: Sequence[Result], storage_options: StorageOptions
) -> tuple[dict[str, Any], int, dict[int, str]]:
    """One ``OPTIMIZE`` version."""
    done = delta_compaction.commit_compaction(
        plan, list(cast(Sequence[delta_compaction.RewriteResult], results)), storage_options
    )
    if done is None:
        return {"committed_version": None}, 0, {}
    return {"committed_version": done.result.version}, done.result.attempts, done.dropped
