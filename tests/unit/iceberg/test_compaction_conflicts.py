"""Iceberg compaction against snapshots committed between its plan and its commit, validated from the
starting snapshot (https://iceberg.apache.org/spec/#commit-conflict-resolution-and-retry): which it
rebases over, which file groups they drop and when it aborts.

The table is identity-partitioned by ``category``: one file group per category. Groups are rewritten
by the pure task (no Spark) and committed through :func:`maintenance_commits.commit_compaction`, which also
deletes the new files of dropped groups (or of the whole run on an abort) and reports them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from iceberg_merge_on_read import add_equality_deletes, add_position_deletes, load
from maintenance_commits import commit_compaction
from pyiceberg.expressions import EqualTo
from pyiceberg_tables import PyIcebergTable, small_file_table

from lakeops.errors import CommitConflict
from lakeops.iceberg.scan import LiveFile, plan_scan
from lakeops.iceberg.table import TableRef
from lakeops.ops import compaction
from lakeops.ops.compaction import CompactionOptions, CompactionReport
from lakeops.storage import StorageOptions


def _table(tmp_path: Path) -> PyIcebergTable:
    return small_file_table(tmp_path, "identity", appends=4, rows=12)


def _rewrite(table: PyIcebergTable) -> tuple[Any, list[Any]]:
    options = CompactionOptions(catalog_uri=table.catalog_uri, min_input_files=2)
    plan = compaction.plan(table.identifier, options, StorageOptions())
    assert len(plan.groups) >= 3
    return plan, [plan.task()(g) for g in plan.groups]


def _commit(plan: Any, results: list[Any]) -> CompactionReport:
    return commit_compaction(plan, plan.groups, results, StorageOptions(), 0.0)


def _live(table: PyIcebergTable, category: str) -> list[LiveFile]:
    loaded = load(TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier))
    files = plan_scan(loaded.storage, loaded.metadata, loaded.metadata.current_snapshot()).data_files
    return sorted((f for f in files if f.entry.data_file.partition.get("category") == category), key=lambda f: f.path)


def _group_of(plan: Any, category: str) -> int:
    return next(g.group_id for g in plan.groups if g.partition.get("category") == category)


def _outputs_exist(results: list[Any], group_id: int) -> list[bool]:
    return [
        Path(w.location.removeprefix("file://")).exists() for r in results if r.group_id == group_id for w in r.written
    ]


def test_an_equality_delete_meanwhile_still_applies_to_the_rewritten_rows(tmp_path: Path) -> None:
    table = _table(tmp_path)
    expected = [r for r in table.rows() if r["id"] not in (1, 4)]
    plan, results = _rewrite(table)
    loaded = load(TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier))
    add_equality_deletes(loaded, pa.table({"id": pa.array([1, 4], pa.int64())}), [1], partition={"category": "b"})

    report = _commit(plan, results)

    assert report.commits == 1 and report.groups_dropped_by_conflict == 0
    new = {p for r in results for p in (w.location for w in r.written)}
    sequence_numbers = {f.data_sequence_number for f in _live(table, "b") if f.path in new}
    assert sequence_numbers == {plan.sequence_number}  # older than the delete's: it still applies to them
    # PyIceberg reads no equality deletes: a second pass applies it (and drops it) before PyIceberg reads.
    options = CompactionOptions(catalog_uri=table.catalog_uri, min_input_files=1, delete_file_threshold=1)
    again = compaction.plan(table.identifier, options, StorageOptions())
    commit_compaction(again, again.groups, [again.task()(g) for g in again.groups], StorageOptions(), 0.0)
    assert table.rows() == expected


def test_a_position_delete_on_a_rewritten_file_drops_its_group(tmp_path: Path) -> None:
    table = _table(tmp_path)
    plan, results = _rewrite(table)
    victim = _live(table, "b")[0]
    loaded = load(TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier))
    add_position_deletes(loaded, [(victim.path, 0)], partition={"category": "b"})
    expected = table.rows()

    report = _commit(plan, results)

    assert report.groups_dropped_by_conflict == 1
    assert "added position deletes" in report.conflicts[0] and victim.path in report.conflicts[0]
    assert _outputs_exist(results, _group_of(plan, "b")) == [False]
    assert _outputs_exist(results, _group_of(plan, "c")) == [True]
    assert victim.path in {f.path for f in _live(table, "b")}  # kept, with its delete
    assert table.rows() == expected  # the deleted row did not come back


def test_a_removed_file_drops_its_group(tmp_path: Path) -> None:
    table = _table(tmp_path)
    plan, results = _rewrite(table)
    table.table.delete(EqualTo("id", 1))  # copy-on-write: replaces a file of category b
    expected = table.rows()

    report = _commit(plan, results)

    assert report.groups_dropped_by_conflict == 1 and "is no longer in the table" in report.conflicts[0]
    assert _outputs_exist(results, _group_of(plan, "b")) == [False]
    assert _outputs_exist(results, _group_of(plan, "c")) == [True]
    assert table.rows() == expected


def test_when_every_group_conflicts_it_aborts_deleting_only_its_own_files(tmp_path: Path) -> None:
    table = _table(tmp_path)
    plan, results = _rewrite(table)
    for category in ("a", "b", "c", None):
        table.reload().delete(EqualTo("id", next(r["id"] for r in table.rows() if r["category"] == category)))
    expected = table.rows()

    with pytest.raises(CommitConflict, match=r"db\.events: .* is no longer in the table.*every file group"):
        _commit(plan, results)

    assert not any(exists for g in plan.groups for exists in _outputs_exist(results, g.group_id))
    assert table.rows() == expected


def test_a_dropped_group_keeps_the_delete_files_it_still_needs(tmp_path: Path) -> None:
    table = _table(tmp_path)
    first = _live(table, "a")[0]
    loaded = load(TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier))
    add_position_deletes(loaded, [(first.path, 0)], partition={"category": "a"})
    plan, results = _rewrite(table)
    assert len(plan.dangling_deletes) == 1  # rewriting every file of category a leaves it nothing to apply to
    deleted_id = next(r["id"] for r in table.rows() if r["category"] == "a")
    table.table.delete(EqualTo("id", deleted_id))  # replaces a file of category a: that group is dropped
    expected = table.rows()

    report = _commit(plan, results)

    assert report.groups_dropped_by_conflict == 1 and report.delete_files_removed == 0
    assert table.rows() == expected  # the position delete still hides its row of the file kept
