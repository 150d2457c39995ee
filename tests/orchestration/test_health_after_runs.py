"""Health that is current by construction (issue 36, item 1): a maintenance run records the table's
observation and its health checks' evaluations as the run left the table, and rebuilds the overview,
however it was launched — here by ``dagster asset materialize`` (no daemon), and with the real daemon
by a schedule tick and by the small-file sensor. Tables are real Delta tables of 30 small files
written by delta-rs; every outcome is read back from the Dagster instance the runs wrote to."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakeops.registry import parse_registry
from orchestration.health import OVERVIEW_KEY
from orchestration.registry_definitions import build_definitions
from orchestration.resources import SparkResource, StorageResource
from orchestration.ui import LOCATION, PROJECT, dagster_dev, graphql


def _small_files(location: Path, count: int) -> None:
    for i in range(count):
        write_deltalake(str(location), pa.table({"id": pa.array([i], pa.int64())}), mode="append")


def _registry(root: Path, *, scheduled: bool = False) -> Path:
    """``events``, compacted when the small-file sensor finds 5 small files; with ``scheduled``, also
    ``orders``, compacted by a schedule every minute and never by the sensor (its trigger is never met)."""
    registry = root / "lakeops.yaml"
    orders = f"""
  - name: orders
    location: {root / "orders"}
    format: delta
    compaction: {{small_file_trigger: 1000, min_input_files: 2}}
    checkpoint: {{interval: 100}}
    health: {{small_files: {{warn: 20}}}}
    schedules: {{compaction: "* * * * *"}}
"""
    registry.write_text(
        f"""
tables:
  - name: events
    location: {root / "events"}
    format: delta
    compaction: {{small_file_trigger: 5, min_input_files: 2}}
    checkpoint: {{interval: 100}}
    health: {{small_files: {{warn: 20}}}}
{orders if scheduled else ""}"""
    )
    return registry


def _home(root: Path) -> Path:
    home = root / "home"
    home.mkdir()
    shutil.copy(PROJECT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    return home


def _observe_before(registry: Path, instance: dg.DagsterInstance, table: str) -> None:
    """``table``'s asset observed before maintenance: 30 small files, its ``small_files`` check warns."""
    definitions = build_definitions(parse_registry(registry.read_text()))
    observed = dg.materialize(
        list(definitions.assets or []),
        selection=[dg.AssetKey([table, "table"])],
        resources={"spark": SparkResource(), "storage": StorageResource()},
        instance=instance,
    )
    (small,) = [c for c in observed.get_asset_check_evaluations() if c.check_name == "small_files"]
    assert (small.passed, small.severity) == (False, dg.AssetCheckSeverity.WARN)


def _observed_at(row: str) -> float:
    return datetime.strptime(row, "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC).timestamp()


def assert_health_is_current(instance: dg.DagsterInstance, table: str, run_id: str) -> None:
    """After run ``run_id`` compacted ``table`` to one file: the table's latest observation is newer
    than the run's materialization and has no small files left, the ``small_files`` check's latest
    evaluation passes, and the overview is no older than the observation and says the same."""
    key = dg.AssetKey([table, "table"])
    (compacted,) = [
        r
        for r in instance.fetch_materializations(dg.AssetKey([table, "compaction"]), limit=20).records
        if r.run_id == run_id
    ]
    (observed,) = instance.fetch_observations(key, limit=1).records
    assert observed.timestamp > compacted.timestamp and observed.asset_observation is not None
    metadata = observed.asset_observation.metadata
    assert (metadata["live_files"].value, metadata["small_files"].value) == (1, 0)
    assert metadata["health_status"].value == "healthy"
    (check,) = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(key, "small_files"), limit=1
    )
    assert check.event is not None and check.event.dagster_event is not None
    evaluation = check.event.dagster_event.event_specific_data
    assert isinstance(evaluation, dg.AssetCheckEvaluation) and evaluation.passed
    assert check.event.timestamp >= compacted.timestamp
    (overview,) = instance.fetch_materializations(OVERVIEW_KEY, limit=1).records
    assert overview.timestamp >= observed.timestamp and overview.asset_materialization is not None
    text = str(overview.asset_materialization.metadata["tables"].value)
    (row,) = [line for line in text.splitlines() if line.startswith(f"| {table} |")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[2] == "healthy" and cells[4].startswith("compaction, ")
    assert abs(_observed_at(cells[5]) - observed.timestamp) < 5  # a time, not an age that freezes
    assert _observed_at(cells[4].removeprefix("compaction, ")) >= compacted.timestamp - 5


def test_a_compaction_by_dagster_asset_materialize_leaves_the_health_current(tmp_path: Path) -> None:
    _small_files(tmp_path / "events", 30)
    registry, home = _registry(tmp_path), _home(tmp_path)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        _observe_before(registry, instance, "events")
    command = [sys.executable, "-m", "dagster", "asset", "materialize", "-m", "orchestration.definitions"]
    env = os.environ | {"LAKEOPS_REGISTRY": str(registry), "DAGSTER_HOME": str(home)}
    done = subprocess.run(
        [*command, "--select", "events/compaction"], env=env, cwd=PROJECT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert len(DeltaTable(str(tmp_path / "events")).file_uris()) == 1
    with dg.DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS]), limit=1)
        assert_health_is_current(instance, "events", run.run_id)


START = """
mutation($selector: %(kind)sSelector!) {
  start%(what)s(%(arg)s: $selector) { __typename ... on PythonError { message } }
}
"""


def _start(url: str, kind: str, name: str) -> None:
    """Turn a schedule or sensor on, as its toggle in the UI does."""
    what, arg = ("Schedule", "scheduleSelector") if kind == "Schedule" else ("Sensor", "sensorSelector")
    field = "scheduleName" if kind == "Schedule" else "sensorName"
    selector = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__", field: name}
    answer = graphql(url, START % {"kind": kind, "what": what, "arg": arg}, {"selector": selector})
    assert "PythonError" not in str(answer), answer


def _run_by(instance: dg.DagsterInstance, tag: str, value: str, timeout_s: float) -> dg.DagsterRun:
    """The first finished run the daemon launched with ``tag`` = ``value``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = instance.get_runs(dg.RunsFilter(tags={tag: value}))
        finished = [run for run in runs if run.is_finished]
        if finished:
            return finished[0]
        time.sleep(2)
    raise AssertionError(f"no run with {tag}={value} finished in {timeout_s} s")


@pytest.mark.long  # the daemon's schedule tick (up to a minute) and a sensor tick: CI's make test-long
def test_schedule_and_sensor_launched_compactions_leave_the_health_current(tmp_path: Path) -> None:
    _small_files(tmp_path / "events", 30)
    _small_files(tmp_path / "orders", 30)
    registry, home = _registry(tmp_path, scheduled=True), _home(tmp_path)
    with dagster_dev(registry, home) as url, dg.DagsterInstance.from_config(str(home)) as instance:
        for table in ("events", "orders"):
            _observe_before(registry, instance, table)
        _start(url, "Schedule", "orders_compaction_schedule")
        _start(url, "Sensor", "lakeops_small_files")
        scheduled = _run_by(instance, "dagster/schedule_name", "orders_compaction_schedule", 240)
        sensed = _run_by(instance, "dagster/sensor_name", "lakeops_small_files", 240)
        assert (scheduled.status, sensed.status) == (dg.DagsterRunStatus.SUCCESS,) * 2
        assert sensed.asset_selection is not None and dg.AssetKey(["events", "compaction"]) in sensed.asset_selection
        assert_health_is_current(instance, "orders", scheduled.run_id)
        assert_health_is_current(instance, "events", sensed.run_id)
