"""Updating a format 2 repo object and a format 1 branch ref: every field kept, backups written,
races lost cleanly, the outcome read back (https://github.com/earth-mover/icechunk/blob/main/docs/docs/spec.md,
"Updates to the repo info file")."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lakeops.errors import CommitConflict, CommitStateUnknown
from lakeops.icechunk import fbs
from lakeops.icechunk.binary import FileType, read_payload
from lakeops.icechunk.flatbuf_codec import Record, decode
from lakeops.icechunk.ids import new_id
from lakeops.icechunk.repo_info import decode_repo_object
from lakeops.icechunk.repo_update import OVERWRITTEN_DIR, RepoDocument, replace_branch_ref, update_repo
from lakeops.storage import LocalStorage

FIXTURES = Path(__file__).parents[2] / "data" / "modern" / "icechunk"
_TAG_CREATED = 5


def _repo(tmp_path: Path, name: str = "test-repo-v2") -> Path:
    shutil.copytree(FIXTURES / name, tmp_path / name)
    return tmp_path / name


def _record(repo: Path) -> Record:
    path = str(repo / "repo")
    return decode(read_payload((repo / "repo").read_bytes(), path, FileType.REPO_INFO)[1], fbs.REPO)


def test_an_unchanged_document_gives_back_the_record_it_was_read_from(tmp_path: Path) -> None:
    for name in ("test-repo-v2", "split-repo-v2"):
        record = _record(FIXTURES / name)
        again = RepoDocument.from_record(record, name).to_record()
        normalise = [{**s, "parent_offset": s.get("parent_offset", 0)} for s in record["snapshots"]]
        assert again == {**record, "snapshots": normalise}


def test_an_update_moves_a_ref_keeps_every_other_field_and_backs_up_the_old_object(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before_bytes = (repo / "repo").read_bytes()
    before = _record(repo)
    backups_before = set((repo / OVERWRITTEN_DIR).iterdir())

    def tag(document: RepoDocument) -> tuple[int, Record]:
        document.tags["lakeops-tag"] = document.branches["main"]
        return _TAG_CREATED, {"name": "lakeops-tag"}

    update_repo(LocalStorage(), str(repo), tag, now=lambda: 1_800_000_000.0)

    after = _record(repo)
    info = decode_repo_object((repo / "repo").read_bytes(), str(repo / "repo"))
    assert info.tags["lakeops-tag"] == info.branches["main"]
    assert {k: v for k, v in after.items() if k not in ("tags", "latest_updates")} == {
        k: v for k, v in before.items() if k not in ("tags", "latest_updates")
    }
    (new_backup,) = set((repo / OVERWRITTEN_DIR).iterdir()) - backups_before
    assert new_backup.read_bytes() == before_bytes
    assert new_backup.name.startswith(f"repo.{32503680000000 - 1_800_000_000_000}.")
    newest, previous = after["latest_updates"][:2]
    assert newest == {"update_type": (_TAG_CREATED, {"name": "lakeops-tag"}), "updated_at": 1_800_000_000_000_000}
    assert previous == {**before["latest_updates"][0], "backup_path": new_backup.name}
    assert after["latest_updates"][2:] == before["latest_updates"][1:]


def test_a_change_that_finds_its_state_gone_writes_nothing(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = (repo / "repo").read_bytes()
    backups = sorted((repo / OVERWRITTEN_DIR).iterdir())

    def refuse(document: RepoDocument) -> tuple[int, Record]:
        raise CommitConflict("branch gone")

    with pytest.raises(CommitConflict, match="branch gone"):
        update_repo(LocalStorage(), str(repo), refuse)
    assert (repo / "repo").read_bytes() == before
    assert sorted((repo / OVERWRITTEN_DIR).iterdir()) == backups


def test_a_lost_race_re_reads_and_re_applies(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    calls: list[int] = []

    def tag(document: RepoDocument) -> tuple[int, Record]:
        calls.append(len(document.tags))
        if len(calls) == 1:  # another writer lands between our read and our write
            update_repo(LocalStorage(), str(repo), other)
        document.tags["ours"] = document.branches["main"]
        return _TAG_CREATED, {"name": "ours"}

    def other(document: RepoDocument) -> tuple[int, Record]:
        document.tags["theirs"] = document.branches["main"]
        return _TAG_CREATED, {"name": "theirs"}

    update_repo(LocalStorage(), str(repo), tag)
    info = decode_repo_object((repo / "repo").read_bytes(), "repo")
    assert {"ours", "theirs"} <= set(info.tags)
    assert calls == [2, 3]


def test_a_format_1_branch_moves_only_from_the_snapshot_it_was_read_at(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "test-repo-v1")
    ref = repo / "refs" / "branch.main" / "ref.json"
    current = json.loads(ref.read_text())["snapshot"]
    with pytest.raises(CommitConflict, match="branch main moved"):
        replace_branch_ref(LocalStorage(), str(repo), "main", "0" * 20, "1" * 20)
    assert json.loads(ref.read_text())["snapshot"] == current
    target = new_id()
    replace_branch_ref(LocalStorage(), str(repo), "main", current, target)
    assert json.loads(ref.read_text()) == {"snapshot": target}


class _ThenAnotherWriter:
    """Local storage whose compare-and-swap is followed at once by another writer's ``after()``."""

    def __init__(self, after: Callable[[], None]) -> None:
        self.inner = LocalStorage()
        self.after = after

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def replace_if_match(self, path: str, data: bytes, token: str) -> None:
        self.inner.replace_if_match(path, data, token)
        self.after()


