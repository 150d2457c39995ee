"""lakeops.api without Spark: the typed functions on tables other writers made, read back by those
writers (delta-rs, PyIceberg) after lakeops changed them; each run that changes a table leaves exactly
one audit record, dry runs and read-only runs none."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from icechunk_repos import build_history, set_age
from pyiceberg_tables import MERGE_APPENDS, small_file_table

from lakeops import api, audit
from lakeops.errors import NotATable, UsageError
from lakeops.ops.cdc import CdcOptions
from lakeops.ops.checkpoint import CheckpointOptions
from lakeops.ops.compaction import CompactionOptions
from lakeops.ops.expiry import ExpiryOptions
from lakeops.ops.inspect import InspectReport
from lakeops.ops.orphans import OrphansOptions
from lakeops.ops.trash import PurgeOptions, RestoreOptions
from lakeops.storage import open_storage


def _delta(tmp_path: Path) -> str:
    location = str(tmp_path / "delta")
    for i in range(5):
        write_deltalake(location, pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64())}), mode="append")
    return location


def _tree(root: str) -> list[Path]:
    """Every path under ``root`` but lakeops' audit records."""
    return sorted(p.relative_to(root) for p in Path(root).rglob("*") if "_lakeops_audit" not in p.parts)


def test_checkpoint_of_a_delta_rs_table_in_threads(tmp_path: Path) -> None:
    location = _delta(tmp_path)
    assert api.checkpoint(location, dry_run=True).status == "planned"
    assert not (Path(location) / "_delta_log" / "_last_checkpoint").exists()
    report = api.checkpoint(location)
    assert (report.status, report.version, report.add_files, report.last_checkpoint_updated) == ("written", 4, 5, True)
    assert (Path(location) / "_delta_log" / "00000000000000000004.checkpoint.parquet").exists()
    assert DeltaTable(location).to_pyarrow_table().num_rows == 50  # delta-rs reads through the checkpoint
    assert api.checkpoint(location).status == "already checkpointed"
    inspected = api.inspect(location)
    assert isinstance(inspected, InspectReport)
    assert (inspected.version, inspected.last_checkpoint_version, inspected.commits_since_checkpoint) == (4, 4, 0)


def test_checkpoint_of_a_pyiceberg_table_in_threads(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=6, rows=5)
    rows = table.rows()
    options = CheckpointOptions(catalog_uri=table.catalog_uri)
    report = api.checkpoint(table.identifier, options)
    assert report.status == "committed" and report.manifests_before == 6 and report.manifests_after == 1
    assert table.reload().current_snapshot().snapshot_id == report.snapshot_id  # type: ignore[union-attr]
    assert table.rows() == rows  # PyIceberg reads the merged manifest
    assert api.checkpoint(table.identifier, options).status == "nothing to rewrite"


def test_checkpoint_of_a_merge_append_table_has_nothing_to_merge(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=4, rows=5, properties=MERGE_APPENDS)
    report = api.checkpoint(table.identifier, CheckpointOptions(catalog_uri=table.catalog_uri))
    assert report.status == "nothing to rewrite" and report.committed_version is None


def test_an_icechunk_repository_has_no_checkpoint(tmp_path: Path) -> None:
    root = str(tmp_path / "repo")
    build_history(open_storage(root), root, commits=3)
    before = _tree(root)
    report = api.checkpoint(root)
    assert (report.format, report.status) == ("icechunk", "not applicable")
    assert _tree(root) == before
    assert _commands(root) == [("checkpoint", "succeeded")]  # audited, as every run of a changing command


def _commands(location: str) -> list[tuple[str, str]]:
    return [(r.command, r.status) for r in audit.read_records(location)]


def test_compact_a_delta_rs_table_records_one_audit_entry(tmp_path: Path) -> None:
    location = _delta(tmp_path)
    planned = api.compact(location, CompactionOptions(min_input_files=2), dry_run=True)
    assert (planned.dry_run, planned.candidate_files, planned.groups) == (True, 5, 1)
    assert DeltaTable(location).version() == 4 and not (Path(location) / "_lakeops_audit").exists()

    report = api.compact(location, CompactionOptions(min_input_files=2))

    assert (report.files_removed, report.files_added, report.committed_version) == (5, 1, 5)
    table = DeltaTable(location)
    assert len(table.file_uris()) == 1
    assert sorted(table.to_pyarrow_table()["id"].to_pylist()) == list(range(50))
    (record,) = audit.read_records(location)
    assert (record.command, record.status, record.options["dry_run"]) == ("compact", "succeeded", False)
    assert record.options["min_input_files"] == 2 and record.metrics["files_added"] == 1


