"""The maintenance plan's models: what a table's observation says each operation would do, and the
planner's decisions with their reasons (the budget they are made within is the registry's
:class:`lakeops.registry.MaintenanceBudget`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lakeops.ops.report import Report

__all__ = [
    "COMMANDS",
    "OPERATIONS",
    "Action",
    "Benefit",
    "CompactionWork",
    "CostEstimate",
    "Decision",
    "MaintenancePlan",
    "Operation",
    "TableObservation",
    "metric_sum",
]

Operation = Literal["compaction", "checkpoint", "expiry", "orphans", "cdc"]

#: The ``lakeops`` command (and audit record ``command``) of each planned operation.
COMMANDS: dict[str, str] = {
    "compaction": "compact",
    "checkpoint": "checkpoint",
    "expiry": "expire",
    "orphans": "orphans",
    "cdc": "cdc",
}
#: The ``lakeops`` command an audit record names -> the operation it ran.
OPERATIONS: dict[str, str] = {command: operation for operation, command in COMMANDS.items()}


def metric_sum(metrics: Mapping[str, Any], *names: str) -> int:
    """The sum of a report's numeric metrics ``names`` (those a format's report lacks count 0)."""
    return sum(int(metrics.get(name) or 0) for name in names)


class CompactionWork(BaseModel):
    """What compaction of one partition (None: the whole table) would rewrite: the files it merges,
    their bytes, and the files it writes instead."""

    model_config = ConfigDict(frozen=True)

    partition: str | None = None
    files_removed: int = Field(ge=0)
    bytes_removed: int = Field(ge=0)
    files_added: int = Field(ge=0)


class TableObservation(BaseModel):
    """What each operation would do on one table now, from its ``inspect`` numbers and dry-run plans.

    Retention floors are already applied: ``expirable_versions``/``reclaimable_bytes`` count only what
    is past the table's retention; ``*_held`` what of that a CDC consumer's watermark still needs."""

    model_config = ConfigDict(frozen=True)

    table: str
    format: str
    #: The concurrency pool runs on this table queue in, and how many run at once.
    pool: str
    pool_limit: int = Field(default=1, ge=1)
    compaction: list[CompactionWork] = []
    #: Log files (Delta commits; Iceberg manifests) a reader replays that a checkpoint would fold.
    checkpoint_lag: int = Field(default=0, ge=0)
    #: Bytes a checkpoint (Iceberg: manifest rewrite) reads and writes.
    checkpoint_bytes: int = Field(default=0, ge=0)
    expirable_versions: int = Field(default=0, ge=0)
    expirable_files: int = Field(default=0, ge=0)
    expirable_bytes: int = Field(default=0, ge=0)
    expirable_versions_held: int = Field(default=0, ge=0)
    #: Files the orphan removal lists, and those past its retention it would delete.
    listed_files: int = Field(default=0, ge=0)
    reclaimable_files: int = Field(default=0, ge=0)
    reclaimable_bytes: int = Field(default=0, ge=0)
    reclaimable_bytes_held: int = Field(default=0, ge=0)
    cdc_lag_versions: int = Field(default=0, ge=0)
    cdc_bytes: int = Field(default=0, ge=0)


class Action(BaseModel):
    """One run the planner may choose: an operation on a table (compaction: one partition of it;
    ``max_bytes``: only a piece of it, the run's ``max_rewrite_bytes``, when the whole would not fit a
    window — :mod:`lakeops.planning.split`)."""

    model_config = ConfigDict(frozen=True)

    table: str
    operation: Operation
    partition: str | None = None
    max_bytes: int | None = Field(default=None, gt=0)

    @property
    def key(self) -> str:
        """``table:operation[:partition]``: how deferrals and run keys name the action."""
        return ":".join([self.table, self.operation, *([self.partition] if self.partition is not None else [])])


class Benefit(BaseModel):
    """What an action gains, in the units an operator reads, and ``points``, their sum at the
    exchange rates of :data:`lakeops.planning.benefit.RATES` (one point: one file a full scan no
    longer opens)."""

    model_config = ConfigDict(frozen=True)

    files_removed: int = 0
    #: Files a full scan opens now minus after.
    read_amplification_avoided: int = 0
    bytes_reclaimed: int = 0
    versions_removed: int = 0
    #: Log files (commits, manifests) a reader no longer replays.
    log_files_saved: int = 0
    cdc_versions_closed: int = 0
    points: float = 0.0
    why: str = ""


class CostEstimate(BaseModel):
    """The predicted cost of an action: the work in its plan, the throughput it is divided by and
    where that came from (``default``, the ``cluster``'s runs of the operation, the ``table``'s own)."""

    model_config = ConfigDict(frozen=True)

    bytes: int
    files: int
    throughput_bytes_per_s: float
    basis: Literal["default", "cluster", "table"]
    samples: int = 0
    seconds: float
    core_minutes: float


class Decision(BaseModel):
    """The planner's verdict on one action: chosen (``rank`` in launch order) or deferred, and why."""

    model_config = ConfigDict(frozen=True)

    action: Action
    benefit: Benefit
    cost: CostEstimate
    chosen: bool
    #: A retention floor or consumer watermark forbids it (never chosen, not aged).
    blocked: bool = False
    rank: int | None = None
    #: Windows this action was deferred before this plan, and the priority that gave it.
    deferred_windows: int = 0
    priority: float
    #: Chosen from the share of the budget reserved for the most indebted tables (not by priority).
    reserved: bool = False
    reason: str


