"""Acceptance of ``lakeops cdc`` on Delta tables: the output table, read back by delta-rs, holds
exactly the rows delta-rs's own ``load_cdf`` reports for the same range (a multiset, commit
timestamps included: both take ``commitInfo.timestamp``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from lakeops_testdata import TESTDATA
from refused_runs import failed_run_records

from lakeops.storage import open_storage, relative_to
from spark_jobs.cli import main as lakeops

ROOT = Path(__file__).resolve().parents[2]
MASTER = ("--master", "local[2]")
CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def _normalised(table: pa.Table, columns: list[str]) -> pa.Table:
    """Comparable columns: plain strings, int64 versions, timestamps as epoch milliseconds; rows sorted."""
    out: dict[str, pa.ChunkedArray] = {}
    for name in columns:
        column = table.column(name)
        if pa.types.is_string_view(column.type) or pa.types.is_large_string(column.type):
            column = column.cast(pa.string())
        elif pa.types.is_timestamp(column.type):
            column = column.cast(pa.timestamp("ms", tz=column.type.tz)).cast(pa.int64())
        elif name == "_commit_version":
            column = column.cast(pa.int64())
        out[name] = column
    result = pa.table(out)
    return result.sort_by([(n, "ascending") for n in columns])


def _delta_rs_cdf(location: str, start: int, end: int | None = None, **kw: Any) -> pa.Table:
    reader = DeltaTable(location, **kw).load_cdf(starting_version=start, ending_version=end)
    return pa.table(reader.read_all())


def _output(location: str, **kw: Any) -> pa.Table:
    return DeltaTable(location, **kw).to_pyarrow_table()


def _assert_same_changes(out: str, source: str, start: int, end: int | None = None) -> pa.Table:
    ours = _output(out)
    columns = ours.column_names
    assert columns[-3:] == list(CDF_COLUMNS)
    expected = _normalised(_delta_rs_cdf(source, start, end), columns)
    actual = _normalised(ours, columns)
    assert actual.num_rows == expected.num_rows
    assert actual.equals(expected), (actual.to_pylist(), expected.to_pylist())
    return actual


def _cdc(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code = lakeops(["cdc", *argv, *MASTER, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report: dict[str, Any] = json.loads(captured.out)
    return report


def _copy(name: str, tmp_path: Path) -> str:
    shutil.copytree(TESTDATA / "delta-rs" / name, tmp_path / name)
    return str(tmp_path / name)


def _fingerprint(root: Path) -> dict[str, str]:
    """The output's files and their hashes but its audit records (a run, failed or not, leaves one)."""
    files = (p for p in root.rglob("*") if p.is_file() and "_lakeops_audit" not in p.parts)
    return {str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest() for p in files}


@pytest.mark.parametrize(
    ("name", "start", "rows"),
    [
        ("cdf-table", 0, 23),
        ("cdf-table-non-partitioned", 0, 25),
        ("simple_table_with_cdc", 0, 3),
        ("cdf-table-with-cdc-and-dvs", 0, 43),  # deletion vectors: delta-rs's load_cdf diffs them too
        ("checkpoint-cdf-table", 4, 12),  # commits 0..2 expired, checkpoint at 3
    ],
)
def test_fixture_tables_match_delta_rs(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, start: int, rows: int
) -> None:
    source, out = _copy(name, tmp_path), str(tmp_path / "changes")
    report = _cdc(capsys, source, "--from", str(start), "--output", out)

    assert report["committed_version"] == 0 and report["output_created"] and report["rows_written"] == rows
    changes = _assert_same_changes(out, source, start)
    by_type = {t: changes.column("_change_type").to_pylist().count(t) for t in ("insert", "delete")}
    assert (report["rows_insert"], report["rows_delete"]) == (by_type["insert"], by_type["delete"])

    again = _cdc(capsys, source, "--from", str(start), "--output", out)
    assert again["already_extracted"] and again["committed_version"] is None and again["files_written"] == 0
    assert DeltaTable(out).version() == 0


