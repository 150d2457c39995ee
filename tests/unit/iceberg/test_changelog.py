"""Iceberg changelog rules on small hand-built tables: which rows each snapshot inserted or deleted
(sequence-number rules as in scans), replaying them reproduces the table, compactions add nothing,
the output is idempotent, and ranges that cannot be replayed are refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from iceberg_merge_on_read import add_equality_deletes, add_position_deletes, write_position_deletes
from pyiceberg_tables import PyIcebergTable, batch, create_table, replay_changes, small_file_table

from lakeops.delta.scan import read_snapshot
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import InvalidArgument, UnsupportedFeature, VersionNotFound
from lakeops.iceberg.commit import commit_change
from lakeops.iceberg.data_writer import ParquetDataWriter
from lakeops.iceberg.maintenance import compaction
from lakeops.iceberg.maintenance.changelog import (
    ChangelogOptions,
    ChangelogPlan,
    change_rows,
    commit_changelog,
    extract_unit,
    plan_changelog,
)
from lakeops.iceberg.maintenance.options import IcebergCompactionOptions
from lakeops.iceberg.manifest import FileContent
from lakeops.iceberg.scan import plan_scan
from lakeops.iceberg.snapshot_update import ReplaceFiles
from lakeops.iceberg.table import IcebergTable, TableRef, load_table
from lakeops.storage import StorageOptions, open_storage

OPTIONS = StorageOptions()


def _load(table: PyIcebergTable) -> IcebergTable:
    return load_table(TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier), OPTIONS)


def _snapshot_id(table: IcebergTable) -> int:
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def _plan(table: PyIcebergTable, start: int, end: int | None, out: Path) -> ChangelogPlan:
    options = ChangelogOptions(from_snapshot=str(start), to_snapshot=None if end is None else str(end), output=str(out))
    return plan_changelog(_load(table), options, OPTIONS)


def _changes(table: PyIcebergTable, start: int, end: int | None, out: Path) -> list[dict[str, Any]]:
    plan = _plan(table, start, end, out)
    return [row for unit in plan.units for rows in change_rows(unit) for row in rows.to_pylist()]


def _brief(changes: list[dict[str, Any]]) -> list[tuple[int, str, int]]:
    """(sequence number, change type, id) of each change row, sorted."""
    return sorted((r["_commit_sequence_number"], r["_change_type"], r["id"]) for r in changes)


def _scan_rows(table: PyIcebergTable, snapshot_id: int) -> list[dict[str, Any]]:
    return table.reload().scan(snapshot_id=snapshot_id).to_arrow().to_pylist()


def _data_file(table: IcebergTable, rows: pa.Table, name: str) -> tuple[str, Any]:
    """A data file of ``rows`` written by lakeops (not committed): its path and manifest entry."""
    location = f"{table.metadata.location.rstrip('/')}/data/{name}.parquet"
    writer = ParquetDataWriter(table.storage, location, table.metadata.current_schema())
    writer.write(rows)
    return location, writer.finish().data_file({})


def _live_paths(table: IcebergTable) -> list[str]:
    plan = plan_scan(table.storage, table.metadata, table.metadata.current_snapshot())
    return sorted(t.file.path for t in plan.tasks)


def test_a_position_delete_committed_with_its_data_file_applies_to_it(tmp_path: Path) -> None:
    table = create_table(tmp_path)
    table.table.append(batch(0, 10))
    ours = _load(table)
    start = _snapshot_id(ours)
    (old_path,) = _live_paths(ours)
    new_path, new_file = _data_file(ours, batch(100, 5), "same-commit")
    deletes = write_position_deletes(
        ours.storage,
        f"{ours.metadata.location}/data/pos-same-commit.parquet",
        [(new_path, 1), (new_path, 3), (old_path, 0)],
    )
    added = [(0, new_file), (0, deletes.data_file({}, content=FileContent.POSITION_DELETES))]
    ours = commit_change(ours, ReplaceFiles(start=ours, removed=[], added=added, operation="overwrite")).table
    end = _snapshot_id(ours)

    changes = _changes(table, start, None, tmp_path / "out")
    sequence = ours.metadata.current_snapshot().sequence_number  # type: ignore[union-attr]
    assert _brief(changes) == [(sequence, "delete", 0), *((sequence, "insert", i) for i in (100, 102, 104))]
    assert {r["_commit_snapshot_id"] for r in changes} == {end}
    assert replay_changes(_scan_rows(table, start), changes) == replay_changes(_scan_rows(table, end))


def test_an_equality_delete_does_not_reach_rows_appended_after_it(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=1, rows=10)
    ours = _load(table)
    start = _snapshot_id(ours)
    ours = add_equality_deletes(ours, pa.table({"id": pa.array([2, 3], pa.int64())}), [1])
    table.table = table.reload()
    table.table.append(batch(2, 1))  # id 2 again, after the delete: it stays
    table.table = table.reload()
    table.table.append(batch(20, 1))
    ours = _load(table)
    snapshots = [s.sequence_number for s in ours.metadata.ancestors(_snapshot_id(ours))][::-1]

    changes = _changes(table, start, None, tmp_path / "out")
    assert _brief(changes) == [
        (snapshots[1], "delete", 2),
        (snapshots[1], "delete", 3),
        (snapshots[2], "insert", 2),
        (snapshots[3], "insert", 20),
    ]
    expected = replay_changes([r for r in batch(0, 10).to_pylist() if r["id"] not in (2, 3)])
    expected.update(replay_changes([*batch(2, 1).to_pylist(), *batch(20, 1).to_pylist()]))
    assert replay_changes(batch(0, 10).to_pylist(), changes) == expected


def test_a_file_removed_with_a_delete_file_touching_it_counts_its_rows_once(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=2, rows=10)  # file A: ids 0..9, file B: ids 10..19
    ours = _load(table)
    a_path = _first_file(table)
    (b_path,) = set(_live_paths(ours)) - {a_path}
    start = _snapshot_id(ours)
    ours = add_position_deletes(ours, [(a_path, 0)])  # older delete: id 0 is already gone
    removed = [t.file for t in plan_scan(ours.storage, ours.metadata, ours.metadata.current_snapshot()).tasks]
    location = f"{ours.metadata.location}/data/pos-with-remove.parquet"
    deletes = write_position_deletes(ours.storage, location, [(a_path, 1), (a_path, 2), (b_path, 0)])
    change = ReplaceFiles(
        start=ours,
        removed=[f for f in removed if f.path == a_path],
        added=[(0, deletes.data_file({}, content=FileContent.POSITION_DELETES))],
        operation="delete",
    )
    ours = commit_change(ours, change).table
    end = ours.metadata.current_snapshot()
    assert end is not None

    changes = _changes(table, start, None, tmp_path / "out")
    first_delete = end.sequence_number - 1
    assert _brief(changes) == [
        (first_delete, "delete", 0),
        *((end.sequence_number, "delete", i) for i in range(1, 11)),
    ]
    assert replay_changes(_scan_rows(table, start), changes) == replay_changes(_scan_rows(table, end.snapshot_id))


def _first_file(table: PyIcebergTable) -> str:
    """The data file of the table's first snapshot (ids 0..9)."""
    first = min(table.reload().snapshots(), key=lambda s: s.sequence_number)
    (task,) = table.table.scan(snapshot_id=first.snapshot_id).plan_files()
    return task.file.file_path


