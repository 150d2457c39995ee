"""Commit a batch of units the test ran itself (between its run and its commit a test can change the
table, e.g. a concurrent writer's commit) and report as the operation's ``run`` does: the same
commit (:func:`lakeops.ops.batches.commit_batch`) and the same report folding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from rich.console import Console

from lakeops.ops import checkpoint, compaction
from lakeops.ops.batches import Batch, commit_batch
from lakeops.ops.checkpoint import CheckpointReport
from lakeops.ops.compaction import CompactionReport
from lakeops.storage import StorageOptions


def commit_compaction(
    plan: Any,
    groups: Sequence[Any],
    results: Sequence[Any],
    storage_options: StorageOptions,
    started: float,
    *,
    previous: CompactionReport | None = None,
    final: bool = True,
) -> CompactionReport:
    """Commit the rewritten ``groups`` (one batch) and fold the outcome into ``previous``: what
    :func:`lakeops.ops.compaction.run` does for each batch (files are deleted as
    :func:`lakeops.ops.batches.commit_batch` says)."""
    report = previous or compaction._started_report(plan, started)
    complete = final and not report.groups_dropped_by_conflict
    outcome = commit_batch(plan, groups, results, storage_options, final=complete)
    return compaction._fold(report, Batch(groups, results, outcome), started)


def commit_checkpoint(
    plan: Any,
    written: Sequence[BaseModel],
    storage_options: StorageOptions,
    started: float,
    *,
    progress: Console | None = None,
) -> CheckpointReport:
    """Commit units written by the test and report: what :func:`lakeops.ops.checkpoint.run` does after
    its executor wrote them."""
    outcome = commit_batch(plan, plan.work_units(), written, storage_options, final=True)
    return checkpoint._committed_report(plan, outcome, started, progress or Console(quiet=True))
