"""The change data feed reading rules ("Add CDC File", "Reader Requirements for AddCDCFile",
"Deletion Vectors", "Column Mapping") and its export into a Delta table, without Spark: tasks are
called directly. delta-rs is the oracle in ``tests/spark/test_cdc_delta.py``; here the expected rows
are read off the logs and the data files by hand."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_deletion_vectors import inline_dv_descriptor, write_dv_file
from deltalake import write_deltalake
from lakeops_testdata import TESTDATA
from pyroaring import BitMap64

from lakeops.changefeed import cdf_export
from lakeops.changefeed.cdf_export import ExportOptions, ExportPlan, ExportResult
from lakeops.delta.actions import DeletionVectorDescriptor
from lakeops.delta.cdf import (
    ChangeFeed,
    change_feed_schema,
    load_feed_end,
    plan_change_feed,
    read_change_rows,
    require_files_present,
)
from lakeops.delta.scan import read_snapshot
from lakeops.delta.schema import parse_schema
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import CommitConflict, CorruptFile, InvalidArgument, UnsupportedFeature, VersionNotFound
from lakeops.storage import StorageOptions, open_storage

OPTIONS = StorageOptions()
STORAGE = open_storage("/")


def _copy(name: str, tmp_path: Path) -> str:
    shutil.copytree(TESTDATA / "delta-rs" / name, tmp_path / name)
    return str(tmp_path / name)


def _feed(root: str, from_version: int, to_version: int | None = None) -> ChangeFeed:
    return plan_change_feed(STORAGE, load_feed_end(STORAGE, root, to_version), from_version)


def _rows(feed: ChangeFeed) -> list[dict[str, Any]]:
    """Every change row of the feed, as (column → value) dicts sorted for comparison."""
    tables = [
        read_change_rows(
            STORAGE, feed.table_root, f, feed.schema, feed.column_mapping_mode, feed.snapshot.partition_columns
        )
        for f in feed.files
    ]
    rows = [r for t in tables for r in t.to_pylist()]
    return sorted(rows, key=lambda r: json.dumps(r, default=str, sort_keys=True))


def _brief(rows: list[dict[str, Any]], *columns: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in (*columns, "_change_type", "_commit_version")) for r in rows)


# --- which files hold a version's changes ----------------------------------------------------------


def test_versions_with_cdc_actions_read_only_their_change_files(tmp_path: Path) -> None:
    feed = _feed(_copy("cdf-table", tmp_path), 0)
    by_version = {v.version: v for v in feed.versions}
    # Version 1 (UPDATE) adds 3 files, removes 3 and writes 6 change files: only the latter count.
    assert by_version[1].from_change_files and len(by_version[1].files) == 6
    assert all(f.change_type is None and "/_change_data/" in f.location for f in by_version[1].files)
    # Version 0 (WRITE) has no cdc action: its 10 adds are inserts.
    assert not by_version[0].from_change_files
    assert [f.change_type for f in by_version[0].files] == ["insert"] * 10
    rows = _rows(feed)
    # Partition column from the cdc action's partitionValues, typed as the schema says (date).
    assert ("Dave", "2023-12-23", "update_preimage", 1) in [
        (r["name"], r["birthday"].isoformat(), r["_change_type"], r["_commit_version"]) for r in rows
    ]
    assert len(rows) == 23 and sum(r["_change_type"] == "delete" for r in rows) == 1


def test_commit_timestamp_is_the_commit_info_timestamp(tmp_path: Path) -> None:
    feed = _feed(_copy("cdf-table", tmp_path), 2, 3)
    # The copies' file mtimes are "now"; the commits say when they happened (what delta-rs reports too).
    assert [(v.version, v.timestamp_ms) for v in feed.versions] == [(2, 1703886093785), (3, 1704559499570)]
    stamps = {r["_commit_timestamp"].timestamp() for r in _rows(feed)}
    assert stamps == {1703886093.785, 1704559499.570}


def test_dataless_commits_yield_no_files_and_expired_or_future_versions_are_refused(tmp_path: Path) -> None:
    root = _copy("cdf-table-with-cdc-and-dvs", tmp_path)
    feed = _feed(root, 3, 3)  # OPTIMIZE: dataChange=false everywhere
    assert feed.versions[0].files == ()
    with pytest.raises(VersionNotFound, match="version 26 does not exist"):
        load_feed_end(STORAGE, root, 26)
    with pytest.raises(InvalidArgument, match="empty"):
        plan_change_feed(STORAGE, load_feed_end(STORAGE, root, 3), 5)
    expired = _copy("checkpoint-cdf-table", tmp_path)  # log 3..5 + checkpoint at 3: commits 0..2 are gone
    with pytest.raises(VersionNotFound, match=r"00000000000000000000\.json has expired.*earliest commit kept is 3"):
        _feed(expired, 0)
    assert len(_rows(_feed(expired, 4))) == 12


# --- deletion vectors -----------------------------------------------------------------------------


def test_dv_rewrites_of_a_real_table_change_only_the_newly_deleted_rows(tmp_path: Path) -> None:
    """Hand-checked against the log of ``cdf-table-with-cdc-and-dvs``: every DELETE there removes a
    file and re-adds it with a bigger DV; only the rows the DV newly hides are deletes."""
    feed = _feed(_copy("cdf-table-with-cdc-and-dvs", tmp_path), 0)
    rows = _rows(feed)
    deletes = {v: sorted(r["id"] for r in rows if r["_commit_version"] == v) for v in (2, 5, 10, 16, 24)}
    assert deletes == {2: [3], 5: [4, 5], 10: [1], 16: [7, 8], 24: [2, 3, 4, 5, 6, 9]}
    assert all(r["_change_type"] == "delete" for r in rows if r["_commit_version"] in deletes)
    # v24 removes (f, no DV) and adds (f, DV of cardinality 6): one planned read, selecting the DV rows.
    (v24,) = feed.versions[24].files
    assert v24.change_type == "delete" and v24.only is not None and v24.only.cardinality == 6 and v24.without is None
    counts = {t: sum(r["_change_type"] == t for r in rows) for t in ("insert", "delete", "update_preimage")}
    assert counts == {"insert": 18, "delete": 13, "update_preimage": 6}


SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


def _dv_table(tmp_path: Path, *commits: list[dict[str, Any]], rows: int = 10) -> str:
    """A reader-3 DV table whose version 0 adds ``f.parquet`` (ids 0..rows-1) and whose later
    versions are the given action lists."""
    root = tmp_path / "dvt"
    (root / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array(range(rows), pa.int64())}), root / "f.parquet")
    first = [
        {"commitInfo": {"timestamp": 1_000, "operation": "WRITE"}},
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors"],
            }
        },
        {
            "metaData": {
                "id": "dvt",
                "format": {"provider": "parquet"},
                "schemaString": json.dumps(SCHEMA),
                "partitionColumns": [],
            }
        },
        {"add": _file("f.parquet", None)},
    ]
    for version, actions in enumerate([first, *commits]):
        lines = "\n".join(json.dumps(a) for a in actions) + "\n"
        (root / "_delta_log" / f"{version:020d}.json").write_text(lines)
    return str(root)


def _file(path: str, dv: DeletionVectorDescriptor | None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"path": path, "partitionValues": {}, "size": 100, "modificationTime": 1, "dataChange": True}
    if dv is not None:
        body["deletionVector"] = dv.to_json_dict()
    return {**body, **extra}


def _dv(*rows: int) -> DeletionVectorDescriptor:
    return inline_dv_descriptor(BitMap64(rows))


@pytest.mark.parametrize(
    ("old", "new", "deleted", "reinserted"),
    [
        ((), (1, 2), [1, 2], []),  # first DELETE of rows 1 and 2
        ((1,), (1, 2, 7), [2, 7], []),  # a second DELETE: row 1 was already gone
        ((1, 2), (), [], [1, 2]),  # RESTORE to before the DELETE: the rows come back
        ((1, 2), (2, 5), [5], [1]),  # RESTORE of one row and DELETE of another in one version
    ],
)
def test_same_path_remove_and_add_are_diffed_by_deletion_vector(
    tmp_path: Path, old: tuple[int, ...], new: tuple[int, ...], deleted: list[int], reinserted: list[int]
) -> None:
    before = _dv(*old) if old else None
    commits = [[{"remove": _file("f.parquet", None)}, {"add": _file("f.parquet", before)}]] if before else []
    after = _dv(*new) if new else None
    commits.append([{"remove": _file("f.parquet", before)}, {"add": _file("f.parquet", after)}])
    root = _dv_table(tmp_path, *commits)
    last = len(commits)
    rows = _rows(_feed(root, last))
    assert sorted(r["id"] for r in rows if r["_change_type"] == "delete") == deleted
    assert sorted(r["id"] for r in rows if r["_change_type"] == "insert") == reinserted


def test_lone_remove_and_add_with_dvs_change_only_visible_rows(tmp_path: Path) -> None:
    hidden = _dv(0, 1, 2)
    root = _dv_table(
        tmp_path,
        [{"remove": _file("f.parquet", None)}, {"add": _file("f.parquet", hidden)}],  # v1: DELETE 0,1,2
        [{"remove": _file("f.parquet", hidden)}],  # v2: drop the file: deletes the 7 rows still visible
        [{"add": _file("f.parquet", _dv(9))}],  # v3: add it back with a DV: inserts the 9 visible rows
        [{"remove": _file("f.parquet", _dv(9), dataChange=False)}, {"add": _file("f.parquet", None, dataChange=False)}],
    )
    rows = _rows(_feed(root, 2))
    assert _brief(rows, "id") == sorted(
        [(i, "delete", 2) for i in range(3, 10)] + [(i, "insert", 3) for i in range(9)]
    )  # version 4 (dataChange=false) contributes nothing


def test_a_dv_naming_rows_beyond_the_file_is_corrupt(tmp_path: Path) -> None:
    root = _dv_table(tmp_path, [{"remove": _file("f.parquet", None)}, {"add": _file("f.parquet", _dv(3, 12))}])
    with pytest.raises(CorruptFile, match="names row 12 but the file has 10 rows"):
        _rows(_feed(root, 1))


# --- column mapping, partitions, schema ----------------------------------------------------------


def test_column_mapped_files_are_read_by_physical_name(tmp_path: Path) -> None:
    root = _copy("table_with_column_mapping", tmp_path)
    rows = _rows(_feed(root, 0))
    # The data files hold only col-3877… (physical names); the partition column lives in the log.
    assert _brief(rows, "Company Very Short", "Super Name") == sorted(
        [
            ("BME", "Timothy Lamb", "insert", 0),
            ("BMS", "Mr. Daniel Ferguson MD", "insert", 0),
            ("BMS", "Stephanie Mcgrath", "insert", 0),
            ("BMS", "Anthony Johnson", "insert", 0),
            ("BMS", "Nathan Bennett", "insert", 0),
        ]
    )


def test_renamed_mapped_partition_column_keeps_the_range_readable(tmp_path: Path) -> None:
    # Version 2 turns on column mapping, version 3 renames the partition column id -> newid.
    rows = _rows(_feed(_copy("table_with_partitioning_mapping", tmp_path), 0))
    assert _brief(rows, "newid", "description") == [
        (1, "Initial data", "insert", 1),
        (2, "Additional data", "insert", 4),
    ]


def test_a_remove_without_partition_values_takes_them_from_the_live_add(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "_delta_log").mkdir(parents=True)
    (root / "day=d1").mkdir()
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), root / "day=d1" / "a.parquet")
    schema = {
        **SCHEMA,
        "fields": [*SCHEMA["fields"], {"name": "day", "type": "date", "nullable": True, "metadata": {}}],
    }
    add = {
        "path": "day=d1/a.parquet",
        "partitionValues": {"day": "2024-02-29"},
        "size": 1,
        "modificationTime": 1,
        "dataChange": True,
    }
    log = [
        [
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {
                "metaData": {
                    "id": "p",
                    "format": {"provider": "parquet"},
                    "schemaString": json.dumps(schema),
                    "partitionColumns": ["day"],
                }
            },
            {"add": add},
        ],
        [
            {"remove": {"path": "day=d1/a.parquet", "deletionTimestamp": 5, "dataChange": True}}
        ],  # an old writer's remove
    ]
    for version, actions in enumerate(log):
        log_file = root / "_delta_log" / f"{version:020d}.json"
        log_file.write_text("\n".join(json.dumps(a) for a in actions))
        os.utime(log_file, (1_700_000_000 + version, 1_700_000_000 + version))
    rows = _rows(_feed(str(root), 1))
    assert [(r["id"], r["day"].isoformat(), r["_change_type"]) for r in rows] == [
        (1, "2024-02-29", "delete"),
        (2, "2024-02-29", "delete"),
    ]
    # No commitInfo: the commit time is the log file's modification time.
    assert {r["_commit_timestamp"].timestamp() for r in rows} == {1_700_000_001}


def test_change_feed_schema_is_plain_and_refuses_clashing_columns() -> None:
    mapped = parse_schema(
        '{"type":"struct","fields":[{"name":"a","type":"integer","nullable":false,"metadata":'
        '{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-1","comment":"the a"}}]}'
    )
    schema = change_feed_schema(mapped)
    assert [(f.name, f.nullable, dict(f.metadata)) for f in schema.fields] == [
        ("a", True, {"comment": "the a"}),
        ("_change_type", False, {}),
        ("_commit_version", False, {}),
        ("_commit_timestamp", False, {}),
    ]
    clash = parse_schema(
        '{"type":"struct","fields":[{"name":"_commit_version","type":"long","nullable":true,"metadata":{}}]}'
    )
    with pytest.raises(UnsupportedFeature, match="_commit_version"):
        change_feed_schema(clash)


def test_unknown_change_type_in_a_change_file_is_corrupt(tmp_path: Path) -> None:
    root = _copy("simple_table_with_cdc", tmp_path)
    (cdc_file,) = Path(root, "_change_data").glob("*.parquet")
    data = pq.read_table(cdc_file)
    pq.write_table(data.set_column(2, "_change_type", pa.array(["update_preimage", "upsert"])), cdc_file)
    with pytest.raises(CorruptFile, match="'upsert'"):
        _rows(_feed(root, 2))


# --- the CDC horizon ------------------------------------------------------------------------------


def test_vacuumed_data_change_or_dv_files_are_refused_before_reading(tmp_path: Path) -> None:
    root = _copy("cdf-table", tmp_path)
    feed = _feed(root, 0)
    require_files_present(STORAGE, feed)
    # Version 0 has no cdc action, so its adds are read; version 1 reads change files only.
    added_in_0 = next(Path(root, "birthday=2023-12-25").glob("part-00007-*.parquet"))
    change_file_of_1 = next(Path(root, "_change_data", "birthday=2023-12-22").glob("cdc-00000-*.parquet"))
    added_in_0.unlink()
    change_file_of_1.unlink()
    with pytest.raises(VersionNotFound) as info:
        require_files_present(STORAGE, _feed(root, 0))
    message = str(info.value)
    assert f"changes of version 0 cannot be read: data file {added_in_0} no longer exists" in message
    assert "2 file(s) of versions 0..3 are missing" in message and "complete only from version 2" in message
    require_files_present(STORAGE, _feed(root, 2))  # versions 2.. are intact
    with pytest.raises(VersionNotFound, match=f"change data file {change_file_of_1} no longer exists"):
        require_files_present(STORAGE, _feed(root, 1))

    dvs = tmp_path / "dvs"
    dv_root = _dv_table(dvs)
    (descriptor,) = write_dv_file(STORAGE, dv_root, [BitMap64([4])])
    Path(dv_root, "_delta_log", f"{1:020d}.json").write_text(
        json.dumps({"remove": _file("f.parquet", None)}) + "\n" + json.dumps({"add": _file("f.parquet", descriptor)})
    )
    feed = _feed(dv_root, 1)
    assert [r["id"] for r in _rows(feed)] == [4]
    (dv_file,) = Path(dv_root).glob("deletion_vector_*.bin")
    dv_file.unlink()
    with pytest.raises(VersionNotFound, match="deletion vector file of f.parquet"):
        require_files_present(STORAGE, feed)


# --- export: idempotency, backfill, conflicts (tasks run inline) ----------------------------------


def _plan(source: str, out: str, from_version: int, to_version: int | None = None) -> ExportPlan:
    options = ExportOptions(from_version=from_version, to_version=to_version, output=out)
    return cdf_export.plan_export(source, options, OPTIONS)


def _extract(plan: ExportPlan) -> list[ExportResult]:
    return [cdf_export.extract_unit(u) for u in plan.units]


def _export(source: str, out: str, from_version: int, to_version: int | None = None) -> int | None:
    plan = _plan(source, out, from_version, to_version)
    outcome = cdf_export.commit_export(plan, _extract(plan), OPTIONS)
    return outcome.version if outcome else None


def _out_rows(out: str) -> pa.Table:
    return read_snapshot(load_snapshot(STORAGE, out), STORAGE)


def test_export_is_idempotent_and_backfills_only_the_missing_suffix(tmp_path: Path) -> None:
    source, out = _copy("cdf-table-with-cdc-and-dvs", tmp_path), str(tmp_path / "out")
    assert _export(source, out, 0, 10) == 0
    first = _out_rows(out)
    assert set(first.column("_commit_version").to_pylist()) <= set(range(11))

    again = _plan(source, out, 0, 10)
    assert again.already_extracted and again.units == [] and again.extracted_through == 10
    assert cdf_export.commit_export(again, [], OPTIONS) is None
    assert load_snapshot(STORAGE, out).version == 0

    overlapping = _plan(source, out, 5, 20)
    assert (overlapping.from_version, overlapping.to_version) == (11, 20)
    assert cdf_export.commit_export(overlapping, _extract(overlapping), OPTIONS) is not None
    assert _export(source, out, 0) == 2  # the rest, up to the latest version (25)

    snapshot = load_snapshot(STORAGE, out)
    assert snapshot.txns[load_snapshot(STORAGE, source).metadata.id].version == 25
    rows = _out_rows(out)
    whole = _rows(_feed(source, 0))
    assert rows.num_rows == len(whole) == 43
    assert sorted(rows.to_pylist(), key=lambda r: json.dumps(r, default=str, sort_keys=True)) == whole


def test_export_refuses_gaps_earlier_versions_and_foreign_outputs(tmp_path: Path) -> None:
    source, out = _copy("cdf-table-with-cdc-and-dvs", tmp_path), str(tmp_path / "out")
    _export(source, out, 5, 10)
    with pytest.raises(InvalidArgument, match=r"would leave versions 11\.\.12 out; use --from 11"):
        _plan(source, out, 13)
    with pytest.raises(InvalidArgument, match=r"holds source versions 5\.\.10 only; versions before 5"):
        _plan(source, out, 2)
    other = _copy("cdf-table", tmp_path)
    with pytest.raises(InvalidArgument, match="holds the changes of table"):
        _plan(other, out, 0)
    with pytest.raises(InvalidArgument, match="must lie outside the source table"):
        _plan(source, str(Path(source, "changes")), 0)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("not a table")
    with pytest.raises(InvalidArgument, match="holds files but no Delta table"):
        _plan(source, str(tmp_path / "notes"), 0)
    assert load_snapshot(STORAGE, out).version == 0


def test_a_range_without_row_changes_still_records_its_progress(tmp_path: Path) -> None:
    source, out = _copy("cdf-table-with-cdc-and-dvs", tmp_path), str(tmp_path / "out")
    assert _export(source, out, 3, 3) == 0  # OPTIMIZE only
    snapshot = load_snapshot(STORAGE, out)
    assert snapshot.files == {} and snapshot.txns[load_snapshot(STORAGE, source).metadata.id].version == 3
    assert _plan(source, out, 3, 3).already_extracted


def test_concurrent_exports_of_one_source_commit_once_and_the_loser_cleans_up(tmp_path: Path) -> None:
    source, out = _copy("cdf-table", tmp_path), str(tmp_path / "out")
    _export(source, out, 0, 1)
    plan_a, plan_b = _plan(source, out, 0), _plan(source, out, 2, 3)
    results_a, results_b = _extract(plan_a), _extract(plan_b)
    assert cdf_export.commit_export(plan_a, results_a, OPTIONS) is not None
    written_b = cdf_export.written_locations(results_b)
    assert written_b and all(Path(p).exists() for p in written_b)
    with pytest.raises(CommitConflict, match="recorded progress 3"):
        cdf_export.commit_export(plan_b, results_b, OPTIONS)
    plan_b.discard(results_b, OPTIONS)
    assert not any(Path(p).exists() for p in written_b)
    keys = [(r["_commit_version"], r["id"], r["_change_type"], str(r["birthday"])) for r in _out_rows(out).to_pylist()]
    assert len(keys) == len(set(keys)) == 23


def test_an_output_whose_schema_no_longer_matches_is_refused(tmp_path: Path) -> None:
    source, out = tmp_path / "src", str(tmp_path / "out")
    write_deltalake(str(source), pa.table({"id": pa.array([1], pa.int64())}))
    _export(str(source), out, 0)
    write_deltalake(
        str(source), pa.table({"id": pa.array([2], pa.int64()), "x": ["new"]}), mode="append", schema_mode="merge"
    )
    with pytest.raises(InvalidArgument, match="schema differs"):
        _plan(str(source), out, 1)
