"""``lakeops compact --partial-progress K`` on Delta: each K groups commit as their own OPTIMIZE
version; when a later batch fails, the run exits 1, its report says what landed and the error
names the versions (issue 23 part 4). Small tables: the groups are rewritten in driver threads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from delta_optimize import fail_second_group, optimize_commits, two_partitions
from deltalake import DeltaTable

from spark_jobs.cli import main as lakeops


def _ids(location: str) -> list[int]:
    return sorted(DeltaTable(location).to_pyarrow_table().column("id").to_pylist())


def test_each_batch_of_groups_is_its_own_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = two_partitions(tmp_path / "t")
    args = ["compact", location, "--min-input-files", "2", "--partial-progress", "1", "--json"]
    assert lakeops(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["commits"], report["files_removed"], report["files_added"], report["committed_version"]) == (
        2,
        12,
        2,
        7,
    )
    assert [len(removed) for removed in optimize_commits(location)] == [6, 6]
    assert _ids(location) == list(range(60))


def test_a_failed_batch_exits_1_naming_the_versions_that_landed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    location = two_partitions(tmp_path / "t")
    fail_second_group(monkeypatch)
    assert lakeops(["compact", location, "--min-input-files", "2", "--partial-progress", "1", "--json"]) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert (report["commits"], report["committed_version"], report["files_removed"]) == (1, 6, 6)
    assert "PartiallyCommitted" in err and "1 of 2 commit batches landed (versions 6;" in " ".join(err.split())
    assert [len(removed) for removed in optimize_commits(location)] == [6]
    assert _ids(location) == list(range(60))
