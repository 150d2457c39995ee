"""Malformed option values and out-of-range metadata end in a clear error, never a traceback (issue 19,
"Unclear crashes"): exit 2 with the option named for a usage error, exit 1 with a ``LakeopsError``
naming the table, the file or the option otherwise (README, "Exit status")."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from lakeops_cli import run_json

from spark_jobs.cli import main as lakeops


def _table(location: Path) -> str:
    for version in range(3):
        write_deltalake(str(location), pa.table({"id": [version]}), mode="append")
    return str(location)


def _usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Exit 2: argparse's own (SystemExit) or an option model's range check (returned)."""
    try:
        code = lakeops(list(argv))
    except SystemExit as usage:
        code = int(usage.code or 0)
    err = capsys.readouterr().err
    assert code == 2, err
    return " ".join(err.split())


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = lakeops(list(argv))
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("command", ["expire", "orphans", "purge-trash"])
@pytest.mark.parametrize("value", ["7x", "-1d", "99999999999999999999999d", "", "1e3d"])
def test_a_bad_retention_is_a_usage_error(
    command: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _usage_error(capsys, command, _table(tmp_path / "t"), f"--older-than={value}")
    assert "--older-than" in err and repr(value) in err


@pytest.mark.parametrize("value", ["99999999999999999999999TB", "12XB", "0.5.5MB"])
def test_a_bad_size_is_a_usage_error(value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error(capsys, "compact", _table(tmp_path / "t"), "--target-file-size", value)
    assert "--target-file-size" in err and repr(value) in err


def _missing(module: str) -> bool:
    return importlib.util.find_spec(module) is None


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        pytest.param(
            "mysql://lakeops:SECRET@db/catalog",
            ["the mysql dialect needs the Python module 'MySQLdb'", "pip install mysqlclient"],
            marks=pytest.mark.skipif(not _missing("MySQLdb"), reason="MySQLdb is installed"),
        ),
        pytest.param(
            "postgresql+pg8000://lakeops:pa/SECRET@db/catalog",
            ["the postgresql+pg8000 dialect needs the Python module 'pg8000'", "pip install pg8000"],
            marks=pytest.mark.skipif(not _missing("pg8000"), reason="pg8000 is installed"),
        ),
        ("nosuchdb://lakeops:SECRET@db/catalog", ["unknown database dialect 'nosuchdb'"]),
        ("sqlite://lakeops:SECRET@/tmp/catalog.db", ["not a usable SQLAlchemy URL", "a SQLite URL names only a file"]),
        ("postgresql+psycopg2://lakeops:SECRET@db:port/catalog", ["its port is not a number"]),
        ("catalog.db", ["not a usable SQLAlchemy URL"]),
    ],
)
@pytest.mark.parametrize("command", ["inspect", "compact"])
def test_an_unusable_catalog_uri_names_the_option_and_the_fix(
    uri: str, expected: list[str], command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _error(capsys, command, "ns.events", "--catalog-uri", uri)
    assert "InvalidArgument: ns.events: --catalog-uri" in err
    assert all(text in err for text in expected), err
    assert "SECRET" not in err


def test_an_unusable_catalog_uri_in_the_registry_names_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(
        'tables:\n  - name: events\n    catalog: {uri: "nosuchdb://u:SECRET@h/db"}\n    identifier: ns.t\n'
    )
    monkeypatch.setenv("LAKEOPS_REGISTRY", str(registry))
    err = _error(capsys, "inspect", "events")
    assert f"events: catalog.uri in registry {registry}" in err and "unknown database dialect" in err
    assert "SECRET" not in err


def test_a_size_beyond_a_long_in_the_log_names_the_commit_file_the_path_and_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = _table(tmp_path / "t")
    commit = tmp_path / "t" / "_delta_log" / f"{2:020d}.json"
    lines = [json.loads(line) for line in commit.read_text().splitlines()]
    (add,) = (line["add"] for line in lines if "add" in line)
    add["size"] = 10**30
    commit.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    for command in ("checkpoint", "inspect", "compact"):
        err = _error(capsys, command, location)
        assert "CorruptFile" in err and commit.name in err and add["path"] in err
        assert f"size {10**30} is outside the protocol's long range" in err


def test_a_commit_file_named_beyond_a_long_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = _table(tmp_path / "t")
    log = tmp_path / "t" / "_delta_log"
    (log / "99999999999999999999.json").write_bytes((log / f"{2:020d}.json").read_bytes())
    err = _error(capsys, "inspect", location)
    assert "CorruptFile" in err and "99999999999999999999.json" in err


def test_a_table_at_the_largest_version_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log whose latest commit is version 2^63-1: compaction committed version 2^63, a file no reader
    lists, and every command then refused the table (issue 34, nearby). No next version exists."""
    location = _table(tmp_path / "t")
    DeltaTable(location).create_checkpoint()
    log = tmp_path / "t" / "_delta_log"
    (log / f"{2:020d}.checkpoint.parquet").rename(log / f"{2**63 - 2:020d}.checkpoint.parquet")
    (log / f"{2:020d}.json").rename(log / f"{2**63 - 1:020d}.json")  # the state is the checkpoint's
    for leftover in (f"{0:020d}.json", f"{1:020d}.json", "_last_checkpoint"):
        (log / leftover).unlink()
    files = sorted(p for p in (tmp_path / "t").rglob("*") if "_lakeops_audit" not in p.parts)
    for command in ("compact", "--min-input-files", "2"), ("compact", "--min-input-files", "2", "--dry-run"):
        err = _error(capsys, command[0], location, *command[1:])
        assert f"ProtocolError: {location}: version {2**63 - 1} is the largest long" in err
    assert sorted(p for p in (tmp_path / "t").rglob("*") if "_lakeops_audit" not in p.parts) == files
    assert run_json(capsys, "inspect", location)["version"] == 2**63 - 1  # reading it still works


@pytest.mark.parametrize("value", ["interval 99999999999999999999 days", "interval nan days", "interval inf weeks"])
def test_a_retention_property_no_duration_holds_names_the_table_and_the_property(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = str(tmp_path / "t")
    write_deltalake(location, pa.table({"id": [1]}), configuration={"delta.logRetentionDuration": value})
    err = _error(capsys, "expire", location, "--dry-run")
    assert f"ProtocolError: {location}: table property delta.logRetentionDuration={value!r}" in err


@pytest.mark.parametrize("command", ["expire", "orphans"])
def test_a_retention_reaching_before_year_one_keeps_everything(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``now - 800000 days`` precedes every datetime: the cutoff is the earliest one, not a ValueError."""
    location = _table(tmp_path / "t")
    report = run_json(capsys, command, location, "--older-than", "800000d", "--dry-run")
    assert report["cutoff"].startswith("0001-01-01") and report["deleted_files"] == 0


ENDPOINTS = [
    ("localhost:9000", "must start with http:// or https://"),
    ("ftp://minio:9000", "must start with http:// or https://"),
    ("http://minio:port", "is not a URL"),
    ("http://[::1", "is not a URL"),
    ("http://minio:9000/?X-Amz-Signature=SECRET", "without a query or fragment"),
]


@pytest.mark.parametrize(("endpoint", "problem"), ENDPOINTS)
def test_a_bad_endpoint_option_is_a_usage_error(
    endpoint: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _usage_error(capsys, "inspect", "s3://bucket/t", "--endpoint-url", endpoint)
    assert "endpoint_url" in err and problem in err and "SECRET" not in err


@pytest.mark.parametrize(("endpoint", "problem"), ENDPOINTS)
def test_a_bad_endpoint_in_the_environment_names_the_variable(
    endpoint: str, problem: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    err = _error(capsys, "inspect", "s3://bucket/t")
    assert "InvalidArgument: $AWS_ENDPOINT_URL" in err and problem in err and "SECRET" not in err
