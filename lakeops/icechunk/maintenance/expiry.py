"""Icechunk snapshot expiry: superseded branch files stop retaining their snapshots.

Spec basis: a branch is a sequence of files, "the latest sequence always appears first" ("Creating
and Updating Branches"), and readers only ever open the first one ("Read from Repository" > "From
Branch"); tags are immutable and "cannot be deleted" ("Tags"). Every older sequence file is history:
it names a snapshot that was the branch head once. Snapshots carry no expiry marker in this format,
so what retains a snapshot is a ref file naming it (see :mod:`.orphans`); expiry removes ref files.

Rules (``cutoff = now - retention``, ages by the object store's modification time, see
:mod:`.retention`):

* The newest file of every branch always stays; tags are never touched.
* An older file goes when it has been **superseded for longer than the retention**: both the file
  and the file that superseded it (the next newer one) are older than the cutoff. Dating a file by
  its successor protects readers that listed the branch just before the successor landed and are
  still reading the old head.
* A snapshot stops being retained when no remaining branch file and no tag names it; the next
  garbage collection (``lakeops orphans``) deletes it and whatever only it reached. Ancestry of the
  kept heads then ends early: :meth:`Repository.ancestry` continues from a head's embedded
  ``short_term_history`` where parent files are gone, so reading every head still works.

Before anything is deleted every ref file is parsed and every snapshot still retained afterwards is
read and decoded with its manifests, so a damaged ref, snapshot or manifest stops the run with a clear
error and nothing deleted: expiring the history of a head that cannot be read would leave garbage
collection free to delete the last readable versions. Deleting is metadata only (a few
small ref files), done on the driver; :func:`execute_expiry` re-checks each file just before.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from lakeops.errors import NotATable, UnsafeOperation
from lakeops.icechunk import refs
from lakeops.icechunk.maintenance.retention import resolve_retention
from lakeops.icechunk.repository import Repository
from lakeops.quarantine import remove
from lakeops.storage import FileInfo, Storage, StorageOptions, is_within, join, normalize, open_storage
from lakeops.units import cutoff_ms as compute_cutoff

__all__ = ["ExpiredBranchFile", "IcechunkExpiryPlan", "execute_expiry", "plan_expiry", "require_repository"]


class ExpiredBranchFile(BaseModel):
    """One superseded branch sequence file to remove."""

    model_config = ConfigDict(frozen=True)

    branch: str
    sequence: int
    path: str
    size: int
    snapshot_id: str
    superseded_by: int


class IcechunkExpiryPlan(BaseModel):
    """What one expiry run removes, computed from one listing of ``refs/``."""

    model_config = ConfigDict(frozen=True)

    format: ClassVar[str] = "icechunk"

    table_root: str
    retention: timedelta
    cutoff_ms: int
    branch_tips: dict[str, int]
    tags: dict[str, str]
    branch_files: int
    files: list[ExpiredBranchFile]
    #: Snapshot ids no ref names once the files are gone: garbage collection may then delete them.
    expired_snapshots: list[str]
    #: Snapshot ids still named by a branch file or a tag after the run.
    retained_snapshots: list[str]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    def expire(self, storage_options: StorageOptions, *, dry_run: bool, quarantine_run: str | None) -> dict[str, Any]:
        """Remove the planned files (:func:`execute_expiry`) unless ``dry_run``; the expiry report's
        figures, named as its fields (the paths listed in a dry run)."""
        if not dry_run:
            execute_expiry(self, open_storage(self.table_root, storage_options), quarantine_run=quarantine_run)
        return {
            "branches": len(self.branch_tips),
            "tags": len(self.tags),
            "branch_files": self.branch_files,
            "deleted_branch_files": len(self.files),
            "deleted_bytes": self.bytes,
            "snapshots_scanned": len(self.expired_snapshots) + len(self.retained_snapshots),
            "snapshots_expired": len(self.expired_snapshots),
            "snapshots_retained": len(self.retained_snapshots),
            "paths": [f.path for f in self.files] if dry_run else [],
        }


def require_repository(repo: Repository) -> None:
    """Refuse a location without ``refs/branch.main/`` (the spec's test for a repository)."""
    if "main" not in repo.branches():
        raise NotATable(f"{repo.root}: not an Icechunk repository (no refs/branch.main/)")


def _ref_files(storage: Storage, root: str) -> dict[str, FileInfo]:
    return {info.path: info for info in storage.list(join(root, refs.REFS_DIR))}


def plan_expiry(
    storage: Storage,
    root: str,
    *,
    retention: timedelta | None,
    force: bool,
    now_ms: int,
    repo: Repository | None = None,
) -> IcechunkExpiryPlan:
    """Choose the branch files to remove (rules in the module docs); reads and decodes every head first
    (through ``repo`` if given)."""
    repo = Repository(storage, root) if repo is None else repo
    require_repository(repo)
    window = resolve_retention(repo.root, retention, override=force, override_flag="--force")
    cutoff = compute_cutoff(window, now_ms)
    listed = _ref_files(storage, repo.root)
    tags = {name: refs.read_tag(storage, repo.root, name).snapshot_id for name in repo.tags()}
    tips: dict[str, int] = {}
    expired: list[ExpiredBranchFile] = []
    kept_ids: set[str] = set(tags.values())
    total = 0
    for branch in repo.branches():
        history = repo.branch_history(branch)  # newest first; parses (validates) every file
        total += len(history)
        tips[branch] = history[0].sequence
        kept_ids.add(history[0].snapshot_id)
        for newer, version in zip(history, history[1:], strict=False):
            info = listed[version.path]
            if listed[newer.path].mtime_ms < cutoff and info.mtime_ms < cutoff:
                expired.append(
                    ExpiredBranchFile(
                        branch=branch,
                        sequence=version.sequence,
                        path=version.path,
                        size=info.size,
                        snapshot_id=version.snapshot_id,
                        superseded_by=newer.sequence,
                    )
                )
            else:
                kept_ids.add(version.snapshot_id)
    repo.reachable(sorted(kept_ids))  # every retained snapshot and its manifests must decode before anything goes
    return IcechunkExpiryPlan(
        table_root=repo.root,
        retention=window,
        cutoff_ms=cutoff,
        branch_tips=tips,
        tags=tags,
        branch_files=total,
        files=expired,
        expired_snapshots=sorted({f.snapshot_id for f in expired} - kept_ids),
        retained_snapshots=sorted(kept_ids),
    )


def execute_expiry(plan: IcechunkExpiryPlan, storage: Storage, *, quarantine_run: str | None = None) -> int:
    """Delete the planned branch files (``quarantine_run``: move them to that run's trash,
    :mod:`lakeops.quarantine`); returns how many.

    Each file is re-checked first: inside its branch directory (and, in :func:`lakeops.quarantine.remove`,
    inside the root with symlinks resolved), and still superseded by a newer file of its branch (files
    are only ever added, so a plan never removes a tip; a branch whose newer files vanished is refused).
    """
    paths: list[tuple[str, int, str]] = []
    for item in plan.files:
        location = normalize(item.path)
        directory = refs.branch_dir(plan.table_root, item.branch)
        if not is_within(directory, location):
            raise UnsafeOperation(
                f"{plan.table_root}: refusing to delete {location}: not a file of branch {item.branch!r}"
            )
        tip = refs.branch_tip(storage, plan.table_root, item.branch)
        if tip.sequence <= item.sequence:
            raise UnsafeOperation(
                f"{location}: branch {item.branch!r} of {plan.table_root} has no newer file than sequence "
                f"{item.sequence} any more; refusing to remove its head"
            )
        paths.append((location, item.size, "branch_file"))
    remove(storage, plan.table_root, paths, quarantine_run=quarantine_run, operation="expire")
    return len(paths)
