"""``lakeops.api.cdc`` leaves one audit record per run that is not a dry run, under the change table it
writes (the source is only read): naming the source and the range extracted, succeeded or failed with
its error, secrets masked; with an audit location, there instead of in the output."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from lakeops_testdata import TESTDATA
from pyiceberg_tables import small_file_table

from lakeops import api, audit
from lakeops.errors import InvalidArgument, VersionNotFound
from lakeops.icechunk.versioned import VersionedRepository
from lakeops.ops.cdc import CdcOptions
from lakeops.ops.icechunk.cdc import IcechunkCdcReport
from lakeops.storage import open_storage

CDF = {"delta.enableChangeDataFeed": "true"}


def _source(location: Path, commits: int, start: int = 0) -> str:
    for i in range(start, start + commits):
        write_deltalake(str(location), pa.table({"id": pa.array([i], pa.int64())}), mode="append", configuration=CDF)
    return str(location)


def _raw(folder: Path) -> list[str]:
    return [p.read_text() for p in sorted(folder.glob("*.json"))]


def test_each_delta_cdc_run_is_recorded_under_its_output_with_the_range(tmp_path: Path) -> None:
    source, output = _source(tmp_path / "source", 3), str(tmp_path / "changes")

    api.cdc(source, CdcOptions(from_version=0, output=output), dry_run=True)
    assert not Path(output).exists()  # a dry run writes nothing, no record either

    first = api.cdc(source, CdcOptions(from_version=0, output=output))
    _source(tmp_path / "source", 2, start=3)
    second = api.cdc(source, CdcOptions(from_version=0, output=output))  # continues from the watermark

    one, two = audit.read_records(output)
    for record, report in ((one, first), (two, second)):
        assert (record.command, record.status, record.error) == ("cdc", "succeeded", None)
        assert (record.table, record.table_root) == (output, output)
        assert (record.source, record.source_root) == (source, source)
        assert record.metrics["versions_extracted"] == report.versions_extracted
        assert record.metrics["rows_written"] == report.rows_written
    assert one.plan == {
        "operation": "cdc",
        "format": "delta",
        "table": source,
        "dry_run": False,
        "read_version": 2,
        "committed_version": 0,
        "from_version": 0,
        "to_version": 2,
    }
    assert (two.plan["from_version"], two.plan["to_version"], two.plan["committed_version"]) == (3, 4, 1)
    assert one.options["output"] == output and one.options["dry_run"] is False
    assert not (Path(source) / "_lakeops_audit").exists()  # the source is only read
    assert DeltaTable(output).to_pyarrow_table().num_rows == 5  # the records do not disturb the change table


def test_a_failed_cdc_run_is_recorded_and_a_rerun_still_creates_the_output(tmp_path: Path) -> None:
    """The failure is recorded under the output that does not exist yet; the next run creates the change
    table there although the folder now holds that record."""
    source, output = _source(tmp_path / "source", 3), str(tmp_path / "changes")

    with pytest.raises(VersionNotFound, match="version 9 does not exist"):
        api.cdc(source, CdcOptions(from_version=0, to_version=9, output=output))
    report = api.cdc(source, CdcOptions(from_version=0, output=output))

    failed, ok = audit.read_records(output)
    assert (failed.status, failed.plan, failed.metrics) == ("failed", {}, {})
    assert failed.error == {"type": "VersionNotFound", "message": f"{source}: version 9 does not exist (latest is 2)"}
    assert (failed.source, failed.source_root, failed.options["to_version"]) == (source, source, 9)
    assert ok.status == "succeeded" and report.output_created and DeltaTable(output).version() == 0


def test_an_iceberg_cdc_run_names_its_catalog_table_and_snapshots(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=3, rows=5)
    output = str(tmp_path / "changes")
    snapshots = [s.snapshot_id for s in table.reload().snapshots()]

    report = api.cdc(table.identifier, CdcOptions(catalog_uri=table.catalog_uri, from_version=0, output=output))

    (record,) = audit.read_records(output)
    assert (record.table_root, record.source, record.source_root) == (output, table.identifier, table.location)
    assert record.plan["format"] == "iceberg" and record.plan["from_version"] == report.from_version
    assert (record.plan["to_snapshot_id"], record.plan.get("from_snapshot_id")) == (snapshots[-1], None)
    assert record.options["catalog_uri"] == table.catalog_uri
    assert not (Path(table.location) / "_lakeops_audit").exists()


def test_an_icechunk_cdc_run_names_its_repository_and_snapshots(tmp_path: Path) -> None:
    root = str(shutil.copytree(TESTDATA / "modern" / "icechunk" / "test-repo-v1", tmp_path / "repo"))
    info = VersionedRepository(open_storage(root), root).info
    first = [s.id for s in info.ancestry(info.branches["main"])][-1]
    output = str(tmp_path / "changes")

    report = api.cdc(root, CdcOptions(from_version=first, output=output))

    assert isinstance(report, IcechunkCdcReport)
    (record,) = audit.read_records(output)
    assert (record.table_root, record.source, record.source_root) == (output, root, root)
    assert (record.plan["format"], record.plan["from_snapshot"]) == ("icechunk", first)
    assert record.plan["to_snapshot"] == report.to_snapshot and report.to_snapshot != first
    assert not (Path(root) / "_lakeops_audit").exists()


def test_a_cdc_run_whose_source_cannot_be_opened_is_recorded_without_its_secrets(tmp_path: Path) -> None:
    output = tmp_path / "changes"
    uri = "postgresql://lakeops:hunter2-secret@127.0.0.1:1/catalog"

    with pytest.raises(InvalidArgument, match="psycopg"):
        api.cdc("db.events", CdcOptions(catalog_uri=uri, from_version=0, output=str(output)))

    (record,) = audit.read_records(str(output))
    assert (record.status, record.source, record.source_root) == ("failed", "db.events", None)
    assert record.options["catalog_uri"] == "postgresql://lakeops:***@127.0.0.1:1/catalog"
    assert record.error is not None and "lakeops:***@127.0.0.1" in record.error["message"]
    assert all("hunter2" not in raw for raw in _raw(output / "_lakeops_audit"))


def test_an_audit_location_holds_the_cdc_records_of_the_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source, output = _source(tmp_path / "source", 2), str(tmp_path / "changes")
    monkeypatch.setenv("LAKEOPS_AUDIT_LOCATION", str(tmp_path / "audit"))

    api.cdc(source, CdcOptions(from_version=0, output=output))

    assert not (Path(output) / "_lakeops_audit").exists() and not (Path(source) / "_lakeops_audit").exists()
    (folder,) = (tmp_path / "audit").iterdir()
    assert folder.name.startswith("changes-") and len(_raw(folder)) == 1
    assert [r.source for r in audit.read_records(output)] == [source]
