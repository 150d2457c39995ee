"""Garbage collection of Icechunk format 1 and 2 repositories, done by lakeops itself.

Spec basis (https://github.com/earth-mover/icechunk/blob/main/docs/docs/spec.md): "Storage Operations"
(deletes, for garbage collection), "File Layout" (objects live in ``snapshots/``, ``manifests/``,
``chunks/``, ``transactions/``), "Snapshot Files" and "Chunk Manifest Files" (what names what),
"Transaction Log Files" (each snapshot's log is ``transactions/{snapshot id}``).

**Retained snapshots** (the roots), with ``cutoff = now - retention``:

1. every snapshot on the ancestry of a branch or a (not deleted) tag — history is cut by expiry
   (:mod:`.versioned_expiry`, which deletes nothing), never by garbage collection;
2. format 2: every snapshot the repo object lists, so nothing the only mutable object names is ever
   deleted and garbage collection never rewrites it: expiry removes the expired snapshots' entries,
   and the collection after it deletes their files;
3. every snapshot file younger than the cutoff: it may be a concurrent writer's, not committed yet.

**Reachable**: the roots' snapshot files and transaction logs, the transaction logs of their expired
ancestors (spec 2.1's ``pruned_ancestor_tx_logs``: part of a snapshot's full transaction history),
the manifests they name, the native chunks those manifests name.

**Deleted**: every object of the four directories whose name is an id, not reachable, last modified
before the cutoff. Nothing else is listed: ``refs/``, the ``repo`` object, ``overwritten/`` and
``config.yaml`` are never candidates, and batches refuse ``refs/`` and ``repo`` besides. Just before
deleting, the roots are read again; if they changed (a commit, a branch
reset), candidates that became reachable are dropped.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from lakeops.deletion import Candidate, DeleteBatch, make_batches
from lakeops.icechunk.maintenance.orphans import (
    DEFAULT_BATCH_SIZE,
    CollectionPlan,
    Tally,
    collection_window,
    scan_directory,
)
from lakeops.icechunk.refs import REFS_DIR
from lakeops.icechunk.repo_info import REPO_OBJECT
from lakeops.icechunk.repository import CHUNKS_DIR, MANIFESTS_DIR, SNAPSHOTS_DIR
from lakeops.icechunk.versioned import TRANSACTIONS_DIR, Reached, VersionedRepository
from lakeops.storage import FileInfo, Storage, StorageOptions, join

__all__ = ["KINDS", "VersionedGcPlan", "plan_versioned_gc"]

#: Candidate kind -> its directory.
KINDS = {
    "snapshot": SNAPSHOTS_DIR,
    "manifest": MANIFESTS_DIR,
    "chunk": CHUNKS_DIR,
    "transaction_log": TRANSACTIONS_DIR,
}


def _roots(repo: VersionedRepository, snapshots: dict[str, FileInfo], cutoff: int) -> list[str]:
    """The retained snapshots (module docs), sorted."""
    info = repo.info
    tips = [*info.branches.values(), *info.tags.values()]
    retained = {entry.id for tip in tips for entry in info.ancestry(tip)}
    if info.spec_version >= 2:
        retained |= info.snapshots.keys()
    retained |= {name for name, file in snapshots.items() if file.mtime_ms >= cutoff}
    return sorted(retained)


def _held(reached: Reached, kind: str) -> set[str]:
    by_kind = {"manifest": reached.manifests, "chunk": reached.chunks, "transaction_log": reached.transaction_logs}
    return by_kind.get(kind, reached.snapshots)


def _batches(root: str, options: StorageOptions, candidates: list[Candidate], size: int) -> list[DeleteBatch]:
    return make_batches(root, options, candidates, size, protected=[join(root, REFS_DIR), join(root, REPO_OBJECT)])


class VersionedGcPlan(CollectionPlan):
    """Immutable, printable plan computed from one listing of a format 1 or 2 repository."""

    spec_version: int
    roots: list[str]

    @property
    def retained_snapshots(self) -> int:
        return len(self.roots)

    def rechecked(self, storage: Storage) -> VersionedGcPlan:
        """The plan re-validated just before deleting (module docs)."""
        repo = VersionedRepository(storage, self.table_root)
        snapshots, _, _ = scan_directory(storage, join(self.table_root, SNAPSHOTS_DIR))
        roots = _roots(repo, snapshots, self.cutoff_ms)
        if roots == self.roots:
            return self
        reached = repo.reached(set(roots))
        kept = [c for c in self.candidates if c.path.rsplit("/", 1)[1] not in _held(reached, c.kind)]
        return self.model_copy(
            update={
                "roots": roots,
                "objects_reachable": self.objects_reachable + len(self.candidates) - len(kept),
                "batches": _batches(self.table_root, self.storage, kept, self.batch_size),
            }
        )

    def deleted_by_kind(self, kinds: Counter[str]) -> dict[str, int]:
        return {
            "deleted_snapshots": kinds["snapshot"],
            "deleted_manifests": kinds["manifest"],
            "deleted_chunks": kinds["chunk"],
            "deleted_transaction_logs": kinds["transaction_log"],
        }


def plan_versioned_gc(
    storage: Storage,
    root: str,
    storage_options: StorageOptions,
    *,
    retention: timedelta | None,
    force: bool,
    now_ms: int,
    batch_size: int = DEFAULT_BATCH_SIZE,
    repo: VersionedRepository | None = None,
) -> VersionedGcPlan:
    """List the repository once and choose the objects to delete (rules in the module docs). A format 2
    repository whose ``RepoStatus`` is not Online (read-only or offline) is refused: deleting is a change
    (``repo``: the reader to plan through)."""
    repo = VersionedRepository(storage, root) if repo is None else repo
    repo.info.require_online("garbage collection")
    window, cutoff = collection_window(repo.root, retention, force=force, now_ms=now_ms)
    objects: dict[str, dict[str, FileInfo]] = {}
    unrecognised = 0
    for kind, directory in KINDS.items():
        objects[kind], temps, others = scan_directory(storage, join(repo.root, directory))
        unrecognised += len(temps) + others
    roots = _roots(repo, objects["snapshot"], cutoff)
    reached = repo.reached(set(roots))
    tally = Tally(cutoff)
    for kind, by_id in objects.items():
        held = _held(reached, kind)
        for object_id, file in by_id.items():
            tally.add(file, kind, reachable=object_id in held)
    return VersionedGcPlan(
        table_root=repo.root,
        spec_version=repo.info.spec_version,
        retention=window,
        cutoff_ms=cutoff,
        storage=storage_options,
        batch_size=batch_size,
        roots=roots,
        **tally.figures(),
        unrecognised_files=unrecognised,
        batches=_batches(repo.root, storage_options, tally.candidates, batch_size),
    )
