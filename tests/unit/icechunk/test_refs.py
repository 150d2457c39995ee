"""Branch sequence files and tags (spec "Reference Files", "Creating and Updating Branches", "Tags")."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from icechunk_repos import create_tag

from lakeops.errors import AlreadyExists, CorruptFile, InvalidArgument, ProtocolError, VersionNotFound
from lakeops.icechunk.refs import (
    BranchVersion,
    branch_file_name,
    branch_history,
    branch_tip,
    create_next_branch_file,
    list_branches,
    list_tags,
    parse_branch_file_name,
    parse_ref,
    read_tag,
    render_ref,
    resolve_ref,
)
from lakeops.storage import open_storage

MAIN = [  # sequence -> snapshot, from refs/branch.main/*.json
    (3, "RZD9SW6JJZHKA94VY1DG"),
    (2, "F8R612XQGFW9CR08HTN0"),
    (1, "J4DQH8NAGRYC10YGT7F0"),
    (0, "WT2Z2GQ09G0RTAEQ3D70"),
]
SNAP = "0XEZMR4J7SJ5QBWAYBE0"


@pytest.mark.parametrize(
    ("sequence", "name"),
    [
        (0, "ZZZZZZZZ.json"),
        (1, "ZZZZZZZY.json"),
        (3, "ZZZZZZZW.json"),
        (100, "ZZZZZZWV.json"),
        (2**40 - 1, "00000000.json"),
    ],
)
def test_branch_file_names(sequence: int, name: str) -> None:
    assert branch_file_name(sequence) == name
    assert parse_branch_file_name(name) == sequence


def test_newer_sequences_sort_first() -> None:
    names = [branch_file_name(s) for s in range(0, 2000, 7)]
    assert sorted(names) == names[::-1]


@pytest.mark.parametrize("bad", ["ZZZZZZZZ.txt", "ZZZZZZZ.json", "ref.json", "ZZZZZZZO.json", "ZZZZZZZZ"])
def test_bad_branch_file_names(bad: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_branch_file_name(bad)


def test_sequence_out_of_range() -> None:
    with pytest.raises(InvalidArgument, match="outside"):
        branch_file_name(2**40)


def test_render_ref_matches_the_reference_writer_byte_for_byte(test_repo: Path) -> None:
    assert (test_repo / "refs/branch.main/ZZZZZZZZ.json").read_bytes() == render_ref("WT2Z2GQ09G0RTAEQ3D70")
    assert (test_repo / "refs/tag.it works!/ref.json").read_bytes() == render_ref("QVY2RGJBE9DX8E525CA0")


def test_branches_and_tags_of_the_test_repository(test_repo: Path) -> None:
    storage, root = open_storage(str(test_repo)), str(test_repo)
    assert list_branches(storage, root) == ["main", "my-branch"]
    assert list_tags(storage, root) == ["it also works!", "it works!"]
    history = branch_history(storage, root, "main")
    assert [(v.sequence, v.snapshot_id) for v in history] == MAIN
    assert history[0].path.endswith("refs/branch.main/ZZZZZZZW.json")
    assert branch_tip(storage, root, "main") == history[0]
    assert [v.sequence for v in branch_history(storage, root, "my-branch")] == [2, 1, 0]
    assert read_tag(storage, root, "it also works!").snapshot_id == "0XEZMR4J7SJ5QBWAYBE0"
    assert read_tag(storage, root, "it works!").snapshot_id == "QVY2RGJBE9DX8E525CA0"
    assert resolve_ref(storage, root, "my-branch") == "0XEZMR4J7SJ5QBWAYBE0"
    assert resolve_ref(storage, root, "it works!") == "QVY2RGJBE9DX8E525CA0"
    assert resolve_ref(storage, root, "main", "branch") == "RZD9SW6JJZHKA94VY1DG"
    assert branch_history(storage, root, "nope") == []
    with pytest.raises(VersionNotFound, match="'nope' is neither a branch nor a tag"):
        resolve_ref(storage, root, "nope")
    with pytest.raises(VersionNotFound, match="branch 'nope' does not exist"):
        branch_tip(storage, root, "nope")
    with pytest.raises(VersionNotFound, match="tag 'main' does not exist"):
        read_tag(storage, root, "main")


def test_a_name_that_is_both_branch_and_tag_is_ambiguous(repo_copy: Path) -> None:
    storage, root = open_storage(str(repo_copy)), str(repo_copy)
    create_tag(storage, root, "main", SNAP)
    with pytest.raises(InvalidArgument, match="both a branch and a tag"):
        resolve_ref(storage, root, "main")
    assert resolve_ref(storage, root, "main", "tag") == SNAP


def test_next_branch_file_is_put_if_absent(repo_copy: Path) -> None:
    storage, root = open_storage(str(repo_copy)), str(repo_copy)
    version = create_next_branch_file(storage, root, "main", SNAP, expected_seq=3)
    assert version == BranchVersion("main", 4, SNAP, str(repo_copy / "refs/branch.main/ZZZZZZZV.json"))
    assert (repo_copy / "refs/branch.main/ZZZZZZZV.json").read_bytes() == render_ref(SNAP)
    assert branch_tip(storage, root, "main").snapshot_id == SNAP
    with pytest.raises(AlreadyExists, match="already has sequence 4"):
        create_next_branch_file(storage, root, "main", "RZD9SW6JJZHKA94VY1DG", expected_seq=3)
    assert branch_tip(storage, root, "main").snapshot_id == SNAP  # the loser changed nothing


def test_racing_branch_writers_exactly_one_wins(repo_copy: Path) -> None:
    storage, root = open_storage(str(repo_copy)), str(repo_copy)
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def race(i: int) -> None:
        barrier.wait()
        try:
            create_next_branch_file(storage, root, "main", SNAP, expected_seq=3)
            outcomes.append("won")
        except AlreadyExists:
            outcomes.append("lost")

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["lost"] * 7 + ["won"]


def test_new_branch_and_names_with_spaces(repo_copy: Path) -> None:
    storage, root = open_storage(str(repo_copy)), str(repo_copy)
    create_next_branch_file(storage, root, "my new branch!", SNAP, expected_seq=None)
    assert (repo_copy / "refs/branch.my new branch!/ZZZZZZZZ.json").is_file()
    assert list_branches(storage, root) == ["main", "my new branch!", "my-branch"]
    assert resolve_ref(storage, root, "my new branch!") == SNAP


def test_tags_are_immutable(repo_copy: Path) -> None:
    storage, root = open_storage(str(repo_copy)), str(repo_copy)
    with pytest.raises(AlreadyExists, match="tag 'it works!' already exists"):
        create_tag(storage, root, "it works!", SNAP)
    assert read_tag(storage, root, "it works!").snapshot_id == "QVY2RGJBE9DX8E525CA0"


@pytest.mark.parametrize("bad", ["a/b", "", "/"])
def test_names_with_slash_are_refused(repo_copy: Path, bad: str) -> None:
    storage, root = open_storage(str(repo_copy)), str(repo_copy)
    with pytest.raises(InvalidArgument, match="must not contain '/'"):
        create_tag(storage, root, bad, SNAP)
    with pytest.raises(InvalidArgument, match="must not contain '/'"):
        create_next_branch_file(storage, root, bad, SNAP, expected_seq=None)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b'{"snapshot":"WT2Z2GQ09G0RTAEQ3D70"', "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b'["WT2Z2GQ09G0RTAEQ3D70"]', "must be a JSON object with key 'snapshot'"),
        (b'{"snap":"WT2Z2GQ09G0RTAEQ3D70"}', "must be a JSON object with key 'snapshot'"),
        (b'{"snapshot":"WT2Z2GQ09G0RTAEQ3D7O"}', "snapshot id 'WT2Z2GQ09G0RTAEQ3D7O' is invalid"),
        (b'{"snapshot":"SHORT"}', "snapshot id 'SHORT' has 5 characters"),
        (b'{"snapshot":7}', "snapshot id 7 is not a string"),
    ],
)
def test_bad_ref_files_are_corrupt_naming_the_file(body: bytes, problem: str) -> None:
    with pytest.raises(CorruptFile, match=problem) as info:
        parse_ref(body, "/repo/refs/branch.main/ZZZZZZZZ.json")
    assert str(info.value).startswith("/repo/refs/branch.main/ZZZZZZZZ.json: ")


def test_corrupt_ref_in_a_repository(repo_copy: Path) -> None:
    storage, root = open_storage(str(repo_copy)), str(repo_copy)
    (repo_copy / "refs/tag.it works!/ref.json").write_bytes(b"{not json")
    with pytest.raises(CorruptFile, match=r"tag\.it works!/ref\.json: ref file is not valid JSON"):
        resolve_ref(storage, root, "it works!")
    (repo_copy / "refs/branch.main/notes.txt").write_text("hello")
    with pytest.raises(ProtocolError, match="notes.txt: unexpected file in branch 'main'"):
        branch_tip(storage, root, "main")
