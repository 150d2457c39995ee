"""Acceptance of ``lakeops cdc`` on Iceberg tables: the changelog of PyIceberg appends, copy-on-write
deletes and overwrites plus merge-on-read deletes, replayed onto the table at ``--from`` (read by
PyIceberg), gives the table at ``--to`` (read by PyIceberg) as a multiset; the output is read back by
delta-rs. A compaction in the range adds no rows; re-runs and overlapping backfills never duplicate;
``--from 0`` includes the table's first snapshot, replaying from the empty table."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from iceberg_merge_on_read import add_equality_deletes, add_position_deletes, load
from lakeops_cli import run_json
from pyiceberg_tables import PyIcebergTable, batch, replay_changes, small_file_table
from refused_runs import failed_run_records

from lakeops.iceberg.table import TableRef
from spark_jobs.cli import main as lakeops

MASTER = ("--master", "local[2]")


def _cdc(capsys: pytest.CaptureFixture[str], table: PyIcebergTable, *argv: str) -> dict[str, Any]:
    return run_json(capsys, "cdc", table.identifier, "--catalog-uri", table.catalog_uri, *MASTER, *argv)


def _ids(table: PyIcebergTable) -> list[int]:
    """The table's snapshot ids, oldest first."""
    return [s.snapshot_id for s in sorted(table.reload().snapshots(), key=lambda s: s.sequence_number)]


def _current(table: PyIcebergTable) -> int:
    snapshot = table.reload().current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def _table_rows(table: PyIcebergTable, snapshot_id: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = table.reload().scan(snapshot_id=snapshot_id).to_arrow().to_pylist()
    return rows


def _output(out: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pa.table(DeltaTable(str(out)).to_pyarrow_table()).to_pylist()
    return rows


def test_the_changelog_replays_to_the_table_and_a_compaction_adds_nothing(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = small_file_table(tmp_path, "identity", appends=3, rows=12)
    ref = TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier)
    start = _current(table)
    table.table.delete("id < 5")  # copy-on-write: rewritten files (deletes + re-inserts)
    table.reload().overwrite(batch(200, 6), overwrite_filter="id >= 30")  # whole and rewritten files
    # Merge-on-read, as Spark writes them: position and equality deletes scoped to one file's partition.
    task = max(table.reload().scan().plan_files(), key=lambda t: t.file.record_count)
    partition = {"category": task.file.partition[0]}
    ids = pq.read_table(task.file.file_path.removeprefix("file://")).column("id").to_pylist()
    positional = add_position_deletes(load(ref), [(task.file.file_path, 0)], partition=partition)
    equality = add_equality_deletes(
        load(ref), pa.table({"id": pa.array(ids[1:3], pa.int64())}), [1], partition=partition
    )
    compacted = run_json(
        capsys, "compact", table.identifier, "--catalog-uri", table.catalog_uri, "--delete-file-threshold", "1", *MASTER
    )
    compaction = _current(table)
    assert compacted["snapshot_id"] == compaction and compacted["rows_removed_by_deletes"] > 0
    table.reload().append(batch(300, 4))
    end = _current(table)
    out = tmp_path / "changes"

    plan = _cdc(capsys, table, "--from", str(start), "--to", str(end), "--output", str(out), "--dry-run")
    assert plan["dry_run"] and not out.exists()
    assert [s["snapshot_id"] for s in plan["snapshots"]] == _ids(table)[_ids(table).index(start) + 1 :]
    (replace,) = [s for s in plan["snapshots"] if s["operation"] == "replace"]
    assert replace["snapshot_id"] == compaction and replace["files_to_read"] == 0

    report = _cdc(capsys, table, "--from", str(start), "--to", str(end), "--output", str(out))
    changes = _output(out)
    assert report["format"] == "iceberg" and report["committed_version"] == 0
    assert report["rows_insert"] == sum(r["_change_type"] == "insert" for r in changes) > 0
    assert report["rows_delete"] == sum(r["_change_type"] == "delete" for r in changes) > 0
    by_snapshot = Counter((r["_commit_snapshot_id"], r["_change_type"]) for r in changes)
    assert by_snapshot[positional.metadata.current_snapshot_id, "delete"] == 1
    assert by_snapshot[equality.metadata.current_snapshot_id, "delete"] == 2
    assert compaction not in {r["_commit_snapshot_id"] for r in changes}
    timestamps = {s.snapshot_id: s.timestamp_ms for s in table.table.snapshots()}
    assert all(
        r["_commit_timestamp"] == dt.datetime.fromtimestamp(timestamps[r["_commit_snapshot_id"]] / 1000, dt.UTC)
        for r in changes
    )
    assert replay_changes(_table_rows(table, start), changes) == replay_changes(_table_rows(table, end))


def test_reruns_and_backfills_never_duplicate_and_expired_ranges_are_refused(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = small_file_table(tmp_path, appends=5, rows=3)
    ids = _ids(table)
    out = tmp_path / "changes"

    # --from 0: from the table's creation, so the first snapshot's rows (the initial load) are included.
    first = _cdc(capsys, table, "--from", "0", "--to", str(ids[2]), "--output", str(out))
    assert (first["from_version"], first["to_version"], first["rows_insert"]) == (1, 3, 9)
    assert first["from_creation"] and first["from_snapshot_id"] is None
    again = _cdc(capsys, table, "--from", "0", "--to", str(ids[2]), "--output", str(out))
    assert again["already_extracted"] and again["committed_version"] is None
    assert DeltaTable(str(out)).version() == 0
    backfill = _cdc(capsys, table, "--from", str(ids[1]), "--output", str(out))
    assert (backfill["from_version"], backfill["to_version"], backfill["rows_insert"]) == (4, 5, 6)
    changes = _output(out)
    assert sorted((r["_commit_snapshot_id"], r["id"]) for r in changes) == sorted(
        (ids[i], row) for i in range(5) for row in range(3 * i, 3 * i + 3)
    )
    assert replay_changes([], changes) == replay_changes(_table_rows(table, ids[4]))

    table.table.maintenance.expire_snapshots().by_id(ids[2]).commit()
    code = lakeops(
        [
            "cdc",
            table.identifier,
            "--catalog-uri",
            table.catalog_uri,
            "--from",
            str(ids[1]),
            "--output",
            str(tmp_path / "other"),
            *MASTER,
            "--json",
        ]
    )
    assert code != 0 and "has expired" in capsys.readouterr().err
    assert failed_run_records(tmp_path / "other") == 1  # the refused run's record, no change table