class MaintenancePlan(Report):
    """The ranked plan for one window: every candidate action, chosen ones first in launch order."""

    operation: str = "plan-maintenance"
    format: str = "mixed"
    dry_run: bool = True
    budget_core_minutes: float
    predicted_core_minutes: float = 0.0
    predicted_points: float = 0.0
    chosen: int = 0
    deferred: int = 0
    decisions: list[Decision] = []
    #: Tables that could not be observed, with the error.
    unreadable: dict[str, str] = {}
    #: The tables observed (with or without work).
    observed: list[str] = []

    def idle_reason(self) -> str | None:
        """Why nothing is planned, when nothing is: an empty plan must say so, not show empty columns."""
        if self.decisions:
            return None
        if not self.observed:
            return "nothing to plan: no table could be observed" if self.unreadable else "no tables registered"
        return (
            f"nothing to do: none of the {len(self.observed)} tables observed ({', '.join(self.observed)}) has "
            "small files to merge, commits past its checkpoint interval, versions or files past retention, "
            "or changes its CDC output lacks"
        )

    def summary_lines(self) -> list[tuple[str, str]]:
        """One line per action: rank or deferred, the benefit, the predicted cost and the reason."""
        lines = [
            ("budget", f"{self.budget_core_minutes:g} core-min"),
            ("predicted", f"{self.predicted_core_minutes:.2f} core-min for {self.predicted_points:,.0f} points"),
        ]
        if (idle := self.idle_reason()) is not None:
            lines.append(("plan", idle))
        for d in self.decisions:
            label = f"#{d.rank} {d.action.key}" if d.chosen else f"deferred {d.action.key}"
            lines.append((label, f"{d.benefit.points:,.0f} pts / {d.cost.core_minutes:.2f} core-min: {d.reason}"))
        lines += [(f"unreadable {name}", error) for name, error in self.unreadable.items()]
        return lines

    def markdown(self) -> str:
        """The plan as a Markdown table, for Dagster metadata."""
        rows = [
            "| # | action | benefit | points | predicted core-min | basis | decision |",
            "|---|---|---|---:|---:|---|---|",
        ]
        for d in self.decisions:
            rank = str(d.rank) if d.chosen else "—"
            rows.append(
                f"| {rank} | `{d.action.key}` | {d.benefit.why} | {d.benefit.points:,.1f} | "
                f"{d.cost.core_minutes:.2f} | {d.cost.basis} | {d.reason} |"
            )
        head = (
            f"Budget {self.budget_core_minutes:g} core-min; chosen {self.chosen} actions, predicted "
            f"{self.predicted_core_minutes:.2f} core-min for {self.predicted_points:,.1f} points; "
            f"deferred {self.deferred}."
        )
        unreadable = [f"- unreadable `{name}`: {error}" for name, error in self.unreadable.items()]
        if (idle := self.idle_reason()) is not None:
            return "\n".join(
                [head, "", f"**{idle[0].upper()}{idle[1:]}.**", *([""] + unreadable if unreadable else [])]
            )
        return "\n".join([head, "", *rows, *([""] + unreadable if unreadable else [])])
