"""``--quarantine``, ``lakeops restore`` and ``lakeops purge-trash`` from the command line (deletions run on the
driver, no Spark): a quarantined VACUUM moves exactly what a plain run would delete and the table still
reads; restore puts it back byte-identical; later orphans runs (Delta and Iceberg) leave the trash alone;
purge-trash deletes only old runs; an Iceberg expiry quarantined then restored has every file back."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from icechunk_repos import build_history, contents
from lakeops_cli import run_json
from lakeops_testdata import TESTDATA
from pyiceberg_tables import small_file_table

from lakeops import audit, quarantine
from lakeops.storage import open_storage
from spark_jobs.cli import main as lakeops

OLD = 1_500_000_000.0  # July 2017: older than any retention


def _simple_table(tmp_path: Path) -> Path:
    """A writable, aged copy of delta-rs's ``simple_table`` (31 tombstoned files and 1 untracked)."""
    root = tmp_path / "simple_table"
    shutil.copytree(TESTDATA / "delta-rs" / "simple_table", root)
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
        if path.is_file():
            os.utime(path, (OLD, OLD))
    return root


def _tree(root: Path, *, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not str(p.relative_to(root)).startswith(skip)
    }


def test_vacuum_quarantine_restore_and_purge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _simple_table(tmp_path)
    rows = DeltaTable(str(root)).to_pyarrow_table().sort_by("id")
    before = _tree(root)
    preview = run_json(capsys, "orphans", str(root), "--dry-run")
    would_delete = {str(Path(p).relative_to(root)) for p in preview["paths"]}
    assert len(would_delete) == 32

    report = run_json(capsys, "orphans", str(root), "--quarantine")

    run_id = report["quarantine_run"]
    assert report["deleted_files"] == 32 and run_id is not None
    trash = root / "_lakeops_trash" / run_id
    assert set(_tree(root, skip=("_lakeops",))) == set(before) - would_delete
    moved = _tree(trash, skip=("_manifest",))
    assert moved == {p: before[p] for p in would_delete}  # exactly the plain run's files, bytes intact
    assert {e.path for e in quarantine.read_manifest(str(root), run_id)} == would_delete
    assert DeltaTable(str(root)).to_pyarrow_table().sort_by("id").equals(rows)
    [record] = audit.read_records(str(root))
    assert record.status == "succeeded" and record.plan["quarantine_run"] == record.run_id == run_id

    again = run_json(capsys, "orphans", str(root), "--older-than", "0s", "--force-short-retention")
    assert again["deleted_files"] == 0 and _tree(trash, skip=("_manifest",)) == moved  # the trash is not an orphan

    restored = run_json(capsys, "restore", str(root), run_id)

    assert restored["restored_files"] == 32 and restored["restored_bytes"] == sum(map(len, moved.values()))
    assert _tree(root, skip=("_lakeops",)) == before  # byte-identical
    assert not trash.exists()
    assert DeltaTable(str(root)).to_pyarrow_table().sort_by("id").equals(rows)
    assert [r.command for r in audit.read_records(str(root))] == ["orphans", "orphans", "restore"]

    assert lakeops(["restore", str(root), run_id]) == 1
    assert "no quarantine run" in capsys.readouterr().err

    # purge-trash: an old run goes, a recent one stays.
    old_run = quarantine.new_run_id(quarantine.run_time(run_id).replace(year=2020))
    second = run_json(capsys, "orphans", str(root), "--quarantine")["quarantine_run"]
    (root / "_lakeops_trash" / second).rename(root / "_lakeops_trash" / old_run)
    (root / "_lakeops_trash" / "x").mkdir()
    (root / "_lakeops_trash" / "x" / "f").write_bytes(b"?")  # lakeops did not write this: kept
    stray = root / "part-99999-stray.snappy.parquet"
    stray.write_bytes(b"an untracked file")
    os.utime(stray, (OLD, OLD))
    recent = run_json(capsys, "orphans", str(root), "--quarantine")["quarantine_run"]
    assert not stray.exists() and (root / "_lakeops_trash" / recent / stray.name).exists()

    dry = run_json(capsys, "purge-trash", str(root), "--dry-run")
    assert dry["runs"] == [old_run] and (root / "_lakeops_trash" / old_run).exists()
    purged = run_json(capsys, "purge-trash", str(root), "--older-than", "7d")

    assert purged["runs"] == [old_run] and purged["purged_files"] == 32 + 1  # the files and the manifest
    assert sorted(p.name for p in (root / "_lakeops_trash").iterdir()) == sorted([recent, "x"])
    assert DeltaTable(str(root)).to_pyarrow_table().num_rows == rows.num_rows


