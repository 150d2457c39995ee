"""Every valid registry loads as Airflow DAGs (issue 37, item 1), as tests/orchestration/test_any_registry.py
holds the Dagster loader to it: per table its nightly, compaction, checkpoint and (CDC on) cdc DAG, with the
ids, tags, owners, schedules and pools the registry gives, each DAG serializable as the DAG processor
stores it. Through Airflow's own commands: ``airflow dags list`` shows every table's DAGs of a registry of
all three formats, and a registry error is the DAG file's import error naming the table and the key.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from airflow.sdk import CronDataIntervalTimetable, CronTriggerTimetable
from airflow.serialization.serialized_objects import DagSerialization
from airflow_commands import airflow, json_output
from hypothesis import HealthCheck, given, settings
from registry_strategies import EXAMPLES, registries

from lakeops.registry import Registry, RegistryError, parse_registry
from orchestration.airflow.registry_dags import build_dags

#: Delta at a location, Iceberg in a SQLite catalog, Icechunk at a location; CDC on the Delta table.
THREE_FORMATS = """
spark: {executor: driver}
tables:
  - name: events
    location: /lake/events
    format: delta
    owners: [team:data-platform, oncall@example.com]
    tags: {tier: gold}
    schedules: {nightly: "30 2 * * *"}
    cdc: {enabled: true, output: /lake/events_changes, start_date: 2026-11-01, key: [id]}
  - name: orders
    catalog: {uri: "sqlite:////lake/catalog.db"}
    identifier: shop.orders
    format: iceberg
  - name: grid
    location: /lake/grid
    format: icechunk
"""


def assert_dags_as_registered(registry: Registry, registry_file: Path) -> None:
    dags = build_dags(registry, registry_file)
    expected = set()
    for entry in registry.tables:
        kinds = {"nightly": ["expiry", "orphans"], "compaction": ["compaction"], "checkpoint": ["checkpoint"]}
        if entry.cdc.enabled:
            kinds["cdc"] = ["cdc"]
        for kind, operations in kinds.items():
            dag_id = f"lakeops__{entry.name}__{kind}"
            expected.add(dag_id)
            dag = dags[dag_id]
            assert [task.task_id for task in dag.topological_sort()] == operations
            tags = {"lakeops", f"table:{entry.name}", *(f"operation:{op}" for op in operations)}
            tags |= {f"{key}:{value}" for key, value in entry.tags.items()}
            tags |= set() if entry.format == "auto" else {f"format:{entry.format}"}
            assert set(dag.tags) == tags
            for task in dag.tasks:
                assert (task.pool, task.pool_slots) == (f"lakeops_{entry.name}", 1)
                assert task.owner == (",".join(entry.owners) or "lakeops")
                assert task.registry == str(registry_file.resolve())
                assert (task.table, task.operation) == (entry.name, task.task_id)
            if kind == "nightly":
                assert isinstance(dag.timetable, CronTriggerTimetable) and not dag.catchup
                cron = CronTriggerTimetable(entry.schedules.nightly, timezone="UTC")  # aliases as Airflow spells them
                assert (dag.timetable.expression, str(dag.timetable.timezone)) == (cron.expression, "UTC")
            elif kind == "cdc":
                assert entry.cdc.start_date is not None
                assert isinstance(dag.timetable, CronDataIntervalTimetable) and dag.catchup
                assert (dag.timetable.expression, str(dag.timetable.timezone)) == ("0 0 * * *", "UTC")  # @daily
                assert dag.start_date == datetime.combine(entry.cdc.start_date, datetime.min.time(), tzinfo=UTC)
            else:
                assert type(dag.timetable).__name__ == "NullTimetable"  # triggered, not scheduled (yet)
            DagSerialization.serialize_dag(dag)  # as the DAG processor stores it
    if registry.tables:  # the registry's health, on every health cron the tables name
        expected.add("lakeops__health")
        health = dags["lakeops__health"]
        assert [task.task_id for task in health.tasks] == ["health"] and health.tasks[0].pool == "default_pool"
        crons = {CronTriggerTimetable(e.schedules.health, timezone="UTC").expression for e in registry.tables}
        assert {t.expression for t in health.timetable.timetables} == crons
        DagSerialization.serialize_dag(health)
    assert set(dags) == expected


def test_the_dags_of_three_formats(tmp_path: Path) -> None:
    assert_dags_as_registered(parse_registry(THREE_FORMATS), tmp_path / "lakeops.yaml")
    nightly = build_dags(parse_registry(THREE_FORMATS))["lakeops__events__nightly"]
    assert isinstance(nightly.timetable, CronTriggerTimetable) and nightly.timetable.expression == "30 2 * * *"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(registries())
def test_any_valid_registry_loads_as_dags(text: str) -> None:
    assert_dags_as_registered(parse_registry(text), Path("lakeops.yaml"))


def test_airflow_lists_every_tables_dags(airflow_db: Path, tmp_path: Path) -> None:
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(THREE_FORMATS)
    assert json_output(airflow(registry, "dags", "list-import-errors", "--local", "-o", "json")) == []
    listed = json_output(airflow(registry, "dags", "list", "--local", "-o", "json", "--columns", "dag_id,owners,tags"))
    by_id = {row["dag_id"]: row for row in listed}
    assert set(by_id) == {
        *(
            f"lakeops__{table}__{kind}"
            for table in ("events", "orders", "grid")
            for kind in ("nightly", "compaction", "checkpoint")
        ),
        "lakeops__events__cdc",
        "lakeops__health",
    }
    assert "team:data-platform" in str(by_id["lakeops__events__cdc"]["owners"])
    assert "format:iceberg" in str(by_id["lakeops__orders__compaction"]["tags"])


def test_a_registry_error_is_the_dag_files_import_error(airflow_db: Path, tmp_path: Path) -> None:
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(
        THREE_FORMATS.replace("    format: iceberg\n", "    format: iceberg\n    compaction: {target_size: 1GB}\n")
    )
    errors = json_output(airflow(registry, "dags", "list-import-errors", "--local", "-o", "json"), returncode=1)
    assert len(errors) == 1, errors
    (error,) = errors
    assert error["filepath"].endswith("lakeops_dags.py")
    assert "RegistryError" in error["error"]
    assert "table 'orders': unknown key compaction.target_size" in error["error"]
    listed = json_output(airflow(registry, "dags", "list", "--local", "-o", "json"))
    assert listed == []  # no table's DAGs half-built: the file fails whole


def test_a_tag_too_long_for_airflow_names_the_table_and_the_tag() -> None:
    """The registry allows tags of 127 + 63 characters; an Airflow tag has 100 at most. Such a registry is
    refused naming the table and the tag, not loaded with the tag cut or left out."""
    key = "k" * 63 + "/" + "e" * 40
    registry = parse_registry(f"tables:\n  - {{name: events, location: /lake/events, tags: {{{key}: gold}}}}\n")
    with pytest.raises(RegistryError, match=rf"table 'events': tags\.{key}: .* is 109 characters as an Airflow tag"):
        build_dags(registry, Path("lakeops.yaml"))
