"""Choose the maintenance runs of one window: the worst tables' debt first, then the most benefit
within the compute budget.

What it optimises, in two passes over the window's predicted core-minutes
(:mod:`lakeops.planning.cost`):

1. **Severity**: a share of the budget (:data:`SEVERITY_SHARE`) is reserved for the tables with the
   largest *debt* — the benefit points (:mod:`lakeops.planning.benefit`) all their actions would
   capture now — worst table first, each table's actions largest gain first, each taken while it fits
   what is left of the reserve. This bounds the worst table's debt, which points per core-minute
   alone does not: a table whose small files are large is a poor buy by that measure and would wait.
2. **Benefit per cost**: the rest of the budget (and what the reserve left) goes to the remaining
   actions by *priority*, benefit per predicted core-minute, each taken while it fits — the greedy
   answer to the knapsack of points within the budget, within one action of the optimum when
   actions are small against the budget.

A compaction predicted to cost more than the reserve is cut into pieces (:mod:`lakeops.planning.split`)
and only its first piece is offered, so that no table's work is too large for a window: it proceeds a
piece per window, and the worst table's piece always fits the reserve (unless even two files do not).

Constraints, each a stated reason when it defers an action:

- the budget: an action whose predicted core-minutes no longer fit is deferred (one larger than the
  whole budget, that cannot be cut into pieces, can never run under it, and says so);
- the table's concurrency pool: its runs queue one after another (``pool_limit`` at a time), so the
  chosen runs' predicted minutes on one table must fit in the window's ``length`` times that limit;
- retention floors and consumer watermarks: an action they block (:class:`Candidate.blocked`) is
  never chosen.

Aging: an action deferred in ``n`` earlier windows has its priority multiplied by
``1 + AGING * n``, so deferred work overtakes any fresh action of fixed priority after finitely many
windows, and no table starves while its action (or its first piece) fits the budget at all.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from lakeops.planning.benefit import candidates
from lakeops.planning.cost import CostModel
from lakeops.planning.models import Decision, MaintenancePlan, TableObservation
from lakeops.planning.split import first_piece
from lakeops.registry import MaintenanceBudget
from lakeops.units import format_size

__all__ = ["AGING", "SEVERITY_SHARE", "next_deferrals", "plan"]

#: Priority raised by this share per window an action waited.
AGING = 0.5
#: Share of each window's budget reserved for the most indebted tables, worst first; also the most
#: one compaction piece may cost.
SEVERITY_SHARE = 0.5


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
    observations = list(observations)  # read twice: planned, then named in the plan
    waited = deferred or {}
    reserve = budget.core_minutes * SEVERITY_SHARE
    piece_limit = min(reserve, budget.length_minutes * budget.cores_per_run)
    pools: dict[str, tuple[int, str]] = {}
    debt: dict[str, float] = defaultdict(float)
    ranked: list[Decision] = []
    blocked: list[Decision] = []
    for obs in observations:
        pools[obs.table] = (obs.pool_limit, obs.pool)
        for c in candidates(obs):
            cost = costs.estimate(obs.table, c.action.operation, c.work_bytes, c.work_files)
            pieces = ""
            if c.blocked is None:
                debt[obs.table] += c.benefit.points
                cut = first_piece(c, costs, piece_limit) if cost.core_minutes > piece_limit else None
                if cut is not None:
                    c, count = cut
                    cost = costs.estimate(obs.table, c.action.operation, c.work_bytes, c.work_files)
                    pieces = f"piece 1 of {count} (at most {format_size(c.action.max_bytes or 0)}): "
            n = waited.get(c.action.key, 0)
            draft = Decision(
                action=c.action,
                benefit=c.benefit.model_copy(update={"why": pieces + c.benefit.why}),
                cost=cost,
                chosen=False,
                blocked=c.blocked is not None,
                deferred_windows=n,
                priority=_priority(c.benefit.points, cost.core_minutes, n),
                reason=c.blocked or "",
            )
            (blocked if c.blocked is not None else ranked).append(draft)
    ranked.sort(key=lambda d: (-d.priority, d.action.key))

    left = budget.core_minutes
    pool_minutes: dict[str, float] = defaultdict(float)
    chosen: list[Decision] = []
    picked: set[int] = set()  # the drafts chosen (by id)

    def fits(draft: Decision, within: float) -> bool:
        limit, pool = pools[draft.action.table]
        return (
            draft.cost.core_minutes <= within
            and pool_minutes[pool] + draft.cost.seconds / 60 <= budget.length_minutes * limit
        )

    def choose(draft: Decision, reason: str, *, reserved: bool) -> None:
        nonlocal left
        picked.add(id(draft))
        left -= draft.cost.core_minutes
        pool_minutes[pools[draft.action.table][1]] += draft.cost.seconds / 60
        update = {"chosen": True, "rank": len(chosen) + 1, "reason": reason, "reserved": reserved}
        chosen.append(draft.model_copy(update=update))

    # Pass 1, severity: the reserve to the most indebted tables, worst first, largest gain first.
    by_table: dict[str, list[Decision]] = defaultdict(list)
    for draft in sorted(ranked, key=lambda d: -d.benefit.points):
        by_table[draft.action.table].append(draft)
    worst = sorted(by_table, key=lambda name: (-debt[name], name))
    for place, name in enumerate(worst, start=1):
        for draft in by_table[name]:
            if fits(draft, reserve - (budget.core_minutes - left)):
                why = f"severity: debt {debt[name]:,.0f} points, #{place} of {len(worst)} tables: "
                choose(draft, why + draft.benefit.why, reserved=True)

    # Pass 2, benefit per cost: the rest of the budget by priority.
    later: list[Decision] = []
    for draft in ranked:
        if id(draft) in picked:
            continue
        limit, pool = pools[draft.action.table]
        aged = f", aged {draft.deferred_windows} windows" if draft.deferred_windows else ""
        if draft.cost.core_minutes > budget.core_minutes:
            unknown = "; no run of it to learn from yet: the default estimate" if draft.cost.basis == "default" else ""
            reason = (
                f"predicted {draft.cost.core_minutes:.2f} core-min exceeds the whole budget "
                f"({budget.core_minutes:g}){unknown}; raise the budget or run it by hand"
            )
        elif draft.cost.core_minutes > left:
            reason = f"budget: predicted {draft.cost.core_minutes:.2f} core-min, {left:.2f} left"
        elif not fits(draft, left):
            reason = (
                f"pool {pool}: its runs already fill the {budget.length} window "
                f"({pool_minutes[pool]:.1f} of {budget.length_minutes * limit:.0f} min)"
            )
        else:
            choose(draft, f"benefit per core-min {draft.priority:,.1f}{aged}: {draft.benefit.why}", reserved=False)
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
        observed=[o.table for o in observations],
    )


def next_deferrals(previous: MaintenancePlan) -> dict[str, int]:
    """Windows waited by each action ``previous`` deferred, counting that window (blocked ones do
    not age: a floor, not the budget, holds them)."""
    return {d.action.key: d.deferred_windows + 1 for d in previous.decisions if not d.chosen and not d.blocked}
