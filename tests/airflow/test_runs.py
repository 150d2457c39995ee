"""``airflow dags test`` of a table's DAGs on real tables (issue 37, items 1 and 2): a Delta table written by
delta-rs and an Iceberg table in a SQLite catalog written by PyIceberg. Afterwards the peers read the same
rows, compaction really merged the files, each task's XCom holds its typed report and its log the report
as ``lakeops`` prints it. The CDC DAG over two days extracts each day's commits once; a re-run of the first
day writes nothing.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from airflow_commands import airflow, xcom
from deltalake import DeltaTable, write_deltalake
from pyiceberg_tables import PyIcebergTable, small_file_table


class Tables:
    """A Delta table (``events``, six one-append files) and an Iceberg one (``orders``, four), registered
    with the driver's threads as executor."""

    def __init__(self, root: Path) -> None:
        self.delta = root / "events"
        for i in range(6):
            write_deltalake(str(self.delta), pa.table({"id": pa.array([2 * i, 2 * i + 1], pa.int64())}), mode="append")
        self.iceberg: PyIcebergTable = small_file_table(root / "iceberg", appends=4, rows=5)
        self.registry = root / "lakeops.yaml"
        self.registry.write_text(
            f"""
spark: {{executor: driver}}
tables:
  - name: events
    location: {self.delta}
    compaction: {{min_input_files: 2}}
  - name: orders
    catalog: {{uri: "{self.iceberg.catalog_uri}"}}
    identifier: {self.iceberg.identifier}
    format: iceberg
    compaction: {{min_input_files: 2}}
"""
        )

    def rows(self, table: str) -> list[object]:
        if table == "events":
            return sorted(DeltaTable(str(self.delta)).to_pyarrow_table()["id"].to_pylist())
        return self.iceberg.rows()

    def live_files(self, table: str) -> int:
        if table == "events":
            return len(DeltaTable(str(self.delta)).file_uris())
        return len(self.iceberg.reload().inspect.files())


@pytest.fixture
def tables(airflow_db: Path, tmp_path: Path) -> Tables:
    return Tables(tmp_path)


@pytest.mark.parametrize("table", ["events", "orders"])
def test_the_compaction_dag_merges_the_files(tables: Tables, table: str) -> None:
    rows, files = tables.rows(table), tables.live_files(table)
    done = airflow(tables.registry, "dags", "test", f"lakeops__{table}__compaction")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert tables.rows(table) == rows  # the peer reads the same rows
    assert tables.live_files(table) == 1 < files
    report = xcom(f"lakeops__{table}__compaction", "compaction")
    assert report["operation"] == "compact" and report["format"] == ("delta" if table == "events" else "iceberg")
    assert (report["files_removed"], report["files_added"]) == (files, 1)
    assert report["rows_written"] == len(rows)
    assert "files removed" in done.stdout and "check rows_kept:" in done.stdout  # the report and check, logged


@pytest.mark.parametrize("table", ["events", "orders"])
def test_the_nightly_dag_expires_then_removes_orphans(tables: Tables, table: str) -> None:
    rows = tables.rows(table)
    done = airflow(tables.registry, "dags", "test", f"lakeops__{table}__nightly")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert tables.rows(table) == rows
    expiry, orphans = xcom(f"lakeops__{table}__nightly", "expiry"), xcom(f"lakeops__{table}__nightly", "orphans")
    assert (expiry["operation"], orphans["operation"]) == ("expire", "orphans")
    assert done.stdout.index("check retained_files_exist:") > done.stdout.index("lakeops expire ")
    assert done.stdout.index("lakeops orphans ") > done.stdout.index("lakeops expire ")  # expiry first


DAYS = ["2026-11-01", "2026-11-02"]
#: Commit version -> the day it is committed on (two commits on the second day).
COMMIT_DAYS = {0: DAYS[0], 1: DAYS[1], 2: DAYS[1]}


@pytest.mark.long  # four `airflow dags test` runs: over a minute
def test_the_cdc_dag_extracts_each_day_once(airflow_db: Path, tmp_path: Path) -> None:
    """A manual run (``airflow dags test DAG DATE``) of an interval timetable covers the day before DATE,
    as Airflow infers a manual run's interval: the run for 11-02 extracts the commits of 11-01. Then a
    failing post-run check fails the task with the check's message."""
    source, output = tmp_path / "events", tmp_path / "changes"
    for version, day in COMMIT_DAYS.items():
        write_deltalake(
            str(source), pa.table({"id": pa.array([10 * version, 10 * version + 1], pa.int64())}), mode="append"
        )
        noon = datetime.fromisoformat(day).replace(hour=12, tzinfo=UTC).timestamp()
        os.utime(source / "_delta_log" / f"{version:020d}.json", (noon, noon))
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(
        f"""
spark: {{executor: driver}}
tables:
  - name: events
    location: {source}
    cdc: {{enabled: true, output: {output}, start_date: {DAYS[0]}, key: [id]}}
"""
    )

    def run(day_after: str) -> dict[str, object]:
        done = airflow(registry, "dags", "test", "lakeops__events__cdc", day_after)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        return xcom("lakeops__events__cdc", "cdc")

    def changes() -> list[tuple[int, int]]:
        feed = DeltaTable(str(output)).to_pyarrow_table()
        return sorted(zip(feed["_commit_version"].to_pylist(), feed["id"].to_pylist(), strict=True))

    first = run("2026-11-02")
    assert first["rows_written"] == 2 and changes() == [(0, 0), (0, 1)]
    second = run("2026-11-03")
    assert second["rows_written"] == 4
    assert changes() == [(0, 0), (0, 1), (1, 10), (1, 11), (2, 20), (2, 21)]
    version = DeltaTable(str(output)).version()
    again = run("2026-11-02")
    assert again == {"operation": "cdc", "table": str(source), "until": "2026-11-02T00:00:00+00:00", "rows_written": 0}
    assert DeltaTable(str(output)).version() == version  # nothing written
    assert len(changes()) == 6

    # An output that holds a change twice fails the run's check, and with it the task (not retried).
    write_deltalake(str(output), DeltaTable(str(output)).to_pyarrow_table().slice(0, 1), mode="append")
    failed = airflow(registry, "dags", "test", "lakeops__events__cdc", "2026-11-02")
    log = failed.stdout + failed.stderr
    assert "CheckFailed: events: check no_duplicate_changes failed after cdc:" in log, log[-4000:]
    assert "up_for_retry" not in log.lower()


def test_the_health_dag_lists_every_table_and_fails_on_one_at_error(tables: Tables, tmp_path: Path) -> None:
    """``lakeops__health`` (issue 37, item 4): every table's verdict in the log as ``lakeops health`` prints
    it; a table that cannot be read is at ERROR and fails the task naming it; without it the task passes
    and its XCom is the report."""
    text = tables.registry.read_text()
    tables.registry.write_text(text + f"  - {{name: gone, location: {tmp_path / 'missing'}, format: delta}}\n")
    failed = airflow(tables.registry, "dags", "test", "lakeops__health")
    log = failed.stdout + failed.stderr
    assert "Unhealthy: 1 of 3 tables at ERROR: gone: error reading: NotATable" in log, log[-4000:]
    assert all(name in failed.stdout for name in ("events", "orders"))  # every table's verdict, logged

    tables.registry.write_text(text)
    done = airflow(tables.registry, "dags", "test", "lakeops__health")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = xcom("lakeops__health", "health")
    assert sorted(t["table"] for t in report["tables"]) == ["events", "orders"]
    assert report["error"] == 0 and report["healthy"] + report["warn"] == 2
