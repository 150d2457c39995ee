"""Bad input: each case exits 1 with a message naming the table, the file and the problem, and
leaves every byte of the table as it was."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from lakeops_testdata import TESTDATA

from spark_jobs.cli import main as lakeops


def _fingerprint(root: Path) -> dict[str, str]:
    """Every file's hash, except lakeops's own audit records (a run, failed or not, leaves one: issue 10)."""
    return {
        str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and "_lakeops_audit" not in p.parts
    }


def _small_table(location: Path, appends: int = 6) -> None:
    for i in range(appends):
        write_deltalake(str(location), pa.table({"id": [i, i + 100]}), mode="append")


def _fails(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> str:
    before = _fingerprint(root) if root.exists() else {}
    assert lakeops(list(argv)) == 1
    err = capsys.readouterr().err
    assert (_fingerprint(root) if root.exists() else {}) == before, "a failed run changed the table"
    return " ".join(err.split())


@pytest.mark.parametrize("command", ["inspect", "compact"])
def test_not_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("hello")
    err = _fails(capsys, tmp_path / "plain", command, str(tmp_path / "plain"))
    assert "NotATable" in err and str(tmp_path / "plain") in err and "_delta_log" in err


def test_truncated_commit(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "t"
    _small_table(table)
    last = table / "_delta_log" / f"{5:020d}.json"
    last.write_bytes(last.read_bytes()[:-40])
    err = _fails(capsys, table, "compact", str(table), "--min-input-files", "2")
    assert "CorruptFile" in err and f"{5:020d}.json" in err and "truncated" in err


def test_corrupt_last_checkpoint(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "t"
    shutil.copytree(TESTDATA / "delta-rs" / "table_with_deletion_logs", table)
    pointer = table / "_delta_log" / "_last_checkpoint"
    pointer.write_text(pointer.read_text().replace('"numOfAddFiles":1', '"numOfAddFiles":2'))
    err = _fails(capsys, table, "compact", str(table))
    assert "CorruptFile" in err and "_last_checkpoint" in err and "checksum" in err


def test_deletion_vector_with_bad_checksum(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "t"
    shutil.copytree(TESTDATA / "delta-rs" / "table-with-dv-small", table)
    (dv,) = table.glob("deletion_vector_*.bin")
    raw = bytearray(dv.read_bytes())
    raw[-1] ^= 0xFF  # the stored CRC-32 no longer matches the bitmap
    dv.write_bytes(bytes(raw))
    err = _fails(capsys, table, "compact", str(table), "--min-input-files", "1")
    assert "CorruptFile" in err and dv.name in err and "CRC" in err.upper()
