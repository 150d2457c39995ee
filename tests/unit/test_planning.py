"""lakeops.planning: benefit, cost and the greedy planner on modelled estates (no table is read).

The planner's promises, each asserted: the predicted core-minutes never exceed the budget; a higher
benefit per cost is chosen first; an action deferred for windows rises until it is chosen; nothing
a retention floor or a consumer watermark forbids is chosen; a table's pool never holds more
predicted minutes than the window; and over random estates (hypothesis) all of that at once.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeops.audit import Actor, AuditRecord
from lakeops.planning.benefit import RATES, candidates
from lakeops.planning.cost import OVERHEAD_S, CostModel, RunSample, prediction_error, samples_from_records
from lakeops.planning.models import CompactionWork, Decision, TableObservation
from lakeops.planning.planner import SEVERITY_SHARE, next_deferrals, plan
from lakeops.planning.split import split
from lakeops.registry import MaintenanceBudget

MIB = 1 << 20
BUDGET = MaintenanceBudget(core_minutes=2.0)


def _table(name: str, small: int, **fields: int) -> TableObservation:
    work = [CompactionWork(files_removed=small, bytes_removed=small * MIB, files_added=1)] if small else []
    return TableObservation(table=name, format="delta", pool=f"lakeops_{name}", compaction=work, **fields)


def test_benefit_counts_files_a_scan_no_longer_opens() -> None:
    (candidate,) = candidates(_table("t", 40))
    assert candidate.benefit.read_amplification_avoided == 39
    assert candidate.benefit.points == 39 * RATES["read_amplification_avoided"]
    assert candidate.work_bytes == 80 * MIB  # read once, written once
    assert "40 small files in the table merge into 1" in candidate.benefit.why


def test_higher_benefit_per_cost_is_chosen_first() -> None:
    estate = [_table("few", 5), _table("many", 60), _table("some", 20)]
    result = plan(estate, MaintenanceBudget(core_minutes=100), CostModel(BUDGET))
    assert [d.action.table for d in result.decisions if d.chosen] == ["many", "some", "few"]
    assert [d.rank for d in result.decisions] == [1, 2, 3]
    priorities = [d.priority for d in result.decisions]
    assert priorities == sorted(priorities, reverse=True)


def test_budget_is_never_exceeded_and_the_deferral_says_why() -> None:
    estate = [_table(f"t{i}", 30) for i in range(10)]
    result = plan(estate, BUDGET, CostModel(BUDGET))
    chosen = [d for d in result.decisions if d.chosen]
    one = chosen[0].cost.core_minutes
    assert len(chosen) == math.floor(BUDGET.core_minutes / one)
    assert result.predicted_core_minutes <= BUDGET.core_minutes
    deferred = [d for d in result.decisions if not d.chosen]
    assert deferred and all(d.reason.startswith("budget: predicted") for d in deferred)


def test_an_action_larger_than_the_whole_budget_says_so() -> None:
    """A checkpoint cannot be cut into pieces: one larger than the budget waits, and says why."""
    huge = _table("huge", 0, checkpoint_lag=10_000, checkpoint_bytes=10_000 * MIB)
    (decision,) = plan([huge], BUDGET, CostModel(BUDGET)).decisions
    assert not decision.chosen
    assert decision.reason.startswith("predicted 10.75 core-min")  # 20 s + (10,000 MiB + 10,001 files) at 32 MiB/s
    assert "exceeds the whole budget (2); no run of it to learn from yet: the default estimate;" in decision.reason


def test_a_split_compaction_fits_the_window_and_its_pieces_cover_the_table() -> None:
    """10,000 files cost 16 core-min, eight times the budget: the first piece is chosen, bounded to
    the reserve, and the pieces together merge exactly the table's small files."""
    huge = _table("huge", 10_000)
    (decision,) = plan([huge], BUDGET, CostModel(BUDGET)).decisions
    assert decision.chosen and decision.reserved
    assert decision.cost.core_minutes <= BUDGET.core_minutes * SEVERITY_SHARE
    assert decision.action.max_bytes == decision.cost.bytes // 2  # the input bytes: read once, written once
    count = int(decision.benefit.why.split(" of ")[1].split(" ")[0])
    assert decision.benefit.why.startswith(f"piece 1 of {count} (at most ")
    pieces = split(huge.compaction[0], count)
    assert pieces[0].files_removed == decision.benefit.files_removed
    assert sum(p.files_removed for p in pieces) == 10_000
    assert sum(p.bytes_removed for p in pieces) == 10_000 * MIB
    # The fewest pieces that fit: one piece fewer would not.
    (bigger,) = candidates(huge.model_copy(update={"compaction": split(huge.compaction[0], count - 1)[:1]}))
    model = CostModel(BUDGET)
    assert (
        model.estimate("huge", "compaction", bigger.work_bytes, bigger.work_files).core_minutes
        > BUDGET.core_minutes * SEVERITY_SHARE
    )


