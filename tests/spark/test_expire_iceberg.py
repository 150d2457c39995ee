"""Acceptance of ``lakeops expire`` on Iceberg tables: PyIceberg writes tables with branches, tags and
many snapshots; after expiry it still reads every retained snapshot and ref exactly as before, time
travel to an expired snapshot fails, and every file a retained snapshot reaches is still there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lakeops_cli import run_json
from pyiceberg.table import Table
from pyiceberg_tables import PyIcebergTable, batch, small_file_table

from lakeops.iceberg.maintenance import expiry as expire
from lakeops.iceberg.reachability import reachable_files
from lakeops.iceberg.table import TableRef, load_table
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize
from spark_jobs import spark_settings
from spark_jobs.cli import main as lakeops

#: Each branch keeps its three newest snapshots; anything older than 1 ms beyond them expires.
POLICY = {"history.expire.max-snapshot-age-ms": "1", "history.expire.min-snapshots-to-keep": "3"}


def _history(tmp_path: Path) -> PyIcebergTable:
    """main: 8 appends, a copy-on-write delete, an overwrite; tag ``v1`` on the second snapshot;
    branch ``dev`` from the third with two appends of its own; branch ``stale`` whose refs expire
    after 1 ms (dropped by the policy, never main)."""
    table = small_file_table(tmp_path, "identity", appends=8, rows=15, properties=POLICY)
    snapshots = table.table.snapshots()
    (
        table.table.manage_snapshots()
        .create_tag(snapshots[1].snapshot_id, "v1")
        .create_branch(snapshots[2].snapshot_id, "dev")
        .create_branch(snapshots[3].snapshot_id, "stale", max_ref_age_ms=1)
        .commit()
    )
    table.reload().append(batch(700, 6), branch="dev")
    table.reload().append(batch(800, 6), branch="dev")
    table.reload().delete("category == 'a'")
    table.reload().overwrite(batch(500, 9), overwrite_filter="id >= 100")
    table.reload()
    return table


def _rows_by_snapshot(table: PyIcebergTable) -> dict[int, list[dict[str, Any]]]:
    return {s.snapshot_id: table.rows(s.snapshot_id) for s in table.reload().snapshots()}


def _refs(table: Table) -> dict[str, int]:
    return {name: ref.snapshot_id for name, ref in table.metadata.refs.items()}


def _newest(table: PyIcebergTable, head: int, count: int) -> list[int]:
    """``head`` and its ancestors, ``count`` in all (as the table's metadata has them)."""
    parents = {s.snapshot_id: s.parent_snapshot_id for s in table.table.metadata.snapshots}
    chain = [head]
    while len(chain) < count and parents[chain[-1]] is not None:
        chain.append(parents[chain[-1]])  # type: ignore[arg-type]
    return chain


def _missing_files(table: PyIcebergTable) -> list[str]:
    """Every manifest list, manifest, data and delete file a retained snapshot reaches, that is gone."""
    ours = load_table(TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier), StorageOptions())
    reached = reachable_files(ours.storage, ours.metadata, ours.metadata.snapshots)
    return sorted(p for p in reached.all() if not Path(p.removeprefix("file://")).is_file())


def _files(table: PyIcebergTable) -> set[str]:
    return {str(p) for p in Path(table.location).rglob("*") if p.is_file()}


def _expire(capsys: pytest.CaptureFixture[str], table: PyIcebergTable, *extra: str) -> dict[str, Any]:
    return run_json(
        capsys, "expire", table.identifier, "--catalog-uri", table.catalog_uri, "--master", "local[2]", *extra
    )


