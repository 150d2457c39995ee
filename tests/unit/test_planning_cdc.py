"""The planner's history includes CDC runs: on real local Delta tables, a CDC run made through
``lakeops.api`` (recorded under its change table) is read back as a run of its source table
(:func:`lakeops.planning.estate.audit_records`), so the review of the window counts the planned CDC
as run and the cost model predicts the next CDC from it; the change table, registered too, does not
take the run as its own."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakeops import api
from lakeops.errors import InvalidArgument
from lakeops.ops.cdc import CdcOptions
from lakeops.planning.benefit import RATES
from lakeops.planning.cost import work_of_run
from lakeops.planning.estate import audit_records, plan_tables, run_history
from lakeops.planning.review import review
from lakeops.registry import MaintenanceBudget, TableEntry, parse_registry

BUDGET = MaintenanceBudget(core_minutes=60)


def _append(location: Path, start: int, commits: int) -> None:
    config = {"delta.enableChangeDataFeed": "true"}
    for i in range(start, start + commits):
        write_deltalake(str(location), pa.table({"id": pa.array([i], pa.int64())}), mode="append", configuration=config)


def _entries(tmp_path: Path) -> tuple[TableEntry, TableEntry]:
    _append(tmp_path / "events", 0, 3)
    events, changes = parse_registry(
        f"""
tables:
  - name: events
    location: {tmp_path / "events"}
    cdc: {{enabled: true, output: {tmp_path / "changes"}, start_date: 2020-01-01}}
  - name: changes
    location: {tmp_path / "changes"}
"""
    ).tables
    return events, changes


def test_the_review_counts_a_planned_cdc_run_as_run_and_the_cost_model_learns_it(tmp_path: Path) -> None:
    events, changes = _entries(tmp_path)
    planned_at = datetime.now(UTC).isoformat()
    plan = plan_tables([events], BUDGET)
    chosen = [d for d in plan.decisions if d.chosen]
    (cdc,) = [d for d in chosen if d.action.operation == "cdc"]
    assert cdc.benefit.cdc_versions_closed == 3 and cdc.cost.basis == "default"

    report = api.cdc(events.address, CdcOptions(from_version=0, output=str(tmp_path / "changes")))

    records = audit_records(events)
    assert [(r.command, r.source) for r in records] == [("cdc", events.address)]
    result = review(chosen, planned_at, {"events": records})
    outcome = next(o for o in result.outcomes if o.action == "events:cdc")
    assert (outcome.status, outcome.actual_s) == ("succeeded", records[0].duration_s)
    assert outcome.actual_points == RATES["cdc_versions_closed"] * report.versions_extracted == 6
    assert "| `events:cdc` | succeeded |" in result.markdown()
    assert {o.status for o in result.outcomes if o.action != "events:cdc"} == {"not run"}

    (sample,) = run_history(events)
    assert (sample.table, sample.operation, sample.seconds) == ("events", "cdc", records[0].duration_s)
    assert (sample.work_bytes, sample.work_files) == work_of_run("cdc", report.metrics())
    assert sample.work_bytes == report.source_bytes + report.bytes_written > 0 and sample.work_files == 3
    assert not audit_records(changes) and not run_history(changes)  # the change table's records are its source's

    _append(tmp_path / "events", 3, 2)
    (later,) = [d for d in plan_tables([events], BUDGET).decisions if d.action.operation == "cdc"]
    assert (later.cost.basis, later.cost.samples) == ("table", 1)
    # Predicted from its run (a fraction of a second), not the default 20 s.
    assert later.cost.seconds == pytest.approx(sample.seconds, rel=0.05) and later.cost.seconds < 5


def test_only_the_tables_own_cdc_runs_count_and_a_failed_one_is_reviewed_as_failed(tmp_path: Path) -> None:
    """Of the records under the table's change table only those naming it as their source count: not a
    dry run (none is written), nor a run of another source into that output; the table's own run there,
    refused because the output holds the other's changes, is its failed run (no cost sample)."""
    events, _ = _entries(tmp_path)
    _append(tmp_path / "other", 0, 2)
    output = str(tmp_path / "changes")
    planned_at = datetime.now(UTC).isoformat()
    chosen = [d for d in plan_tables([events], BUDGET).decisions if d.chosen and d.action.operation == "cdc"]

    api.cdc(events.address, CdcOptions(from_version=0, output=output), dry_run=True)
    api.cdc(str(tmp_path / "other"), CdcOptions(from_version=0, output=output))
    assert audit_records(events) == []
    with pytest.raises(InvalidArgument, match="holds the changes of table"):
        api.cdc(events.address, CdcOptions(from_version=0, output=output))

    (record,) = audit_records(events)
    assert (record.status, record.source) == ("failed", events.address) and run_history(events) == []
    (outcome,) = review(chosen, planned_at, {"events": [record]}).outcomes
    assert (outcome.action, outcome.status, outcome.actual_points) == ("events:cdc", "failed", 0.0)
