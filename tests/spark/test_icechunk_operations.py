"""Every ``lakeops`` command on Icechunk repositories, end to end through the CLI with Spark.

Repositories: a copy of the real test repository (Icechunk 0.1.0-alpha.1) and one our writer builds
with many commits of small chunks, on local disk and on the S3 endpoint. After compaction, expiry and
garbage collection every retained head (branch tips and tags) reads back the same node metadata and
chunk bytes, and every object a retained snapshot reaches exists.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from icechunk_repos import create_tag
from lakeops_cli import run_json
from lakeops_testdata import TESTDATA

from lakeops.icechunk import refs
from lakeops.icechunk.manifest import VirtualChunkRef
from lakeops.icechunk.repository import Repository
from lakeops.icechunk.snapshot import FillValue, ZarrArrayMetadata
from lakeops.icechunk.versioned import VersionedRepository
from lakeops.icechunk.writer import ChangeSet, commit, init_repository
from lakeops.storage import Storage, join, open_storage
from spark_jobs.cli import main as lakeops

GRID = ZarrArrayMetadata(shape=(8, 6), data_type="uint8", chunk_shape=(2, 2), fill_value=FillValue("UInt8", 0))
LINE = ZarrArrayMetadata(shape=(40,), data_type="uint8", chunk_shape=(1,), fill_value=FillValue("UInt8", 0))
TEST_REPO = TESTDATA / "icechunk-seed-format" / "test-repo"
LONG_AGO = time.time() - 30 * 86400

#: A head's content: node path -> (user attributes, Zarr metadata, {chunk indices: stored bytes or ref}).
State = dict[str, tuple[Any, Any, dict[tuple[int, ...], bytes | VirtualChunkRef | None]]]


def _state(repo: Repository, snapshot_id: str) -> State:
    state: State = {}
    for node in repo.nodes(snapshot_id):
        chunks = {}
        if node.is_array:
            chunks = {
                i: repo.read_chunk(snapshot_id, node.path, i) for i in repo.chunk_payloads(snapshot_id, node.path)
            }
        meta = getattr(node.node_data, "metadata", None)
        state[node.path] = (node.user_attributes, repr(meta), chunks)
    return state


def _heads(repo: Repository) -> dict[str, str]:
    heads = {f"branch {b}": repo.resolve(b, "branch") for b in repo.branches()}
    heads.update({f"tag {t}": repo.resolve(t, "tag") for t in repo.tags()})
    return heads


def _states(root: str, storage: Storage) -> dict[str, State]:
    repo = Repository(storage, root)
    return {name: _state(repo, sid) for name, sid in _heads(repo).items()}


def _assert_every_reachable_object_exists(root: str, storage: Storage) -> None:
    repo = Repository(storage, root)
    live = repo.reachable(_heads(repo).values())
    for object_id in live.snapshots:
        assert storage.exists(repo.snapshot_path(object_id))
    for object_id in live.manifests:
        assert storage.exists(repo.manifest_path(object_id))
    for object_id in live.chunks:
        assert storage.exists(repo.chunk_path(object_id))


def _chunk_objects(root: str, storage: Storage) -> int:
    return sum(1 for _ in storage.list(join(root, "chunks")))


def _build(storage: Storage, root: str, commits: int = 10) -> None:
    """Structure, then ``commits`` commits of a few small native chunks each, a tag and a side branch."""
    init_repository(storage, root)
    commit(
        storage,
        root,
        ChangeSet().add_group("/", {"title": "demo"}).add_array("/grid", GRID).add_array("/line", LINE),
        message="structure",
    )
    rng = random.Random(11)
    for k in range(commits):
        changes = ChangeSet()
        for _ in range(4):
            changes.set_chunk("/grid", (rng.randrange(4), rng.randrange(3)), rng.randbytes(rng.randrange(4, 12)))
            changes.set_chunk("/line", (rng.randrange(40),), rng.randbytes(3))
        result = commit(storage, root, changes, message=f"batch {k}")
        if k == commits // 2:
            create_tag(storage, root, "half", result.snapshot_id)
    refs.create_next_branch_file(storage, root, "side", result.snapshot_id, None)


def _age(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (LONG_AGO, LONG_AGO))


def test_the_test_repository_through_every_command(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "test-repo"
    shutil.copytree(TEST_REPO, root)
    _age(root)
    location, storage = str(root), open_storage(str(root))
    before = _states(location, storage)

    health = run_json(capsys, "inspect", location)
    assert health["branches"] == ["main", "my-branch"] and health["tags"] == ["it also works!", "it works!"]
    assert (health["chunks_inline"], health["chunks_virtual"], health["chunks_native"]) == (5, 1, 3)
    assert run_json(capsys, "checkpoint", location)["status"] == "not applicable"

    extract = (
        "cdc",
        location,
        "--from",
        "WT2Z2GQ09G0RTAEQ3D70",
        "--to",
        "my-branch",
        "--output",
        str(tmp_path / "changes"),
    )
    changes = run_json(capsys, *extract)
    rows = DeltaTable(str(tmp_path / "changes")).to_pyarrow_table().to_pylist()
    assert changes["rows_written"] == len(rows)
    removed = [r for r in rows if r["change"] == "removed"]
    assert [(r["path"], r["chunk_index"]) for r in removed] == [("/group1/small_chunks", "4")]
    again = run_json(capsys, *extract)
    assert again["already_extracted"] and DeltaTable(str(tmp_path / "changes")).version() == 0

    packed = run_json(capsys, "compact", location, "--branch", "my-branch", "--min-input-files", "2")
    assert packed["files_removed"] == 3 and packed["files_added"] == 1
    # The compaction snapshot moves chunks without changing them: the change table gains no rows.
    after_compaction = run_json(
        capsys,
        "cdc",
        location,
        "--from",
        "0XEZMR4J7SJ5QBWAYBE0",
        "--output",
        str(tmp_path / "changes"),
        "--to",
        "my-branch",
    )
    assert after_compaction["snapshots_extracted"] == 1 and after_compaction["rows_written"] == 0
    assert DeltaTable(str(tmp_path / "changes")).to_pyarrow_table().num_rows == len(rows)
    expired = run_json(capsys, "expire", location)
    assert expired["deleted_branch_files"] > 0
    collected = run_json(capsys, "orphans", location)
    assert collected["deleted_snapshots"] > 0

    after = _states(location, storage)
    assert after.keys() == before.keys()
    for name in before:
        if name != "branch my-branch":
            assert after[name] == before[name], name
    moved = after["branch my-branch"]
    assert {p: (a, m) for p, (a, m, _) in moved.items()} == {
        p: (a, m) for p, (a, m, _) in before["branch my-branch"].items()
    }
    assert moved == before["branch my-branch"]  # same stored bytes, now in one shared chunk file
    _assert_every_reachable_object_exists(location, storage)


@pytest.mark.parametrize("backend", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_many_small_chunks_compacted_expired_collected(
    backend: str, spark: Any, tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    if backend == "local":
        location, flags = str(tmp_path / "repo"), []
        storage = open_storage(location)
    else:
        bucket = request.getfixturevalue("s3_bucket")
        location, flags = f"{bucket.uri}/repo", ["--endpoint-url", bucket.options.endpoint_url]
        storage = open_storage(location, bucket.options)
    _build(storage, location)
    before = _states(location, storage)
    objects_before = _chunk_objects(location, storage)

    dry = run_json(capsys, "compact", location, "--dry-run", *flags)
    assert dry["dry_run"] and _chunk_objects(location, storage) == objects_before
    packed = run_json(capsys, "compact", location, *flags)
    assert packed["committed_snapshot"] and packed["files_added"] < packed["files_removed"]
    # Everything is younger than any default window: a short one must be asked for explicitly.
    assert lakeops(["orphans", location, "--older-than", "0s", *flags]) != 0
    assert "shorter than the default" in capsys.readouterr().err
    run_json(capsys, "expire", location, "--older-than", "0s", "--force", *flags)
    collected = run_json(capsys, "orphans", location, "--older-than", "0s", "--force-short-retention", *flags)
    assert collected["deleted_chunks"] > 0

    after = _states(location, storage)
    assert after["branch main"] == before["branch main"]
    assert after["branch side"] == before["branch side"] and after["tag half"] == before["tag half"]
    assert _chunk_objects(location, storage) < objects_before
    _assert_every_reachable_object_exists(location, storage)


def test_a_broken_ref_stops_every_destructive_command_and_deletes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = str(tmp_path / "repo")
    storage = open_storage(location)
    _build(storage, location, commits=3)
    _age(Path(location))
    tag = Path(refs.tag_path(location, "half"))
    tag.write_text("{not json")
    files = sorted(p for p in Path(location).rglob("*") if p.is_file())
    for command in ("expire", "orphans"):
        assert lakeops([command, location]) != 0
        err = capsys.readouterr().err
        assert "ref.json" in err and "half" in err, err
    # Deletes nothing; each failed run leaves only its audit record (issue 10).
    assert sorted(p for p in Path(location).rglob("*") if p.is_file() and "_lakeops_audit" not in p.parts) == files
    assert len(list(Path(location, "_lakeops_audit").iterdir())) == 2


@pytest.mark.parametrize(
    "flags",
    [
        ["--where", "day = '2024-01-01'"],
        ["--partial-progress", "2"],
        ["--commit-retries", "3"],
        ["--commit-timeout", "10m"],
        ["--min-file-size", "1MB"],
    ],
)
def test_compaction_options_of_other_formats_are_refused_not_ignored(
    flags: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = str(tmp_path / "repo")
    storage = open_storage(location)
    _build(storage, location, commits=2)
    files = sorted(p for p in Path(location).rglob("*") if p.is_file())
    assert lakeops(["compact", location, *flags]) == 2  # a usage error
    assert f"{flags[0]} does not apply to this table's format" in capsys.readouterr().err
    assert sorted(p for p in Path(location).rglob("*") if p.is_file() and "_lakeops_audit" not in p.parts) == files


def test_change_capture_of_format_2_through_spark(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Spark's tasks diff a format 2 repository (read natively) as the threads do: test-repo-v2's main
    holds 13 chunk and node additions and the virtual replacement of big_chunks 0/0."""
    root = tmp_path / "test-repo-v2"
    shutil.copytree(TESTDATA / "modern" / "icechunk" / "test-repo-v2", root)
    extract = ("cdc", str(root), "--from", "1CECHNKREP0F1RSTCMT0", "--output", str(tmp_path / "changes"))
    changes = run_json(capsys, *extract)
    rows = DeltaTable(str(tmp_path / "changes")).to_pyarrow_table().to_pylist()
    assert changes["watermark"] == "flushed_at" and changes["rows_written"] == len(rows) == 14
    assert [(r["path"], r["chunk_index"]) for r in rows if r["change"] == "modified"] == [("/group1/big_chunks", "0/0")]
    assert run_json(capsys, *extract)["already_extracted"]
    assert DeltaTable(str(tmp_path / "changes")).version() == 0


