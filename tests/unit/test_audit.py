"""lakeops.audit: one record object per run under ``<root>/_lakeops_audit/`` with who/what/when, the plan and
the outcome (a report's metrics, or the error), never a secret; on local disk and on the moto S3 fixture.
The hook that writes one for every CLI and Dagster run is tested in ``tests/cli/test_audit.py``."""

from __future__ import annotations

import getpass
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from lakeops import audit
from lakeops.errors import UnsafeOperation
from lakeops.ops.report import Report
from lakeops.storage import StorageOptions, open_storage


class _VacuumReport(Report):
    deleted_files: int = 0
    deleted_bytes: int = 0
    paths: list[str] = []


def _records(root: str, options: StorageOptions, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEOPS_ACTOR", "dagster-run-42")
    started = datetime.now(UTC)
    report = _VacuumReport(
        operation="orphans",
        format="delta",
        table=root,
        read_version=3,
        deleted_files=2,
        deleted_bytes=10,
        quarantine_run="20261123T120000Z-abcdef",
        paths=["a", "b"],
    )
    secret_uri = "postgresql+psycopg2://lakeops:hunter2@db/catalog"
    audit.record_run(
        root,
        command="orphans",
        table=root,
        options={"older_than": "7d", "catalog_uri": secret_uri},
        started=started,
        storage_options=options,
        report=report,
    )
    error = UnsafeOperation(f"{root}: retention 1d is shorter than the table's (7d); see {secret_uri}")
    audit.record_run(
        root,
        command="expire",
        table=root,
        options={"older_than": "1d"},
        started=started,
        storage_options=options,
        error=error,
    )

    ok, failed = audit.read_records(root, options)

    assert (ok.status, failed.status) == ("succeeded", "failed")
    assert ok.who.model_dump() == failed.who.model_dump() == {"os_user": getpass.getuser(), "actor": "dagster-run-42"}
    assert ok.run_id == "20261123T120000Z-abcdef" and failed.run_id != ok.run_id  # a quarantine run is its run
    assert ok.options == {"older_than": "7d", "catalog_uri": "postgresql+psycopg2://lakeops:***@db/catalog"}
    assert ok.plan == {
        "operation": "orphans",
        "format": "delta",
        "table": root,
        "dry_run": False,
        "read_version": 3,
        "quarantine_run": "20261123T120000Z-abcdef",
    }
    assert ok.metrics == {"read_version": 3, "duration_s": 0.0, "deleted_files": 2, "deleted_bytes": 10}
    assert ok.error is None and failed.metrics == {} and failed.plan == {}
    assert failed.error == {
        "type": "UnsafeOperation",
        "message": f"{root}: retention 1d is shorter than the table's (7d); see postgresql+psycopg2://lakeops:***@db/catalog",
    }
    assert ok.started_at <= ok.finished_at and failed.table_root == root
    storage = open_storage(root, options)
    raw = [storage.read(f.path).decode() for f in storage.list(f"{root}/_lakeops_audit")]
    assert len(raw) == 2 and all(f.path.endswith(".json") for f in storage.list(f"{root}/_lakeops_audit"))
    assert not any("hunter2" in text for text in raw)


def test_records_local(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _records(str(tmp_path / "t"), StorageOptions(), monkeypatch)


@pytest.mark.s3
def test_records_s3(s3_bucket: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _records(f"{s3_bucket.uri}/warehouse/t", s3_bucket.options, monkeypatch)


def test_secrets_are_redacted() -> None:
    options = {
        "catalog_uri": "postgresql+psycopg2://lakeops:hunter2@db:5432/catalog",
        "api_token": "abc",
        "nested": {"password": "pw", "endpoint_url": "http://user:pw2@minio:9000"},
        "older_than": "7d",
        "snapshot_id": [1, 2],
    }

    redacted = audit.redact(options)

    assert redacted == {
        "catalog_uri": "postgresql+psycopg2://lakeops:***@db:5432/catalog",
        "api_token": "***",
        "nested": {"password": "***", "endpoint_url": "http://user:***@minio:9000"},
        "older_than": "7d",
        "snapshot_id": [1, 2],
    }
    assert "hunter2" not in json.dumps(redacted) and "pw2" not in json.dumps(redacted)
