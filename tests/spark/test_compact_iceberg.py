"""Acceptance of ``lakeops compact`` on Iceberg tables: PyIceberg writes the tables, reads them back
after compaction through the same SQLite catalog, and must see exactly the same rows."""

from __future__ import annotations

import hashlib
import io
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from iceberg_merge_on_read import add_equality_deletes, add_position_deletes, load
from lakeops_cli import run_json
from maintenance_commits import commit_compaction
from pyiceberg.table import StaticTable
from pyiceberg_tables import PyIcebergTable, batch, rows_of, small_file_table
from rich.console import Console

from lakeops.errors import CommitConflict
from lakeops.iceberg.scan import plan_scan
from lakeops.iceberg.sql_catalog import SqlCatalog
from lakeops.iceberg.table import TableRef
from lakeops.ops import compaction
from lakeops.ops.compaction import CompactionOptions
from lakeops.storage import StorageOptions
from spark_jobs.spark_settings import SparkSettings
from spark_jobs.spark_tasks import run_units


def _compact(capsys: pytest.CaptureFixture[str], table: PyIcebergTable, *extra: str) -> dict[str, Any]:
    return run_json(
        capsys, "compact", table.identifier, "--catalog-uri", table.catalog_uri, "--master", "local[2]", *extra
    )


def _data_files(table: PyIcebergTable) -> list[str]:
    return sorted(task.file.file_path for task in table.reload().scan().plan_files())


