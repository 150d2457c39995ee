"""Acceptance of ``lakeops orphans`` (Delta VACUUM) on Spark: delta-rs is the oracle for rows and files."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from lakeops_cli import run_json
from lakeops_testdata import TESTDATA
from rich.console import Console

from lakeops.deletion import delete_batch
from lakeops.delta.maintenance.orphans import VacuumOptions
from lakeops.ops import orphans
from lakeops.storage import StorageOptions, open_storage
from spark_jobs.cli import main as lakeops
from spark_jobs.spark_settings import SparkSettings
from spark_jobs.spark_tasks import run_units

ROOT = Path(__file__).resolve().parents[2]
OLD = 1_500_000_000.0  # July 2017: older than any retention


def _simple_table(tmp_path: Path) -> tuple[Path, set[str], set[str]]:
    """A writable, aged copy of ``simple_table`` and its (tombstoned, untracked) file names from the log."""
    root = tmp_path / "simple_table"
    shutil.copytree(TESTDATA / "delta-rs" / "simple_table", root)  # copy2 keeps the fixture's (recent) mtimes
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
        if path.is_file():
            os.utime(path, (OLD, OLD))
    actions: dict[str, set[str]] = {"add": set(), "remove": set()}
    for commit in sorted((root / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            for kind, paths in actions.items():
                if kind in action:
                    paths.add(action[kind]["path"])
    live = {uri.rsplit("/", 1)[1] for uri in DeltaTable(str(root)).file_uris()}
    tombstoned = actions["remove"] - live
    untracked = {p.name for p in root.glob("*.parquet")} - actions["add"] - actions["remove"]
    return root, tombstoned, untracked


def test_vacuum_simple_table(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, tombstoned, untracked = _simple_table(tmp_path)
    assert (len(tombstoned), len(untracked)) == (31, 1)
    rows = DeltaTable(str(root)).to_pyarrow_table().sort_by("id")
    live = {uri.rsplit("/", 1)[1] for uri in DeltaTable(str(root)).file_uris()}
    (root / "part-99999-fresh-c000.snappy.parquet").write_bytes(b"a writer's file, not committed yet")
    outside = tmp_path / "simple_table_old" / "part-00000-outside.parquet"  # a sibling sharing the prefix
    outside.parent.mkdir()
    outside.write_bytes(b"not the table's")
    os.utime(outside, (OLD, OLD))
    files_before = {p.relative_to(root) for p in root.rglob("*") if p.is_file()}

    preview = run_json(capsys, "orphans", str(root), "--dry-run")

    assert preview["dry_run"] is True
    assert {Path(p).name for p in preview["paths"]} == tombstoned | untracked
    assert {p.relative_to(root) for p in root.rglob("*") if p.is_file()} == files_before

    report = run_json(capsys, "orphans", str(root), "--master", "local[2]")

    assert (report["deleted_tombstoned_files"], report["deleted_untracked_files"]) == (31, 1)
    assert report["deleted_files"] == 32 and report["files_too_recent"] == 1 and report["paths"] == []
    assert report["directories_scanned"] == 1 and report["live_files"] == 5
    assert {p.name for p in root.glob("*.parquet")} == live | {"part-99999-fresh-c000.snappy.parquet"}
    assert (root / "_delta_log" / ".tmp" / "00000000000000000005.json").exists()
    assert outside.exists()
    assert DeltaTable(str(root)).to_pyarrow_table().sort_by("id").equals(rows)
    again = run_json(capsys, "orphans", str(root), "--master", "local[2]")
    assert again["deleted_files"] == 0


def test_many_batches_run_as_spark_tasks(spark: Any, tmp_path: Path) -> None:
    root, tombstoned, untracked = _simple_table(tmp_path)
    started = time.monotonic()
    plan = orphans.plan_delta(str(root), VacuumOptions(batch_size=10), StorageOptions())
    assert [len(b.files) for b in plan.batches] == [10, 10, 10, 2]

    results = run_units(spark, plan.batches, delete_batch, orphans.BatchResult)
    report = orphans.finish(plan, results, started)

    assert report.deleted_files == sum(r.files for r in results) == 32
    assert report.deleted_bytes == sum(r.bytes for r in results) > 0
    assert not {p.name for p in root.glob("*.parquet")} & (tombstoned | untracked)


@pytest.mark.s3
def test_vacuum_on_s3(spark: Any, s3_bucket: Any, capsys: pytest.CaptureFixture[str]) -> None:
    endpoint = s3_bucket.options.endpoint_url
    location = f"{s3_bucket.uri}/warehouse/events"
    delta_rs = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "lakeops-test",
        "AWS_SECRET_ACCESS_KEY": "lakeops-test-secret",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }
    for i in range(3):
        write_deltalake(location, pa.table({"id": [i, i + 10]}), mode="append", storage_options=delta_rs)
    DeltaTable(location, storage_options=delta_rs).delete("id = 11")  # rewrites one file
    write_deltalake(location, pa.table({"id": [7, 8]}), mode="append", storage_options=delta_rs)
    table = DeltaTable(location, storage_options=delta_rs)
    rows = table.to_pyarrow_table().sort_by("id")
    live = set(table.file_uris())
    storage = open_storage(s3_bucket.uri, s3_bucket.options)  # the bucket: it writes another table too
    sibling = f"{s3_bucket.uri}/warehouse/events2/part-0.parquet"  # same key prefix, other table
    storage.write(sibling, b"other table")

    # moto dates every object "now", so only a zero retention makes anything old enough.
    assert lakeops(["orphans", location, "--endpoint-url", endpoint, "--older-than", "0s"]) == 1
    assert "shorter than the table's delta.deletedFileRetentionDuration (7d)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:  # a malformed option value: a usage error (README)
        lakeops(["orphans", location, "--endpoint-url", endpoint, "--older-than=-1s"])
    assert usage.value.code == 2 and "retention '-1s' is negative" in capsys.readouterr().err
    time.sleep(0.01)

    report = run_json(
        capsys, "orphans", location, "--endpoint-url", endpoint, "--older-than", "0s", "--force-short-retention"
    )

    assert report["deleted_tombstoned_files"] == 1 and report["deleted_untracked_files"] == 0
    remaining = {f.path for f in storage.list(location) if f.path.endswith(".parquet")}
    assert remaining == {uri.replace("s3a://", "s3://") for uri in live}
    assert storage.exists(sibling)
    assert DeltaTable(location, storage_options=delta_rs).to_pyarrow_table().sort_by("id").equals(rows)


def test_spark_submit_entry_point_vacuums(tmp_path: Path) -> None:
    root, tombstoned, untracked = _simple_table(tmp_path)
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    result = subprocess.run(
        [str(spark_submit), "--master", "local[1]", str(ROOT / "spark_jobs" / "orphans.py"), str(root), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["deleted_files"] == 32
    assert not {p.name for p in root.glob("*.parquet")} & (tombstoned | untracked)


def test_listing_on_spark_tasks_plans_as_the_driver_does(spark: Any, tmp_path: Path) -> None:
    """Above ``--listing-threshold`` VACUUM lists each second-level directory in a Spark task: the
    plan is the one-pass driver listing's, and after deleting delta-rs reads the same rows."""
    root = tmp_path / "by_region_day"
    for i in range(3):
        rows = pa.table(
            {"id": [i * 10 + k for k in range(6)], "region": ["eu", "us"] * 3, "day": ["d1", "d2", "d3"] * 2}
        )
        write_deltalake(str(root), rows, partition_by=["region", "day"], mode="overwrite" if i == 1 else "append")
    untracked = root / "region=eu" / "day=d1" / "part-00000-crashed-writer.parquet"
    untracked.write_bytes(b"a crashed writer's leftover")
    for path in [root, *root.rglob("*")]:
        os.utime(path, (OLD, OLD))
    expected = DeltaTable(str(root)).to_pyarrow_table().sort_by("id")
    options = VacuumOptions(retention=None, force_short_retention=True)
    now_ms = int(time.time() * 1000) + 8 * 24 * 3600 * 1000  # every tombstone older than the 7-day default

    on_driver = orphans.plan_delta(str(root), options, StorageOptions(), now_ms=now_ms)
    console = Console(record=True, width=200, file=io.StringIO())
    on_spark = orphans.plan_delta(
        str(root),
        options,
        StorageOptions(),
        now_ms=now_ms,
        executor=SparkSettings(master="local[2]", driver_max_bytes=0),
        progress=console,
        listing_threshold=0,
    )

    assert "listing 6 directories on Spark" in console.export_text()
    assert on_driver.files_scanned == 19 and str(untracked) in {c.path for c in on_driver.candidates}
    assert on_spark.model_dump() == on_driver.model_dump()
    results = run_units(spark, on_spark.batches, delete_batch, orphans.BatchResult)
    assert sum(r.files for r in results) == len(on_driver.candidates) == 7
    assert not untracked.exists()
    assert DeltaTable(str(root)).to_pyarrow_table().sort_by("id").equals(expected)