def test_copy_on_write_deletes_and_overwrites_replay_to_the_table(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "identity", appends=3, rows=12)
    start = table.table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    table.table.delete("id < 5")  # rewrites files: deletes and re-inserts their surviving rows
    table.reload().delete("category == 'a'")  # drops whole files
    table.reload().overwrite(batch(200, 6))
    table.reload().append(batch(300, 4))
    end = table.reload().current_snapshot().snapshot_id  # type: ignore[union-attr]

    changes = _changes(table, start, end, tmp_path / "out")
    assert {r["_change_type"] for r in changes} == {"insert", "delete"}
    assert replay_changes(_scan_rows(table, start), changes) == replay_changes(_scan_rows(table, end))


def test_a_compaction_between_the_snapshots_adds_no_rows(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=4, rows=5)
    ours = _load(table)
    start = _snapshot_id(ours)
    target = _live_paths(ours)[0]
    deleted_id = pq.read_table(target).column("id")[1].as_py()
    ours = add_position_deletes(ours, [(target, 1)])
    compact = compaction.plan_compaction(ours, IcebergCompactionOptions(min_input_files=2), OPTIONS)
    results = [compaction.rewrite_group(g) for g in compact.groups]
    done = compaction.commit_groups(compact, compact.groups, results, OPTIONS)
    assert done.committed and _load(table).metadata.snapshot_by_id(done.snapshot_id).operation == "replace"
    table.table = table.reload()
    table.table.append(batch(50, 2))
    end = _snapshot_id(_load(table))

    plan = _plan(table, start, end, tmp_path / "out")
    replace = [s for s in plan.snapshots if s.operation == "replace"]
    assert len(replace) == 1 and replace[0].files_to_read == 0 and replace[0].data_files_added > 0
    assert all(u.snapshot_id != replace[0].snapshot_id for u in plan.units)
    changes = [row for unit in plan.units for rows in change_rows(unit) for row in rows.to_pylist()]
    assert sorted((r["_change_type"], r["id"]) for r in changes) == [
        ("delete", deleted_id),
        ("insert", 50),
        ("insert", 51),
    ]
    assert replay_changes(_scan_rows(table, start), changes) == replay_changes(_scan_rows(table, end))


