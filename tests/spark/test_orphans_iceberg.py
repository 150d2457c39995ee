"""Acceptance of ``lakeops orphans`` on Iceberg tables: PyIceberg writes the tables (snapshots, a tag,
a metadata log), orphans are planted with old and new modification times, exactly the old ones go,
and PyIceberg still reads every snapshot with the same rows."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from lakeops_cli import run_json
from pyiceberg_tables import PyIcebergTable, batch, small_file_table

from lakeops.storage import open_storage
from spark_jobs.cli import main as lakeops

OLD = 1_500_000_000.0  # July 2017: older than any floor


def _orphans(capsys: pytest.CaptureFixture[str], table: PyIcebergTable, *extra: str) -> dict[str, Any]:
    return run_json(capsys, "orphans", table.identifier, "--catalog-uri", table.catalog_uri, *extra)


def _fingerprint(root: Path) -> dict[str, str]:
    """Every file's hash, except lakeops's own audit records (a run, failed or not, leaves one: issue 10)."""
    return {
        str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and "_lakeops_audit" not in p.parts
    }


def _every_snapshot(table: PyIcebergTable) -> dict[int, list[dict[str, Any]]]:
    return {s.snapshot_id: table.rows(s.snapshot_id) for s in table.reload().snapshots()}


def _plant(*paths: Path, mtime: float | None = OLD) -> set[Path]:
    """Files a failed writer left behind, modified at ``mtime`` (None: now)."""
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"left behind by a failed writer")
        if mtime is not None:
            os.utime(path, (mtime, mtime))
    return set(paths)


def _history_table(tmp_path: Path) -> PyIcebergTable:
    """Appends, a tag on the first snapshot, a copy-on-write delete and an overwrite (a delete and an
    append): seven snapshots and a metadata log; every file aged past any floor."""
    table = small_file_table(tmp_path, "identity", appends=3, rows=12)
    first = table.table.snapshots()[0].snapshot_id
    table.table.manage_snapshots().create_tag(first, "first").commit()
    table.reload().delete("id < 6")
    table.reload().overwrite(batch(500, 6), overwrite_filter="id >= 30")
    table.reload()
    for path in Path(table.location).rglob("*"):
        if path.is_file():
            os.utime(path, (OLD, OLD))
    return table


def test_exactly_the_old_orphans_go_and_every_snapshot_still_reads(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _history_table(tmp_path)
    location = Path(table.location)
    snapshots = _every_snapshot(table)
    assert len(snapshots) == 7 and len(table.table.metadata.metadata_log) >= 5
    hint = location / "metadata" / "version-hint.text"
    outside = tmp_path / "warehouse" / "db" / "events_copy" / "old.parquet"  # shares the location's prefix
    _plant(hint, outside)
    old = _plant(
        location / "data" / "category=a" / "00000-0-orphan.parquet",
        location / "data" / "category=zz" / "00000-1-orphan.parquet",
        location / "metadata" / "snap-1-0-orphan.avro",
        location / "metadata" / "00099-orphan.metadata.json",
    )
    new = _plant(
        location / "data" / "category=b" / "00000-2-in-flight.parquet",
        location / "metadata" / "in-flight-m0.avro",
        mtime=None,
    )
    current = Path(table.table.metadata_location.removeprefix("file://"))
    before = _fingerprint(tmp_path)

    preview = _orphans(capsys, table, "--dry-run")

    assert preview["dry_run"] is True and preview["format"] == "iceberg"
    assert set(preview["paths"]) == {str(p) for p in old}
    assert _fingerprint(tmp_path) == before

    report = _orphans(capsys, table, "--master", "local[2]", "--listing-threshold", "0")

    assert report["deleted_files"] == 4 and report["paths"] == []
    assert (report["deleted_data_files"], report["deleted_metadata_files"]) == (2, 2)
    assert report["files_too_recent"] == 2 and report["listing_tasks"] == 5  # data/category=a,b,c,null,zz
    assert report["snapshots"] == 7 and report["metadata_files"] == 1 + len(table.table.metadata.metadata_log)
    assert not any(p.exists() for p in old)
    assert all(p.exists() for p in new | {hint, current, outside})
    assert {k: v for k, v in before.items() if not any(str(p).endswith(k) for p in old)} == _fingerprint(tmp_path)
    assert _every_snapshot(table) == snapshots
    again = _orphans(capsys, table, "--master", "local[2]")
    assert again["deleted_files"] == 0 and again["files_scanned"] == report["files_scanned"] - 4


def test_a_reference_under_another_authority_stops_the_run(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = small_file_table(tmp_path, appends=2, rows=5)
    stats = Path(table.location) / "metadata" / "stats.puffin"
    _plant(stats, Path(table.location) / "data" / "old-orphan.parquet")
    current = Path(table.table.metadata_location.removeprefix("file://"))
    document = json.loads(current.read_text())
    document["statistics"] = [
        {
            "snapshot-id": document["current-snapshot-id"],
            "statistics-path": f"s3a://replica{stats}",
            "file-size-in-bytes": stats.stat().st_size,
            "file-footer-size-in-bytes": 1,
            "blob-metadata": [],
        }
    ]
    current.write_text(json.dumps(document))
    before = _fingerprint(tmp_path)

    assert lakeops(["orphans", table.identifier, "--catalog-uri", table.catalog_uri]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "UnsafeOperation" in err and f"{stats} is referenced as s3a://replica{stats}" in err
    assert _fingerprint(tmp_path) == before

    kept = _orphans(capsys, table, "--prefix-mismatch-mode", "ignore", "--dry-run")
    assert kept["prefix_mismatches_kept"] == 1 and [Path(p).name for p in kept["paths"]] == ["old-orphan.parquet"]
    dropped = _orphans(capsys, table, "--prefix-mismatch-mode", "delete", "--dry-run")
    assert sorted(Path(p).name for p in dropped["paths"]) == ["old-orphan.parquet", "stats.puffin"]


def test_short_floors_and_delta_flags_are_refused(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = small_file_table(tmp_path, appends=1, rows=5)
    young = Path(table.location) / "data" / "young-orphan.parquet"
    _plant(young, mtime=time.time() - 7200)
    argv = ["orphans", table.identifier, "--catalog-uri", table.catalog_uri]

    assert lakeops([*argv, "--older-than", "1h"]) == 1
    assert "--older-than 1h is shorter than the 3d floor" in " ".join(capsys.readouterr().err.split())
    assert lakeops([*argv, "--keep-from-version", "3"]) == 2  # a usage error
    assert "--keep-from-version does not apply" in capsys.readouterr().err

    forced = _orphans(capsys, table, "--older-than", "1h", "--force-short-retention", "--dry-run")
    assert forced["paths"] == [str(young)] and forced["retention"] == "1h"
    assert young.exists()


@pytest.mark.s3
def test_orphans_on_s3(spark: Any, s3_bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = small_file_table(
        tmp_path, "identity", appends=3, rows=8, s3=(s3_bucket.uri, s3_bucket.options.endpoint_url)
    )
    table.table.delete("id < 4")
    snapshots = _every_snapshot(table)
    location = table.table.location()
    storage = open_storage(s3_bucket.uri, s3_bucket.options)  # the bucket: it writes beside the table too
    orphans = [f"{location}/data/category=a/orphan.parquet", f"{location}/metadata/orphan-m0.avro"]
    for path in orphans:
        storage.write(path, b"left behind")
    storage.write(f"{location}_copy/data/orphan.parquet", b"not the table's")
    listed = {f.path for f in storage.list(location)}
    time.sleep(1.1)  # S3 modification times have second precision: the floor below must pass them

    report = _orphans(
        capsys,
        table,
        "--endpoint-url",
        s3_bucket.options.endpoint_url,
        "--older-than",
        "0s",
        "--force-short-retention",
        "--master",
        "local[2]",
    )

    assert report["deleted_files"] == 2
    kept = {f.path for f in storage.list(location) if "/_lakeops_audit/" not in f.path}  # the run's audit record
    assert kept == listed - set(orphans)
    assert storage.exists(f"{location}_copy/data/orphan.parquet")
    assert _every_snapshot(table) == snapshots
