"""Icechunk format 1 and 2 read natively: detection, refs, snapshots, manifests and ``inspect``.

Format 1 is checked against the icechunk package (1.x reads it); format 2, which no installed package
reads, against the upstream fixtures' documented content: ``test-repo-v2`` holds the same commits as
``test-repo-v1`` (upstream ``icechunk-python/tests/test_can_read_old.py`` writes both with one script)
and ``split-repo-v2`` a 10x10 float32 array ``/group1/split`` in 3x3 chunks spread over manifests.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import icechunk
import pytest
import zarr
from lakeops_testdata import TESTDATA

from lakeops import api
from lakeops.errors import CorruptFile, UnsafeOperation, UnsupportedFeature
from lakeops.icechunk import versioned
from lakeops.icechunk.binary import HEADER_SIZE
from lakeops.icechunk.objects import Snapshot
from lakeops.icechunk.repo_info import RepoInfo, RepoStatus, read_repo_info
from lakeops.icechunk.versioned import VersionedRepository, format_version
from lakeops.ops.detect import detect_format
from lakeops.ops.expiry import ExpiryOptions
from lakeops.ops.icechunk.inspect import IcechunkInspectReport
from lakeops.ops.orphans import OrphansOptions
from lakeops.ops.target import CatalogOptions, resolve_target
from lakeops.ops.trash import RestoreOptions
from lakeops.ops.verify import retained_files_exist
from lakeops.storage import Storage, StorageOptions, open_storage

MODERN = TESTDATA / "modern" / "icechunk"
#: main's history in both test repositories, newest first (upstream test_can_read_old.py).
MAIN_MESSAGES = ["set virtual chunk", "fill data", "empty structure", "Repository initialized"]


@pytest.fixture(params=["test-repo-v1", "test-repo-v2", "split-repo-v2"])
def modern_copy(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return Path(shutil.copytree(MODERN / request.param, tmp_path / request.param))


def _copy(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(MODERN / name, tmp_path / name))


def _inspect(root: Path) -> IcechunkInspectReport:
    report = api.inspect(str(root))
    assert isinstance(report, IcechunkInspectReport)
    return report


def test_both_formats_are_detected_with_their_version(modern_copy: Path) -> None:
    storage = open_storage(str(modern_copy))
    assert detect_format(storage, str(modern_copy)) == "icechunk"
    assert format_version(storage, str(modern_copy)) == (1 if modern_copy.name.endswith("v1") else 2)


def test_the_seed_format_is_neither(repo_copy: Path) -> None:
    assert format_version(open_storage(str(repo_copy)), str(repo_copy)) is None


def test_format_1_refs_and_history_match_the_icechunk_package(tmp_path: Path) -> None:
    root = _copy("test-repo-v1", tmp_path)
    package = icechunk.Repository.open(icechunk.local_filesystem_storage(str(root)))
    info = VersionedRepository(open_storage(str(root)), str(root)).info
    assert info.branches == {name: package.lookup_branch(name) for name in package.list_branches()}
    assert info.tags == {name: package.lookup_tag(name) for name in package.list_tags()}
    assert info.deleted_tags == ["deleted"]
    for branch in info.branches:
        expected = [(s.id, s.message, s.parent_id) for s in package.ancestry(branch=branch)]
        assert [(s.id, s.message, s.parent_id) for s in info.ancestry(info.branches[branch])] == expected


def _package_view(root: Path) -> tuple[int, int, int]:
    """Groups, arrays and chunk keys (inline, virtual and native alike) at main's tip, as the package
    and zarr list them."""
    session = icechunk.Repository.open(icechunk.local_filesystem_storage(str(root))).readonly_session("main")
    group = zarr.open_group(session.store, mode="r")
    members = dict(group.members(max_depth=None))
    arrays = sum(isinstance(member, zarr.Array) for member in members.values())
    keys = zarr.core.sync.sync(_list_keys(session.store))
    chunks = sum("/c/" in f"/{key}" for key in keys)
    return len(members) - arrays + 1, arrays, chunks  # + the root group


async def _list_keys(store: icechunk.IcechunkStore) -> list[str]:
    return [key async for key in store.list()]


def test_inspect_of_format_1_counts_what_the_package_reads(tmp_path: Path) -> None:
    root = _copy("test-repo-v1", tmp_path)
    report = _inspect(root)
    groups, arrays, chunks = _package_view(root)
    assert (report.groups, report.arrays) == (groups, arrays)
    assert report.chunks_inline + report.chunks_virtual + report.chunks_native == chunks == 9
    assert (report.chunks_inline, report.chunks_virtual, report.chunks_native) == (5, 1, 3)
    package = icechunk.Repository.open(icechunk.local_filesystem_storage(str(root)))
    assert report.snapshot == package.lookup_branch("main")
    assert report.ancestry_length == len(list(package.ancestry(branch="main")))
    assert (report.branches, report.tags) == (["main", "my-branch"], ["it also works!", "it works!"])
    assert (report.snapshots, report.manifests, report.chunk_objects, report.chunk_object_bytes) == (6, 4, 4, 76)
    assert report.branch_files == 2
    assert report.reclaimable_objects == 0  # every object is reachable, and a fresh copy is young anyway


def test_inspect_of_format_2_reads_the_same_repository_as_format_1(tmp_path: Path) -> None:
    v1, v2 = _inspect(_copy("test-repo-v1", tmp_path)), _inspect(_copy("test-repo-v2", tmp_path))
    differ = {"snapshot", "oldest_snapshot_age_s", "branch_files", "duration_s", "table"}
    differ |= {"format_version", "supported_operations", "refused_operations"}  # what lakeops does to each format
    assert v2.model_dump(exclude=differ) == v1.model_dump(exclude=differ)
    assert v2.snapshot == "2768FV3XW5ZXYM84XNNG"
    assert v2.branch_files == 0  # format 2 has no ref files: the repo object holds every ref


def test_format_2_history_is_the_documented_one(tmp_path: Path) -> None:
    root = _copy("test-repo-v2", tmp_path)
    info = VersionedRepository(open_storage(str(root)), str(root)).info
    assert info.spec_version == 2
    assert [s.message for s in info.ancestry(info.branches["main"])] == MAIN_MESSAGES
    assert info.ancestry(info.branches["main"])[-1].id == "1CECHNKREP0F1RSTCMT0"  # the spec's initial id
    assert info.deleted_tags == ["deleted"]
    assert info.tags["it works!"] != info.tags["it also works!"]
    my_branch = [s.message for s in info.ancestry(info.branches["my-branch"])]
    assert my_branch[:2] == ["some more structure", "delete a chunk"]


def test_a_split_array_is_read_through_every_manifest(tmp_path: Path) -> None:
    root = _copy("split-repo-v2", tmp_path)
    repo = VersionedRepository(open_storage(str(root)), str(root))
    tip = repo.info.branches["main"]
    split = next(node for node in repo.snapshot(tip).nodes if node.path == "/group1/split")
    assert split.node_data is not None
    manifests = {ref.object_id for ref in split.node_data.manifests}
    assert len(manifests) > 1
    indices = {
        tuple(ref.index)
        for manifest_id in manifests
        for array in repo.manifest(manifest_id).arrays
        if array.node_id == split.id
        for ref in array.refs
    }
    assert indices == {(i, j) for i in range(4) for j in range(4)}  # 10x10 in 3x3 chunks
    assert _inspect(root).chunks_native == 16


def test_a_truncated_snapshot_is_a_corrupt_file_naming_it(tmp_path: Path) -> None:
    root = _copy("test-repo-v2", tmp_path)
    path = root / "snapshots" / "2768FV3XW5ZXYM84XNNG"
    path.write_bytes(path.read_bytes()[: HEADER_SIZE + 10])
    with pytest.raises(CorruptFile, match="2768FV3XW5ZXYM84XNNG"):
        VersionedRepository(open_storage(str(root)), str(root)).snapshot("2768FV3XW5ZXYM84XNNG")


def test_a_manifest_read_as_a_snapshot_is_refused_by_its_file_type(tmp_path: Path) -> None:
    root = _copy("test-repo-v1", tmp_path)
    shutil.copy(root / "manifests" / "SHTEAP8C784YMZSJKBM0", root / "snapshots" / "NXH3M0HJ7EEJ0699DPP0")
    with pytest.raises(CorruptFile, match=r"NXH3M0HJ7EEJ0699DPP0: file type 2 in the header, expected 1"):
        VersionedRepository(open_storage(str(root)), str(root)).snapshot("NXH3M0HJ7EEJ0699DPP0")


def _files(root: Path) -> dict[str, bytes]:
    """Every file of the repository, lakeops' own audit records left out."""
    files = {p.relative_to(root): p for p in root.rglob("*") if p.is_file()}
    return {str(rel): p.read_bytes() for rel, p in files.items() if not rel.parts[0].startswith("_lakeops")}