def _events(start: int, n: int, day: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "name": pa.array([f"n{i}" for i in range(start, start + n)]),
            "score": pa.array([i * 0.5 for i in range(start, start + n)], pa.float64()),
            "day": pa.array([day] * n),
        }
    )


def _dml_history(location: str, *, change_data_feed: bool) -> None:
    """Appends, a DELETE, an UPDATE and a MERGE (update + insert + delete), partitioned by day."""
    configuration = {"delta.enableChangeDataFeed": "true"} if change_data_feed else None
    write_deltalake(location, _events(0, 6, "2026-01-01"), partition_by=["day"], configuration=configuration)
    write_deltalake(location, _events(6, 4, "2026-01-02"), mode="append")  # v1
    DeltaTable(location).delete("id = 2")  # v2
    DeltaTable(location).update(predicate="id >= 7", updates={"name": "'renamed'"})  # v3
    source = pa.table(
        {
            "id": pa.array([0, 1, 20], pa.int64()),
            "name": ["merged", "gone", "new"],
            "score": pa.array([1.0, 2.0, 3.0]),
            "day": ["2026-01-01", "2026-01-01", "2026-01-03"],
        }
    )
    (
        DeltaTable(location)
        .merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all(predicate="s.name = 'merged'")
        .when_matched_delete(predicate="s.name = 'gone'")
        .when_not_matched_insert_all()
        .execute()
    )  # v4


