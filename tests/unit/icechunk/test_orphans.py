"""Garbage collection (lakeops.icechunk.maintenance.orphans), run as ``lakeops orphans`` runs it: plan,
``recheck``, then every batch through ``lakeops.deletion.delete_batch``.

Proves: after expiry and gc every head reads back identical and every object it reaches exists;
exactly the unreachable objects past the age floor go; young objects (a concurrent writer's) stay and
young snapshot files are roots; ``recheck`` keeps what a commit landing after the plan made reachable;
damaged refs, ids and MessagePack files stop every plan with an error naming the file, deleting nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from icechunk_repos import (
    VIRTUAL,
    all_files,
    build_history,
    contents,
    days_from_now_ms,
    heads,
    missing_objects,
    object_ids,
    run_expiry,
    run_gc,
    set_age,
    storage_options,
)

from lakeops.deletion import delete_batch
from lakeops.errors import CorruptFile, LakeopsError, UnsafeOperation
from lakeops.icechunk import refs
from lakeops.icechunk.maintenance.expiry import plan_expiry
from lakeops.icechunk.maintenance.orphans import TEMP_KIND, GcPlan, plan_gc, recheck
from lakeops.icechunk.maintenance.summary import summarize
from lakeops.icechunk.manifest import ChunkRef
from lakeops.icechunk.repository import Repository
from lakeops.icechunk.writer import ChangeSet, commit
from lakeops.ops.icechunk.orphans import IcechunkGcReport
from lakeops.storage import Storage, StorageOptions, join, open_storage
from lakeops.storage.local import TMP_SUFFIX

TEST_VIRTUAL = "s3://testbucket/path/to/python/chunk-1"


def _plan(storage: Storage, root: str, now_ms: int) -> GcPlan:
    return plan_gc(storage, root, StorageOptions(), retention=None, force=False, now_ms=now_ms)


def test_the_test_repository_after_expiry_and_gc(repo_copy: Path) -> None:
    root, storage = str(repo_copy), open_storage(str(repo_copy))
    set_age(repo_copy, 30)
    before, files_before = contents(storage, root), all_files(storage, root)
    now = days_from_now_ms(0)

    untouched = plan_gc(storage, root, StorageOptions(), retention=None, force=False, now_ms=now)
    assert untouched.candidates == []  # every branch file is a root until expiry removes it
    assert untouched.objects_scanned == 6 + 4 + 4 and untouched.objects_reachable == 14

    run_expiry(storage, root, now)
    repo = Repository(storage, root)
    live = repo.reachable(heads(repo).values())
    plan = run_gc(storage, root, now)

    gone = files_before - all_files(storage, root)
    assert {c.path for c in plan.candidates} == {p for p in gone if "/refs/" not in p}
    assert {(c.kind, c.path.rsplit("/", 1)[1]) for c in plan.candidates} == {
        ("snapshot", "WT2Z2GQ09G0RTAEQ3D70"),  # Repository initialized
        ("snapshot", "J4DQH8NAGRYC10YGT7F0"),  # empty structure
        ("snapshot", "F8R612XQGFW9CR08HTN0"),  # fill data
        ("manifest", "PGFG33J5SJNP38N7NFV0"),  # fill data's manifest
        ("chunk", "Q7HMN2SYVTRD4YP93780"),  # big_chunks 0/0 before the virtual reference replaced it
    }
    # Exactly the unreachable objects went: what remains is what the heads reach.
    assert object_ids(storage, root, "snapshots") == live.snapshots
    assert object_ids(storage, root, "manifests") == live.manifests
    assert object_ids(storage, root, "chunks") == live.chunks
    assert contents(storage, root) == before
    assert missing_objects(storage, root) == []
    after = Repository(storage, root)
    main = after.resolve("main")
    assert after.read_chunk(main, "group1/big_chunks", (0, 0)) == before["branch main"]["/group1/big_chunks"][2][(0, 0)]
    assert after.reachable([main]).virtual_locations == {TEST_VIRTUAL}
    # Ancestry is shorter in files but still complete from the kept heads' embedded history.
    assert [(e.message, e.file_id is None) for e in after.ancestry(main)] == [
        ("set virtual chunk", False),
        ("fill data", True),
        ("empty structure", True),
        ("Repository initialized", True),
    ]
    # The newest file of every branch and both tags stay.
    assert {p.rsplit("/refs/", 1)[1] for p in all_files(storage, root) if "/refs/" in p} == {
        "branch.main/ZZZZZZZW.json",
        "branch.my-branch/ZZZZZZZX.json",
        "tag.it works!/ref.json",
        "tag.it also works!/ref.json",
    }
    assert run_gc(storage, root, now).candidates == []  # nothing left to collect


def test_many_commits_expire_and_collect(any_storage_root: tuple[str, Storage], request: pytest.FixtureRequest) -> None:
    root, storage = any_storage_root
    build_history(storage, root)
    before = contents(storage, root)
    chunks_before = object_ids(storage, root, "chunks")
    later = days_from_now_ms(8)  # everything written so far is 8 days old

    expired = run_expiry(storage, root, later)
    assert len(expired.files) == 13 + 2  # main: 14 files, side: 3 files; the newest of each stays
    plan = run_gc(storage, root, later, storage_options(root, request))

    assert contents(storage, root) == before
    assert missing_objects(storage, root) == []
    repo = Repository(storage, root)
    live = repo.reachable(heads(repo).values())
    assert object_ids(storage, root, "chunks") == live.chunks < chunks_before
    assert object_ids(storage, root, "snapshots") == live.snapshots == set(heads(repo).values())
    assert VIRTUAL.location in live.virtual_locations
    kinds = {c.kind for c in plan.candidates}
    assert kinds == {"snapshot", "manifest", "chunk"}
    assert all(b.protected == [join(repo.root, "refs")] for b in plan.batches)


def test_young_objects_stay_and_young_snapshots_are_roots(tmp_path: Path) -> None:
    location = tmp_path / "repo"
    root, storage = str(location), open_storage(str(location))
    build_history(storage, root, commits=4)
    # A concurrent writer: its commit is written but the branch file not yet (we remove it again).
    pending = commit(storage, root, ChangeSet().set_chunk("/data/line", (47,), b"pending"), message="pending")
    Path(refs.branch_tip(storage, root, "main").path).unlink()
    set_age(location, 30)
    snapshot_file = Path(Repository(storage, root).snapshot_path(pending.snapshot_id))
    set_age(snapshot_file, 0)
    stray = Path(Repository(storage, root).chunk_path("0" * 20))
    stray.write_bytes(b"a writer's chunk, not referenced yet")
    readme = location / "chunks" / "README"
    readme.write_text("not an object id: never ours to judge")

    plan = _plan(storage, root, days_from_now_ms(0))
    assert plan.young_snapshots == [pending.snapshot_id]
    paths = {c.path for c in plan.candidates}
    repo = Repository(storage, root)
    pending_objects = {repo.chunk_path(pending.chunk_ids[0]), repo.manifest_path(pending.manifest_id or "")}
    assert not paths & pending_objects  # old, but the young snapshot reaches them
    assert str(stray) not in paths and str(readme) not in paths
    assert plan.objects_too_recent == 1 and plan.unrecognised_files == 1

    set_age(snapshot_file, 30)  # the writer never committed: past the floor it is garbage
    plan = run_gc(storage, root, days_from_now_ms(0))
    assert pending_objects | {str(snapshot_file)} <= {c.path for c in plan.candidates}
    assert stray.exists() and readme.exists() and not snapshot_file.exists()
    assert missing_objects(storage, root) == []


def test_recheck_keeps_what_a_later_commit_made_reachable(tmp_path: Path) -> None:
    location = tmp_path / "repo"
    root, storage = str(location), open_storage(str(location))
    build_history(storage, root, commits=4)
    now = days_from_now_ms(8)
    run_expiry(storage, root, now)
    plan = _plan(storage, root, now)
    repo = Repository(storage, root)
    doomed = next(c for c in plan.candidates if c.kind == "chunk")
    chunk_id = doomed.path.rsplit("/", 1)[1]
    # Between plan and delete a commit lands that points a chunk at the old object.
    ref = ChunkRef(chunk_id, 0, doomed.size)
    landed = commit(storage, root, ChangeSet().set_chunk_ref("/data/line", (46,), ref), message="reuse")

    checked = recheck(plan, storage)
    assert doomed not in checked.candidates and len(checked.candidates) == len(plan.candidates) - 1
    assert checked.objects_reachable == plan.objects_reachable + 1
    assert recheck(checked, storage) == checked  # nothing moved since
    for batch in checked.batches:
        delete_batch(batch)
    assert Repository(storage, root).read_chunk(landed.snapshot_id, "/data/line", (46,)) == repo.read_native_chunk(ref)
    assert missing_objects(storage, root) == []


def test_short_retention_needs_the_override(tmp_path: Path) -> None:
    location = tmp_path / "repo"
    root, storage = str(location), open_storage(str(location))
    build_history(storage, root, commits=2)
    run_expiry(storage, root, days_from_now_ms(8))
    files = all_files(storage, root)
    with pytest.raises(UnsafeOperation, match=r"retention 1h is shorter than the default 7d.*--force-short-retention"):
        plan_gc(storage, root, StorageOptions(), retention=timedelta(hours=1), force=False, now_ms=days_from_now_ms(0))
    assert all_files(storage, root) == files
    forced = plan_gc(storage, root, StorageOptions(), retention=timedelta(0), force=True, now_ms=days_from_now_ms(0))
    assert forced.candidates and forced.objects_too_recent == 0


def test_batches_never_delete_refs(tmp_path: Path) -> None:
    location = tmp_path / "repo"
    root, storage = str(location), open_storage(str(location))
    build_history(storage, root, commits=2)
    run_expiry(storage, root, days_from_now_ms(8))
    plan = _plan(storage, root, days_from_now_ms(8))
    ref_file = refs.branch_tip(storage, root, "main").path
    batch = plan.batches[0]
    forged = batch.model_copy(update={"files": [*batch.files, batch.files[0].model_copy(update={"path": ref_file})]})
    with pytest.raises(UnsafeOperation, match="inside refs"):
        delete_batch(forged)
    assert Path(ref_file).exists() and all(Path(c.path).exists() for c in batch.files)


def _corrupt_ref_json(root: Path, repo: Repository) -> str:
    path = Path(refs.branch_history(repo.storage, repo.root, "main")[3].path)  # an old file, not the tip
    path.write_text('{"snapshot": "WT2Z2GQ09G0RTAEQ3D70"')
    return str(path)


def _ref_id_not_base32(root: Path, repo: Repository) -> str:
    path = Path(refs.tag_path(repo.root, "middle"))
    path.write_text('{"snapshot":"WT2Z2GQ09G0RTAEQ3DIU"}')
    return str(path)


def _truncated_snapshot(root: Path, repo: Repository) -> str:
    path = Path(repo.snapshot_path(repo.resolve("side")))
    path.write_bytes(path.read_bytes()[:-9])
    return str(path)


def _truncated_manifest(root: Path, repo: Repository) -> str:
    manifest = repo.read_snapshot(repo.resolve("main")).manifest_files[0].id
    path = Path(repo.manifest_path(manifest))
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    return str(path)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (_corrupt_ref_json, "ref file is not valid JSON"),
        (_ref_id_not_base32, "is not Crockford base32"),
        (_truncated_snapshot, "snapshot"),
        (_truncated_manifest, "manifest"),
    ],
)
def test_bad_input_stops_every_plan_and_deletes_nothing(
    tmp_path: Path, damage: Callable[[Path, Repository], str], message: str
) -> None:
    location = tmp_path / "repo"
    root, storage = str(location), open_storage(str(location))
    build_history(storage, root, commits=4)
    set_age(location, 30)
    broken = damage(location, Repository(storage, root))
    files = all_files(storage, root)
    now = days_from_now_ms(0)
    for plan in (
        lambda: plan_expiry(storage, root, retention=None, force=False, now_ms=now),
        lambda: plan_gc(storage, root, StorageOptions(), retention=None, force=False, now_ms=now),
        lambda: summarize(storage, root, now_ms=now),
    ):
        with pytest.raises(LakeopsError, match=message) as raised:
            plan()
        assert broken in str(raised.value)
        assert isinstance(raised.value, CorruptFile)
    assert all_files(storage, root) == files


def test_abandoned_temp_files_go_past_the_age_floor(tmp_path: Path) -> None:
    """A local write killed between staging and rename/link leaves ``.<name>.<random>.lakeops-tmp``
    beside its target, in the object directories and in a branch's ref directory; gc deletes the old
    ones (kind ``temp``), keeps a fresh one (it may be a write in progress), and nothing else changes."""
    location = tmp_path / "repo"
    root, storage = str(location), open_storage(str(location))
    build_history(storage, root, commits=3)
    set_age(location, 30)
    tip = refs.branch_tip(storage, root, "main")
    next_ref = refs.branch_file_name(tip.sequence + 1)
    old = [
        location / "chunks" / f".{'1' * 20}.k2x9q1{TMP_SUFFIX}",
        location / "manifests" / f".{'2' * 20}.a8d0m3{TMP_SUFFIX}",
        location / "snapshots" / f".{'3' * 20}.p4w7z2{TMP_SUFFIX}",
        Path(tip.path).parent / f".{next_ref}.r5t6y7{TMP_SUFFIX}",
    ]
    fresh = location / "chunks" / f".{'4' * 20}.b1c2d3{TMP_SUFFIX}"
    for path in [*old, fresh]:
        path.write_bytes(b"half a write")
    for path in old:
        set_age(path, 30)
    before, files_before = contents(storage, root), all_files(storage, root)
    assert refs.branch_tip(storage, root, "main") == tip  # the staging file is no ref

    plan = run_gc(storage, root, days_from_now_ms(0))

    assert {(c.kind, c.path) for c in plan.candidates} == {(TEMP_KIND, str(p)) for p in old}
    assert plan.objects_too_recent == 1 and plan.unrecognised_files == 0
    assert all_files(storage, root) == files_before - {str(p) for p in old}
    assert fresh.exists()
    assert contents(storage, root) == before and missing_objects(storage, root) == []
    report = IcechunkGcReport(format=plan.format, table=root, **plan.report_fields(dry_run=False))
    assert report.deleted_temp_files == len(old) == report.deleted_files