def test_the_output_is_idempotent_and_backfills_only_missing_snapshots(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=5, rows=3)
    ids = [s.snapshot_id for s in sorted(table.table.snapshots(), key=lambda s: s.sequence_number)]
    out = tmp_path / "out"

    def export(start: int, end: int | None) -> ChangelogPlan:
        plan = _plan(table, start, end, out)
        commit_changelog(plan, [extract_unit(u) for u in plan.units], OPTIONS)
        return plan

    def output_rows() -> list[tuple[int, str, int]]:
        storage = open_storage(str(out), OPTIONS)
        return _brief(read_snapshot(load_snapshot(storage, str(out)), storage).to_pylist())

    first = export(ids[0], ids[2])
    assert (first.from_version, first.to_version, first.output_version) == (2, 3, None)
    assert output_rows() == [(s, "insert", i) for s in (2, 3) for i in range(3 * (s - 1), 3 * s)]
    again = _plan(table, ids[0], ids[2], out)
    assert again.already_extracted and again.units == []
    assert commit_changelog(again, [], OPTIONS) is None
    overlapping = export(ids[1], None)
    assert (overlapping.from_version, overlapping.to_version) == (4, 5)
    assert output_rows() == [(s, "insert", i) for s in (2, 3, 4, 5) for i in range(3 * (s - 1), 3 * s)]
    storage = open_storage(str(out), OPTIONS)
    assert load_snapshot(storage, str(out)).txns[f"iceberg:{table.table.metadata.table_uuid}"].version == 5


def test_a_gap_in_the_output_is_refused_naming_the_snapshot_to_resume_from(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=4, rows=2)
    ids = [s.snapshot_id for s in sorted(table.table.snapshots(), key=lambda s: s.sequence_number)]
    out = tmp_path / "out"
    plan = _plan(table, ids[0], ids[1], out)
    commit_changelog(plan, [extract_unit(u) for u in plan.units], OPTIONS)
    with pytest.raises(InvalidArgument, match=rf"would leave sequence numbers 3\.\.3 out; use --from {ids[1]}"):
        _plan(table, ids[2], None, out)


def _expired_as_java_does(table: PyIcebergTable, snapshot_id: int) -> IcebergTable:
    """The table without snapshot ``snapshot_id``, its child still naming it as parent (Java keeps a
    child's parent-snapshot-id when the parent expires; PyIceberg clears it)."""
    ours = _load(table)
    kept = [s for s in ours.metadata.snapshots if s.snapshot_id != snapshot_id]
    return dataclasses.replace(ours, metadata=ours.metadata.model_copy(update={"snapshots": kept}))