@pytest.mark.parametrize("name", ["test-repo-v1", "test-repo-v2"])
def test_compaction_is_refused_by_name_and_format(name: str, tmp_path: Path) -> None:
    root = _copy(name, tmp_path)
    before = _files(root)
    version = name[-1]
    with pytest.raises(
        UnsupportedFeature, match=f"compaction of Icechunk format {version} repositories.*does not write its manifests"
    ):
        api.compact(str(root))
    assert _files(root) == before


#: Objects no ref reaches, planted in a copy: an abandoned writer's chunk, manifest, snapshot and log.
PLANTED = [
    "chunks/0000000000000000000G",
    "manifests/0000000000000000001G",
    "snapshots/0000000000000000002G",
    "transactions/0000000000000000002G",
]


def _plant(root: Path) -> None:
    """The planted objects; the snapshot is a real one's bytes (a young snapshot is read, as a root)."""
    real = max((root / "snapshots").iterdir())
    for relative in PLANTED:
        (root / relative).write_bytes(b"never committed")
    shutil.copy(real, root / "snapshots" / "0000000000000000002G")


def _age(root: Path, days: int) -> None:
    old = time.time() - days * 24 * 3600
    for path in root.rglob("*"):
        os.utime(path, (old, old))


@pytest.mark.parametrize("name", ["test-repo-v1", "test-repo-v2", "split-repo-v2"])
def test_garbage_collection_deletes_exactly_the_unreachable_objects(name: str, tmp_path: Path) -> None:
    root = _copy(name, tmp_path)
    inspected = _inspect(root)
    _plant(root)
    before = _files(root)
    _age(root, 10)
    assert _inspect(root).reclaimable_objects == len(PLANTED)

    dry = api.orphans(str(root), OrphansOptions(older_than="8d"), dry_run=True)
    assert _files(root) == before
    report = api.orphans(str(root), OrphansOptions(older_than="8d"))
    assert (dry.deleted_files, report.deleted_files) == (len(PLANTED), len(PLANTED))
    assert (report.deleted_snapshots, report.deleted_manifests, report.deleted_chunks) == (1, 1, 1)
    assert report.deleted_transaction_logs == 1
    assert _files(root) == {path: data for path, data in before.items() if path not in PLANTED}
    after = _inspect(root)
    same = {"duration_s", "oldest_snapshot_age_s", "reclaimable_objects", "reclaimable_bytes"}
    assert after.model_dump(exclude=same) == inspected.model_dump(exclude=same)
    assert after.reclaimable_objects == 0


