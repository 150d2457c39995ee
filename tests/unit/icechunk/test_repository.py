"""Reading the real Icechunk 0.1.0-alpha.1 test repository: every fact its own test asserts
(tests/data/PROVENANCE.md), on local disk and on S3."""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lakeops.errors import CorruptFile, InvalidArgument, NotATable, NotFound, VersionNotFound
from lakeops.icechunk.manifest import ChunkRef, InlineChunk, VirtualChunkRef
from lakeops.icechunk.repository import Repository
from lakeops.storage import open_storage

MAIN_ANCESTRY = ["set virtual chunk", "fill data", "empty structure", "Repository initialized"]
BRANCH_ANCESTRY = ["some more structure", "delete a chunk", *MAIN_ANCESTRY]
BRANCH_TIP = "0XEZMR4J7SJ5QBWAYBE0"
NATIVE = {(0, 1): "HDRYBA66N2Z6YEV174D0", (1, 0): "EWW1EVYRD0RVW23YZ3N0", (1, 1): "1H3ZMQ27T6XPD5CGK1DG"}
VIRTUAL = VirtualChunkRef("s3://testbucket/path/to/python/chunk-1", 0, 100)


def _check_readme_facts(repo: Repository) -> None:
    assert repo.branches() == ["main", "my-branch"]
    assert [e.message for e in repo.ancestry(repo.resolve("main"))] == MAIN_ANCESTRY
    assert [e.message for e in repo.ancestry(repo.resolve("my-branch"))] == BRANCH_ANCESTRY
    assert repo.resolve("it also works!") == repo.resolve("my-branch") == BRANCH_TIP
    assert repo.read_snapshot(repo.resolve("it works!")).metadata.message == "delete a chunk"
    assert repo.chunk_payload(BRANCH_TIP, "group1/big_chunks", (0, 0)) == VIRTUAL
    data = repo.read_chunk(BRANCH_TIP, "group1/big_chunks", (1, 1))
    assert isinstance(data, bytes) and np.all(np.frombuffer(data, "<f4") == 42.0)


def test_main_and_branch_ancestry_and_tags(test_repo: Path) -> None:
    repo = Repository.open(str(test_repo))
    _check_readme_facts(repo)
    assert repo.tags() == ["it also works!", "it works!"]
    ancestry = repo.ancestry(BRANCH_TIP)
    assert [e.file_id for e in ancestry] == [
        "0XEZMR4J7SJ5QBWAYBE0",
        "QVY2RGJBE9DX8E525CA0",
        "RZD9SW6JJZHKA94VY1DG",
        "F8R612XQGFW9CR08HTN0",
        "J4DQH8NAGRYC10YGT7F0",
        "WT2Z2GQ09G0RTAEQ3D70",
    ]
    assert [e.parent_id for e in ancestry] == [e.id for e in ancestry[1:]] + [None]
    assert [e.written_at for e in ancestry] == sorted((e.written_at for e in ancestry), reverse=True)


def test_initial_snapshot_id_quirk(test_repo: Path) -> None:
    repo = Repository.open(str(test_repo))
    initial = repo.read_snapshot("WT2Z2GQ09G0RTAEQ3D70")
    assert initial.id == "6W05WADKS87N84AMH5KG"
    assert repo.read_snapshot("J4DQH8NAGRYC10YGT7F0").parent_id == "6W05WADKS87N84AMH5KG"
    assert not (test_repo / "snapshots" / "6W05WADKS87N84AMH5KG").exists()
    assert repo.locate_snapshot("6W05WADKS87N84AMH5KG") == "WT2Z2GQ09G0RTAEQ3D70"
    assert repo.embedded_index()["6W05WADKS87N84AMH5KG"] == "WT2Z2GQ09G0RTAEQ3D70"
    last = repo.ancestry("J4DQH8NAGRYC10YGT7F0")[-1]
    assert (last.id, last.file_id, last.message) == ("6W05WADKS87N84AMH5KG", "WT2Z2GQ09G0RTAEQ3D70", MAIN_ANCESTRY[-1])
    with pytest.raises(VersionNotFound, match="snapshot 1H3ZMQ27T6XPD5CGK1DG not found"):
        repo.read_snapshot("1H3ZMQ27T6XPD5CGK1DG")