def test_expiry_follows_the_table_policy_and_keeps_every_retained_snapshot(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _history(tmp_path)
    before = _rows_by_snapshot(table)
    refs = _refs(table.table)
    expected = {*_newest(table, refs["main"], 3), *_newest(table, refs["dev"], 3), refs["v1"]}
    metadata_before = table.table.metadata_location
    files_before = _files(table)

    dry = _expire(capsys, table, "--dry-run")
    assert dry["dry_run"] and dry["snapshots_before"] == len(before)
    assert table.reload().metadata_location == metadata_before and _files(table) == files_before

    monkeypatch.setattr(expire, "DELETE_BATCH_SIZE", 4)
    monkeypatch.setattr(spark_settings, "DRIVER_DELETE_BATCHES", 1)  # several batches: the deletes run on Spark
    report = _expire(capsys, table)
    after = table.reload()

    # The policy: main and dev keep their three newest snapshots, v1 its own; stale is dropped.
    assert _refs(after) == {name: refs[name] for name in ("main", "dev", "v1")}
    assert report["dropped_refs"] == ["stale"] and report["refs_dropped"] == 1
    retained = {s.snapshot_id for s in after.snapshots()}
    assert retained == expected and len(expected) == 7
    assert retained == set(before) - set(dry["expired_snapshot_ids"])
    assert report["expired_snapshot_ids"] == dry["expired_snapshot_ids"]
    assert report["snapshots_retained"] == len(retained) and report["snapshots_expired"] == len(before) - len(retained)

    # PyIceberg reads every retained snapshot and ref as before; expired ones are gone.
    assert {sid: table.rows(sid) for sid in retained} == {sid: before[sid] for sid in retained}
    for name, snapshot_id in _refs(after).items():
        assert table.rows(after.snapshot_by_name(name).snapshot_id) == before[snapshot_id]
    for expired_id in report["expired_snapshot_ids"]:
        with pytest.raises(ValueError, match="Snapshot not found"):
            table.rows(expired_id)

    # Nothing a retained snapshot reaches is gone; exactly the dry run's files were deleted.
    assert _missing_files(table) == []
    deleted = files_before - _files(table)
    assert deleted == {p.removeprefix("file://") for p in dry["paths"]}
    assert report["deleted_files"] == len(deleted) == dry["deleted_files"] and report["batches"] > 1
    assert report["deleted_data_files"] > 0 and report["deleted_manifests"] > 0
    assert report["deleted_manifest_lists"] == report["snapshots_expired"]
    assert metadata_before.removeprefix("file://") in _files(table)  # metadata files are orphans' business

    # A second run finds nothing more to expire and commits nothing.
    again = _expire(capsys, table)
    assert again["snapshots_expired"] == 0 and again["commit_attempts"] == 0
    assert table.reload().metadata_location == after.metadata_location


def test_flags_override_the_policy_and_shorter_retention_needs_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Driver-only (one batch): no Spark session. ``--retain-last`` below the table's count is refused
    without ``--force``; with it only the heads of main and the tag remain."""
    table = small_file_table(tmp_path, appends=5, rows=4, properties=POLICY)
    tag = table.table.snapshots()[0].snapshot_id
    table.table.manage_snapshots().create_tag(tag, "first").commit()
    table.reload()
    before = _rows_by_snapshot(table)
    head = table.table.metadata.current_snapshot_id
    argv = ["expire", table.identifier, "--catalog-uri", table.catalog_uri, "--retain-last", "1"]

    assert lakeops(argv) == 1
    err = capsys.readouterr().err
    assert "--retain-last 1 keeps fewer snapshots than the table's history.expire.min-snapshots-to-keep (3)" in err
    assert {s.snapshot_id for s in table.reload().snapshots()} == set(before)

    report = run_json(capsys, *argv, "--force")
    assert {s.snapshot_id for s in table.reload().snapshots()} == {head, tag}
    assert report["snapshots_expired"] == 3 and report["batches"] == 1
    assert table.rows(head) == before[head] and table.rows(tag) == before[tag]
    assert _missing_files(table) == []


def test_snapshot_ids_and_options_of_other_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = small_file_table(tmp_path, appends=4, rows=4, properties=POLICY)
    snapshots = [s.snapshot_id for s in table.table.snapshots()]
    base = ["expire", table.identifier, "--catalog-uri", table.catalog_uri]

    assert lakeops([*base, "--snapshot-id", str(snapshots[-1])]) == 1
    assert f"--snapshot-id {snapshots[-1]} is the head of branch 'main'" in capsys.readouterr().err
    assert lakeops([*base, "--keep-from-version", "2", "--snapshot-id", str(snapshots[1])]) == 1
    assert f"--snapshot-id {snapshots[1]} is kept: its sequence number is at least 2" in capsys.readouterr().err

    # The policy keeps the three newest; naming the second keeps it from them (it is old enough with --force).
    report = run_json(capsys, *base, "--snapshot-id", str(snapshots[1]), "--force")
    assert report["expired_snapshot_ids"] == sorted([snapshots[0], snapshots[1]])
    assert [s.snapshot_id for s in table.reload().snapshots()] == [snapshots[2], snapshots[3]]


@pytest.mark.s3
def test_expiry_on_s3(s3_bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    endpoint = s3_bucket.options.endpoint_url
    table = small_file_table(tmp_path, "day", appends=5, rows=6, properties=POLICY, s3=(s3_bucket.uri, endpoint))
    before = _rows_by_snapshot(table)
    storage = open_storage(s3_bucket.uri, s3_bucket.options)
    objects_before = {o.path for o in storage.list(s3_bucket.uri)}

    report = _expire(capsys, table, "--endpoint-url", endpoint)

    retained = {s.snapshot_id for s in table.reload().snapshots()}
    assert len(retained) == 3 and report["snapshots_expired"] == 2
    assert {sid: table.rows(sid) for sid in retained} == {sid: before[sid] for sid in retained}
    ours = load_table(TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier), s3_bucket.options)
    reached = {normalize(p) for p in reachable_files(ours.storage, ours.metadata, ours.metadata.snapshots).all()}
    objects_after = {o.path for o in storage.list(s3_bucket.uri)}
    assert reached <= objects_after
    assert len(objects_before - objects_after) == report["deleted_files"] > 0