def test_young_unreachable_objects_are_kept(tmp_path: Path) -> None:
    """A writer's objects before its commit lands look unreachable: the retention protects them (a young
    snapshot is even a root, with its transaction log; the chunk and manifest are too recent)."""
    root = _copy("test-repo-v2", tmp_path)
    _age(root, 10)
    _plant(root)
    report = api.orphans(str(root), OrphansOptions(older_than="8d"))
    assert (report.deleted_files, report.files_too_recent) == (0, 2)
    assert all((root / relative).exists() for relative in PLANTED)


def test_format_1_after_garbage_collection_reads_the_same_through_the_package(tmp_path: Path) -> None:
    root = _copy("test-repo-v1", tmp_path)
    (root / "chunks" / "0000000000000000000G").write_bytes(b"orphan chunk")
    package = icechunk.Repository.open(icechunk.local_filesystem_storage(str(root)))
    lines = {branch: [s.id for s in package.ancestry(branch=branch)] for branch in package.list_branches()}
    view = _package_view(root)
    _age(root, 10)
    assert api.orphans(str(root), OrphansOptions(older_than="8d")).deleted_chunks == 1
    package = icechunk.Repository.open(icechunk.local_filesystem_storage(str(root)))
    assert {branch: [s.id for s in package.ancestry(branch=branch)] for branch in package.list_branches()} == lines
    assert _package_view(root) == view
    session = package.readonly_session("main")
    assert zarr.open_array(session.store, path="group1/small_chunks", mode="r")[:].shape == (5,)