def test_hierarchy_on_my_branch(test_repo: Path) -> None:
    repo = Repository.open(str(test_repo))
    nodes = repo.nodes(BRANCH_TIP)
    assert [(n.path, n.is_array) for n in nodes] == [
        ("/", False),
        ("/group1", False),
        ("/group1/big_chunks", True),
        ("/group1/small_chunks", True),
        ("/group2", False),
        ("/group2/group3", False),
        ("/group2/group3/group4", False),
        ("/group2/group3/group4/group5", False),
        ("/group2/group3/group4/group5/inner", True),
    ]
    assert "/group2" not in {n.path for n in repo.nodes(repo.resolve("main"))}
    with pytest.raises(InvalidArgument, match="no node '/group9'"):
        repo.node(BRANCH_TIP, "group9")
    with pytest.raises(InvalidArgument, match="is a group, not an array"):
        repo.chunk_payloads(BRANCH_TIP, "group1")


def test_big_chunks(test_repo: Path) -> None:
    repo = Repository.open(str(test_repo))
    _, data = repo.array(BRANCH_TIP, "group1/big_chunks")
    meta = data.metadata
    assert (meta.data_type, meta.shape, meta.chunk_shape) == ("float32", (10, 10), (5, 5))
    assert meta.fill_value.kind == "Float32" and math.isnan(meta.fill_value.value)
    payloads = repo.chunk_payloads(BRANCH_TIP, "/group1/big_chunks")
    assert payloads == {(0, 0): VIRTUAL, **{k: ChunkRef(v, 0, 100) for k, v in NATIVE.items()}}
    assert repo.read_chunk(BRANCH_TIP, "group1/big_chunks", (0, 0)) == VIRTUAL  # outside the repository
    for indices in NATIVE:
        raw = repo.read_chunk(BRANCH_TIP, "group1/big_chunks", indices)
        assert raw == struct.pack("<f", 42.0) * 25
    # Before "set virtual chunk", chunk 0/0 was native too, filled with 42.0.
    fill_data = "F8R612XQGFW9CR08HTN0"
    assert repo.chunk_payload(fill_data, "group1/big_chunks", (0, 0)) == ChunkRef("Q7HMN2SYVTRD4YP93780", 0, 100)
    assert repo.read_chunk(fill_data, "group1/big_chunks", (0, 0)) == struct.pack("<f", 42.0) * 25


def test_small_chunks(test_repo: Path) -> None:
    repo = Repository.open(str(test_repo))
    _, data = repo.array(BRANCH_TIP, "group1/small_chunks")
    meta = data.metadata
    assert (meta.data_type, meta.shape, meta.chunk_shape, meta.fill_value.value) == ("int8", (5,), (1,), 8)
    main = repo.resolve("main")
    assert repo.chunk_payloads(main, "group1/small_chunks") == {(i,): InlineChunk(bytes([84])) for i in range(5)}
    assert repo.read_chunk(main, "group1/small_chunks", (4,)) == bytes([84])
    # chunk 4 deleted on my-branch: it reads as the fill value again
    assert repo.chunk_payloads(BRANCH_TIP, "group1/small_chunks") == {(i,): InlineChunk(b"T") for i in range(4)}
    assert repo.read_chunk(BRANCH_TIP, "group1/small_chunks", (4,)) is None
    assert repo.chunk_payload(repo.resolve("it works!"), "group1/small_chunks", (4,)) is None
    with pytest.raises(InvalidArgument, match=r"chunk indices \[5\] are outside the chunk grid \[5\]"):
        repo.read_chunk(BRANCH_TIP, "group1/small_chunks", (5,))
    with pytest.raises(InvalidArgument, match="outside the chunk grid"):
        repo.read_chunk(BRANCH_TIP, "group1/small_chunks", (0, 0))


def test_inner_has_no_chunks(test_repo: Path) -> None:
    repo = Repository.open(str(test_repo))
    node, data = repo.array(BRANCH_TIP, "group2/group3/group4/group5/inner")
    assert (data.metadata.shape, data.metadata.chunk_shape) == ((10, 10), (5, 5))
    assert repo.chunk_payloads(BRANCH_TIP, node.path) == {}
    assert repo.read_chunk(BRANCH_TIP, node.path, (1, 1)) is None