def test_a_table_whose_root_is_not_utf8_is_listed_on_spark(tmp_path: Path) -> None:
    """The Spark job's label names the table; a root that is not UTF-8 holds lone surrogates, which Py4J
    could not send (a UnicodeEncodeError traceback, found by the long-budget hostile-names search). The
    command runs in its own process, where ``$LAKEOPS_DRIVER_MAX_UNITS=0`` puts every plan on Spark."""
    location = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(location), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    DeltaTable(str(location)).create_checkpoint()  # its adds are Arrow rows: the listing is planned in units
    root = os.fsencode(tmp_path) + b"/\xff"
    os.rename(location, os.fsdecode(root))
    os.makedirs(root + b"/sub/sub")
    with open(root + b"/sub/sub/\xfe", "wb") as out:
        out.write(b"x")
    os.utime(root + b"/sub/sub/\xfe", (0, 0))

    argv = ["orphans", os.fsdecode(root), "--listing-threshold", "0", "--json"]
    code = "import sys; from spark_jobs.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "LAKEOPS_DRIVER_MAX_UNITS": "0"}
    result = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-3000:]
    assert b"on Spark" in result.stderr
    assert json.loads(result.stdout)["deleted_untracked_files"] == 1
    assert not os.path.exists(root + b"/sub/sub/\xfe")
    os.rename(root, tmp_path / "peer")  # delta-rs opens only UTF-8 locations
    assert sorted(DeltaTable(str(tmp_path / "peer")).to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2]
