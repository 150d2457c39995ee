"""Acceptance of ``lakeops checkpoint`` on Iceberg tables (rewrite manifests): PyIceberg writes the
tables and reads them back through the same SQLite catalog after the rewrite, and must see exactly
the same rows, now and at earlier snapshots, while planning reads fewer manifests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from iceberg_merge_on_read import add_position_deletes, load
from lakeops_cli import run_json
from maintenance_commits import commit_checkpoint
from pyiceberg_tables import PyIcebergTable, batch, create_table, small_file_table

from lakeops.errors import CommitConflict
from lakeops.iceberg.maintenance.rewrite_manifests import RewriteManifestsPlan, WrittenManifest
from lakeops.iceberg.manifest import manifests_of
from lakeops.iceberg.scan import plan_scan
from lakeops.iceberg.sql_catalog import SqlCatalog
from lakeops.iceberg.table import TableRef
from lakeops.ops import checkpoint
from lakeops.ops.checkpoint import CheckpointOptions
from lakeops.storage import StorageOptions
from spark_jobs.spark_tasks import run_units

STORAGE = StorageOptions()


def _checkpoint(capsys: pytest.CaptureFixture[str], table: PyIcebergTable, *extra: str) -> dict[str, Any]:
    return run_json(
        capsys, "checkpoint", table.identifier, "--catalog-uri", table.catalog_uri, "--master", "local[2]", *extra
    )


def _ref(table: PyIcebergTable) -> TableRef:
    return TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier)


def _planning(table: PyIcebergTable) -> tuple[int, dict[str, list[str]]]:
    """Manifests our scan planning reads, and data file -> delete files it attaches."""
    loaded = load(_ref(table))
    scan = plan_scan(loaded.storage, loaded.metadata, loaded.metadata.current_snapshot())
    return scan.manifests_read, {t.file.path: sorted(d.path for d in t.deletes) for t in scan.tasks}


def _plan(table: PyIcebergTable) -> RewriteManifestsPlan:
    plan = checkpoint.plan(table.identifier, CheckpointOptions(catalog_uri=table.catalog_uri), STORAGE)
    assert isinstance(plan, RewriteManifestsPlan)
    return plan


def _write(spark: Any, plan: RewriteManifestsPlan) -> list[WrittenManifest]:
    written = run_units(spark, plan.outputs, plan.task(), WrittenManifest)
    return [w for w in written if isinstance(w, WrittenManifest)]


def test_200_appends_become_one_manifest(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = create_table(tmp_path, "unpartitioned")
    for i in range(200):
        table.table.append(batch(3 * i, 1 + i % 3))
    rows = table.rows()
    earlier = table.reload().snapshots()[49].snapshot_id
    earlier_rows = table.rows(earlier)
    manifests_read, files = _planning(table)
    assert manifests_read == 200

    plan = run_json(capsys, "checkpoint", table.identifier, "--catalog-uri", table.catalog_uri, "--dry-run")
    assert plan["status"] == "planned" and plan["manifests_before"] == 200 and plan["manifests_after"] == 1
    assert len(table.reload().snapshots()) == 200  # the dry run committed nothing

    report = _checkpoint(capsys, table)

    assert report["status"] == "committed" and report["format"] == "iceberg"
    assert (report["manifests_before"], report["manifests_replaced"], report["manifests_after"]) == (200, 200, 1)
    assert report["entries"] == len(files) == 200 and report["bytes"] > 0
    assert report["replaced_bytes"] > report["bytes"]
    current = table.reload().current_snapshot()
    assert current is not None and current.summary is not None
    assert current.summary.operation.value == "replace"
    assert current.summary["manifests-created"] == "1" and current.summary["entries-processed"] == "200"
    assert table.rows() == rows
    assert table.rows(earlier) == earlier_rows  # time travel reads the old manifests
    assert _planning(table) == (1, files)
    # a second run finds nothing to merge
    again = _checkpoint(capsys, table)
    assert again["status"] == "nothing to rewrite" and again["manifests_after"] == 1


def test_two_specs_and_position_deletes(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Manifests of each spec and content are merged separately; delete manifests too, and the
    deletes still apply to the same files."""
    table = small_file_table(tmp_path, "identity", appends=3, rows=6)
    with table.table.update_spec() as update:
        update.add_field("ts", "day", "ts_day")
    for i in range(3):
        table.reload().append(batch(100 + 10 * i, 6))
    loaded = load(_ref(table))
    first_spec = sorted(
        t.file.path
        for t in plan_scan(loaded.storage, loaded.metadata, loaded.metadata.current_snapshot()).tasks
        if "ts_day=" not in t.file.path
    )
    for path in first_spec[:2]:
        category = path.split("category=")[1].split("/")[0]
        partition = {"category": None if category == "null" else category}
        add_position_deletes(load(_ref(table)), [(path, 0)], spec_id=0, partition=partition)
    rows = table.rows()
    assert len(rows) == 36 - 2
    _, files = _planning(table)

    report = _checkpoint(capsys, table)

    assert report["manifests_before"] == 8 and report["manifests_after"] == 3
    after = load(_ref(table))
    snapshot = after.metadata.current_snapshot()
    assert snapshot is not None
    kinds = sorted((m.partition_spec_id, int(m.content)) for m in manifests_of(after.storage, snapshot))
    assert kinds == [(0, 0), (0, 1), (1, 0)]
    assert table.rows() == rows
    assert _planning(table) == (3, files)


