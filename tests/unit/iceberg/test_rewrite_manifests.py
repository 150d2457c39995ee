"""Manifest rewriting: clustering and cutting rules, and commits that keep every entry's snapshot id
and sequence numbers, carry over concurrent appends and abort on a concurrent rewrite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from iceberg_merge_on_read import add_equality_deletes, add_position_deletes, load
from pyiceberg_tables import PyIcebergTable, batch, small_file_table

from lakeops.errors import CommitConflict, InvalidArgument, ProtocolError
from lakeops.iceberg.maintenance.rewrite_manifests import (
    RewriteManifests,
    RewriteManifestsOptions,
    RewriteManifestsPlan,
    SourceSlice,
    cluster,
    commit_rewrite,
    entry_order,
    output_count,
    plan_rewrite_manifests,
    write_output,
)
from lakeops.iceberg.manifest import DataFile, EntryStatus, ManifestEntry, manifests_of, read_manifest
from lakeops.iceberg.manifest_list import ManifestContent, ManifestFile
from lakeops.iceberg.scan import LiveFile, plan_scan, read_live_files
from lakeops.iceberg.table import IcebergTable, TableRef
from lakeops.storage import StorageOptions

STORAGE = StorageOptions()


def _ref(table: PyIcebergTable) -> TableRef:
    return TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier)


def _plan(table: PyIcebergTable, **options: Any) -> RewriteManifestsPlan:
    return plan_rewrite_manifests(load(_ref(table)), RewriteManifestsOptions(**options), STORAGE)


def _exists(uri: str) -> bool:
    return Path(uri.removeprefix("file://")).is_file()


def _tracking(table: IcebergTable) -> dict[str, tuple[int, int | None, int | None, int | None]]:
    """Every live file of the current snapshot: (content, snapshot id, data and file sequence number)."""
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None
    files = read_live_files(table.storage, manifests_of(table.storage, snapshot))
    tracked = {
        f.path: (int(f.content), f.entry.snapshot_id, f.entry.sequence_number, f.entry.file_sequence_number)
        for f in files
    }
    assert len(tracked) == len(files)
    return tracked


def _scan(table: IcebergTable) -> dict[str, list[str]]:
    """Data file -> the delete files planning attaches to it."""
    plan = plan_scan(table.storage, table.metadata, table.metadata.current_snapshot())
    return {t.file.path: sorted(d.path for d in t.deletes) for t in plan.tasks}


# --- pure rules ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("total", "target", "entries", "expected"),
    [(10, 100, 5, 1), (100, 100, 5, 1), (101, 100, 5, 2), (950, 100, 5, 5), (950, 100, 0, 0), (1, 8, 1, 1)],
)
def test_output_count_is_ceil_of_bytes_over_target_within_entries(
    total: int, target: int, entries: int, expected: int
) -> None:
    assert output_count(total, target, entries) == expected


def _live(manifest: str, path: str, day: Any) -> LiveFile:
    data = DataFile(file_path=path, file_format="PARQUET", partition={"day": day}, record_count=1, file_size_in_bytes=1)
    return LiveFile(ManifestEntry(status=EntryStatus.EXISTING, snapshot_id=1, data_file=data), 0, manifest)


def _manifest(path: str) -> ManifestFile:
    return ManifestFile(manifest_path=path, manifest_length=10, partition_spec_id=0, added_snapshot_id=1)


def test_cluster_orders_by_partition_then_path_and_cuts_equal_runs() -> None:
    nan = float("nan")
    files = [
        _live("m1", "f1", 3.0),
        _live("m1", "f2", None),
        _live("m1", "f3", 1.0),
        _live("m2", "f4", nan),
        _live("m2", "f5", 1.0),
        _live("m3", "f6", 2.0),
        _live("m3", "f7", 1.0),
    ]
    manifests = [_manifest(p) for p in ("m1", "m2", "m3")]
    groups = cluster(files, manifests, ["day"], 3)
    assert [sum(s.entries for s in g) for g in groups] == [3, 2, 2]

    by_manifest: dict[str, list[LiveFile]] = {}
    for f in files:
        by_manifest.setdefault(f.manifest_path, []).append(f)

    def taken(slices: list[SourceSlice]) -> list[str]:
        chosen = [
            by_manifest[s.manifest.manifest_path][i].entry for s in slices for a, b in s.ranges for i in range(a, b)
        ]
        return [e.data_file.file_path for e in sorted(chosen, key=lambda e: entry_order(e, ["day"]))]

    # null first, then values ascending with the path breaking ties, NaN last
    assert [taken(g) for g in groups] == [["f2", "f3", "f5"], ["f7", "f6"], ["f1", "f4"]]
    # consecutive positions of one source collapse into one range
    assert groups[0] == [
        SourceSlice(manifest=manifests[0], ranges=[(1, 3)]),
        SourceSlice(manifest=manifests[1], ranges=[(1, 2)]),
    ]


# --- planning and committing PyIceberg tables ----------------------------------------------------------


def _two_specs_with_deletes(tmp_path: Path) -> PyIcebergTable:
    """Three appends unpartitioned, two after partitioning by category, two position delete files."""
    table = small_file_table(tmp_path, "unpartitioned", appends=3, rows=6)
    with table.table.update_spec() as update:
        update.add_identity("category")
    for i in range(2):
        table.reload().append(batch(100 + 10 * i, 6))
    first_spec = sorted(p for p, t in _tracking(load(_ref(table))).items() if "category=" not in p)
    add_position_deletes(load(_ref(table)), [(first_spec[0], 0)])
    add_position_deletes(load(_ref(table)), [(first_spec[1], 2)])
    table.reload()
    return table


def _write_and_commit(plan: RewriteManifestsPlan) -> IcebergTable:
    outcome = commit_rewrite(plan, [write_output(u) for u in plan.outputs], STORAGE)
    assert outcome is not None
    return outcome.table


def test_rewrite_merges_per_spec_and_content_and_keeps_tracking_fields(tmp_path: Path) -> None:
    table = _two_specs_with_deletes(tmp_path)
    before = load(_ref(table))
    tracked, scanned, rows = _tracking(before), _scan(before), table.rows()
    parent = before.metadata.current_snapshot()
    assert parent is not None and parent.summary is not None
    assert len(manifests_of(before.storage, parent)) == 7

    plan = _plan(table)
    kinds = sorted((u.spec.spec_id, u.content) for u in plan.outputs)
    assert kinds == [(0, "data"), (0, "deletes"), (1, "data")]
    assert len(plan.replaced) == plan.manifests_before == 7 and plan.manifests_after == 3
    assert plan.entries == len(tracked)

    after = _write_and_commit(plan)

    snapshot = after.metadata.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    manifests = manifests_of(after.storage, snapshot)
    assert len(manifests) == 3
    assert {m.added_snapshot_id for m in manifests} == {snapshot.snapshot_id}
    assert all(m.sequence_number == snapshot.sequence_number for m in manifests)
    # Every file keeps the snapshot that added it and both sequence numbers; all are EXISTING now.
    assert _tracking(after) == tracked
    assert {e.status for m in manifests for e in read_manifest(after.storage, m, include_deleted=True)} == {
        EntryStatus.EXISTING
    }
    # The minimum sequence number is the oldest live file's, so delete planning prunes as before.
    for m in manifests:
        assert m.min_sequence_number == min(e.sequence_number or 0 for e in read_manifest(after.storage, m))
    assert _scan(after) == scanned and table.rows() == rows
    summary = snapshot.summary
    assert summary["operation"] == "replace" and snapshot.parent_snapshot_id == parent.snapshot_id
    assert (summary["manifests-created"], summary["manifests-kept"], summary["manifests-replaced"]) == ("3", "0", "7")
    assert summary["entries-processed"] == str(len(tracked))
    for total in ("total-records", "total-data-files", "total-delete-files", "total-files-size"):
        assert summary[total] == parent.summary[total]
    # Time travel to the parent still reads its own manifests.
    assert table.rows(parent.snapshot_id) == rows


def test_entries_are_clustered_by_partition_across_manifests(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "identity", appends=6, rows=6)
    before = _tracking(load(_ref(table)))
    plan = _plan(table, target_manifest_size=2 * min(m.manifest_length for m in _plan(table).replaced))
    assert len(plan.outputs) >= 2
    after = _write_and_commit(plan)
    assert _tracking(after) == before
    snapshot = after.metadata.current_snapshot()
    assert snapshot is not None
    seen: list[Any] = []
    for m in manifests_of(after.storage, snapshot):
        categories = [e.data_file.partition["category"] for e in read_manifest(after.storage, m)]
        assert categories == sorted(categories, key=lambda c: (c is not None, c or ""))
        seen += categories
    # manifests follow each other in key order: a partition never reappears after another one
    runs = [c for i, c in enumerate(seen) if i == 0 or seen[i - 1] != c]
    assert len(runs) == len(set(runs))


def test_large_manifests_are_kept_unless_rewrite_all(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "unpartitioned", appends=4, rows=5)
    lengths = sorted(m.manifest_length for m in _plan(table).replaced)
    plan = _plan(table, target_manifest_size=lengths[1])  # only the smallest is below: nothing to merge
    assert plan.replaced == [] and plan.outputs == []
    assert commit_rewrite(plan, [], STORAGE) is None
    assert _plan(table, target_manifest_size=lengths[0]).replaced == []
    everything = _plan(table, target_manifest_size=lengths[0], rewrite_all=True)
    assert len(everything.replaced) == 4 and len(everything.outputs) == 4  # at most one manifest per entry
    halves = _plan(table, target_manifest_size=2 * lengths[-1])
    assert len(halves.replaced) == 4 and [u.entries for u in halves.outputs] == [2, 2]


def test_concurrent_append_is_carried_over(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "day", appends=4, rows=5)
    plan = _plan(table)
    written = [write_output(u) for u in plan.outputs]
    table.table.append(batch(500, 4))  # lands between plan and commit
    expected = table.rows()
    outcome = commit_rewrite(plan, written, STORAGE)
    assert outcome is not None
    snapshot = outcome.metadata.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    manifests = manifests_of(outcome.table.storage, snapshot)
    assert len(manifests) == 2 and snapshot.summary["manifests-kept"] == "1"
    assert table.rows() == expected


def test_concurrent_rewrite_aborts_and_deletes_what_it_wrote(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "unpartitioned", appends=3, rows=5)
    ours, theirs = _plan(table), _plan(table)
    written = [write_output(u) for u in ours.outputs]
    assert written and all(_exists(w.manifest.manifest_path) for w in written)
    _write_and_commit(theirs)
    current = table.reload().metadata_location
    with pytest.raises(CommitConflict, match="no longer in snapshot"):
        commit_rewrite(ours, written, STORAGE)
    assert not any(_exists(w.manifest.manifest_path) for w in written)
    assert table.reload().metadata_location == current


def test_a_taken_snapshot_id_is_replaced_on_apply(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "unpartitioned", appends=3, rows=5)
    plan = _plan(table)
    written = [write_output(u) for u in plan.outputs]
    start = load(_ref(table))
    taken = start.metadata.snapshots[0].snapshot_id
    change = RewriteManifests(start, plan.replaced, [w.manifest for w in written], snapshot_id=taken)
    metadata = change.apply(start)
    snapshot = metadata.current_snapshot()
    assert snapshot is not None and snapshot.snapshot_id != taken
    assert {m.added_snapshot_id for m in manifests_of(start.storage, snapshot)} == {snapshot.snapshot_id}
    assert _exists(written[0].manifest.manifest_path) and _exists(snapshot.manifest_list or "")
    change.abandon(None)
    assert not _exists(written[0].manifest.manifest_path) and not _exists(snapshot.manifest_list or "")


def test_equality_deletes_keep_applying_after_the_rewrite(tmp_path: Path) -> None:
    """Data files appended after an equality delete must keep their newer data sequence number, or
    the delete would start hiding their rows."""
    import pyarrow as pa

    table = small_file_table(tmp_path, "unpartitioned", appends=2, rows=5)
    add_equality_deletes(load(_ref(table)), pa.table({"id": pa.array([1, 101], pa.int64())}), [1])
    table.reload().append(batch(100, 5))
    before = load(_ref(table))
    scanned, tracked = _scan(before), _tracking(before)
    after = _write_and_commit(_plan(table))
    assert _scan(after) == scanned and _tracking(after) == tracked
    assert sum(1 for deletes in scanned.values() if deletes) == 2  # only the two older files


def test_v1_table(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "bucket", appends=4, rows=5, properties={"format-version": "1"})
    rows, tracked = table.rows(), _tracking(load(_ref(table)))
    after = _write_and_commit(_plan(table))
    snapshot = after.metadata.current_snapshot()
    assert snapshot is not None and len(manifests_of(after.storage, snapshot)) == 1
    assert after.metadata.format_version == 1
    assert table.rows() == rows and _tracking(after) == tracked


def test_a_source_that_shrank_is_corrupt(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "unpartitioned", appends=2, rows=5)
    unit = _plan(table).outputs[0]
    source = unit.sources[0]
    broken = unit.model_copy(update={"sources": [source.model_copy(update={"ranges": [(0, 5)]})]})
    with pytest.raises(ProtocolError, match="has 1 live entries"):
        write_output(broken)


def test_delete_manifests_are_their_own_group(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "unpartitioned", appends=2, rows=5)
    paths = sorted(_tracking(load(_ref(table))))
    add_position_deletes(load(_ref(table)), [(paths[0], 0)])
    add_position_deletes(load(_ref(table)), [(paths[1], 1)])
    plan = _plan(table)
    contents = sorted(u.content for u in plan.outputs)
    assert contents == ["data", "deletes"]
    after = _write_and_commit(plan)
    snapshot = after.metadata.current_snapshot()
    assert snapshot is not None
    assert sorted(int(m.content) for m in manifests_of(after.storage, snapshot)) == [
        ManifestContent.DATA,
        ManifestContent.DELETES,
    ]


def test_manifests_that_lost_a_file_are_refused_and_removed(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "unpartitioned", appends=3, rows=5)
    plan = _plan(table)
    written = [write_output(u) for u in plan.outputs]
    short = [
        w.model_copy(update={"manifest": w.manifest.model_copy(update={"existing_files_count": 2})}) for w in written
    ]
    with pytest.raises(InvalidArgument, match="hold 2 live files, the replaced ones 3"):
        commit_rewrite(plan, short, STORAGE)
    assert not any(_exists(w.manifest.manifest_path) for w in written)
    assert len(table.reload().snapshots()) == 3