def test_ranges_that_cannot_be_replayed_are_refused(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=4, rows=2)
    ids = [s.snapshot_id for s in sorted(table.table.snapshots(), key=lambda s: s.sequence_number)]
    out = tmp_path / "out"
    with pytest.raises(InvalidArgument, match=f"--from snapshot {ids[2]} is not an ancestor of --to snapshot {ids[1]}"):
        _plan(table, ids[2], ids[1], out)
    with pytest.raises(InvalidArgument, match="is empty"):
        _plan(table, ids[1], ids[1], out)
    with pytest.raises(VersionNotFound, match=f"snapshot {ids[1]} \\(parent of {ids[2]}\\) has expired"):
        plan_changelog(
            _expired_as_java_does(table, ids[1]), ChangelogOptions(from_snapshot=str(ids[0]), output=str(out)), OPTIONS
        )
    table.table.maintenance.expire_snapshots().by_id(ids[1]).commit()
    with pytest.raises(VersionNotFound, match=f"ends at snapshot {ids[2]} .*whose parent has expired"):
        _plan(table, ids[0], None, out)
    with pytest.raises(VersionNotFound, match=f"no snapshot {ids[1]}"):
        _plan(table, ids[1], None, out)
    assert len(_plan(table, ids[2], None, out).units) == 1  # after the expired snapshot: still fine
    assert not out.exists()

    v1 = small_file_table(tmp_path / "v1", appends=2, rows=2, properties={"format-version": "1"})
    first = min(v1.table.snapshots(), key=lambda s: s.timestamp_ms).snapshot_id
    with pytest.raises(UnsupportedFeature, match="format-version 1"):
        _plan(v1, first, None, out)


def test_tags_and_branches_name_the_ends_and_an_output_follows_one_branch(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=3, rows=2)
    ids = [s.snapshot_id for s in sorted(table.table.snapshots(), key=lambda s: s.sequence_number)]
    table.table.manage_snapshots().create_tag(ids[0], "v0").create_branch(ids[1], "side").commit()
    table.reload().append(batch(100, 2), branch="side")
    out = tmp_path / "out"

    main = plan_changelog(
        _load(table), ChangelogOptions(from_snapshot="v0", to_snapshot="main", output=str(out)), OPTIONS
    )
    assert (main.from_snapshot_id, main.to_snapshot_id) == (ids[0], ids[2])
    commit_changelog(main, [extract_unit(u) for u in main.units], OPTIONS)
    side = ChangelogOptions(from_snapshot=str(ids[1]), to_snapshot="side", output=str(out))
    with pytest.raises(InvalidArgument, match=f"up to snapshot {ids[2]}, which is not on the ancestry"):
        plan_changelog(_load(table), side, OPTIONS)
    other = plan_changelog(_load(table), side.model_copy(update={"output": str(tmp_path / "side")}), OPTIONS)
    assert _brief([r for u in other.units for rows in change_rows(u) for r in rows.to_pylist()]) == [
        (other.to_version, "insert", 100),
        (other.to_version, "insert", 101),
    ]


def _ordered_ids(table: PyIcebergTable) -> list[int]:
    """The table's snapshot ids, oldest first."""
    return [s.snapshot_id for s in sorted(table.reload().snapshots(), key=lambda s: s.sequence_number)]


def test_from_the_creation_every_row_is_an_insert_and_replays_from_the_empty_table(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=3, rows=4)
    ids = _ordered_ids(table)

    plan = _plan(table, 0, None, tmp_path / "out")
    assert (plan.from_snapshot_id, plan.to_snapshot_id) == (None, ids[2])
    assert (plan.requested_from, plan.from_version, plan.to_version) == (1, 1, 3)
    assert [(s.snapshot_id, s.data_files_added) for s in plan.snapshots] == [(i, 1) for i in ids]
    changes = [row for unit in plan.units for rows in change_rows(unit) for row in rows.to_pylist()]
    assert _brief(changes) == [(s, "insert", i) for s in (1, 2, 3) for i in range(4 * (s - 1), 4 * s)]
    assert {(r["_commit_sequence_number"], r["_commit_snapshot_id"]) for r in changes} == set(
        zip((1, 2, 3), ids, strict=True)
    )
    assert replay_changes([], changes) == replay_changes(_scan_rows(table, ids[2]))


