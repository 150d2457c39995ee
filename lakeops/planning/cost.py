"""What an action would cost, in seconds and core-minutes, before it runs.

The work of a run is the bytes its plan reads and writes plus a fixed byte-equivalent per object it
opens, lists or deletes (:data:`FILE_COST_BYTES`: an object-store request costs about as long as
moving a MiB). Before any history the prediction is the conservative default
``OVERHEAD_S + work / DEFAULT_THROUGHPUT`` (a Spark job's start and planning, then 32 MiB/s per
run). Each audited run of the operation then corrects it: the model keeps a factor per (table,
operation) — else per operation over the whole cluster — and moves it, run by run in time order,
halfway (in log space) towards what that run's actual duration says: ``log f += ALPHA * log(actual /
predicted)``. The prediction error of each run is what feeds the next estimate, and one
unrepresentative run moves it only half-way.

One factor per (table, operation) is a deliberate simplification: a table's runs tend to look alike
(the same files, the same cluster), but a table whose work grows a hundredfold since its last runs
is predicted by the ratio its smaller runs showed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from lakeops.audit import AuditRecord
from lakeops.planning.models import OPERATIONS, CostEstimate, metric_sum
from lakeops.registry import MaintenanceBudget

__all__ = [
    "ALPHA",
    "DEFAULT_THROUGHPUT",
    "FILE_COST_BYTES",
    "OVERHEAD_S",
    "CostModel",
    "RunSample",
    "prediction_error",
    "samples_from_records",
    "work_of_run",
]

FILE_COST_BYTES = 1 << 20
DEFAULT_THROUGHPUT = 32 * (1 << 20)
OVERHEAD_S = 20.0
#: How far each run's error moves the factor (log space): 0.5, half-way.
ALPHA = 0.5


@dataclass(frozen=True)
class RunSample:
    """One finished run: its table, operation, the work it did and how long it took."""

    table: str
    operation: str
    work_bytes: int
    work_files: int
    seconds: float
    #: When it finished (ISO 8601): the model learns runs in this order.
    finished_at: str = ""


def _default_seconds(work_bytes: int, work_files: int) -> float:
    return OVERHEAD_S + (work_bytes + work_files * FILE_COST_BYTES) / DEFAULT_THROUGHPUT


def prediction_error(predicted_s: float, actual_s: float) -> float:
    """``|ln(actual / predicted)|``: 0 for a perfect prediction, ln 2 ≈ 0.69 for one off by a factor of 2
    either way (symmetric, so over- and under-estimates plot alike)."""
    return abs(math.log(max(actual_s, 1e-3) / max(predicted_s, 1e-3)))


def work_of_run(operation: str, metrics: Mapping[str, Any]) -> tuple[int, int]:
    """(bytes, files) a finished run of ``operation`` did, from its report's metrics, counted as
    :mod:`lakeops.planning.benefit` counts a plan's work."""

    get = partial(metric_sum, metrics)

    if operation == "compaction":
        return get("bytes_removed") + get("bytes_added"), get("files_removed") + get("files_added")
    if operation == "checkpoint":
        lag = get("version") - get("previous_checkpoint_version") if "version" in metrics else 0
        replaced = get("manifests_replaced") + get("manifests_created")
        return get("bytes") + get("replaced_bytes"), max(lag, 0) + replaced + get("parts")
    if operation == "expiry":
        return 0, get("deleted_files") + get("deleted_branch_files")
    if operation == "orphans":
        return 0, get("files_scanned") + get("objects_scanned") + get("deleted_files")
    if operation == "cdc":
        return get("source_bytes") + get("bytes_written"), get("versions_extracted")
    raise ValueError(f"no such planned operation: {operation}")


def samples_from_records(table: str, records: Iterable[AuditRecord]) -> list[RunSample]:
    """The succeeded runs of planned operations among ``table``'s audit records, oldest first."""
    samples = []
    for record in sorted(records, key=lambda r: r.finished_at):
        operation = OPERATIONS.get(record.command)
        if operation is None or record.status != "succeeded" or record.plan.get("dry_run"):
            continue
        work_bytes, work_files = work_of_run(operation, record.metrics)
        samples.append(RunSample(table, operation, work_bytes, work_files, record.duration_s, record.finished_at))
    return samples


class CostModel:
    """Predictions corrected by the history of ``samples`` (every table's, learnt oldest first)."""

    def __init__(self, budget: MaintenanceBudget, samples: Iterable[RunSample] = ()) -> None:
        self._cores = budget.cores_per_run
        self._table: dict[tuple[str, str], tuple[float, int]] = {}
        self._cluster: dict[str, tuple[float, int]] = {}
        for sample in sorted(samples, key=lambda s: s.finished_at):
            self.learn(sample)

    @staticmethod
    def _moved(state: tuple[float, int] | None, sample: RunSample) -> tuple[float, int]:
        log_factor, n = state or (0.0, 0)
        predicted = math.exp(log_factor) * _default_seconds(sample.work_bytes, sample.work_files)
        error = math.log(max(sample.seconds, 1e-3) / predicted)
        # The first run replaces the default entirely; later ones move the factor by ALPHA.
        return log_factor + (error if n == 0 else ALPHA * error), n + 1

    def learn(self, sample: RunSample) -> None:
        """Feed one finished run's prediction error into the next estimates."""
        key = (sample.table, sample.operation)
        self._table[key] = self._moved(self._table.get(key), sample)
        self._cluster[sample.operation] = self._moved(self._cluster.get(sample.operation), sample)

    def estimate(self, table: str, operation: str, work_bytes: int, work_files: int) -> CostEstimate:
        """The predicted seconds and core-minutes of ``work`` on ``table``, and their basis."""
        state, basis = self._table.get((table, operation)), "table"
        if state is None:
            state, basis = self._cluster.get(operation), "cluster"
        if state is None:
            state, basis = (0.0, 0), "default"
        seconds = math.exp(state[0]) * _default_seconds(work_bytes, work_files)
        work = work_bytes + work_files * FILE_COST_BYTES
        return CostEstimate(
            bytes=work_bytes,
            files=work_files,
            throughput_bytes_per_s=work / seconds,
            basis=basis,  # type: ignore[arg-type]
            samples=state[1],
            seconds=seconds,
            core_minutes=seconds * self._cores / 60,
        )