def test_retained_objects_are_verified_and_a_missing_one_is_named(modern_copy: Path) -> None:
    target = resolve_target(str(modern_copy), CatalogOptions(), StorageOptions())
    result = retained_files_exist(target)
    assert result.passed, result.summary
    chunks = sorted((modern_copy / "chunks").iterdir())
    assert result.details["referenced_files"] >= len(chunks)
    manifest = max((modern_copy / "manifests").iterdir())
    chunks[0].unlink()
    manifest.unlink()
    broken = retained_files_exist(target)
    assert not broken.passed
    assert manifest.name in broken.summary and chunks[0].name in broken.summary


def test_quarantined_garbage_of_format_2_is_restored_byte_for_byte(tmp_path: Path) -> None:
    root = _copy("test-repo-v2", tmp_path)
    _plant(root)
    before = _files(root)
    _age(root, 10)
    report = api.orphans(str(root), OrphansOptions(older_than="8d"), quarantine=True)
    assert report.deleted_files == len(PLANTED) and report.quarantine_run is not None
    assert not any((root / relative).exists() for relative in PLANTED)
    api.restore(str(root), RestoreOptions(run_id=report.quarantine_run))
    assert _files(root) == before


def test_transaction_logs_of_expired_ancestors_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spec 2.1: a snapshot's ``pruned_ancestor_tx_logs`` are part of its history. No fixture has any
    (they are written by icechunk 2.1's expiry), so main's tip is given one in the decoded repo object."""
    root = _copy("test-repo-v2", tmp_path)
    _plant(root)
    _age(root, 10)
    pruned = Path(PLANTED[-1]).name
    decoded = read_repo_info

    def with_pruned(storage: Storage, location: str, load: Callable[[str], Snapshot]) -> RepoInfo:
        info = decoded(storage, location, load)
        assert all(not s.pruned_ancestor_tx_logs for s in info.snapshots.values())  # spec 2.0 fixture
        tip = info.snapshots[info.branches["main"]]
        snapshots = info.snapshots | {tip.id: tip.model_copy(update={"pruned_ancestor_tx_logs": [pruned]})}
        return info.model_copy(update={"snapshots": snapshots})

    monkeypatch.setattr(versioned, "read_repo_info", with_pruned)
    report = api.orphans(str(root), OrphansOptions(older_than="8d"))
    assert (report.deleted_files, report.deleted_transaction_logs) == (len(PLANTED) - 1, 0)
    assert (root / "transactions" / pruned).exists()


@pytest.mark.parametrize("operation", ["orphans", "expire"])
def test_a_read_only_repository_is_refused_by_what_changes_it(
    operation: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Format 2's ``RepoStatus``: the fixtures are Online; a ReadOnly one is made in the decoded object.
    Garbage collection deletes and expiry rewrites the repo object: both are refused."""
    root = _copy("test-repo-v2", tmp_path)
    _plant(root)
    _age(root, 10)
    decoded = read_repo_info

    def read_only(storage: Storage, location: str, load: Callable[[str], Snapshot]) -> RepoInfo:
        info = decoded(storage, location, load)
        assert info.status.online
        return info.model_copy(update={"status": RepoStatus(availability=1, limited_availability_reason="migrating")})

    monkeypatch.setattr(versioned, "read_repo_info", read_only)
    before = _files(root)
    what = {"orphans": "garbage collection", "expire": "snapshot expiry"}[operation]
    with pytest.raises(UnsafeOperation, match=rf"repo: the repository is read-only \(migrating\); {what}"):
        if operation == "orphans":
            api.orphans(str(root), OrphansOptions(older_than="8d"))
        else:
            api.expire(str(root), ExpiryOptions(older_than="8d"))
    assert _files(root) == before


@pytest.mark.parametrize(
    ("path", "version", "refused"),
    [
        ("icechunk-seed-format/test-repo", None, []),
        ("modern/icechunk/test-repo-v1", 1, ["compact"]),
        ("modern/icechunk/test-repo-v2", 2, ["compact"]),
    ],
)
def test_inspect_says_which_operations_each_format_allows(path: str, version: int | None, refused: list[str]) -> None:
    """Read in place (inspect writes nothing); each refusal is the reason the operation itself gives."""
    report = _inspect(TESTDATA / path)
    assert (report.format_version, sorted(report.refused_operations)) == (version, refused)
    assert set(report.supported_operations) == {"read", "compact", "expire", "orphans", "cdc"} - set(refused)
    if "compact" in refused:
        with pytest.raises(UnsupportedFeature, match=re.escape(report.refused_operations["compact"])):
            api.compact(str(TESTDATA / path), dry_run=True)