def test_the_worst_table_is_not_starved_when_its_whole_action_does_not_fit() -> None:
    """Many cheap, dense gains against one huge table whose files are large (few points per byte):
    by benefit per cost alone it would wait every window; the severity reserve takes a piece of it
    in the window, worst table first."""
    budget = MaintenanceBudget(core_minutes=4.0)
    work = CompactionWork(files_removed=2_000, bytes_removed=2_000 * 64 * MIB, files_added=1_000)
    worst = TableObservation(table="worst", format="delta", pool="lakeops_worst", compaction=[work])
    cheap = [_table(f"cheap{i}", 40) for i in range(30)]
    by_debt = sorted(candidates(worst) + [c for t in cheap for c in candidates(t)], key=lambda c: -c.benefit.points)
    assert by_debt[0].action.table == "worst"  # the largest debt
    result = plan([worst, *cheap], budget, CostModel(budget))
    (first,) = [d for d in result.decisions if d.action.table == "worst"]
    assert first.chosen and first.rank == 1 and first.reserved
    assert first.reason.startswith("severity: debt 1,000 points, #1 of 31 tables: piece 1 of ")
    assert first.cost.core_minutes <= budget.core_minutes * SEVERITY_SHARE
    assert result.predicted_core_minutes <= budget.core_minutes
    # Without the reserve its whole compaction (80 core-min) could never run in a 4 core-min window.
    whole = CostModel(budget).estimate("worst", "compaction", 2 * work.bytes_removed, 3_000)
    assert whole.core_minutes > budget.core_minutes


def test_deferred_action_rises_until_chosen() -> None:
    """A small gain loses to fresh large gains every window until its age lifts it above them."""
    budget = MaintenanceBudget(core_minutes=0.4)  # room for one run a window
    waited: dict[str, int] = {}
    windows_until_chosen = None
    for window in range(20):
        estate = [_table("starved", 4), _table(f"fresh{window}", 12)]
        result = plan(estate, budget, CostModel(budget), deferred=waited)
        starved = next(d for d in result.decisions if d.action.table == "starved")
        assert starved.deferred_windows == window
        if starved.chosen:
            windows_until_chosen = window
            break
        waited = next_deferrals(result)
    # 3 points against 11: priority x (1 + 0.5 n) passes 11/3 at n = 6.
    assert windows_until_chosen == 6


def test_consumer_watermark_and_retention_floor_block_expiry() -> None:
    held = _table("held", 0, expirable_versions=50, expirable_versions_held=50)
    free = _table("free", 0, expirable_versions=50, expirable_versions_held=20, expirable_bytes=4 << 30)
    young = _table("young", 0)  # nothing past its retention floor: no expiry candidate at all
    result = plan([held, free, young], MaintenanceBudget(core_minutes=100), CostModel(BUDGET))
    by_table = {d.action.table: d for d in result.decisions}
    assert "young" not in by_table
    assert not by_table["held"].chosen and by_table["held"].blocked
    assert by_table["held"].reason.startswith("consumer watermark")
    assert by_table["free"].chosen and by_table["free"].benefit.versions_removed == 30
    assert next_deferrals(result) == {}  # a blocked action does not age


def test_orphans_held_by_the_consumer_are_not_counted() -> None:
    obs = _table("t", 0, reclaimable_files=10, reclaimable_bytes=10 << 30, reclaimable_bytes_held=4 << 30)
    (candidate,) = candidates(obs)
    assert candidate.benefit.bytes_reclaimed == 6 << 30
    assert candidate.benefit.points == pytest.approx(6 * RATES["gib_reclaimed"])


def test_pool_holds_no_more_than_the_window() -> None:
    """Two long runs on one table queue in its pool: only the first fits a one-hour window."""
    obs = _table("t", 3000, checkpoint_lag=9000, checkpoint_bytes=100 * 1024 * MIB)
    budget = MaintenanceBudget(core_minutes=1000, length="1h")
    result = plan([obs], budget, CostModel(budget))
    assert [d.chosen for d in result.decisions] == [True, False]
    assert result.decisions[1].reason.startswith("pool lakeops_t")


def test_cost_learns_from_the_prediction_error_of_each_run() -> None:
    model = CostModel(BUDGET)
    default = model.estimate("t", "compaction", 0, 0)
    assert default.basis == "default" and default.seconds == pytest.approx(OVERHEAD_S)
    model.learn(RunSample("t", "compaction", 0, 0, 2.0))
    first = model.estimate("t", "compaction", 0, 0)
    assert first.basis == "table" and first.seconds == pytest.approx(2.0)
    model.learn(RunSample("t", "compaction", 0, 0, 8.0))  # half-way (log space) from 2 to 8
    assert model.estimate("t", "compaction", 0, 0).seconds == pytest.approx(4.0)
    other = model.estimate("u", "compaction", 0, 0)
    assert other.basis == "cluster" and other.samples == 2
    assert prediction_error(2.0, 4.0) == pytest.approx(math.log(2)) == pytest.approx(prediction_error(4.0, 2.0))


