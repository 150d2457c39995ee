"""File names that are not UTF-8 (issue 19, "Unclear crashes"): every report and record naming one is
written, in every format, and reads back to the file's bytes.

``orphans --dry-run --json`` on a table holding ``\\xff.parquet`` crashed with ``PydanticSerializationError
... surrogates not allowed``; the JSON now carries the name as ``\\udcff`` (``lakeops.jsontext``), which
``json.loads`` + ``os.fsencode`` turn back into the bytes. The human table goes to a strict UTF-8 stdout
(pytest's capture is one) with the name escaped. Also covered: a table whose own directory name is not
UTF-8 (audit record, quarantine manifest, restore), Iceberg directory listings run as plan units, and
Icechunk repositories.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from icechunk_repos import build_history
from lakeops_cli import run_json
from pyiceberg_tables import small_file_table

from lakeops import audit, quarantine
from lakeops.storage import open_storage
from spark_jobs.cli import main as lakeops


def _odd_file(directory: bytes, name: bytes) -> bytes:
    """An old one-byte file ``directory/name`` (bytes: not UTF-8), past every retention."""
    path = directory + b"/" + name
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY)
    os.write(fd, b"x")
    os.close(fd)
    os.utime(path, (0, 0))
    return path


def _human(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert sys.stdout.errors == "strict"  # as a terminal under LANG=en_US.UTF-8: a surrogate would not print
    code = lakeops(list(argv))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out + captured.err


def _delta_table(tmp_path: Path, folder: bytes, *, checkpoint: bool = False) -> tuple[str, bytes]:
    """A Delta table in ``tmp_path/folder`` (its name possibly not UTF-8) holding an untracked ``\\xff.parquet``;
    with ``checkpoint``, its live files are read from a checkpoint (Arrow rows, not objects)."""
    staging = tmp_path / "staging"
    for version in range(2):
        write_deltalake(str(staging), pa.table({"id": [version]}), mode="append")
    if checkpoint:
        DeltaTable(str(staging)).create_checkpoint()
    root = os.fsencode(tmp_path) + b"/" + folder
    os.rename(os.fsencode(staging), root)
    return os.fsdecode(root), _odd_file(root, b"\xff.parquet")


@pytest.mark.parametrize("checkpoint", [False, True], ids=["log", "checkpoint"])
@pytest.mark.parametrize("folder", [b"events", b"ev\xfents"])
def test_delta_orphans_report_and_record_names_that_are_not_utf8(
    folder: bytes, checkpoint: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, odd = _delta_table(tmp_path, folder, checkpoint=checkpoint)

    for listing in ([], ["--listing-threshold", "0"]):  # 0: every directory listed by a plan unit
        report = run_json(capsys, "orphans", table, "--dry-run", *listing)
        assert [os.fsencode(p) for p in report["paths"]] == [odd]
    assert report["table"] == table
    assert "\\udcff.parquet" in _human(capsys, "orphans", table, "--dry-run")
    assert "inspect" in _human(capsys, "inspect", table)

    report = run_json(capsys, "orphans", table, "--older-than", "8d", "--quarantine")
    assert not os.path.exists(odd) and report["deleted_files"] == 1
    (record,) = audit.read_records(table)
    assert record.table_root == table and record.status == "succeeded"
    (entry,) = quarantine.read_manifest(table, report["quarantine_run"])
    assert os.fsencode(entry.path) == b"\xff.parquet"
    run_json(capsys, "restore", table, report["quarantine_run"])
    assert Path(os.fsdecode(odd)).read_bytes() == b"x"
    os.rename(table, tmp_path / "peer")  # delta-rs opens only UTF-8 locations
    assert sorted(DeltaTable(str(tmp_path / "peer")).to_pyarrow_table().column("id").to_pylist()) == [0, 1]


def test_iceberg_orphans_list_names_that_are_not_utf8_on_the_driver_and_in_plan_units(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = small_file_table(tmp_path, appends=2, rows=5)
    data = os.fsencode(table.location) + b"/data"
    odd = {_odd_file(data, b"\xff.parquet"), _odd_file(data + b"/sub\xfe", b"x.parquet")}
    argv = ("orphans", table.identifier, "--catalog-uri", table.catalog_uri, "--dry-run")
    for listing in ([], ["--listing-threshold", "0"]):  # 0: every directory listed by a plan unit
        report = run_json(capsys, *argv, *listing)
        assert {os.fsencode(p) for p in report["paths"]} == odd
    assert "\\udcfe" in _human(capsys, *argv, "--listing-threshold", "0")
    report = run_json(capsys, *argv[:-1], "--listing-threshold", "0")  # argv without --dry-run
    assert report["deleted_files"] == 2 and not any(os.path.exists(p) for p in odd)


def test_icechunk_reports_unrecognised_names_that_are_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(tmp_path / "arrays")
    build_history(open_storage(root), root, commits=2)
    for folder in (b"chunks", b"manifests", b"snapshots"):
        _odd_file(os.fsencode(root) + b"/" + folder, b"\xff")
    report = run_json(capsys, "orphans", root, "--dry-run")
    assert report["unrecognised_files"] == 3
    assert "unrecognised" in _human(capsys, "orphans", root, "--dry-run")
