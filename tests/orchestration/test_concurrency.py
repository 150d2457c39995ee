"""One maintenance run per table at a time, shown by the real daemon: ``dagster dev`` (webserver and
daemon, queued run coordinator) on an instance with the shipped ``dagster.yaml``, runs launched as
the UI launches them, each a real maintenance run (its own run and step processes, a Spark session,
the operation and its blocking check) on a real Delta table. What happened is read back from the
instance: when the run queue let each run go (``RUN_STARTING``), when it started and ended."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from orchestration import ui
from orchestration.health import OVERVIEW_KEY
from orchestration.ui import PROJECT, dagster_dev

pytestmark = pytest.mark.long  # minutes of work: CI runs it as its own stage (make test-long)

LAUNCH = """
mutation($runs: [ExecutionParams!]!) {
  launchMultipleRuns(executionParamsList: $runs) {
    ... on LaunchMultipleRunsResult {
      launchMultipleRunsResult { __typename ... on LaunchRunSuccess { run { runId } } ... on Error { message } }
    }
  }
}
"""
POOLS = "{ instance { concurrencyLimits { concurrencyKey limit usingDefaultLimit } } }"
CHECKS = {"compaction": "rows_kept", "checkpoint": "matches_log"}
#: Launched at once: two runs on alpha, one on beta.
RUNS = [("alpha", "compaction"), ("alpha", "checkpoint"), ("beta", "compaction")]


def _table(location: Path) -> None:
    for i in range(6):
        rows = pa.table({"id": pa.array(range(i * 100, i * 100 + 100), pa.int64())})
        write_deltalake(str(location), rows, mode="append")


def _run(table: str, operation: str) -> dict:
    """What the UI sends for "Materialize" of one asset (with its blocking check)."""
    return {
        "selector": {
            "repositoryLocationName": ui.LOCATION,
            "repositoryName": "__repository__",
            "jobName": "__ASSET_JOB",
            "assetSelection": [{"path": [table, operation]}],
            "assetCheckSelection": [{"assetKey": {"path": [table, operation]}, "name": CHECKS[operation]}],
        },
        "mode": "default",
        "executionMetadata": {"tags": [{"key": "lakeops/table", "value": table}]},
    }


def _pools(url: str, timeout_s: float = 90) -> dict[str, tuple[int, bool]]:
    """The Concurrency page's pools, once the ``lakeops_pools`` sensor's first tick listed them."""
    deadline = time.monotonic() + timeout_s
    while True:
        listed = ui.graphql(url, POOLS)["instance"]["concurrencyLimits"]
        pools = {p["concurrencyKey"]: (p["limit"], p["usingDefaultLimit"]) for p in listed}
        if pools or time.monotonic() > deadline:
            return pools
        time.sleep(2)


def _finished(instance: dg.DagsterInstance, run_ids: list[str], timeout_s: float) -> list[dg.RunRecord]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        records = instance.get_run_records(dg.RunsFilter(run_ids=run_ids))
        if len(records) == len(run_ids) and all(r.dagster_run.is_finished for r in records):
            return sorted(records, key=lambda r: run_ids.index(r.dagster_run.run_id))
        time.sleep(2)
    raise AssertionError(f"runs not finished within {timeout_s} s: {[r.dagster_run.status for r in records]}")


def _errors(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """What went wrong in a run, as its log says it."""
    errors = []
    for entry in instance.all_logs(run_id):
        error = getattr(entry.dagster_event and entry.dagster_event.event_specific_data, "error", None)
        if error is not None:
            errors.append(f"{entry.message}: {error.message}")
    return errors


def _let_go(instance: dg.DagsterInstance, run_id: str) -> float:
    """When the run queue handed the run to the launcher (``RUN_STARTING``)."""
    (event,) = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_STARTING)
    return event.timestamp


def _launch(url: str) -> list[str]:
    runs = [_run(table, operation) for table, operation in RUNS]
    launched = ui.graphql(url, LAUNCH, {"runs": runs})["launchMultipleRuns"]["launchMultipleRunsResult"]
    assert [r["__typename"] for r in launched] == ["LaunchRunSuccess"] * len(RUNS), launched
    return [r["run"]["runId"] for r in launched]


def test_runs_on_one_table_queue_while_runs_on_two_tables_proceed(tmp_path: Path) -> None:
    for name in ("alpha", "beta"):
        _table(tmp_path / name)
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(
        f"""
spark: {{master: "local[1]"}}
tables:
  - {{name: alpha, location: {tmp_path / "alpha"}, compaction: {{min_input_files: 2}}, checkpoint: {{interval: 2}}}}
  - {{name: beta, location: {tmp_path / "beta"}, compaction: {{min_input_files: 2}}}}
"""
    )
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")

    with dagster_dev(registry, home) as url, dg.DagsterInstance.from_config(str(home)) as instance:
        # Listed (limit 1, the instance's default) before any run: what the Concurrency page shows.
        assert _pools(url) == {"lakeops_alpha": (1, True), "lakeops_beta": (1, True)}
        run_ids = _launch(url)
        records = _finished(instance, run_ids, timeout_s=300)

        failures = {
            r.dagster_run.run_id: _errors(instance, r.dagster_run.run_id)
            for r in records
            if not r.dagster_run.is_success
        }
        assert not failures, failures
        for record, (table, operation) in zip(records, RUNS, strict=True):
            run_id = record.dagster_run.run_id
            key = dg.AssetKey([table, operation])
            materialized = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
            # The run's own, then the overview it rebuilt with the table's observation after it.
            assert [m.dagster_event.asset_key for m in materialized] == [key, OVERVIEW_KEY]
            evaluations = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
            (check,) = [e for e in evaluations if e.dagster_event.event_specific_data.asset_key == key]
            assert check.dagster_event.event_specific_data.passed, check
        let_go = {run_id: _let_go(instance, run_id) for run_id in run_ids}

    first, second = sorted(records[:2], key=lambda r: let_go[r.dagster_run.run_id])
    beta = records[2]
    assert first.start_time and first.end_time and second.start_time and beta.start_time and beta.end_time
    # alpha: both launched at once; the queue held the second until the first had ended.
    assert second.create_timestamp.timestamp() < first.start_time
    assert let_go[second.dagster_run.run_id] >= first.end_time
    # alpha and beta: in progress at the same time.
    assert max(first.start_time, beta.start_time) < min(first.end_time, beta.end_time)