def test_iceberg_expire_quarantine_then_restore(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = {"history.expire.max-snapshot-age-ms": "1", "history.expire.min-snapshots-to-keep": "2"}
    table = small_file_table(tmp_path, "identity", appends=6, rows=10, properties=policy)
    table.table.delete("category == 'a'")
    table.reload()
    location = Path(table.location.removeprefix("file://"))
    common = (table.identifier, "--catalog-uri", table.catalog_uri)
    stale = location / "_lakeops_trash" / "20200101T000000Z-abcdef" / "data" / "x.parquet"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"quarantined long ago")
    os.utime(stale, (OLD, OLD))
    orphans = run_json(capsys, "orphans", *common, "--older-than", "0s", "--force-short-retention", "--dry-run")
    assert not [p for p in orphans["paths"] if "_lakeops_" in p]  # Iceberg's listing never sees the trash
    stale.unlink()
    dry = run_json(capsys, "expire", *common, "--dry-run")
    before = _tree(location)
    expired_files = {str(Path(p.removeprefix("file://")).relative_to(location)) for p in dry["paths"]}
    assert dry["snapshots_expired"] > 0 and expired_files

    report = run_json(capsys, "expire", *common, "--quarantine")

    run_id = report["quarantine_run"]
    assert (
        report["deleted_files"] == len(expired_files) and report["expired_snapshot_ids"] == dry["expired_snapshot_ids"]
    )
    assert not any((location / p).exists() for p in expired_files)
    trash = location / "_lakeops_trash" / run_id
    assert _tree(trash, skip=("_manifest",)) == {p: before[p] for p in expired_files}

    restored = run_json(capsys, "restore", *common, run_id)

    assert restored["restored_files"] == len(expired_files)
    after = _tree(location, skip=("_lakeops",))
    assert {p: after[p] for p in expired_files} == {p: before[p] for p in expired_files}  # every file is back
    assert [r.command for r in audit.read_records(str(location))] == ["expire", "restore"]


def test_quarantine_is_refused_with_dry_run_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _simple_table(tmp_path)
    before = _tree(root)

    preview = run_json(capsys, "orphans", str(root), "--dry-run", "--quarantine")

    assert preview["quarantine_run"] is None and _tree(root) == before
    assert run_json(capsys, "purge-trash", str(root))["purged_runs"] == 0


def test_icechunk_expire_and_gc_quarantined_then_restored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "repo"
    storage = open_storage(str(root))
    build_history(storage, str(root))
    before, heads_before = _tree(root), contents(storage, str(root))
    short = ("--older-than", "0s")

    expired = run_json(capsys, "expire", str(root), *short, "--force", "--quarantine")
    collected = run_json(capsys, "orphans", str(root), *short, "--force-short-retention", "--quarantine")

    assert expired["deleted_branch_files"] > 0 and collected["deleted_chunks"] > 0
    assert contents(storage, str(root)) == heads_before  # every head reads as before
    moved = set(before) - set(_tree(root, skip=("_lakeops",)))
    assert len(moved) == expired["deleted_branch_files"] + collected["deleted_files"]

    for run in (collected["quarantine_run"], expired["quarantine_run"]):
        run_json(capsys, "restore", str(root), run)

    assert _tree(root, skip=("_lakeops",)) == before
    assert [r.command for r in audit.read_records(str(root))] == ["expire", "orphans", "restore", "restore"]


def test_delta_log_expiry_quarantined_then_restored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "t"
    for version in range(4):
        write_deltalake(str(root), pa.table({"id": [version]}), mode="append")
    DeltaTable(str(root)).create_checkpoint()
    for commit in (root / "_delta_log").glob("*.json"):
        os.utime(commit, (OLD, OLD))
    before = _tree(root)

    report = run_json(capsys, "expire", str(root), "--quarantine")

    gone = set(before) - set(_tree(root, skip=("_lakeops",)))
    assert report["deleted_commits"] == 3 and gone == {f"_delta_log/{v:020d}.json" for v in range(3)}
    assert sorted(DeltaTable(str(root)).to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2, 3]
    run_json(capsys, "restore", str(root), report["quarantine_run"])
    assert _tree(root, skip=("_lakeops",)) == before
    assert DeltaTable(str(root), version=0).to_pyarrow_table().column("id").to_pylist() == [0]