def _rename_over(target: Path, data: bytes) -> None:
    """A writer that read ``target`` before lakeops wrote it renames its own version over it, as the
    icechunk package writes a ref on a local file system."""
    staged = target.with_name(f"{target.name}#1")
    staged.write_bytes(data)
    staged.rename(target)


#: ``main`` of ``test-repo-v1``, newest first: each snapshot's parent follows it.
_V1_MAIN = ["NXH3M0HJ7EEJ0699DPP0", "7XAF0Q905SH4938DN9CG", "GC4YVH5SKBPEZCENYQE0", "P874YS3J196959RDHX7G"]


def test_a_format_1_branch_move_a_later_commit_builds_on_has_landed(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "test-repo-v1")
    ref = repo / "refs" / "branch.main" / "ref.json"
    tip, parent = _V1_MAIN[:2]
    child = _ThenAnotherWriter(lambda: _rename_over(ref, json.dumps({"snapshot": tip}).encode()))
    replace_branch_ref(child, str(repo), "main", tip, parent)  # type: ignore[arg-type]
    assert json.loads(ref.read_text()) == {"snapshot": tip}  # the tip's parent is what lakeops wrote


def test_a_format_1_branch_move_overwritten_by_a_writer_that_had_not_read_it_is_unknown(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "test-repo-v1")
    ref = repo / "refs" / "branch.main" / "ref.json"
    tip, parent, older = _V1_MAIN[:3]
    stale = _ThenAnotherWriter(lambda: _rename_over(ref, json.dumps({"snapshot": older}).encode()))
    unknown = "branch.main/ref.json: the store accepted the commit but the table read back does not hold the change"
    with pytest.raises(CommitStateUnknown, match=unknown):
        replace_branch_ref(stale, str(repo), "main", tip, parent)  # type: ignore[arg-type]


def _tag(name: str) -> Callable[[RepoDocument], tuple[int, Record]]:
    def tag(document: RepoDocument) -> tuple[int, Record]:
        document.tags[name] = document.branches["main"]
        return _TAG_CREATED, {"name": name}

    return tag


def test_a_repo_object_update_a_later_update_builds_on_has_landed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    later = _ThenAnotherWriter(lambda: update_repo(LocalStorage(), str(repo), _tag("theirs")))
    update_repo(later, str(repo), _tag("ours"))  # type: ignore[arg-type]
    assert {"ours", "theirs"} <= set(decode_repo_object((repo / "repo").read_bytes(), "repo").tags)


def test_a_repo_object_update_overwritten_by_a_writer_that_had_not_read_it_is_unknown(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = (repo / "repo").read_bytes()
    stale = _ThenAnotherWriter(lambda: _rename_over(repo / "repo", before))
    with pytest.raises(
        CommitStateUnknown, match="repo: the store accepted the commit but the table read back does not hold"
    ):
        update_repo(stale, str(repo), _tag("ours"))  # type: ignore[arg-type]