def test_compaction_of_format_2_through_spark(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Spark's tasks pack split-repo-v2's 16 small chunk objects into one file; lakeops' format 2 reader
    then reads every chunk of the new tip as the old tip held it."""
    root = tmp_path / "split-repo-v2"
    shutil.copytree(TESTDATA / "modern" / "icechunk" / "split-repo-v2", root)
    repo = VersionedRepository(open_storage(str(root)), str(root))
    tip = repo.info.branches["main"]

    def chunks(snapshot_id: str) -> dict[tuple[int, ...], bytes]:
        refs_ = VersionedRepository(open_storage(str(root)), str(root)).chunk_refs(snapshot_id, "/group1/split")
        return {
            i: (root / "chunks" / str(r.chunk_id)).read_bytes()[r.offset : r.offset + r.length]
            for i, r in refs_.items()
        }

    report = run_json(capsys, "compact", str(root), "--min-input-files", "2")
    assert (report["files_removed"], report["files_added"], report["chunks_packed"]) == (16, 1, 16)
    after = VersionedRepository(open_storage(str(root)), str(root)).info
    assert after.branches["main"] == report["committed_snapshot"]
    assert after.snapshots[report["committed_snapshot"]].parent_id == tip
    assert chunks(report["committed_snapshot"]) == chunks(tip)