def test_history_reads_succeeded_runs_of_planned_operations() -> None:
    def record(command: str, status: str, finished: str, **metrics: int) -> AuditRecord:
        return AuditRecord(
            run_id=finished,
            who=Actor(os_user="u"),
            command=command,
            table="t",
            table_root="/t",
            options={},
            started_at=finished,
            finished_at=finished,
            duration_s=3.0,
            status=status,  # type: ignore[arg-type]
            metrics=metrics,
        )

    records = [
        record("compact", "succeeded", "2026-01-02", bytes_removed=10, bytes_added=5, files_removed=4, files_added=1),
        record("compact", "failed", "2026-01-01"),
        record("restore", "succeeded", "2026-01-03"),
        record("orphans", "succeeded", "2026-01-01", files_scanned=7, deleted_files=2),
    ]
    samples = samples_from_records("t", records)
    assert samples == [
        RunSample("t", "orphans", 0, 9, 3.0, "2026-01-01"),
        RunSample("t", "compaction", 15, 5, 3.0, "2026-01-02"),
    ]


def test_budget_length_must_be_a_duration() -> None:
    with pytest.raises(ValueError, match="bad duration 'soon'"):
        MaintenanceBudget(core_minutes=10, length="soon")


@st.composite
def _estates(draw: st.DrawFn) -> list[TableObservation]:
    tables = []
    for i in range(draw(st.integers(1, 12))):
        expirable = draw(st.integers(0, 200))
        reclaim = draw(st.integers(0, 50 << 30))
        tables.append(
            _table(
                f"t{i}",
                draw(st.integers(0, 3000)),
                checkpoint_lag=draw(st.integers(0, 500)),
                expirable_versions=expirable,
                expirable_versions_held=draw(st.integers(0, expirable)),
                reclaimable_files=draw(st.integers(0, 1000)),
                reclaimable_bytes=reclaim,
                reclaimable_bytes_held=draw(st.integers(0, reclaim)),
                cdc_lag_versions=draw(st.integers(0, 100)),
            )
        )
    return tables


@settings(max_examples=80, deadline=None)
@given(
    estate=_estates(),
    core_minutes=st.floats(0.1, 50),
    waited=st.dictionaries(st.sampled_from(["t0:compaction", "t1:expiry", "t2:cdc"]), st.integers(0, 30)),
)
def test_any_estate(estate: list[TableObservation], core_minutes: float, waited: dict[str, int]) -> None:
    budget = MaintenanceBudget(core_minutes=core_minutes, length="30min")
    result = plan(estate, budget, CostModel(budget), deferred=waited)
    chosen = [d for d in result.decisions if d.chosen]
    # The budget, by prediction.
    assert sum(d.cost.core_minutes for d in chosen) <= core_minutes + 1e-9
    # Floors and watermarks: nothing blocked is chosen, and nothing chosen removes what is held.
    obs = {o.table: o for o in estate}
    for d in chosen:
        assert not d.blocked
        o = obs[d.action.table]
        if d.action.operation == "expiry":
            assert d.benefit.versions_removed <= o.expirable_versions - o.expirable_versions_held
        if d.action.operation == "orphans":
            assert d.benefit.bytes_reclaimed <= o.reclaimable_bytes - o.reclaimable_bytes_held

    # Greedy: an action deferred for the budget did not fit beside the chosen ones ranked before it
    # (or chosen from the severity reserve, which is spent first).
    def before(c: Decision, d: Decision) -> bool:
        return (-c.priority, c.action.key) < (-d.priority, d.action.key)

    for d in result.decisions:
        if not d.chosen and d.reason.startswith("budget:"):
            spent = sum(c.cost.core_minutes for c in chosen if c.reserved or before(c, d))
            assert spent + d.cost.core_minutes > core_minutes - 1e-9
    # Pools: each table's chosen runs fit in the window.
    for table in obs:
        minutes = sum(d.cost.seconds / 60 for d in chosen if d.action.table == table)
        assert minutes <= budget.length_minutes + 1e-9
    # Aging: every priority is benefit per core-minute times (1 + 0.5 x windows waited).
    for d in result.decisions:
        base = d.benefit.points / d.cost.core_minutes
        assert d.priority == pytest.approx(base * (1 + 0.5 * waited.get(d.action.key, 0)))
