"""The audit hook every run passes (``lakeops.audit.audited``, around every ``lakeops.api`` call): a successful
and a failed run, from the CLI and from ``run_operation`` (Dagster's entry), each leave one record under the table
root with who/what/when, the plan and the outcome, and no secrets; read-only runs and dry runs leave none. A
``lakeops cdc`` run is recorded under its output, naming the source and the range."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakeops import audit
from lakeops.errors import InvalidArgument, UnsafeOperation
from spark_jobs.cli import main as lakeops
from spark_jobs.operations import run_operation


def _table(location: Path) -> None:
    for version in range(3):
        write_deltalake(str(location), pa.table({"id": [version]}), mode="append")


def _raw_records(location: Path) -> list[str]:
    return [p.read_text() for p in sorted((location / "_lakeops_audit").glob("*.json"))]


def test_success_and_failure_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LAKEOPS_ACTOR", "oncall@example.com")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-do-not-log")
    location = tmp_path / "t"
    _table(location)

    assert lakeops(["orphans", str(location), "--dry-run"]) == 0  # a dry run changes nothing: no record
    assert lakeops(["inspect", str(location)]) == 0  # read-only: no record
    assert not (location / "_lakeops_audit").exists()
    capsys.readouterr()

    assert lakeops(["orphans", str(location), "--older-than", "8d", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    with pytest.raises(UnsafeOperation, match="shorter than the table's delta.deletedFileRetentionDuration"):
        run_operation("orphans", str(location), {"older_than": "1d"})

    ok, failed = audit.read_records(str(location))
    assert ok.status == "succeeded" and failed.status == "failed"
    for record in (ok, failed):
        assert record.who.os_user == getpass.getuser() and record.who.actor == "oncall@example.com"
        assert record.command == "orphans" and record.table == str(location)
        assert record.table_root == str(location)
        assert record.started_at <= record.finished_at and record.duration_s >= 0
    assert ok.options["older_than"] == "8d" and ok.options["dry_run"] is False and not ok.options["quarantine"]
    assert ok.plan == {
        "operation": "orphans",
        "format": "delta",
        "table": report["table"],
        "dry_run": False,
        "read_version": 2,
    }
    assert ok.metrics["live_files"] == report["live_files"] == 3 and ok.error is None
    assert failed.options["older_than"] == "1d" and failed.metrics == {} and failed.plan == {}
    assert failed.error is not None and failed.error["type"] == "UnsafeOperation"
    assert "delta.deletedFileRetentionDuration" in failed.error["message"]
    assert ok.run_id != failed.run_id
    assert all("s3cr3t" not in raw for raw in _raw_records(location))


def test_cdc_runs_are_recorded_under_their_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LAKEOPS_ACTOR", "oncall@example.com")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-do-not-log")
    source, output = tmp_path / "t", tmp_path / "changes"
    _table(source)

    assert lakeops(["cdc", str(source), "--from", "0", "--output", str(output), "--dry-run"]) == 0
    assert not output.exists()
    capsys.readouterr()
    assert lakeops(["cdc", str(source), "--from", "1", "--output", str(output), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert lakeops(["cdc", str(source), "--from", "0", "--to", "7", "--output", str(output)]) == 1
    capsys.readouterr()

    ok, failed = audit.read_records(str(output))
    for record in (ok, failed):
        assert (record.command, record.table_root, record.who.actor) == ("cdc", str(output), "oncall@example.com")
        assert (record.source, record.source_root) == (str(source), str(source))
    assert ok.status == "succeeded" and ok.options["from_version"] == "1"  # as given
    assert (ok.plan["from_version"], ok.plan["to_version"]) == (report["from_version"], report["to_version"]) == (1, 2)
    assert ok.metrics["rows_written"] == report["rows_written"] == 2
    assert failed.status == "failed" and failed.error is not None and failed.error["type"] == "VersionNotFound"
    assert len(_raw_records(output)) == 2 and all("s3cr3t" not in raw for raw in _raw_records(output))
    assert not (source / "_lakeops_audit").exists()


def test_unresolvable_table_warns_and_keeps_the_outcome(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nothing-here"

    assert lakeops(["orphans", str(missing)]) == 1

    err = capsys.readouterr().err
    assert "no audit record written for lakeops orphans" in err and "NotATable" in err
    assert not missing.exists()


def test_an_audit_location_keeps_records_out_of_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``$LAKEOPS_AUDIT_LOCATION`` wins over the registry's ``audit_location``; either moves the records
    out of the table root, into one folder per table that two tables with the same name do not share."""
    first, second = tmp_path / "a" / "events", tmp_path / "b" / "events"
    _table(first)
    _table(second)
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(f"audit_location: {tmp_path / 'registry-audit'}\ntables: []\n")
    monkeypatch.setenv("LAKEOPS_REGISTRY", str(registry))

    assert lakeops(["orphans", str(first), "--older-than", "8d"]) == 0
    assert lakeops(["orphans", str(second), "--older-than", "8d"]) == 0
    monkeypatch.setenv("LAKEOPS_AUDIT_LOCATION", str(tmp_path / "env-audit"))
    assert lakeops(["checkpoint", str(first)]) == 0

    assert not (first / "_lakeops_audit").exists() and not (second / "_lakeops_audit").exists()
    [env_folder] = (tmp_path / "env-audit").iterdir()
    assert env_folder.name.startswith("events-") and len(list(env_folder.iterdir())) == 1
    assert len(list((tmp_path / "registry-audit").iterdir())) == 2  # one folder per table root
    assert [r.command for r in audit.read_records(str(first))] == ["checkpoint"]
    monkeypatch.delenv("LAKEOPS_AUDIT_LOCATION")
    assert [r.command for r in audit.read_records(str(first))] == ["orphans"]
    assert [r.table_root for r in audit.read_records(str(second))] == [str(second)]


def test_a_bad_registry_audit_location_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = tmp_path / "lakeops.yaml"
    registry.write_text("audit_location: [1, 2]\ntables: []\n")
    monkeypatch.setenv("LAKEOPS_REGISTRY", str(registry))
    with pytest.raises(InvalidArgument, match=r"lakeops.yaml: audit_location must be a path or URI"):
        audit.audit_dir(str(tmp_path / "t"))
