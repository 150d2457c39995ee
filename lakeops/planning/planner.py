"""Choose the maintenance runs of one window: the most benefit within the compute budget.

What it optimises: the benefit points captured (:mod:`lakeops.planning.benefit`) per window, subject
to the predicted core-minutes (:mod:`lakeops.planning.cost`) staying within the budget. That is a
knapsack; the planner takes the greedy answer — actions by *priority*, benefit per predicted
core-minute, each taken while it fits — which is within one action of the optimum when actions are
small against the budget, as maintenance runs are against a night's budget.

Constraints, each a stated reason when it defers an action:

- the budget: an action whose predicted core-minutes no longer fit is deferred (one larger than the
  whole budget can never run under it, and says so);
- the table's concurrency pool: its runs queue one after another (``pool_limit`` at a time), so the
  chosen runs' predicted minutes on one table must fit in the window's ``length`` times that limit;
- retention floors and consumer watermarks: an action they block (:class:`Candidate.blocked`) is
  never chosen.

Aging: an action deferred in ``n`` earlier windows has its priority multiplied by
``1 + AGING * n``, so deferred work overtakes any fresh action of fixed priority after finitely many
windows, and no table starves while its action fits the budget at all.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from lakeops.planning.benefit import Candidate, candidates
from lakeops.planning.cost import CostModel
from lakeops.planning.models import Decision, MaintenanceBudget, MaintenancePlan, TableObservation

__all__ = ["AGING", "next_deferrals", "plan"]

#: Priority raised by this share per window an action waited.
AGING = 0.5


def _priority(points: float, core_minutes: float, waited: int) -> float:
    return points / max(core_minutes, 1e-6) * (1 + AGING * waited)


def plan(
    observations: Iterable[TableObservation],
    budget: MaintenanceBudget,
    costs: CostModel,
    *,
    deferred: Mapping[str, int] | None = None,
    table: str = "registry",
    unreadable: Mapping[str, str] | None = None,
) -> MaintenancePlan:
    """The plan for one window over ``observations``; ``deferred``: action key -> windows it waited
    (:func:`next_deferrals` of the previous plan)."""
    waited = deferred or {}
    pools: dict[str, tuple[int, str]] = {}
    ranked: list[tuple[float, Candidate, Decision]] = []
    blocked: list[Decision] = []
    for obs in observations:
        pools[obs.table] = (obs.pool_limit, obs.pool)
        for c in candidates(obs):
            cost = costs.estimate(obs.table, c.action.operation, c.work_bytes, c.work_files)
            n = waited.get(c.action.key, 0)
            priority = _priority(c.benefit.points, cost.core_minutes, n)
            draft = Decision(
                action=c.action,
                benefit=c.benefit,
                cost=cost,
                chosen=False,
                blocked=c.blocked is not None,
                deferred_windows=n,
                priority=priority,
                reason=c.blocked or "",
            )
            if c.blocked is not None:
                blocked.append(draft)
            else:
                ranked.append((priority, c, draft))
    ranked.sort(key=lambda item: (-item[0], item[2].action.key))

    left = budget.core_minutes
    pool_minutes: dict[str, float] = defaultdict(float)
    chosen: list[Decision] = []
    later: list[Decision] = []
    for priority, candidate, draft in ranked:
        limit, pool = pools[candidate.action.table]
        minutes = draft.cost.seconds / 60
        aged = f", aged {draft.deferred_windows} windows" if draft.deferred_windows else ""
        if draft.cost.core_minutes > budget.core_minutes:
            unknown = "; no run of it to learn from yet: the default estimate" if draft.cost.basis == "default" else ""
            reason = (
                f"predicted {draft.cost.core_minutes:.2f} core-min exceeds the whole budget "
                f"({budget.core_minutes:g}){unknown}; raise the budget or run it by hand"
            )
        elif draft.cost.core_minutes > left:
            reason = f"budget: predicted {draft.cost.core_minutes:.2f} core-min, {left:.2f} left"
        elif pool_minutes[pool] + minutes > budget.length_minutes * limit:
            reason = (
                f"pool {pool}: its runs already fill the {budget.length} window "
                f"({pool_minutes[pool]:.1f} of {budget.length_minutes * limit:.0f} min)"
            )
        else:
            left -= draft.cost.core_minutes
            pool_minutes[pool] += minutes
            reason = f"benefit per core-min {priority:,.1f}{aged}: {draft.benefit.why}"
            chosen.append(draft.model_copy(update={"chosen": True, "rank": len(chosen) + 1, "reason": reason}))
            continue
        later.append(draft.model_copy(update={"reason": reason}))

    return MaintenancePlan(
        table=table,
        budget_core_minutes=budget.core_minutes,
        predicted_core_minutes=budget.core_minutes - left,
        predicted_points=sum(d.benefit.points for d in chosen),
        chosen=len(chosen),
        deferred=len(later) + len(blocked),
        decisions=[*chosen, *later, *blocked],
        unreadable=dict(unreadable or {}),
    )


def next_deferrals(previous: MaintenancePlan) -> dict[str, int]:
    """Windows waited by each action ``previous`` deferred, counting that window (blocked ones do
    not age: a floor, not the budget, holds them)."""
    return {d.action.key: d.deferred_windows + 1 for d in previous.decisions if not d.chosen and not d.blocked}