def test_compact_refuses_options_an_icechunk_repository_cannot_honour(tmp_path: Path) -> None:
    root = str(tmp_path / "repo")
    build_history(open_storage(root), root, commits=3)
    before = _tree(root)
    with pytest.raises(UsageError, match="--where does not apply to this table's format"):
        api.compact(root, CompactionOptions(where="day = 1"))
    report = api.compact(root, dry_run=True)
    assert (report.format, report.dry_run) == ("icechunk", True)
    assert _tree(root) == before
    assert [r.status for r in audit.read_records(root)] == ["failed"]  # the refused run; the dry run leaves none


def test_cdc_of_a_delta_rs_change_data_feed(tmp_path: Path) -> None:
    location = str(tmp_path / "source")
    config = {"delta.enableChangeDataFeed": "true"}
    write_deltalake(location, pa.table({"id": pa.array([1, 2, 3], pa.int64())}), configuration=config)
    DeltaTable(location).delete("id = 2")
    output = str(tmp_path / "changes")

    report = api.cdc(location, CdcOptions(from_version=0, output=output))

    assert (report.from_version, report.to_version, report.rows_insert, report.rows_delete) == (0, 1, 3, 1)
    changes = DeltaTable(output).to_pyarrow_table()
    assert sorted(zip(changes["id"].to_pylist(), changes["_change_type"].to_pylist(), strict=True)) == [
        (1, "insert"),
        (2, "delete"),
        (2, "insert"),
        (3, "insert"),
    ]
    assert not (Path(location) / "_lakeops_audit").exists()  # the source is only read
    assert api.cdc(location, CdcOptions(from_version=0, output=output)).already_extracted


def test_expire_a_pyiceberg_table(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=4, rows=5)
    rows = table.rows()
    options = ExpiryOptions(catalog_uri=table.catalog_uri, older_than="0d", retain_last=1, force=True)

    planned = api.expire(table.identifier, options, dry_run=True)
    assert planned.snapshots_expired == 3 and len(table.reload().snapshots()) == 4
    report = api.expire(table.identifier, options)

    assert (report.snapshots_expired, report.snapshots_retained) == (3, 1)
    assert len(table.reload().snapshots()) == 1 and table.rows() == rows  # PyIceberg reads what is left
    assert _commands(table.reload().location()) == [("expire", "succeeded")]


def test_orphans_quarantine_restore_and_purge(tmp_path: Path) -> None:
    location = _delta(tmp_path)
    orphan = Path(location) / "part-00000-left-by-a-failed-writer.parquet"
    orphan.write_bytes(b"not referenced")
    set_age(orphan, 30)

    assert api.orphans(location, dry_run=True).paths == [str(orphan)]
    report = api.orphans(location, OrphansOptions(older_than="7d"), quarantine=True)

    assert report.deleted_files == 1 and report.quarantine_run is not None and not orphan.exists()
    assert DeltaTable(location).to_pyarrow_table().num_rows == 50
    restored = api.restore(location, RestoreOptions(run_id=report.quarantine_run))
    assert restored.restored_files == 1 and orphan.read_bytes() == b"not referenced"
    again = api.orphans(location, OrphansOptions(older_than="7d"), quarantine=True)
    assert api.purge_trash(location, PurgeOptions(older_than="0d"), dry_run=True).runs == [again.quarantine_run]
    purged = api.purge_trash(location, PurgeOptions(older_than="0d"))
    assert (purged.runs, purged.purged_files) == ([again.quarantine_run], 2)  # the file and the batch's manifest
    assert not orphan.exists() and not list((Path(location) / "_lakeops_trash").rglob("*"))
    assert _commands(location) == [
        ("orphans", "succeeded"),
        ("restore", "succeeded"),
        ("orphans", "succeeded"),
        ("purge-trash", "succeeded"),
    ]


def test_registry_names_resolve_as_on_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _delta(tmp_path)
    orders = small_file_table(tmp_path / "iceberg", appends=3, rows=5)
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(
        "tables:\n"
        f"  - name: events\n    location: {events}\n"
        f"  - name: orders\n    catalog: {{uri: '{orders.catalog_uri}'}}\n    identifier: {orders.identifier}\n"
        f"  - name: changes\n    location: {tmp_path / 'changes'}\n"
    )
    monkeypatch.setenv("LAKEOPS_REGISTRY", str(registry))
    monkeypatch.chdir(tmp_path / "iceberg")  # nothing here is named like a table

    assert api.inspect("events").version == 4
    assert api.checkpoint("orders").manifests_before == 3  # the identifier, in the entry's catalog
    exported = api.cdc("events", CdcOptions(from_version=0, output="changes"))
    assert exported.output == str(tmp_path / "changes") and DeltaTable(str(tmp_path / "changes")).version() == 0
    (record,) = audit.read_records(orders.reload().location())
    assert (record.table, record.options["catalog_uri"]) == (orders.identifier, orders.catalog_uri)
    with pytest.raises(NotATable, match="did you mean 'events'"):
        api.compact("event")