def test_from_the_creation_reruns_write_nothing_and_later_runs_add_only_new_snapshots(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=3, rows=2)
    ids = _ordered_ids(table)
    out = tmp_path / "out"

    def export(end: int | None) -> ChangelogPlan:
        plan = _plan(table, 0, end, out)
        commit_changelog(plan, [extract_unit(u) for u in plan.units], OPTIONS)
        return plan

    def output_rows() -> list[dict[str, Any]]:
        storage = open_storage(str(out), OPTIONS)
        rows: list[dict[str, Any]] = read_snapshot(load_snapshot(storage, str(out)), storage).to_pylist()
        return rows

    first = export(ids[1])
    assert (first.from_version, first.to_version, first.output_version) == (1, 2, None)
    again = _plan(table, 0, ids[1], out)
    assert again.already_extracted and again.units == [] and commit_changelog(again, [], OPTIONS) is None
    assert _brief(output_rows()) == [(s, "insert", i) for s in (1, 2) for i in range(2 * (s - 1), 2 * s)]
    table.table.delete("id == 1")  # copy-on-write: the file of ids 0, 1 is rewritten
    table.reload().append(batch(100, 2))
    later_ids = _ordered_ids(table)

    later = export(None)
    assert (later.requested_from, later.from_version, later.to_version) == (1, 3, 5)
    assert [s.snapshot_id for s in later.snapshots] == later_ids[2:]
    changes = output_rows()
    assert _brief(changes) == [
        *((s, "insert", i) for s in (1, 2, 3) for i in range(2 * (s - 1), 2 * s)),  # each once
        (4, "delete", 0),
        (4, "delete", 1),
        (4, "insert", 0),  # the rewritten file's survivor
        (5, "insert", 100),
        (5, "insert", 101),
    ]
    assert replay_changes([], changes) == replay_changes(_scan_rows(table, later_ids[-1]))
    assert _plan(table, 0, None, out).already_extracted


def test_from_the_creation_is_refused_once_the_first_snapshot_expired(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=3, rows=2)
    ids = _ordered_ids(table)
    out = tmp_path / "out"
    with pytest.raises(VersionNotFound, match=f"snapshot {ids[0]} \\(parent of {ids[1]}\\) has expired"):
        plan_changelog(
            _expired_as_java_does(table, ids[0]), ChangelogOptions(from_snapshot="0", output=str(out)), OPTIONS
        )
    # PyIceberg clears it: the root's sequence number (2) shows that its ancestors are gone.
    table.table.maintenance.expire_snapshots().by_id(ids[0]).commit()
    with pytest.raises(
        VersionNotFound,
        match=rf"ends at snapshot {ids[1]} \(sequence number 2\), whose parent has expired.*between the table's "
        rf"creation and {ids[2]} can no longer be extracted",
    ):
        _plan(table, 0, None, out)
    assert not out.exists()


def test_from_the_creation_refuses_snapshots_written_before_the_upgrade_to_v2(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=2, rows=2, properties={"format-version": "1"})
    with table.table.transaction() as upgrade:
        upgrade.upgrade_table_version(format_version=2)
    table.reload().append(batch(10, 2))
    ids = _ordered_ids(table)
    with pytest.raises(UnsupportedFeature, match=f"snapshot {ids[0]} was written before the table's upgrade"):
        _plan(table, 0, None, tmp_path / "out")
    plan = _plan(table, ids[1], None, tmp_path / "out")
    assert (plan.from_version, plan.to_version, len(plan.units)) == (1, 1, 1)
