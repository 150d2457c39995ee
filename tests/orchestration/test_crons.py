"""The registry's cron expressions, read without Dagster (:func:`lakeops.registry.cron_problem`), are
schedules Dagster runs as written: every one lakeops accepts, Dagster's ``ScheduleDefinition`` accepts
too, and its ticks fall on the minutes, hours, days and months the expression names (issue 34: the
check was Dagster's own, so ``lakeops plan-maintenance``, which runs without Dagster, had none)."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice

import dagster as dg
import pytest
from dagster._utils.schedules import cron_string_iterator
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeops.registry import cron_problem

EXAMPLES = int(os.environ.get("LAKEOPS_FUZZ_EXAMPLES", "25")) * 4
START = datetime(2026, 11, 27, 13, 7, tzinfo=UTC).timestamp()
MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


@dataclass(frozen=True)
class Field:
    text: str
    values: frozenset[int]


@st.composite
def fields(
    draw: st.DrawFn, low: int, high: int, names: list[str] | None = None, *, offset: int = 0, open_high: int = 0
) -> Field:
    """One field as its text and the values it selects: lists of ``*``, numbers, ranges of two or more
    values and steps; ``*`` and ``a/step`` end at ``open_high`` (default ``high``)."""
    open_high = open_high or high

    def spell(value: int) -> str:
        if names and value - offset < len(names) and draw(st.booleans()):
            name = names[value - offset]
            return draw(st.sampled_from([name, name.lower(), name.title()]))
        return str(value)

    items, values = [], set()
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["star", "value", "range", "star_step", "range_step", "start_step"]))
        first = draw(st.integers(low, high - 1))
        last = draw(st.integers(first + 1, high))
        step = draw(st.integers(1, high - low + 2))
        if kind == "star":
            items.append("*")
            values |= set(range(low, open_high + 1))
        elif kind == "value":
            value = draw(st.integers(low, high))
            items.append(spell(value))
            values.add(value)
        elif kind == "range":
            items.append(f"{spell(first)}-{spell(last)}")
            values |= set(range(first, last + 1))
        elif kind == "star_step":
            items.append(f"*/{step}")
            values |= set(range(low, open_high + 1, step))
        elif kind == "range_step":
            items.append(f"{spell(first)}-{spell(last)}/{step}")
            values |= set(range(first, last + 1, step))
        elif first < open_high:
            items.append(f"{first}/{step}")
            values |= set(range(first, open_high + 1, step))
        else:  # a step from the last value would select it alone: the value itself
            items.append(str(first))
            values.add(first)
    return Field(",".join(items), frozenset(values))


def _runs(cron: str) -> list[datetime]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Dagster warns about steps longer than their field; it still runs them
        dg.ScheduleDefinition(name="check", cron_schedule=cron, job_name="check")
        return list(islice(cron_string_iterator(START, cron, "UTC"), 6))


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    minute=fields(0, 59),
    hour=fields(0, 23),
    day=fields(1, 28, open_high=31) | st.just(Field("*", frozenset(range(1, 32)))),
    month=fields(1, 12, MONTHS, offset=1),
    weekday=st.just(Field("*", frozenset(range(7)))) | fields(0, 7, DAYS, open_high=6),
)
def test_every_expression_lakeops_accepts_runs_in_dagster_as_written(
    minute: Field, hour: Field, day: Field, month: Field, weekday: Field
) -> None:
    cron = f"{minute.text} {hour.text} {day.text} {month.text} {weekday.text}"
    assert cron_problem(cron) is None
    for run in _runs(cron):
        assert run.minute in minute.values and run.hour in hour.values and run.month in month.values, (cron, run)
        on_day, on_weekday = run.day in day.values, run.isoweekday() % 7 in {v % 7 for v in weekday.values}
        # cron's rule: with both day fields restricted, either one matching is enough
        restricted = [ok for ok, f in ((on_day, day), (on_weekday, weekday)) if f.text != "*"]
        assert any(restricted) if restricted else True, (cron, run)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.text(st.sampled_from("0123456789*/-, LW#?@JANMONdailyhourly"), max_size=24))
def test_any_text_lakeops_accepts_dagster_runs(text: str) -> None:
    if cron_problem(text) is None:
        assert _runs(text), text


@pytest.mark.parametrize("cron", ["61 25 * * *", "0 0 0 * *", "0 3 * * * 2026", "*/0 * * * *"])
def test_what_dagster_refuses_lakeops_refuses(cron: str) -> None:
    with pytest.raises(dg.DagsterInvalidDefinitionError):
        _runs(cron)
    assert cron_problem(cron) is not None


def test_an_expression_dagster_accepts_but_cannot_run_is_refused() -> None:
    """April has no 31st: Dagster takes the schedule and its tick iterator then fails."""
    assert cron_problem("0 0 31 4 *") == "no month it names has day 31: it would never run"
    with pytest.raises(Exception, match="Failed to find prev date|failed to find"):
        _runs("0 0 31 4 *")