def test_reachability(test_repo: Path) -> None:
    repo = Repository.open(str(test_repo))
    tips = [repo.resolve(b) for b in repo.branches()] + [repo.resolve(t) for t in repo.tags()]
    live = repo.reachable(tips)
    assert live.snapshots == {"RZD9SW6JJZHKA94VY1DG", "0XEZMR4J7SJ5QBWAYBE0", "QVY2RGJBE9DX8E525CA0"}
    assert live.manifests == {"ME8XN2EDY7P3E2XSR5TG", "BNV9Q6Q9Y9VKYT45MHJG", "Z77TTBHNH7GG72HRTXN0"}
    assert live.chunks == set(NATIVE.values())  # Q7HM... was replaced by the virtual chunk
    assert live.attribute_files == frozenset()
    assert live.virtual_locations == {VIRTUAL.location}  # reported, never a repository file
    everything = repo.reachable(p.name for p in (test_repo / "snapshots").iterdir())
    assert everything.chunks == {p.name for p in (test_repo / "chunks").iterdir()}
    assert everything.manifests == {p.name for p in (test_repo / "manifests").iterdir()}
    # by embedded id as well as by file name
    assert repo.reachable(["6W05WADKS87N84AMH5KG"]).snapshots == {"WT2Z2GQ09G0RTAEQ3D70"}


def test_ancestry_continues_from_embedded_history_when_files_are_gone(repo_copy: Path) -> None:
    (repo_copy / "snapshots" / "F8R612XQGFW9CR08HTN0").unlink()
    repo = Repository.open(str(repo_copy))
    ancestry = repo.ancestry(repo.resolve("main"))
    assert [e.message for e in ancestry] == MAIN_ANCESTRY
    assert [e.file_id for e in ancestry] == ["RZD9SW6JJZHKA94VY1DG", None, None, None]
    assert ancestry[1].parent_id == "J4DQH8NAGRYC10YGT7F0"


def test_missing_and_corrupt_files(repo_copy: Path) -> None:
    chunk = repo_copy / "chunks" / "HDRYBA66N2Z6YEV174D0"
    chunk.write_bytes(chunk.read_bytes()[:60])
    (repo_copy / "manifests" / "BNV9Q6Q9Y9VKYT45MHJG").unlink()
    snap = repo_copy / "snapshots" / "QVY2RGJBE9DX8E525CA0"
    snap.write_bytes(snap.read_bytes()[:100])
    repo = Repository.open(str(repo_copy))
    main = repo.resolve("main")
    with pytest.raises(CorruptFile, match="HDRYBA66N2Z6YEV174D0: chunk file ends after 60 bytes"):
        repo.read_chunk(main, "group1/big_chunks", (0, 1))
    with pytest.raises(NotFound, match="manifest BNV9Q6Q9Y9VKYT45MHJG .* is missing"):
        repo.chunk_payloads(BRANCH_TIP, "group1/big_chunks")
    with pytest.raises(CorruptFile, match="QVY2RGJBE9DX8E525CA0: snapshot is not valid MessagePack"):
        repo.ancestry(BRANCH_TIP)


def test_open_refuses_a_directory_without_main(tmp_path: Path) -> None:
    with pytest.raises(NotATable, match="no refs/branch.main/"):
        Repository.open(str(tmp_path))


@pytest.mark.s3
def test_reading_the_test_repository_on_s3(test_repo: Path, s3_bucket: Any) -> None:
    root = f"{s3_bucket.uri}/repos/test repo"
    storage = open_storage(root, s3_bucket.options)
    for path in test_repo.rglob("*"):
        if path.is_file():
            storage.write(f"{root}/{path.relative_to(test_repo)}", path.read_bytes())
    repo = Repository.open(root, s3_bucket.options)
    _check_readme_facts(repo)
    assert repo.tags() == ["it also works!", "it works!"]
    assert repo.locate_snapshot("6W05WADKS87N84AMH5KG") == "WT2Z2GQ09G0RTAEQ3D70"
