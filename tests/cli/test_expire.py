"""``lakeops expire``: Delta log expiry from the command line (runs on the driver, no Spark); a damaged
Iceberg table is named (Iceberg expiry itself: ``tests/spark/test_expire_iceberg.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from spark_jobs.cli import main as lakeops

ROOT = Path(__file__).resolve().parents[2]


def _table(location: Path, *, config: dict[str, str] | None = None) -> None:
    """Six commits, checkpoints at 2 and 4, commits 0-4 forty to thirty-six days old."""
    for version in range(6):
        write_deltalake(
            str(location), pa.table({"id": [version]}), mode="append", configuration=config if version == 0 else None
        )
        if version in (2, 4):
            DeltaTable(str(location)).create_checkpoint()
    for version in range(5):
        stamp = time.time() - (40 - version) * 86400
        os.utime(location / "_delta_log" / f"{version:020d}.json", (stamp, stamp))


def _log(location: Path) -> set[str]:
    return {p.name for p in (location / "_delta_log").iterdir()}


def _expire(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code = lakeops(["expire", *argv, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report: dict[str, Any] = json.loads(captured.out)
    return report


def test_dry_run_then_expire(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = tmp_path / "t"
    _table(location)
    before = _log(location)
    expired = {f"{v:020d}.json" for v in range(4)} | {"00000000000000000002.checkpoint.parquet"}

    preview = _expire(capsys, str(location), "--dry-run")

    assert preview["dry_run"] is True and _log(location) == before
    assert {Path(p).name for p in preview["paths"]} == expired
    assert (preview["cutoff_version"], preview["checkpoint_kept"]) == (4, 4)

    report = _expire(capsys, str(location))

    assert report["deleted_files"] == 5 and report["deleted_commits"] == 4 and report["deleted_checkpoint_files"] == 1
    assert report["retention"] == "30d" and report["paths"] == []
    assert _log(location) == before - expired
    assert sorted(DeltaTable(str(location)).to_pyarrow_table().column("id").to_pylist()) == list(range(6))
    assert sorted(DeltaTable(str(location), version=4).to_pyarrow_table().column("id").to_pylist()) == list(range(5))


def test_retention_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = tmp_path / "t"
    _table(location, config={"delta.logRetentionDuration": "interval 60 days"})
    before = _log(location)

    with pytest.raises(SystemExit) as usage:  # a malformed option value: a usage error (README)
        lakeops(["expire", str(location), "--older-than=-1d"])
    assert usage.value.code == 2 and "retention '-1d' is negative" in capsys.readouterr().err
    assert lakeops(["expire", str(location), "--older-than", "0s"]) == 1
    assert "retention must be longer than zero" in capsys.readouterr().err
    assert lakeops(["expire", str(location), "--older-than", "30d"]) == 1
    err = capsys.readouterr().err
    assert "UnsafeOperation" in err and "shorter than the table's delta.logRetentionDuration (60d)" in err
    assert _log(location) == before

    assert _expire(capsys, str(location))["deleted_files"] == 0  # 60 days: nothing is that old
    assert _expire(capsys, str(location), "--older-than", "30d", "--force")["deleted_files"] == 5


def test_nothing_to_expire_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = tmp_path / "t"
    write_deltalake(str(location), pa.table({"id": [1]}))
    stamp = time.time() - 90 * 86400
    os.utime(location / "_delta_log" / f"{0:020d}.json", (stamp, stamp))

    assert lakeops(["expire", str(location)]) == 0
    captured = capsys.readouterr()
    assert "no complete checkpoint at or below version 0" in captured.err  # progress line
    assert "deleted files" in captured.out and "no complete checkpoint" in captured.out  # the report table


def test_damaged_iceberg_metadata_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata" / "v1.metadata.json").write_text("{}")
    assert lakeops(["expire", str(tmp_path)]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "ProtocolError" in err and "v1.metadata.json: format-version is missing" in err
    assert (tmp_path / "metadata" / "v1.metadata.json").read_text() == "{}"


def test_script_entry_point(tmp_path: Path) -> None:
    """``spark_jobs/expire.py`` is its own entry point (``spark-submit`` runs it the same way)."""
    location = tmp_path / "t"
    _table(location)
    result = subprocess.run(
        [sys.executable, str(ROOT / "spark_jobs" / "expire.py"), str(location), "--dry-run", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["deleted_files"] == 5
