"""Repositories in Icechunk format 1, the icechunk package's: detection, expiry delegated to the
package, and lakeops' own garbage collection (:mod:`lakeops.icechunk.maintenance.versioned_gc`)
checked against the package's.

Every repository here is written by the package itself (``icechunk`` 1.x with zarr), on local disk or
on the moto S3 endpoint, and read back through the package after lakeops ran its maintenance.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import icechunk
import numpy as np
import pytest
import zarr
from rich.console import Console

from lakeops.errors import InvalidArgument, NotATable, UnsafeOperation, UnsupportedFeature
from lakeops.execution import ThreadExecutor
from lakeops.icechunk.maintenance import delegated
from lakeops.icechunk.maintenance.delegated import DelegatedPlan
from lakeops.icechunk.maintenance.versioned_gc import VersionedGcPlan
from lakeops.ops.detect import detect_format
from lakeops.ops.icechunk import expiry as ops_expiry
from lakeops.ops.icechunk import orphans as ops_orphans
from lakeops.ops.icechunk.orphans import IcechunkGcReport
from lakeops.storage import StorageOptions, open_storage, relative_to

WEEK_MS = 7 * 24 * 3600 * 1000
#: 4 chunks of 256 random float64 (2 KiB each, incompressible): stored as chunk objects, not inlined.
SHAPE, CHUNK = 1024, 256
LOCAL = StorageOptions()


@dataclass(frozen=True)
class History:
    """What :func:`_write_history` committed: snapshot ids and array values by name, the instant
    between ``c1`` and ``c2`` (ms), and the objects the first commit ``c0`` added (relative paths)."""

    ids: dict[str, str]
    values: dict[str, np.ndarray]
    mid_ms: int
    c0_files: frozenset[str]


def _listing(root: str, options: StorageOptions) -> dict[str, tuple[int, int]]:
    """Relative path -> (size, mtime) of every object of the repository."""
    return {relative_to(root, f.path): (f.size, f.mtime_ms) for f in open_storage(root, options).list(root)}


def _commit(repo: Any, branch: str, values: np.ndarray, message: str) -> str:
    session = repo.writable_session(branch)
    group = zarr.open_group(session.store, mode="a")
    array = group["x"] if "x" in group else group.create_array("x", shape=(SHAPE,), chunks=(CHUNK,), dtype="f8")
    array[:] = values
    return str(session.commit(message))


def _write_history(storage: Any, root: str, options: StorageOptions) -> History:
    """main: c0 c1 | c2 c3 (``|`` is ``mid_ms``); tag v1 at c1; branch dev from c0 with d1 after the mid."""
    repo = icechunk.Repository.create(storage)
    rng = np.random.default_rng(7)
    values = {name: rng.random(SHAPE) for name in ("c0", "c1", "c2", "c3", "d1")}
    before = set(_listing(root, options))
    ids = {"c0": _commit(repo, "main", values["c0"], "c0")}
    c0_files = frozenset(set(_listing(root, options)) - before - {"refs/branch.main/ref.json"})
    ids["c1"] = _commit(repo, "main", values["c1"], "c1")
    repo.create_tag("v1", ids["c1"])
    repo.create_branch("dev", ids["c0"])
    time.sleep(0.05)
    mid_ms = int(time.time() * 1000)
    time.sleep(0.05)
    ids["c2"] = _commit(repo, "main", values["c2"], "c2")
    ids["c3"] = _commit(repo, "main", values["c3"], "c3")
    ids["d1"] = _commit(repo, "dev", values["d1"], "d1")
    return History(ids=ids, values=values, mid_ms=mid_ms, c0_files=c0_files)


def _ancestries(storage: Any) -> dict[str, list[str]]:
    repo = icechunk.Repository.open(storage)
    lines = {f"branch {b}": list(repo.ancestry(branch=b)) for b in repo.list_branches()}
    lines |= {f"tag {t}": list(repo.ancestry(tag=t)) for t in repo.list_tags()}
    return {ref: [info.id for info in line] for ref, line in lines.items()}


def _read(storage: Any, **at: str) -> np.ndarray:
    session = icechunk.Repository.open(storage).readonly_session(**at)
    return np.asarray(zarr.open_array(session.store, path="x", mode="r")[:])


def _assert_values(storage: Any, history: History) -> None:
    """Every branch head and tag, and the retained c2, read back exactly what was written."""
    assert np.array_equal(_read(storage, branch="main"), history.values["c3"])
    assert np.array_equal(_read(storage, branch="dev"), history.values["d1"])
    assert np.array_equal(_read(storage, tag="v1"), history.values["c1"])
    assert np.array_equal(_read(storage, snapshot_id=history.ids["c2"]), history.values["c2"])


@dataclass(frozen=True)
class LocalRepo:
    """A package-written repository on local disk and the history it holds."""

    root: str
    history: History
    package_storage: Any

    @classmethod
    def at(cls, root: str, history: History) -> LocalRepo:
        return cls(root, history, icechunk.local_filesystem_storage(root))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> LocalRepo:
    root = str(tmp_path_factory.mktemp("pristine") / "repo")
    return LocalRepo.at(root, _write_history(icechunk.local_filesystem_storage(root), root, LOCAL))


@pytest.fixture
def local_repo(pristine: LocalRepo, tmp_path: Path) -> LocalRepo:
    """A private copy of the package-written repository (``copytree`` keeps modification times)."""
    return LocalRepo.at(str(shutil.copytree(pristine.root, tmp_path / "repo")), pristine.history)


def _mid_retention(repo: LocalRepo) -> tuple[timedelta, int]:
    """A retention whose cutoff falls between c1 and c2 (from the real clock; forced), and now."""
    now_ms = int(time.time() * 1000)
    return timedelta(milliseconds=now_ms - repo.history.mid_ms), now_ms


def _plan(repo: LocalRepo) -> DelegatedPlan:
    """An expiry plan with the cutoff between c1 and c2."""
    retention, now_ms = _mid_retention(repo)
    return delegated.plan_delegated(
        open_storage(repo.root), repo.root, LOCAL, retention=retention, force=True, now_ms=now_ms
    )


def _collect(repo: LocalRepo, *, dry_run: bool, retention: timedelta | None = None) -> IcechunkGcReport:
    """lakeops' garbage collection (threads), the cutoff between c1 and c2 unless ``retention`` is given
    (None there: the default week)."""
    window, now_ms = _mid_retention(repo) if retention is None else (retention, int(time.time() * 1000))
    storage = open_storage(repo.root)
    plan = ops_orphans.plan(repo.root, storage, LOCAL, retention=window, force=True, now_ms=now_ms)
    assert isinstance(plan, VersionedGcPlan)
    return ops_orphans.run(
        plan, LOCAL, executor=ThreadExecutor(), dry_run=dry_run, progress=Console(quiet=True), description=""
    )


# --- detection -------------------------------------------------------------------------------------


def test_a_repository_the_package_wrote_is_detected_as_its_format(local_repo: LocalRepo) -> None:
    storage = open_storage(local_repo.root)
    assert detect_format(storage, local_repo.root) == "icechunk"
    assert delegated.is_package_format(storage, local_repo.root)
    plan = _plan(local_repo)
    assert plan.spec_version == 1
    assert plan.package_version == icechunk.__version__
    assert plan.cutoff_ms == local_repo.history.mid_ms


def test_the_seed_format_test_repository_and_an_empty_directory_are_not(repo_copy: Path, tmp_path: Path) -> None:
    storage = open_storage(str(repo_copy))
    assert not delegated.is_package_format(storage, str(repo_copy))
    assert not delegated.is_package_format(storage, str(tmp_path / "empty"))


def test_a_seed_format_repository_keeps_its_own_expiry_plan(repo_copy: Path) -> None:
    root = str(repo_copy)
    plan = ops_expiry.plan(root, open_storage(root), LOCAL, retention=None, force=False, now_ms=int(time.time() * 1000))
    assert not isinstance(plan, DelegatedPlan)


# --- expiry ----------------------------------------------------------------------------------------


def test_expiry_dry_run_counts_what_would_expire_and_changes_nothing(local_repo: LocalRepo) -> None:
    files = _listing(local_repo.root, LOCAL)
    lines = _ancestries(local_repo.package_storage)
    outcome = delegated.expire_snapshots(_plan(local_repo), dry_run=True)
    # c0 and c1 predate the cutoff; c1 is tag v1's tip, so only c0 leaves every history
    assert outcome.snapshots_expired == 1
    assert _listing(local_repo.root, LOCAL) == files
    assert _ancestries(local_repo.package_storage) == lines


def test_expiry_drops_snapshots_older_than_the_cutoff_from_every_history(local_repo: LocalRepo) -> None:
    ids = local_repo.history.ids
    root = _ancestries(local_repo.package_storage)["branch main"][-1]
    dry = delegated.expire_snapshots(_plan(local_repo), dry_run=True)
    outcome = delegated.expire_snapshots(_plan(local_repo), dry_run=False)
    assert outcome.snapshots_expired == dry.snapshots_expired == 1
    assert _ancestries(local_repo.package_storage) == {
        "branch main": [ids["c3"], ids["c2"], root],
        "branch dev": [ids["d1"], root],
        "tag v1": [ids["c1"], root],
    }
    _assert_values(local_repo.package_storage, local_repo.history)


def test_the_default_week_keeps_a_fresh_history(local_repo: LocalRepo) -> None:
    lines = _ancestries(local_repo.package_storage)
    files = _listing(local_repo.root, LOCAL)
    now_ms = int(time.time() * 1000)

    plan = delegated.plan_delegated(
        open_storage(local_repo.root), local_repo.root, LOCAL, retention=None, force=False, now_ms=now_ms
    )
    assert plan.cutoff_ms == now_ms - WEEK_MS
    assert delegated.expire_snapshots(plan, dry_run=False).snapshots_expired == 0
    assert _collect(local_repo, dry_run=False, retention=timedelta(days=7)).deleted_files == 0
    assert _ancestries(local_repo.package_storage) == lines
    assert set(_listing(local_repo.root, LOCAL)) == set(files)


# --- garbage collection ----------------------------------------------------------------------------


def test_garbage_collection_without_expiry_deletes_nothing(local_repo: LocalRepo) -> None:
    files = _listing(local_repo.root, LOCAL)
    report = _collect(local_repo, dry_run=False)
    assert (report.deleted_files, report.objects_reachable) == (0, report.objects_scanned)
    assert _listing(local_repo.root, LOCAL) == files


def test_garbage_collection_after_expiry_deletes_exactly_the_unreachable_objects(local_repo: LocalRepo) -> None:
    delegated.expire_snapshots(_plan(local_repo), dry_run=False)
    files = _listing(local_repo.root, LOCAL)
    dry = _collect(local_repo, dry_run=True)
    assert _listing(local_repo.root, LOCAL) == files

    report = _collect(local_repo, dry_run=False)
    figures = ("deleted_snapshots", "deleted_manifests", "deleted_chunks", "deleted_transaction_logs")
    assert [getattr(report, name) for name in figures] == [getattr(dry, name) for name in figures]
    assert [getattr(report, name) for name in figures] == [1, 1, SHAPE // CHUNK, 1]
    deleted = set(files) - set(_listing(local_repo.root, LOCAL))
    assert deleted == local_repo.history.c0_files  # c0's snapshot, manifest, chunks and transaction log
    assert report.deleted_bytes == sum(files[path][0] for path in deleted)
    _assert_values(local_repo.package_storage, local_repo.history)


def test_garbage_collection_deletes_what_the_package_deletes(local_repo: LocalRepo, tmp_path: Path) -> None:
    """A deleted branch and tag, and an abandoned writer's chunks, beside the expired c0: lakeops and
    ``Repository.garbage_collect`` (on a copy in the same state) leave exactly the same files."""
    repo = icechunk.Repository.open(local_repo.package_storage)
    repo.create_branch("scratch", local_repo.history.ids["c1"])
    scratch = _commit(repo, "scratch", np.zeros(SHAPE), "scratch")
    repo.create_tag("gone", scratch)
    repo.delete_tag("gone")
    repo.delete_branch("scratch")
    session = repo.writable_session("main")
    zarr.open_array(session.store, path="x", mode="a")[:] = np.ones(SHAPE)  # written, never committed
    delegated.expire_snapshots(_plan(local_repo), dry_run=False)
    package_copy = shutil.copytree(local_repo.root, tmp_path / "package-copy")
    retention, _ = _mid_retention(local_repo)
    old = time.time() - retention.total_seconds() - 60
    for path in [*Path(local_repo.root).rglob("*"), *package_copy.rglob("*")]:
        os.utime(path, (old, old))  # everything past the cutoff: only reachability decides
    cutoff = datetime.fromtimestamp(time.time() - retention.total_seconds(), UTC)
    icechunk.Repository.open(icechunk.local_filesystem_storage(str(package_copy))).garbage_collect(cutoff)

    report = _collect(local_repo, dry_run=False, retention=retention)
    assert report.deleted_snapshots == 2  # c0 and the scratch commit
    assert set(_listing(local_repo.root, LOCAL)) == set(_listing(str(package_copy), LOCAL))
    _assert_values(local_repo.package_storage, local_repo.history)


def test_a_location_the_package_cannot_open_is_not_a_table(tmp_path: Path) -> None:
    root = str(tmp_path / "nothing")
    plan = delegated.plan_delegated(open_storage(root), root, LOCAL, retention=None, force=False, now_ms=0)
    assert plan.spec_version is None
    with pytest.raises(NotATable, match="nothing: the icechunk package cannot open"):
        delegated.expire_snapshots(plan, dry_run=True)


# --- safety and installation -----------------------------------------------------------------------


@pytest.mark.parametrize(("operation", "flag"), [("expire", "--force"), ("orphans", "--force-short-retention")])
def test_a_retention_under_a_week_needs_the_override(local_repo: LocalRepo, operation: str, flag: str) -> None:
    storage = open_storage(local_repo.root)
    planner = ops_expiry.plan if operation == "expire" else ops_orphans.plan

    def plan(retention: timedelta, force: bool) -> DelegatedPlan | VersionedGcPlan:
        found = planner(local_repo.root, storage, LOCAL, retention=retention, force=force, now_ms=WEEK_MS)
        assert isinstance(found, DelegatedPlan | VersionedGcPlan)
        return found

    with pytest.raises(UnsafeOperation, match=f"retention 6d is shorter than the default 7d.*Pass {flag}"):
        plan(timedelta(days=6), force=False)
    with pytest.raises(InvalidArgument, match="negative"):
        plan(timedelta(days=-1), force=True)
    assert plan(timedelta(days=6), force=True).cutoff_ms == WEEK_MS - 6 * 24 * 3600 * 1000
    assert plan(timedelta(days=8), force=False).retention == timedelta(days=8)


def test_without_the_package_installed_expiry_says_how_to_install_it_and_gc_needs_none(
    local_repo: LocalRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "icechunk", None)  # ``import icechunk`` now raises ImportError
    storage = open_storage(local_repo.root)
    assert delegated.is_package_format(storage, local_repo.root)  # detection needs no package
    with pytest.raises(UnsupportedFeature, match=r"icechunk package.*not installed.*pip install 'lakeops\[icechunk\]'"):
        ops_expiry.plan(local_repo.root, storage, LOCAL, retention=None, force=False, now_ms=0)
    gc_plan = ops_orphans.plan(local_repo.root, storage, LOCAL, retention=None, force=False, batch_size=10, now_ms=0)
    assert isinstance(gc_plan, VersionedGcPlan)


# --- S3 --------------------------------------------------------------------------------------------


@pytest.mark.s3
def test_expiry_and_garbage_collection_through_the_reports_on_s3(s3_bucket: Any) -> None:
    root = f"{s3_bucket.uri}/repo"
    options = s3_bucket.options
    package_storage = icechunk.s3_storage(
        bucket=s3_bucket.name,
        prefix="repo",
        endpoint_url=options.endpoint_url,
        allow_http=True,
        force_path_style=True,
        from_env=True,
    )
    history = _write_history(package_storage, root, options)
    storage = open_storage(root, options)
    assert delegated.is_package_format(storage, root)
    now_ms = history.mid_ms + WEEK_MS  # the default week then ends between c1 and c2

    expiry_plan = ops_expiry.plan(root, storage, options, retention=None, force=False, now_ms=now_ms)
    assert isinstance(expiry_plan, DelegatedPlan)
    started = time.monotonic()
    dry = ops_expiry.run(expiry_plan, options, dry_run=True, started=started)
    report = ops_expiry.run(expiry_plan, options, dry_run=False, started=started)
    assert (dry.snapshots_expired, report.snapshots_expired) == (1, 1)
    assert report.format == delegated.PACKAGE_FORMAT
    assert report.delegated_to == f"icechunk {icechunk.__version__}"
    assert report.retention == "7d"

    files = _listing(root, options)
    gc_plan = ops_orphans.plan(root, storage, options, retention=None, force=False, batch_size=10, now_ms=now_ms)
    assert isinstance(gc_plan, VersionedGcPlan)
    collect = {"executor": ThreadExecutor(), "progress": Console(quiet=True), "description": "", "started": started}
    gc_dry = ops_orphans.run(gc_plan, options, dry_run=True, **collect)
    assert _listing(root, options) == files
    gc = ops_orphans.run(gc_plan, options, dry_run=False, **collect)
    assert (gc_dry.deleted_files, gc.deleted_files) == (len(history.c0_files), len(history.c0_files))
    assert gc.deleted_chunks == SHAPE // CHUNK
    assert set(files) - set(_listing(root, options)) == history.c0_files
    _assert_values(package_storage, history)
