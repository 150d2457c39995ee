"""After a window: each chosen action's predicted cost and benefit against what its run did, from
the tables' audit records (the same records the cost model learns the next estimates from)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean

from pydantic import BaseModel, ConfigDict

from lakeops.audit import AuditRecord
from lakeops.planning.benefit import realised_points
from lakeops.planning.cost import prediction_error
from lakeops.planning.models import COMMANDS, Decision

__all__ = ["ActionOutcome", "PlanReview", "review"]


class ActionOutcome(BaseModel):
    """One chosen action: predicted seconds and points, and the run's (None: no run finished)."""

    model_config = ConfigDict(frozen=True)

    action: str
    predicted_s: float
    predicted_points: float
    status: str
    actual_s: float | None = None
    actual_points: float | None = None
    #: :func:`lakeops.planning.cost.prediction_error` of the cost.
    error: float | None = None


class PlanReview(BaseModel):
    """A window's plan against its runs; ``prediction_error``: the mean over the runs that finished."""

    model_config = ConfigDict(frozen=True)

    planned_at: str
    outcomes: list[ActionOutcome]
    prediction_error: float | None = None
    predicted_s: float = 0.0
    actual_s: float = 0.0
    predicted_points: float = 0.0
    actual_points: float = 0.0

    def markdown(self) -> str:
        rows = [
            "| action | run | predicted s | actual s | error | predicted points | actual points |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for o in self.outcomes:
            actual = f"{o.actual_s:.2f}" if o.actual_s is not None else "—"
            error = f"{o.error:.2f}" if o.error is not None else "—"
            points = f"{o.actual_points:,.1f}" if o.actual_points is not None else "—"
            rows.append(
                f"| `{o.action}` | {o.status} | {o.predicted_s:.2f} | {actual} | {error} | "
                f"{o.predicted_points:,.1f} | {points} |"
            )
        error = f"{self.prediction_error:.2f}" if self.prediction_error is not None else "none (no run finished)"
        head = (
            f"Plan of {self.planned_at}: predicted {self.predicted_s:.1f} s for {self.predicted_points:,.1f} points, "
            f"ran {self.actual_s:.1f} s for {self.actual_points:,.1f} points; prediction error |ln(actual/predicted)| "
            f"mean {error}."
        )
        return "\n".join([head, "", *rows])


def review(chosen: Sequence[Decision], planned_at: str, records: Mapping[str, Sequence[AuditRecord]]) -> PlanReview:
    """``chosen`` (in launch order) against ``records`` (table -> its audit records): each action
    matched to the next run of its command on its table that started after ``planned_at``."""
    used: set[tuple[str, str]] = set()
    outcomes = []
    for d in chosen:
        command = COMMANDS[d.action.operation]
        run = next(
            (
                r
                for r in sorted(records.get(d.action.table, ()), key=lambda r: r.started_at)
                if r.command == command
                and r.started_at >= planned_at
                and not r.plan.get("dry_run")
                and (d.action.table, r.run_id) not in used
            ),
            None,
        )
        outcome = ActionOutcome(
            action=d.action.key, predicted_s=d.cost.seconds, predicted_points=d.benefit.points, status="not run"
        )
        if run is not None:
            used.add((d.action.table, run.run_id))
            succeeded = run.status == "succeeded"
            outcome = outcome.model_copy(
                update={
                    "status": run.status,
                    "actual_s": run.duration_s,
                    "actual_points": realised_points(d.action.operation, run.metrics) if succeeded else 0.0,
                    "error": prediction_error(d.cost.seconds, run.duration_s),
                }
            )
        outcomes.append(outcome)
    finished = [o for o in outcomes if o.actual_s is not None]
    return PlanReview(
        planned_at=planned_at,
        outcomes=outcomes,
        prediction_error=fmean(o.error for o in finished if o.error is not None) if finished else None,
        predicted_s=sum(o.predicted_s for o in outcomes),
        actual_s=sum(o.actual_s or 0.0 for o in finished),
        predicted_points=sum(o.predicted_points for o in outcomes),
        actual_points=sum(o.actual_points or 0.0 for o in finished),
    )
