"""Expiry of superseded branch files (lakeops.icechunk.maintenance.expiry) and the retention window:
the newest file of every branch and every tag stay, a file goes only when it has been superseded for
longer than the retention, short windows need the override, and every head still reads the same."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from icechunk_repos import build_history, contents, days_from_now_ms, run_expiry, set_age

from lakeops.errors import InvalidArgument, NotATable, UnsafeOperation
from lakeops.icechunk import refs
from lakeops.icechunk.maintenance.expiry import execute_expiry, plan_expiry
from lakeops.icechunk.maintenance.retention import DEFAULT_RETENTION, resolve_retention
from lakeops.icechunk.repository import Repository
from lakeops.storage import open_storage

MAIN = ["RZD9SW6JJZHKA94VY1DG", "F8R612XQGFW9CR08HTN0", "J4DQH8NAGRYC10YGT7F0", "WT2Z2GQ09G0RTAEQ3D70"]
MY_BRANCH = ["0XEZMR4J7SJ5QBWAYBE0", "QVY2RGJBE9DX8E525CA0", "RZD9SW6JJZHKA94VY1DG"]


def test_the_test_repository_keeps_every_head(repo_copy: Path) -> None:
    root, storage = str(repo_copy), open_storage(str(repo_copy))
    set_age(repo_copy, 30)
    before = contents(storage, root)
    tags = {p: p.read_bytes() for p in (repo_copy / "refs").glob("tag.*/ref.json")}
    assert [v.snapshot_id for v in refs.branch_history(storage, root, "main")] == MAIN
    assert [v.snapshot_id for v in refs.branch_history(storage, root, "my-branch")] == MY_BRANCH

    plan = run_expiry(storage, root, days_from_now_ms(0))

    assert plan.branch_tips == {"main": 3, "my-branch": 2} and plan.branch_files == 7
    assert {(f.branch, f.sequence, f.superseded_by) for f in plan.files} == {
        ("main", 0, 1),
        ("main", 1, 2),
        ("main", 2, 3),
        ("my-branch", 0, 1),
        ("my-branch", 1, 2),
    }
    # RZD9 stays (main's tip), QVY2 stays (tag "it works!"): only main's three old snapshots go.
    assert plan.expired_snapshots == sorted(MAIN[1:])
    assert plan.retained_snapshots == sorted({MAIN[0], *MY_BRANCH})
    assert plan.bytes == 5 * 35
    assert sorted(p.name for p in (repo_copy / "refs" / "branch.main").iterdir()) == ["ZZZZZZZW.json"]
    assert sorted(p.name for p in (repo_copy / "refs" / "branch.my-branch").iterdir()) == ["ZZZZZZZX.json"]
    assert {p: p.read_bytes() for p in (repo_copy / "refs").glob("tag.*/ref.json")} == tags
    assert contents(storage, root) == before
    # Nothing but ref files went; ancestry still reads back to the root through the snapshot files.
    assert len(list((repo_copy / "snapshots").iterdir())) == 6
    repo = Repository(storage, root)
    assert [e.message for e in repo.ancestry(repo.resolve("my-branch"))] == [
        "some more structure",
        "delete a chunk",
        "set virtual chunk",
        "fill data",
        "empty structure",
        "Repository initialized",
    ]
    again = plan_expiry(storage, root, retention=None, force=False, now_ms=days_from_now_ms(0))
    assert again.files == [] and again.branch_files == 2


def test_a_file_is_dated_by_its_successor(tmp_path: Path) -> None:
    root = str(tmp_path / "repo")
    storage = open_storage(root)
    build_history(storage, root, commits=4)
    set_age(tmp_path / "repo", 30)
    main = refs.branch_history(storage, root, "main")  # sequences 5 (tip) .. 0
    set_age(Path(main[2].path), 1)  # sequence 3 superseded sequence 2 only a day ago
    plan = plan_expiry(storage, root, retention=None, force=False, now_ms=days_from_now_ms(0))
    gone = {f.sequence for f in plan.files if f.branch == "main"}
    # 2 stays (superseded a day ago) and 3 stays (it is young itself); 4 was superseded long ago.
    assert gone == {0, 1, 4}
    assert main[3].snapshot_id in plan.retained_snapshots and main[2].snapshot_id in plan.retained_snapshots
    assert {f.branch for f in plan.files} == {"main", "side"}


def test_nothing_is_old_within_the_window(tmp_path: Path) -> None:
    root = str(tmp_path / "repo")
    storage = open_storage(root)
    build_history(storage, root, commits=3)
    assert plan_expiry(storage, root, retention=None, force=False, now_ms=days_from_now_ms(6.9)).files == []
    assert len(plan_expiry(storage, root, retention=None, force=False, now_ms=days_from_now_ms(7.1)).files) == 6


def test_short_retention_needs_the_override(tmp_path: Path) -> None:
    root = str(tmp_path / "repo")
    storage = open_storage(root)
    build_history(storage, root, commits=3)
    now = days_from_now_ms(0)
    with pytest.raises(UnsafeOperation, match=r"retention 1h is shorter than the default 7d.*--force"):
        plan_expiry(storage, root, retention=timedelta(hours=1), force=False, now_ms=now)
    files = sorted(p for p in (tmp_path / "repo").rglob("*") if p.is_file())
    plan = plan_expiry(storage, root, retention=timedelta(0), force=True, now_ms=now + 1000)
    assert len(plan.files) == 6 and plan.retention == timedelta(0)
    assert sorted(p for p in (tmp_path / "repo").rglob("*") if p.is_file()) == files  # planning deletes nothing
    assert plan_expiry(storage, root, retention=timedelta(days=30), force=False, now_ms=now).files == []


def test_retention_window_rules() -> None:
    assert resolve_retention("r", None, override=False, override_flag="--x") == DEFAULT_RETENTION == timedelta(days=7)
    assert resolve_retention("r", timedelta(days=9), override=False, override_flag="--x") == timedelta(days=9)
    assert resolve_retention("r", timedelta(hours=2), override=True, override_flag="--x") == timedelta(hours=2)
    with pytest.raises(UnsafeOperation, match="r: retention 2h .* Pass --x only"):
        resolve_retention("r", timedelta(hours=2), override=False, override_flag="--x")
    with pytest.raises(InvalidArgument, match="negative"):
        resolve_retention("r", timedelta(hours=-2), override=True, override_flag="--x")


def test_execute_refuses_to_remove_a_head(tmp_path: Path) -> None:
    root = str(tmp_path / "repo")
    storage = open_storage(root)
    build_history(storage, root, commits=2)
    plan = plan_expiry(storage, root, retention=None, force=False, now_ms=days_from_now_ms(8))
    main = refs.branch_history(storage, root, "main")
    Path(main[0].path).unlink()  # the tip vanished: sequence 2 would now be the head
    with pytest.raises(UnsafeOperation, match="refusing to remove its head"):
        execute_expiry(plan, storage)
    assert [v.sequence for v in refs.branch_history(storage, root, "main")] == [2, 1, 0]


def test_execute_refuses_a_path_outside_its_branch(tmp_path: Path) -> None:
    root = str(tmp_path / "repo")
    storage = open_storage(root)
    build_history(storage, root, commits=2)
    plan = plan_expiry(storage, root, retention=None, force=False, now_ms=days_from_now_ms(8))
    forged = plan.files[0].model_copy(update={"path": plan.files[0].path.replace("branch.main", "tag.middle")})
    with pytest.raises(UnsafeOperation, match="not a file of branch 'main'"):
        execute_expiry(plan.model_copy(update={"files": [forged]}), storage)
    assert refs.read_tag(storage, root, "middle")


def test_not_a_repository(tmp_path: Path) -> None:
    (tmp_path / "refs" / "branch.dev").mkdir(parents=True)
    (tmp_path / "refs" / "branch.dev" / "ZZZZZZZZ.json").write_text('{"snapshot":"WT2Z2GQ09G0RTAEQ3D70"}')
    with pytest.raises(NotATable, match="no refs/branch.main"):
        plan_expiry(open_storage(str(tmp_path)), str(tmp_path), retention=None, force=False, now_ms=0)
