"""Every valid registry loads as a Dagster code location (issue 20, item 1).

Each table's partitions are its own: CDC days start on the table's ``start_date`` and a partitioned
compaction has its own dynamic partitions. No job may mix assets of different partitions
definitions, so the sensors target asset selections (run in Dagster's implicit asset job, which
allows it) and every schedule targets a job of one table. The regression: two CDC tables with
different start dates made the CDC sensor's job unresolvable and the whole location failed to load.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from registry_strategies import EXAMPLES, registries

from lakeops.registry import parse_registry
from orchestration.assets import MAINTENANCE, check_key, operation_key, table_key
from orchestration.health import OVERVIEW_KEY
from orchestration.registry_definitions import build_definitions

ROOT = Path(__file__).resolve().parents[2]

#: The demo's shape: CDC on two tables from different days, and two partitioned compactions.
OWN_PARTITIONS = """
tables:
  - name: events
    location: /lake/events
    compaction: {partitioned: true}
    cdc: {enabled: true, output: /lake/events_changes, start_date: 2026-10-14}
  - name: orders
    location: /lake/orders
    compaction: {partitioned: true}
    cdc: {enabled: true, output: /lake/order_changes, start_date: 2026-11-26}
"""


def resolve_everything(defs: dg.Definitions) -> dg.RepositoryDefinition:
    """What a code server does on load: every job (schedules' and sensors' targets included) resolved."""
    dg.Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    assert {job.name for job in repo.get_all_jobs()} - {"__ASSET_JOB"} == {s.job_name for s in repo.schedule_defs}
    return repo


def dagster_validate(registry: Path) -> subprocess.CompletedProcess[str]:
    """``dagster definitions validate -w workspace.yaml`` on ``registry``, as an operator runs it."""
    env = os.environ | {"LAKEOPS_REGISTRY": str(registry)}
    command = [sys.executable, "-m", "dagster", "definitions", "validate", "-w", str(ROOT / "workspace.yaml")]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_tables_with_different_cdc_days_and_partitions_load(tmp_path: Path) -> None:
    repo = resolve_everything(build_definitions(parse_registry(OWN_PARTITIONS)))
    graph = repo.asset_graph
    starts = {
        key.path[0]: graph.get(key).partitions_def.start.date().isoformat()  # type: ignore[union-attr]
        for key in graph.get_all_asset_keys()
        if key.path[1] == "cdc"
    }
    assert starts == {"events": "2026-10-14", "orders": "2026-11-26"}
    assert {s.name for s in repo.sensor_defs} == {
        "lakeops_small_files",
        "lakeops_checkpoints",
        "lakeops_cdc",
        "lakeops_pools",
    }

    registry = tmp_path / "lakeops.yaml"
    registry.write_text(OWN_PARTITIONS)
    done = dagster_validate(registry)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Validation successful" in done.stdout + done.stderr


def test_a_maintenance_budget_adds_the_planner_over_every_table() -> None:
    """The planner's sensor selects every maintenance asset of every table, CDC days and dynamic
    partitions of different tables among them (the implicit asset job holds them all)."""
    budget = 'maintenance_budget: {window: "0 1 * * *", core_minutes: 120}\n'
    repo = resolve_everything(build_definitions(parse_registry(budget + OWN_PARTITIONS)))
    assert "lakeops_planner" in {s.name for s in repo.sensor_defs}
    planner = repo.get_sensor_def("lakeops_planner")
    selected = planner.asset_selection.resolve(repo.asset_graph)  # type: ignore[union-attr]
    assert selected == {dg.AssetKey([t, op]) for t in ("events", "orders") for op in MAINTENANCE}
    assert dg.AssetKey(["lakeops", "maintenance_plan"]) in repo.asset_graph.get_all_asset_keys()


def test_five_hundred_tables_load_with_a_few_shared_jobs() -> None:
    """500 tables of every address, format, CDC start and compaction mix load; the jobs do not grow
    with the tables (each job resolves against every asset: a job per table made loading quadratic,
    a minute at this size)."""
    entries: list[dict[str, Any]] = []
    for i in range(500):
        entry: dict[str, Any] = {"name": f"t{i}", "format": ["auto", "delta", "iceberg", "icechunk"][i % 4]}
        if i % 2:
            entry["location"] = f"/lake/t{i}"
        else:
            entry |= {"catalog": {"uri": "sqlite:///c.db"}, "identifier": f"db.t{i}"}
        if i % 3:
            start = date(2026, 1, 1) + timedelta(days=i % 400)
            entry["cdc"] = {"enabled": True, "output": f"/lake/t{i}_changes", "start_date": start}
        if i % 5 == 0:
            entry["compaction"] = {"partitioned": True}
        if i % 7 == 0:
            entry["schedules"] = {"checkpoint": "0 */6 * * *"}
        entries.append(entry)
    registry = parse_registry(yaml.safe_dump({"tables": entries}))
    repo = resolve_everything(build_definitions(registry))
    cdc_tables = sum(1 for e in registry.tables if e.cdc.enabled)
    assert len(repo.asset_graph.get_all_asset_keys()) == 500 * 5 + cdc_tables + 1  # and the overview
    jobs = {job.name for job in repo.get_all_jobs()}
    assert jobs == {"__ASSET_JOB", "lakeops_nightly", "lakeops_health", "lakeops_checkpoint"}
    assert len(repo.schedule_defs) == 500 * 2 + len(range(0, 500, 7)) + 1


def assert_loads_as_generated(text: str) -> None:
    """``text`` loads, and every table gets its assets, own partitions, schedules and sensor targets,
    each asset launchable on its own with its check (what a sensor or the UI requests)."""
    registry = parse_registry(text)
    repo = resolve_everything(build_definitions(registry))
    graph = repo.asset_graph
    expected: set[dg.AssetKey] = set()
    for entry in registry.tables:
        operations = [op for op in MAINTENANCE if op != "cdc" or entry.cdc.enabled]
        expected |= {table_key(entry), *(operation_key(entry, op) for op in operations)}
        for operation in operations:
            key = operation_key(entry, operation)
            partitions = graph.get(key).partitions_def
            if operation == "cdc":
                assert isinstance(partitions, dg.DailyPartitionsDefinition)
                assert partitions.start.date() == entry.cdc.start_date
            elif operation == "compaction" and entry.compaction.partitioned:
                assert isinstance(partitions, dg.DynamicPartitionsDefinition)
                assert partitions.name == f"{entry.name}_partitions"
            else:
                assert partitions is None, key
            job = repo.get_implicit_job_def_for_assets([key])
            assert job is not None
            launched = job.get_subset(asset_selection={key}, asset_check_selection={check_key(entry, operation)})
            assert partitions is None or launched.partitions_def == partitions
    assert graph.get_all_asset_keys() == expected | ({OVERVIEW_KEY} if registry.tables else set())
    tables = {entry.name: entry for entry in registry.tables}
    now = datetime.now(UTC)
    for schedule in repo.schedule_defs:
        tick = schedule.evaluate_tick(dg.build_schedule_context(scheduled_execution_time=now, repository_def=repo))
        if schedule.name == "lakeops_overview_schedule":  # every table's health cron; no table's assets
            (request,) = tick.run_requests or []
            repo.get_job(schedule.job_name).get_subset(asset_selection=set(request.asset_selection or []))
            assert set(request.asset_selection or []) == {OVERVIEW_KEY}
            continue
        if tick.skip_message:  # CDC that starts after today
            entry = tables[schedule.name.removesuffix("_cdc_schedule")]
            assert entry.cdc.start_date is not None and entry.cdc.start_date > now.date(), tick.skip_message
            continue
        (request,) = tick.run_requests or []
        entry = tables[request.tags["lakeops/table"]]
        assert schedule.name.startswith(f"{entry.name}_") and {k.path[0] for k in request.asset_selection or []} == {
            entry.name
        }
        job = repo.get_job(schedule.job_name)
        job.get_subset(
            asset_selection=set(request.asset_selection or []),
            asset_check_selection=set(request.asset_check_keys or []),
        )
        if request.partition_key is not None:
            assert job.partitions_def is not None and job.partitions_def.has_partition_key(request.partition_key)
    for sensor in repo.sensor_defs:
        if sensor.name == "lakeops_pools":
            assert sensor.asset_selection is None and sensor.default_status == dg.DefaultSensorStatus.RUNNING
            continue
        operation = {"lakeops_small_files": "compaction", "lakeops_checkpoints": "checkpoint", "lakeops_cdc": "cdc"}
        op = operation[sensor.name]
        covered = [e for e in registry.tables if op != "cdc" or e.cdc.enabled]
        assert sensor.asset_selection is not None
        assert sensor.asset_selection.resolve(graph) == {operation_key(e, op) for e in covered}
    assert len(repo.sensor_defs) == (
        0 if not registry.tables else 4 if any(e.cdc.enabled for e in registry.tables) else 3
    )


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(registries())
def test_any_valid_registry_loads(text: str) -> None:
    assert_loads_as_generated(text)


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(registries(max_tables=12))
def test_dagster_validates_the_workspace_on_a_generated_registry(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    registry = tmp_path_factory.mktemp("registry") / "lakeops.yaml"
    registry.write_text(text)
    done = dagster_validate(registry)
    assert done.returncode == 0, text + done.stdout[-3000:] + done.stderr[-3000:]