@pytest.mark.parametrize("spec", ["unpartitioned", "identity", "day", "bucket"])
def test_compaction_of_pyiceberg_tables_keeps_rows(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    table = small_file_table(tmp_path, spec, appends=8, rows=30)
    table.table.delete("id < 5")  # copy-on-write: PyIceberg rewrites the files holding those rows
    table.table.overwrite(batch(1000, 12), overwrite_filter="id >= 200")
    table.reload()
    before = table.rows()
    before_snapshot = table.table.current_snapshot()
    assert before_snapshot is not None
    files_before = _data_files(table)

    report = _compact(capsys, table)

    after = table.reload()
    assert table.rows() == before
    files_after = _data_files(table)
    assert len(files_after) < len(files_before)
    assert all(Path(f.removeprefix("file://")).is_file() for f in files_before + files_after)
    current = after.current_snapshot()
    assert current is not None and current.summary is not None
    assert current.summary.operation.value == "replace"
    assert current.parent_snapshot_id == before_snapshot.snapshot_id
    assert int(current.summary["total-records"]) == sum(1 for _ in before)
    assert report["files_removed"] == len(files_before) - (len(files_after) - report["files_added"])
    assert report["rows_read"] == report["rows_written"] == len(before)
    # Time travel to the snapshot before still reads the old files.
    assert table.rows(before_snapshot.snapshot_id) == before
    # Everything lakeops wrote is readable straight from the metadata file too.
    static = StaticTable.from_metadata(after.metadata_location)
    assert static.scan().to_arrow().num_rows == len(before)


def test_file_system_table_and_dry_run(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file-system table (``metadata/vN.metadata.json`` + ``version-hint.text``) made from a
    PyIceberg table's files; ``--dry-run`` changes nothing, the real run commits ``v2``."""
    source = small_file_table(tmp_path / "src", "identity", appends=6, rows=10)
    expected = source.rows()
    location = Path(source.location)
    shutil.copy(source.table.metadata_location.removeprefix("file://"), location / "metadata" / "v1.metadata.json")
    (location / "metadata" / "version-hint.text").write_text("1")

    data_files = len(source.table.scan().plan_files())
    before = {p: hashlib.md5(p.read_bytes()).hexdigest() for p in location.rglob("*") if p.is_file()}
    plan = run_json(capsys, "compact", str(location), "--dry-run")
    # Four partitions (a, b, c and null), six small files each.
    assert plan["dry_run"] and plan["files_removed"] == data_files == 24 and plan["groups"] == 4
    assert {p: hashlib.md5(p.read_bytes()).hexdigest() for p in location.rglob("*") if p.is_file()} == before

    report = run_json(capsys, "compact", str(location), "--master", "local[2]")
    assert report["files_added"] == 4 and report["commits"] == 1
    assert (location / "metadata" / "v2.metadata.json").is_file()
    assert (location / "metadata" / "version-hint.text").read_text() == "2"
    static = StaticTable.from_metadata(str(location))  # follows version-hint.text
    assert rows_of(static.scan().to_arrow()) == expected


def test_position_deletes_read_the_same_by_pyiceberg_and_are_applied(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = small_file_table(tmp_path, "unpartitioned", appends=6, rows=10)
    ref = TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier)
    first, second = _data_files(table)[:2]
    ours = add_position_deletes(load(ref), [(first, 0), (first, 3), (second, 9)])
    with_deletes = table.rows()
    assert len(with_deletes) == 60 - 3
    # Our scan attaches the delete file to exactly the two files it names.
    scan = plan_scan(ours.storage, ours.metadata, ours.metadata.current_snapshot())
    attached = {t.file.path: len(t.deletes) for t in scan.tasks}
    assert attached[first] == attached[second] == 1 and sum(attached.values()) == 2

    report = _compact(capsys, table)

    assert table.rows() == with_deletes
    assert report["rows_removed_by_deletes"] == 3 and report["delete_files_removed"] == 1
    after = load(ref)
    final = plan_scan(after.storage, after.metadata, after.metadata.current_snapshot())
    assert final.delete_files == [] and len(final.tasks) == 1


def test_equality_deletes_applied_then_readable_by_pyiceberg(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PyIceberg cannot read equality deletes; after compaction applied them and dropped the then
    dangling delete file, it reads exactly the rows the deletes left."""
    table = small_file_table(tmp_path, "identity", appends=6, rows=10)
    ref = TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier)
    everything = table.reload().scan().to_arrow()
    doomed = ["a", "b"]
    category_field = 3
    add_equality_deletes(
        load(ref),
        pa.table({"category": pa.array(["a"], pa.string())}),
        [category_field],
        partition={"category": "a"},
    )
    add_equality_deletes(
        load(ref),
        pa.table({"category": pa.array(["b"], pa.string())}),
        [category_field],
        partition={"category": "b"},
    )
    table.table.append(batch(500, 6))  # newer rows: sequence number above the deletes', untouched
    deleted = pc.fill_null(pc.is_in(everything.column("category"), pa.array(doomed)), False)
    expected = rows_of(pa.concat_tables([everything.filter(pc.invert(deleted)), batch(500, 6)]))

    report = _compact(capsys, table, "--min-input-files", "2")

    assert report["rows_removed_by_deletes"] == pc.sum(deleted).as_py()
    assert report["delete_files_removed"] == 2
    after = load(ref)
    assert plan_scan(after.storage, after.metadata, after.metadata.current_snapshot()).delete_files == []
    assert table.rows() == expected


def test_racing_append_commits_and_racing_delete_aborts(spark: Any, tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "unpartitioned", appends=6, rows=10)
    options = CompactionOptions(catalog_uri=table.catalog_uri)
    storage = StorageOptions()

    plan = compaction.plan(table.identifier, options, storage)
    results = run_units(spark, plan.groups, plan.task(), plan.result_type())
    table.table.append(batch(900, 5))  # lands between plan and commit
    expected = table.rows()
    report = commit_compaction(plan, plan.groups, results, storage, 0.0)
    assert report.commits == 1
    assert table.rows() == expected

    plan = compaction.plan(table.identifier, options.model_copy(update={"min_input_files": 2}), storage)
    assert plan.input_files == 2
    results = run_units(spark, plan.groups, plan.task(), plan.result_type())
    written = [w.location for r in results for w in r.written]
    table.table.delete("id >= 900")  # rewrites a file this compaction also rewrites
    expected = table.rows()
    with pytest.raises(CommitConflict, match="no longer in the table"):
        commit_compaction(plan, plan.groups, results, storage, 0.0)
    assert not any(Path(w.removeprefix("file://")).exists() for w in written)
    assert table.rows() == expected


def test_global_equality_delete_on_a_dropped_column(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unpartitioned table's equality delete is global; it still applies after its column was
    dropped from the schema (the column is read from the data files by id)."""
    table = small_file_table(tmp_path, "unpartitioned", appends=5, rows=10)
    ref = TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier)
    everything = table.reload().scan().to_arrow()
    add_equality_deletes(load(ref), pa.table({"category": pa.array(["c"], pa.string())}), [3])
    with table.table.update_schema() as update:
        update.delete_column("category")
    deleted = pc.fill_null(pc.equal(everything.column("category"), "c"), False)
    expected = rows_of(everything.filter(pc.invert(deleted)).drop_columns(["category"]))

    report = _compact(capsys, table)

    assert report["rows_removed_by_deletes"] == pc.sum(deleted).as_py() > 0
    assert report["delete_files_removed"] == 1
    assert table.rows() == expected


def test_sort_partial_progress_and_where(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pyiceberg.table.sorting import NullOrder, SortDirection, SortField, SortOrder
    from pyiceberg.transforms import IdentityTransform

    order = SortOrder(
        SortField(
            source_id=5, transform=IdentityTransform(), direction=SortDirection.DESC, null_order=NullOrder.NULLS_LAST
        )
    )
    table = small_file_table(tmp_path, "identity", appends=6, rows=10, sort_order=order)
    before = table.rows()
    untouched = {f for f in _data_files(table) if "category=a" not in f and "category=b" not in f}

    report = _compact(capsys, table, "--where", "category IN ('a', 'b')", "--sort", "--partial-progress", "1")

    assert table.rows() == before
    assert report["groups"] == report["commits"] == 2 and report["partitions_compacted"] == 2
    snapshots = table.reload().snapshots()[-2:]
    assert [s.summary.operation.value for s in snapshots if s.summary] == ["replace", "replace"]
    files = table.table.scan().plan_files()
    assert untouched <= {t.file.file_path for t in files}
    for task in files:
        if "category=a" in task.file.file_path or "category=b" in task.file.file_path:
            assert task.file.sort_order_id == 1
            scores = pq.read_table(task.file.file_path.removeprefix("file://")).column("score").to_pylist()
            assert scores == sorted(scores, key=lambda v: (math.isnan(v), -v if not math.isnan(v) else 0))


def test_v1_table(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = small_file_table(tmp_path, "day", appends=6, rows=10, properties={"format-version": "1"})
    before = table.rows()
    report = _compact(capsys, table)
    assert table.rows() == before and report["files_added"] == 3
    metadata = json.loads(Path(table.table.metadata_location.removeprefix("file://")).read_text())
    assert metadata["format-version"] == 1 and "last-sequence-number" not in metadata
    assert table.table.current_snapshot().summary.operation.value == "replace"  # type: ignore[union-attr]


def test_a_commit_that_loses_the_catalog_race_retries(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = small_file_table(tmp_path, "unpartitioned", appends=6, rows=10)
    storage = StorageOptions()
    plan = compaction.plan(table.identifier, CompactionOptions(catalog_uri=table.catalog_uri), storage)
    results = run_units(spark, plan.groups, plan.task(), plan.result_type())
    real_swap = SqlCatalog.swap
    raced: list[str] = []

    def swap_after_a_concurrent_append(self: SqlCatalog, expected: str, new: str, payload: bytes) -> str:
        if not raced:
            raced.append(new)
            table.table.append(batch(700, 3))  # PyIceberg commits first: our swap now conflicts
        return real_swap(self, expected, new, payload)

    monkeypatch.setattr(SqlCatalog, "swap", swap_after_a_concurrent_append)
    report = commit_compaction(plan, plan.groups, results, storage, 0.0)
    assert raced and report.commit_attempts == 2
    assert not Path(raced[0]).exists()  # the losing metadata file was removed
    assert [r["id"] for r in table.rows()] == sorted(list(range(60)) + [700, 701, 702], key=str)


def test_delete_file_threshold_selects_files_with_deletes(spark: Any, tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "unpartitioned", appends=3, rows=10)
    ref = TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier)
    target = _data_files(table)[0]
    add_position_deletes(load(ref), [(target, 1)])
    options = CompactionOptions(catalog_uri=table.catalog_uri, min_file_size=0, min_input_files=1)
    assert compaction.plan(table.identifier, options, StorageOptions()).groups == []  # nothing is small
    plan = compaction.plan(table.identifier, options.model_copy(update={"delete_file_threshold": 1}), StorageOptions())
    assert [f.path for g in plan.groups for f in g.files] == [target]


@pytest.mark.s3
def test_compaction_on_s3(spark: Any, s3_bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    endpoint = s3_bucket.options.endpoint_url
    table = small_file_table(tmp_path, "day", appends=6, rows=10, s3=(s3_bucket.uri, endpoint))
    ref = TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier)
    loaded = load(ref, s3_bucket.options)
    first = plan_scan(loaded.storage, loaded.metadata, loaded.metadata.current_snapshot()).tasks[0].file
    add_position_deletes(loaded, [(first.path, 0)], partition=first.entry.data_file.partition)
    before = table.rows()
    assert table.table.location().startswith(s3_bucket.uri)

    report = _compact(capsys, table, "--endpoint-url", endpoint)

    assert report["files_added"] == 3 and report["rows_removed_by_deletes"] == 1
    assert table.rows() == before
    assert all(f.startswith(f"{s3_bucket.uri}/") for f in _data_files(table))


def test_manifests_read_in_spark_tasks_plan_as_the_driver_does(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Above ``--manifest-threshold`` the data manifests are read in Spark tasks returning planning
    columns: the plan is the driver's, field for field (groups, the deletes each file takes, dangling
    deletes), and the compaction it runs leaves the rows PyIceberg read before."""
    table = small_file_table(tmp_path, "identity", appends=6, rows=10)
    ref = TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier)
    first = _data_files(table)[0]
    add_position_deletes(load(ref), [(first, 0)], partition={"category": first.split("category=")[1].split("/")[0]})
    expected = [r for r in table.rows() if r["category"] != "b"]  # PyIceberg cannot read equality deletes
    add_equality_deletes(
        load(ref), pa.table({"category": pa.array(["b"], pa.string())}), [3], partition={"category": "b"}
    )
    options = CompactionOptions(catalog_uri=table.catalog_uri, manifest_threshold=0, min_input_files=2)

    on_driver = compaction.plan(table.identifier, options, StorageOptions())
    console = Console(record=True, width=200, file=io.StringIO())
    on_spark = compaction.plan(
        table.identifier,
        options,
        StorageOptions(),
        executor=SparkSettings(master="local[2]", driver_max_bytes=0),
        progress=console,
    )

    assert "reading 6 manifests on Spark" in console.export_text()
    assert on_driver.groups and any(f.deletes for g in on_driver.groups for f in g.files)
    assert on_spark.model_dump() == on_driver.model_dump()
    report = _compact(capsys, table, "--manifest-threshold", "0", "--min-input-files", "2")
    assert report["files_removed"] == on_driver.input_files
    assert table.rows() == expected
