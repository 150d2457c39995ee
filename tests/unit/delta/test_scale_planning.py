"""Planning at 10 M files (issue 23 part 4): snapshots that keep only row counts, VACUUM matching listed
files against live Arrow path columns, must decide exactly as the object-per-file code did.

Tables are written as JSON commits directly (a commit of 1,000+ plain adds is read as an Arrow column,
as a checkpoint's adds are); what must be kept or deleted is known from how the test wrote them.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from delta_optimize import fail_second_group, optimize_commits, two_partitions

from lakeops import api
from lakeops.delta.checkpoint_reader import AddColumn
from lakeops.delta.live_files import LiveFiles
from lakeops.delta.live_paths import LivePaths
from lakeops.delta.snapshot import load_snapshot
from lakeops.ops.orphans import OrphansOptions
from lakeops.storage import open_storage
from lakeops.storage.uri import resolve

OLD = 1_500_000_000.0
SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "day", "type": "string", "nullable": True, "metadata": {}},
    ],
}


def _add(path: str, stats: str | None = '{"numRecords":10,"minValues":{"id":1}}') -> str:
    add = {"path": path, "partitionValues": {"day": "d"}, "size": 100, "modificationTime": 1, "dataChange": True}
    if stats is not None:
        add["stats"] = stats
    return json.dumps({"add": add})


def _table(root: Path, adds: list[str], *later: list[str]) -> None:
    log = root / "_delta_log"
    log.mkdir(parents=True)
    header = [
        json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
        json.dumps(
            {
                "metaData": {
                    "id": "scale-test",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": json.dumps(SCHEMA),
                    "partitionColumns": ["day"],
                    "configuration": {},
                }
            }
        ),
    ]
    for version, lines in enumerate([header + adds, *later]):
        (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def _files(count: int) -> list[str]:
    return [f"day=d/part-{i:05d}.parquet" for i in range(count)]


def test_row_counts_only_keeps_num_records_and_nothing_else_of_plain_stats(tmp_path: Path) -> None:
    odd = [
        ("day=d/odd-0.parquet", '{"minValues":{"id":1},"numRecords":7}'),  # not leading: kept as written
        ("day=d/odd-1.parquet", '{"numRecords":007}'),  # not JSON: kept, so num_records still refuses it
        ("day=d/odd-2.parquet", '{"numRecords":1,"numRecords":2}'),  # the last wins: kept as written
        ("day=d/odd-3.parquet", None),
    ]
    _table(tmp_path, [_add(p) for p in _files(1_200)] + [_add(p, s) for p, s in odd])
    storage = open_storage(str(tmp_path))
    full = load_snapshot(storage, str(tmp_path))
    narrow = load_snapshot(storage, str(tmp_path), row_counts_only=True)
    assert isinstance(narrow.files, LiveFiles) and narrow.files.columns  # the Arrow route was taken
    stats = {add.path: add.stats for add in narrow.files.values()}
    assert stats["day=d/part-00000.parquet"] == '{"numRecords":10}'
    assert {p: stats[p] for p, _ in odd} == dict(odd)
    for key, add in full.files.items():
        if add.path != "day=d/odd-1.parquet":
            assert narrow.files[key].num_records == add.num_records
    assert full.files[("day=d/part-00000.parquet", None)].stats == '{"numRecords":10,"minValues":{"id":1}}'


def test_live_paths_match_plain_paths_in_arrow_and_others_resolved() -> None:
    root = "/t"
    paths = ["a/b.parquet", "a%20b.parquet", "./c.parquet", "d//e.parquet", "x:y.parquet", "/abs/f.parquet", "g/"]
    column = AddColumn(pa.StructArray.from_arrays([pa.array(paths)], names=["path"]))
    live = LivePaths(root, [column], {"/t/kept-by-set.parquet"})
    resolved = [resolve(root, p) for p in paths]
    listed = [*resolved, "/t/kept-by-set.parquet", "/t/a/other.parquet", "/t/b.parquet"]
    assert live.kept(listed) == {*resolved, "/t/kept-by-set.parquet"}


def test_vacuum_from_arrow_rows_deletes_exactly_the_unreferenced(tmp_path: Path) -> None:
    now_ms = int(time.time() * 1000)
    live = [*_files(1_100), "day=d/with%20space.parquet"]
    gone = "day=d/part-00001.parquet"  # removed long ago by a later commit
    readded = "day=d/part-00002.parquet"  # removed, then added again: live
    remove = {"path": gone, "deletionTimestamp": now_ms - 30 * 86_400_000, "dataChange": True}
    remove2 = {**remove, "path": readded}
    _table(
        tmp_path,
        [_add(p) for p in live],
        [json.dumps({"remove": remove}), json.dumps({"remove": remove2})],
        [_add(readded)],
    )
    for relative in [*live, "day=d/untracked.parquet"]:
        path = tmp_path / relative.replace("%20", " ")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"PAR1")
    for path in tmp_path.rglob("*"):
        os.utime(path, (OLD, OLD))

    report = api.orphans(str(tmp_path), OrphansOptions(), dry_run=True)

    assert sorted(report.paths) == sorted([str(tmp_path / gone), str(tmp_path / "day=d/untracked.parquet")])
    assert report.live_files == 1_100  # 1,101 written, one removed
    assert (report.deleted_tombstoned_files, report.deleted_untracked_files) == (1, 1)


@pytest.mark.parametrize("chunk", [1, 3])
def test_vacuum_settles_the_listing_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    from lakeops.delta.maintenance import orphans as vacuum

    monkeypatch.setattr(vacuum, "LISTED_CHUNK", chunk)
    _table(tmp_path, [_add(p) for p in _files(1_000)])
    for relative in [*_files(5), "day=d/untracked-a.parquet", "day=d/untracked-b.parquet"]:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_bytes(b"PAR1")
    for path in tmp_path.rglob("*"):
        os.utime(path, (OLD, OLD))
    report = api.orphans(str(tmp_path), OrphansOptions(), dry_run=True)
    assert sorted(report.paths) == [str(tmp_path / f"day=d/untracked-{x}.parquet") for x in "ab"]
    assert report.files_scanned == 7


# --- compaction planned from Arrow rows ------------------------------------------------------------


def _sized_add(path: str, day: str, size: int) -> str:
    add = {"path": path, "partitionValues": {"day": day}, "size": size, "modificationTime": 1, "dataChange": True}
    return json.dumps({"add": {**add, "stats": '{"numRecords":5}'}})


def _group_view(plan: object) -> list[tuple[object, ...]]:
    return [
        (
            g.partition_values,
            g.output_dir,
            g.file_count,
            g.bytes,
            [(f.location, f.add["path"], f.num_records) for f in g.files],
        )
        for g in plan.groups  # type: ignore[attr-defined]
    ]


@pytest.mark.parametrize("where", [None, "day = 'b'"])
def test_compaction_plan_from_arrow_rows_equals_the_object_route(tmp_path: Path, where: str | None) -> None:
    from lakeops.delta.maintenance.compaction import plan_compaction
    from lakeops.delta.maintenance.options import DeltaCompactionOptions
    from lakeops.storage import StorageOptions

    # 1,200 files in three partitions, sizes 1..40 KB, every 97th above the 256 KB target; a later
    # small commit adds objects to two partitions (a bin mixes both), with escaped paths.
    sizes = [300_000 if i % 97 == 0 else 1_000 * (1 + i % 40) for i in range(1_200)]
    rows = [_sized_add(f"day={'abc'[i % 3]}/f-{i:05d}.parquet", "abc"[i % 3], size) for i, size in enumerate(sizes)]
    objects = [_sized_add(f"day={d}/late%20{d}.parquet", d, 3_000) for d in "ab"]
    _table(tmp_path, rows, objects)
    snapshot = load_snapshot(open_storage(str(tmp_path)), str(tmp_path), row_counts_only=True)
    assert isinstance(snapshot.files, LiveFiles) and len(snapshot.files.columns) == 1
    options = DeltaCompactionOptions(target_file_size=256_000, min_input_files=3, where=where)

    arrow = plan_compaction(snapshot, options, StorageOptions())
    reference = plan_compaction(
        snapshot.__class__(**{**snapshot.__dict__, "files": dict(snapshot.files.items())}), options, StorageOptions()
    )

    assert _group_view(arrow) == _group_view(reference)
    assert len(arrow.groups) > 3 and arrow.candidate_files == reference.candidate_files
    assert (arrow.input_files, arrow.input_bytes, arrow.live_bytes) == (
        reference.input_files,
        reference.input_bytes,
        reference.live_bytes,
    )
    mixed = [g for g in arrow.groups if any("%20" in f.add["path"] for f in g.files)]
    assert mixed or where is not None
    # A task receives every file as an object: the group's payload holds them all.
    from lakeops.executors import dump_model, load_model

    for group in arrow.groups:
        again = load_model(type(group), dump_model(group))
        assert again.files == group.files and again.bytes == group.bytes


def test_compaction_of_checkpoint_rows_keeps_every_row_for_delta_rs(tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake

    from lakeops.ops.compaction import CompactionOptions

    location = str(tmp_path / "t")
    for i in range(8):
        batch = pa.table({"id": pa.array(range(i * 50, i * 50 + 50), pa.int64()), "day": pa.array(["x", "y"] * 25)})
        write_deltalake(location, batch, mode="append", partition_by=["day"])
    DeltaTable(location).create_checkpoint()
    snapshot = load_snapshot(open_storage(location), location, row_counts_only=True)
    assert isinstance(snapshot.files, LiveFiles) and sum(len(c) for c in snapshot.files.columns) == 16
    full = load_snapshot(open_storage(location), location)
    assert {a.stats for a in snapshot.files.values()} == {'{"numRecords":25}'}  # cut as the checkpoint was read
    assert {a.num_records for a in full.files.values()} == {25} and "minValues" in next(iter(full.files.values())).stats

    report = api.compact(location, CompactionOptions(min_input_files=2))

    assert (report.files_removed, report.files_added, report.commits) == (16, 2, 1)
    table = DeltaTable(location)
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == list(range(400))
    assert len(table.file_uris()) == 2


# --- OPTIMIZE in bounded commits (partial progress) ------------------------------------------------


def test_partial_progress_commits_each_batch_as_its_own_version(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    from lakeops.ops.compaction import CompactionOptions

    location = two_partitions(tmp_path / "t")
    report = api.compact(location, CompactionOptions(min_input_files=2, partial_progress=1))

    assert (report.commits, report.files_removed, report.files_added) == (2, 12, 2)
    commits = optimize_commits(location)
    assert [len(c) for c in commits] == [6, 6]
    assert {p.split("/")[0] for p in commits[0]} != {p.split("/")[0] for p in commits[1]}  # a partition each
    assert sorted(DeltaTable(location).to_pyarrow_table().column("id").to_pylist()) == list(range(60))


def test_a_failed_batch_leaves_the_earlier_ones_committed_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltalake import DeltaTable

    from lakeops.errors import PartiallyCommitted
    from lakeops.ops.compaction import CompactionOptions

    location = two_partitions(tmp_path / "t")
    fail_second_group(monkeypatch)
    with pytest.raises(
        PartiallyCommitted,
        match=r"1 of 2 commit batches landed \(versions 6; 6 files rewritten into 1\).*OSError: disk full",
    ) as err:
        api.compact(location, CompactionOptions(min_input_files=2, partial_progress=1))

    assert err.value.report.commits == 1 and err.value.report.committed_version == 6
    assert [len(c) for c in optimize_commits(location)] == [6]
    table = DeltaTable(location)
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == list(range(60))
    assert len(table.file_uris()) == 7  # one partition compacted, the other's six files untouched


@pytest.mark.parametrize("slice_rows", [1, 2, 3, 1 << 20])
def test_distinct_finds_a_repeat_wherever_the_sorted_slices_cut(
    monkeypatch: pytest.MonkeyPatch, slice_rows: int
) -> None:
    from lakeops.delta import live_files

    monkeypatch.setattr(live_files, "_SLICE_ROWS", slice_rows)
    unique = pa.chunked_array([pa.array(["e", "a", "c"]), pa.array(["b", "d"])])
    assert live_files.distinct(unique)
    for repeat in ("a", "c", "e"):
        assert not live_files.distinct(pa.chunked_array([*unique.chunks, pa.array([repeat])]))
    assert live_files.distinct(pa.chunked_array([], pa.string()))


def test_unpartitioned_checkpoint_rows_plan_as_the_object_route(tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake

    from lakeops.delta.maintenance.compaction import plan_compaction
    from lakeops.delta.maintenance.options import DeltaCompactionOptions
    from lakeops.storage import StorageOptions

    location = str(tmp_path / "t")
    for i in range(7):
        write_deltalake(location, pa.table({"id": pa.array(range(i * 5, i * 5 + 5), pa.int64())}), mode="append")
    DeltaTable(location).create_checkpoint()
    snapshot = load_snapshot(open_storage(location), location, row_counts_only=True)
    assert isinstance(snapshot.files, LiveFiles) and len(snapshot.files.columns) == 1

    options = DeltaCompactionOptions(min_input_files=2)
    arrow = plan_compaction(snapshot, options, StorageOptions())
    reference = plan_compaction(
        snapshot.__class__(**{**snapshot.__dict__, "files": dict(snapshot.files.items())}), options, StorageOptions()
    )
    assert _group_view(arrow) == _group_view(reference) and arrow.input_files == 7


def test_partitions_of_rows_whose_keys_vary_or_repeat() -> None:
    from lakeops.delta.maintenance.compaction_rows import partitions

    map_type = pa.map_(pa.string(), pa.string())
    uniform = pa.array([[("a", "1"), ("b", None)], [("a", "2"), ("b", "x")], [("a", "1"), ("b", None)]], map_type)
    varying = pa.array([[("a", "1")], [("b", "x"), ("a", "1")], [("a", "1")]], map_type)

    def grouped(values: pa.Array) -> dict[object, list[int]]:
        struct = pa.StructArray.from_arrays([pa.array(["p0", "p1", "p2"]), values], names=["path", "partitionValues"])
        return {key: rows.to_pylist() for key, rows in partitions(AddColumn(struct))}

    assert grouped(uniform) == {(("a", "1"), ("b", None)): [0, 2], (("a", "2"), ("b", "x")): [1]}
    assert grouped(varying) == {(("a", "1"),): [0, 2], (("a", "1"), ("b", "x")): [1]}
