"""The execute and commit steps of every operation, for any format's :class:`~lakeops.plan.MaintenancePlan`.

One batch: its units run on an executor (threads here, or Spark tasks), then the plan commits them.
What is deleted when, in one place: a unit that failed leaves the files of the units that finished,
deleted before the error goes up (nothing was committed); a definite conflict deletes the batch's
files; a commit that landed deletes the files of units it dropped; any other failure deletes nothing,
because the commit may have landed (orphan removal takes such files later, past its age floor).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from rich.console import Console

from lakeops.errors import CommitConflict, StorageError
from lakeops.executors import Executor, TaskFailed
from lakeops.ops.report import Report
from lakeops.plan import CommitOutcome, MaintenancePlan, ResultT, UnitT
from lakeops.storage import StorageOptions

__all__ = ["Batch", "Telling", "commit_batch", "run_batches"]

PlanT = TypeVar("PlanT", bound=MaintenancePlan[Any, Any])
ReportT = TypeVar("ReportT", bound=Report)


@dataclass(frozen=True)
class Batch(Generic[UnitT, ResultT]):
    """One committed batch: its units, their results and the commit's outcome (``kept()`` leaves out
    the units the commit dropped)."""

    units: Sequence[UnitT]
    results: Sequence[ResultT]
    outcome: CommitOutcome

    def kept(self) -> tuple[list[UnitT], list[ResultT]]:
        keep = [i for i in range(len(self.units)) if i not in self.outcome.dropped]
        return [self.units[i] for i in keep], [self.results[i] for i in keep]


@dataclass(frozen=True)
class Telling(Generic[PlanT, ReportT]):
    """How the compaction of a family of formats is told, the run being one: ``action`` names the work
    in progress lines (:func:`~lakeops.ops.batches.run_batches`), ``planned`` is the line after
    planning, ``report`` the report before any commit (``(plan, started, dry_run)``: a dry run's whole
    report), ``fold`` adds one committed batch to it, ``announce`` prints each commit's version."""

    action: str
    planned: Callable[[PlanT], str]
    report: Callable[[PlanT, float, bool], ReportT]
    fold: Callable[[ReportT, Batch[Any, Any], float], ReportT]
    announce: bool = True


def run_batches(
    plan: MaintenancePlan[Any, Any],
    executor: Executor,
    storage_options: StorageOptions,
    *,
    action: str,
    description: str,
    progress: Console,
) -> Iterator[Batch[Any, Any]]:
    """Run and commit each of the plan's :meth:`~lakeops.plan.MaintenancePlan.commit_batches`, yielding
    each committed batch (the caller folds them into its report). ``action`` names the work in progress
    lines (``"rewriting groups"``: "rewriting 12 groups (batch 1/3)"). The last batch's commit is the
    plan's final one only if no earlier commit dropped units (what the final commit adds, such as
    Iceberg's dangling delete files, may still apply to them)."""
    batches = plan.commit_batches()
    verb, _, noun = action.partition(" ")
    complete = True
    for number, units in enumerate(batches, start=1):
        suffix = f" (batch {number}/{len(batches)})" if len(batches) > 1 else ""
        label = f"{verb} {len(units)} {noun}{suffix}"
        results = _execute(plan, units, executor, storage_options, label, description, progress)
        if units:
            progress.print("committing ...")
        final = complete and number == len(batches)
        outcome = commit_batch(plan, units, results, storage_options, final=final)
        complete = complete and not outcome.dropped
        yield Batch(units, results, outcome)


def _execute(
    plan: MaintenancePlan[Any, Any],
    units: Sequence[Any],
    executor: Executor,
    storage_options: StorageOptions,
    label: str,
    description: str,
    progress: Console,
) -> list[Any]:
    if not units:
        return []
    work_bytes = plan.work_bytes(units)
    local = plan.results_in_process(executor.runs_on_driver(len(units), work_bytes))
    if local is not None:
        return local
    try:
        return executor.run_units(
            units,
            plan.task(),
            plan.result_type(),
            label=label,
            description=description,
            progress=progress,
            work_bytes=work_bytes,
        )
    except TaskFailed as failure:
        # Nothing of this batch was committed: the units that did finish leave no files behind.
        result_type = plan.result_type()
        plan.discard([r for r in failure.completed.values() if isinstance(r, result_type)], storage_options)
        raise


def commit_batch(
    plan: MaintenancePlan[Any, Any],
    units: Sequence[Any],
    results: Sequence[Any],
    storage_options: StorageOptions,
    *,
    final: bool,
) -> CommitOutcome:
    """``plan.commit`` of one batch, deleting the batch's files on a definite conflict and the dropped
    units' files once the commit landed."""
    try:
        outcome = plan.commit(units, results, storage_options, final=final)
    except CommitConflict:
        plan.discard(results, storage_options)
        raise
    if outcome.dropped:
        with contextlib.suppress(StorageError):  # the commit landed: orphan removal takes what is left
            plan.discard([results[i] for i in sorted(outcome.dropped)], storage_options)
    return outcome