def test_a_commit_that_loses_the_catalog_race_retries(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = small_file_table(tmp_path, "day", appends=5, rows=4)
    plan = _plan(table)
    written = _write(spark, plan)
    swaps: list[str] = []  # metadata files our commit tried to install, in order
    real_swap = SqlCatalog.swap

    def racing_swap(self: SqlCatalog, expected: str, new: str, payload: bytes) -> str:
        swaps.append(new)
        if len(swaps) == 1:
            table.table.append(batch(700, 3))  # PyIceberg commits first: our first swap conflicts
        return real_swap(self, expected, new, payload)

    monkeypatch.setattr(SqlCatalog, "swap", racing_swap)
    report = commit_checkpoint(plan, written, STORAGE, 0.0)
    assert report.commit_attempts == len(swaps) == 2
    assert report.manifests_after == 2  # the merged one and the concurrent append's, carried over
    assert not Path(swaps[0]).exists() and Path(swaps[1]).exists()  # the losing metadata file was removed
    assert [r["id"] for r in table.rows()] == sorted([*range(20), 700, 701, 702], key=str)


def test_a_racing_rewrite_aborts_cleanly(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = small_file_table(tmp_path, "unpartitioned", appends=4, rows=3)
    plan = _plan(table)
    written = _write(spark, plan)
    theirs = _checkpoint(capsys, table)  # replaces the same manifests first
    assert theirs["status"] == "committed"
    current = table.reload().metadata_location
    rows = table.rows()
    with pytest.raises(CommitConflict, match="no longer in snapshot"):
        commit_checkpoint(plan, written, STORAGE, 0.0)
    assert written and not any(Path(w.manifest.manifest_path.removeprefix("file://")).exists() for w in written)
    assert table.reload().metadata_location == current and table.rows() == rows


def test_invalid_iceberg_metadata_is_refused_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from spark_jobs.cli import main as lakeops

    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata" / "v1.metadata.json").write_text("{}")
    assert lakeops(["checkpoint", str(tmp_path)]) == 1
    assert "ProtocolError" in capsys.readouterr().err
    written = [p.name for p in tmp_path.rglob("*") if "_lakeops_audit" not in p.parts]  # issue 10: audit record
    assert written == ["metadata", "v1.metadata.json"]


def test_version_is_refused_for_iceberg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from spark_jobs.cli import main as lakeops

    table = small_file_table(tmp_path, "unpartitioned", appends=2, rows=2)
    code = lakeops(["checkpoint", table.identifier, "--catalog-uri", table.catalog_uri, "--version", "1"])
    assert code == 1 and "--version is Delta's" in capsys.readouterr().err
    assert len(table.reload().snapshots()) == 2