def test_delta_rs_tables_with_change_data_files_match_delta_rs(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = str(tmp_path / "events"), str(tmp_path / "changes")
    _dml_history(source, change_data_feed=True)
    report = _cdc(capsys, source, "--from", "0", "--output", out)
    assert report["versions_from_change_files"] == 3 and report["versions_from_file_actions"] == 2
    assert report["rows_update_preimage"] == report["rows_update_postimage"] == 4  # ids 7, 8, 9 and 0
    _assert_same_changes(out, source, 0)


def test_delta_rs_tables_without_change_data_feed_use_adds_and_removes(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = str(tmp_path / "events"), str(tmp_path / "changes")
    _dml_history(source, change_data_feed=False)
    report = _cdc(capsys, source, "--from", "1", "--output", out)
    assert report["versions_from_change_files"] == 0 and report["rows_update_preimage"] == 0
    # Without change data files a rewritten file is all deletes plus all inserts (copied rows too).
    _assert_same_changes(out, source, 1)
    # delta-rs refuses version 0 here ("change data not enabled"); lakeops reads its adds as inserts.
    first = str(tmp_path / "first")
    _cdc(capsys, source, "--from", "0", "--to", "0", "--output", first)
    inserted = _output(first)
    assert set(inserted.column("_change_type").to_pylist()) == {"insert"}
    assert sorted(inserted.column("id").to_pylist()) == list(range(6))


def test_overlapping_backfill_writes_no_duplicate_keys(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = str(tmp_path / "events"), str(tmp_path / "changes")
    _dml_history(source, change_data_feed=True)
    _cdc(capsys, source, "--from", "0", "--to", "2", "--output", out)
    report = _cdc(capsys, source, "--from", "1", "--output", out)
    assert (report["from_version"], report["to_version"], report["committed_version"]) == (3, 4, 1)
    changes = _assert_same_changes(out, source, 0)
    keys = list(zip(*(changes.column(c).to_pylist() for c in ("_commit_version", "_change_type", "id")), strict=True))
    assert len(keys) == len(set(keys))
    assert DeltaTable(out).version() == 1


def test_dry_run_writes_nothing(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, out = _copy("cdf-table", tmp_path), tmp_path / "changes"
    report = _cdc(capsys, source, "--from", "1", "--output", str(out), "--dry-run")
    assert report["dry_run"] and report["source_files"] == 13 and report["versions_extracted"] == 3
    assert not out.exists()


def _fails(capsys: pytest.CaptureFixture[str], out: Path, *argv: str, status: int = 1) -> str:
    before = _fingerprint(out)
    assert lakeops(["cdc", *argv, *MASTER]) == status
    assert _fingerprint(out) == before, "a refused run changed the output table"
    return " ".join(capsys.readouterr().err.split())


def test_a_range_with_vacuumed_files_is_refused_before_writing(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = _copy("cdf-table-with-cdc-and-dvs", tmp_path), tmp_path / "changes"
    _cdc(capsys, source, "--from", "0", "--to", "9", "--output", str(out))
    # Version 24 deletes rows of this file through a DV: reading the change needs the file.
    (vacuumed,) = Path(source).glob("part-00000-92f71a43-*.parquet")
    vacuumed.unlink()
    err = _fails(capsys, out, source, "--from", "10", "--output", str(out))
    assert "VersionNotFound" in err and vacuumed.name in err and "no longer exists" in err
    assert "complete only from version 25" in err
    assert DeltaTable(str(out)).version() == 0


def test_a_range_whose_commits_expired_is_refused(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = _copy("checkpoint-cdf-table", tmp_path), tmp_path / "changes"
    err = _fails(capsys, out, source, "--from", "0", "--output", str(out))
    assert "VersionNotFound" in err and "00000000000000000000.json has expired" in err
    assert failed_run_records(out) == 1  # the refused run's record, no change table


def test_a_from_that_is_not_a_version_is_refused_for_delta(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = _copy("cdf-table", tmp_path), tmp_path / "changes"
    err = _fails(capsys, out, source, "--from", "main", "--output", str(out), status=2)  # a usage error
    assert "UsageError" in err and "--from 'main' is not a table version" in err and source in err
    err = _fails(capsys, out, source, "--from", "0", "--to", "-1", "--output", str(out), status=2)
    assert "--to '-1' is not a table version" in err
    assert failed_run_records(out) == 2  # the refused runs' records, no change table


def test_an_unwritable_output_is_refused_before_any_work(tmp_path: Path) -> None:
    source = _copy("cdf-table", tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    out = locked / "changes"
    # Root ignores directory permissions; drop the capabilities that let it (as an ordinary user has none).
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-all"] if os.geteuid() == 0 else []
    if drop and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a read-only directory cannot be made unwritable")
    result = subprocess.run(
        [*drop, sys.executable, "-m", "spark_jobs.cli", "cdc", source, "--from", "0", "--output", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    err = " ".join(result.stderr.split())
    assert result.returncode == 1, result.stderr
    assert "StorageError" in err and str(out) in err and "not writable" in err and "nothing was written" in err
    assert list(locked.iterdir()) == []


@pytest.mark.s3
def test_cdc_on_s3(spark: Any, s3_bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    endpoint = s3_bucket.options.endpoint_url
    source, out = f"{s3_bucket.uri}/warehouse/events", f"{s3_bucket.uri}/warehouse/events_changes"
    delta_rs = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "lakeops-test",
        "AWS_SECRET_ACCESS_KEY": "lakeops-test-secret",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }
    configuration = {"delta.enableChangeDataFeed": "true"}
    write_deltalake(source, _events(0, 5, "d1"), configuration=configuration, storage_options=delta_rs)
    write_deltalake(source, _events(5, 5, "d2"), mode="append", storage_options=delta_rs)
    DeltaTable(source, storage_options=delta_rs).update(predicate="id < 3", updates={"name": "'x'"})

    report = _cdc(capsys, source, "--from", "0", "--output", out, "--endpoint-url", endpoint)

    assert report["committed_version"] == 0 and report["rows_update_postimage"] == 3
    ours = _output(out, storage_options=delta_rs)
    columns = ours.column_names
    # delta-rs 1.6's load_cdf, like its history(), never finishes listing against moto ("start-after"
    # requests time out), so the oracle reads a byte-for-byte local copy of the source instead.
    local = tmp_path / "events"
    storage = open_storage(source, s3_bucket.options)
    for info in storage.list(source):
        target = local / relative_to(source, info.path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(storage.read(info.path))
    expected = _normalised(_delta_rs_cdf(str(local), 0), columns)
    assert _normalised(ours, columns).equals(expected)
