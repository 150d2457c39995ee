"""Snapshot expiry of Icechunk format 1 and 2 repositories, done by lakeops itself.

The rules are those of Icechunk's own ``Repository.expire_snapshots(older_than)`` (its documentation:
"Expire all snapshots older than a threshold ... navigating all references in the repo", which
"returns the ids of all snapshots considered expired and skipped from history"), checked against the
icechunk 1.x package on format 1 copies. With ``cutoff = now - retention`` (:mod:`.retention`):

* Every branch and (not deleted) tag is a **line**: its tip and the tip's ancestry, down to the
  repository's initial snapshot (``1CECHNKREP0F1RSTCMT0`` in repositories icechunk 1.x and later
  created; older format 1 repositories such as the ``test-repo-v1`` fixture have a random id there:
  it is whatever the ancestry ends at). A line keeps its tip and, below it, every snapshot flushed at
  or after the cutoff, down to the first one flushed before it; that one and everything under it,
  except the initial snapshot, are skipped from the line's history.
* The oldest snapshot a line keeps gets the initial snapshot as its parent (if it had another), so
  each history stays a chain that ends at the initial snapshot.
* A snapshot **expires** when some line skipped it and no line keeps it: the tip of one ref that
  another line skipped (a tag on an old commit) stays, with its own history shortened.
* Branches and tags are never deleted (the package's ``delete_expired_branches``/``_tags`` are off),
  and expiry deletes no file: it only shortens histories. The next ``lakeops orphans``
  (:mod:`.versioned_orphans`) deletes the snapshots, manifests and chunks no history reaches any more.
  ``--quarantine`` therefore moves nothing here: the files leave through that collection, whose own
  ``--quarantine`` moves them into the trash.

Dates are the snapshots' own ``flushed_at`` (what the package compares), not file modification times.

**Format 1** (https://icechunk.io/en/stable/spec/, "Snapshot Files"): a snapshot's parent is the
``parent_id`` in its own file, so each re-parented snapshot's file is decoded whole, given the new
``parent_id``, encoded and written back in place (compare-and-swap against the bytes read) — the one
overwrite of a format 1 snapshot, as the package does; nothing else in the file changes. Each rewrite
leaves valid histories on its own, so a run stopped part-way leaves some shortened and some not, and
the next run finishes the rest.

**Format 2** (https://github.com/earth-mover/icechunk/blob/main/docs/docs/spec.md, "Repo Info File",
"Changes from spec version 2 to 2.1"): parents live in the ``repo`` object, changed in one
:func:`~lakeops.icechunk.repo_update.update_repo`: the expired ``SnapshotInfo``s are removed, the
re-parented ones point at the initial snapshot and get the skipped ancestors' transaction logs in
``pruned_ancestor_tx_logs`` (oldest first, each ancestor's own pruned logs before its log, after any
the snapshot already had), and ``ExpirationRanUpdate`` is recorded. The change re-derives everything
from the object it reads, so a lost race re-applies the rules to the new state. A listed snapshot no
ref reaches whose parent expires is re-parented the same way, so no ``parent_offset`` dangles.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from lakeops.errors import CommitConflict, CommitStateUnknown, StorageError, Superseded
from lakeops.icechunk import fbs
from lakeops.icechunk.binary import FileType, file_bytes, read_payload
from lakeops.icechunk.flatbuf_codec import Record, decode, encode
from lakeops.icechunk.ids import decode_bytes, encode_bytes
from lakeops.icechunk.maintenance.retention import resolve_retention
from lakeops.icechunk.repo_info import REPO_OBJECT, RepoDocument, RepoInfo
from lakeops.icechunk.repo_update import update_repo
from lakeops.icechunk.repository import SNAPSHOTS_DIR
from lakeops.icechunk.versioned import VersionedRepository
from lakeops.storage import Storage, StorageOptions, join, open_storage
from lakeops.units import cutoff_ms as compute_cutoff

__all__ = ["Expiry", "Reparent", "VersionedExpiryPlan", "decide", "expirable", "plan_versioned_expiry"]


class Reparent(BaseModel):
    """A kept snapshot's new parent (the initial snapshot) and the ancestors skipped to get there,
    oldest first (the last is its old parent)."""

    model_config = ConfigDict(frozen=True)

    parent: str
    skipped: list[str]


@dataclass(frozen=True)
class Expiry:
    """What the rules decide for one state of the snapshot graph."""

    #: Snapshots on some ref's history (the initial one included).
    scanned: frozenset[str]
    #: Snapshots no line keeps any more.
    expired: frozenset[str]
    #: Kept snapshot -> its new parent and the ancestors skipped.
    reparented: dict[str, Reparent]


def _line(parents: Mapping[str, str | None], tip: str) -> list[str]:
    line = [tip]
    while (parent := parents[line[-1]]) is not None:
        line.append(parent)
    return line


def decide(
    parents: Mapping[str, str | None], flushed_at: Mapping[str, int], tips: Iterable[str], cutoff_us: int
) -> Expiry:
    """The module's rules on a graph: ``parents`` of every known snapshot, ``flushed_at`` in
    microseconds, the refs' ``tips``. A kept snapshot loses its parent exactly when that parent was
    flushed before the cutoff, whichever line it is on, so the lines never disagree. Were ``flushed_at``
    not increasing along a history (no writer does that), a line would still stop at its first old
    snapshot, expiring newer ones below it."""
    on_lines: set[str] = set()
    kept: set[str] = set()
    initial: set[str] = set()
    for tip in set(tips):
        line = _line(parents, tip)
        on_lines.update(line)
        initial.add(line[-1])
        end = 1  # line[:end] is what this line keeps (the initial snapshot, line[-1], aside)
        while end < len(line) - 1 and flushed_at[line[end]] >= cutoff_us:
            end += 1
        kept.update(line[:end])
    expired = on_lines - kept - initial
    reparented: dict[str, Reparent] = {}
    for snapshot_id, parent in parents.items():
        if parent is None or parent in initial or snapshot_id in expired:
            continue
        if parent in expired or (snapshot_id in kept and flushed_at[parent] < cutoff_us):
            below = _line(parents, parent)
            reparented[snapshot_id] = Reparent(parent=below[-1], skipped=below[-2::-1])
    return Expiry(scanned=frozenset(on_lines), expired=frozenset(expired), reparented=reparented)


class VersionedExpiryPlan(BaseModel):
    """What one expiry of a format 1 or 2 repository changes, decided from one read of its refs."""

    model_config = ConfigDict(frozen=True)

    format: ClassVar[str] = "icechunk"

    table_root: str
    spec_version: int
    retention: timedelta
    cutoff_ms: int
    branches: dict[str, str]
    tags: dict[str, str]
    snapshots_scanned: int
    expired: list[str]
    reparented: dict[str, Reparent]

    @property
    def rewritten(self) -> list[str]:
        """The files the run writes: format 1 the re-parented snapshots', format 2 the repo object."""
        if self.spec_version >= 2:
            return [join(self.table_root, REPO_OBJECT)] if self.expired or self.reparented else []
        return [join(self.table_root, SNAPSHOTS_DIR, snapshot_id) for snapshot_id in sorted(self.reparented)]

    def expire(self, storage_options: StorageOptions, *, dry_run: bool, quarantine_run: str | None) -> dict[str, Any]:
        """Rewrite the histories (unless ``dry_run``); the expiry report's figures, named as its fields.
        ``quarantine_run`` is unused and reported as None: nothing is deleted, so no trash run holds
        anything (module docs)."""
        scanned, expired, reparented = self.snapshots_scanned, len(self.expired), len(self.reparented)
        if not dry_run and self.rewritten:
            storage = open_storage(self.table_root, storage_options)
            if self.spec_version >= 2:  # figures of the state written over, which a lost race changes
                applied = _expire_format2(self, storage)
                scanned, expired, reparented = len(applied.scanned), len(applied.expired), len(applied.reparented)
            else:
                _reparent_format1(self, storage)
        return {
            "branches": len(self.branches),
            "tags": len(self.tags),
            "snapshots_scanned": scanned,
            "snapshots_expired": expired,
            "snapshots_retained": scanned - expired,
            "snapshots_reparented": reparented,
            "paths": self.rewritten if dry_run else [],
            "quarantine_run": None,
        }


def expirable(info: RepoInfo, cutoff_ms: int) -> Expiry:
    """:func:`decide` on the refs and graph ``info`` holds."""
    parents = {s.id: s.parent_id for s in info.snapshots.values()}
    flushed_at = {s.id: s.flushed_at for s in info.snapshots.values()}
    return decide(parents, flushed_at, [*info.branches.values(), *info.tags.values()], cutoff_ms * 1000)


def plan_versioned_expiry(
    storage: Storage,
    root: str,
    *,
    retention: timedelta | None,
    force: bool,
    now_ms: int,
    repo: VersionedRepository | None = None,
) -> VersionedExpiryPlan:
    """Read the refs and histories once and decide (module docs). A format 2 repository that is not
    Online is refused: expiry changes it (``repo``: the reader to plan through)."""
    repo = VersionedRepository(storage, root) if repo is None else repo
    info = repo.info
    info.require_online("snapshot expiry")
    window = resolve_retention(repo.root, retention, override=force, override_flag="--force")
    cutoff = compute_cutoff(window, now_ms)
    decided = expirable(info, cutoff)
    return VersionedExpiryPlan(
        table_root=repo.root,
        spec_version=info.spec_version,
        retention=window,
        cutoff_ms=cutoff,
        branches=info.branches,
        tags=info.tags,
        snapshots_scanned=len(decided.scanned),
        expired=sorted(decided.expired),
        reparented=decided.reparented,
    )


def _reparent_format1(plan: VersionedExpiryPlan, storage: Storage) -> None:
    """Give each re-parented snapshot's file the initial snapshot as ``parent_id``, if its parent is
    still the one planned (:class:`~lakeops.errors.CommitConflict` otherwise)."""
    for snapshot_id, move in sorted(plan.reparented.items()):
        path = join(plan.table_root, SNAPSHOTS_DIR, snapshot_id)
        data, token = storage.read_versioned(path)
        version, table = read_payload(data, path, FileType.SNAPSHOT)
        record = decode(table, fbs.SNAPSHOT)
        parent = record.get("parent_id")
        if parent is None or encode_bytes(parent) != move.skipped[-1]:
            found = None if parent is None else encode_bytes(parent)
            raise CommitConflict(
                f"{path}: the parent of snapshot {snapshot_id} is {found}, not {move.skipped[-1]} as read"
            )
        record["parent_id"] = decode_bytes(move.parent)
        try:
            storage.replace_if_match(path, file_bytes(encode(record, fbs.SNAPSHOT), FileType.SNAPSHOT, version), token)
        except Superseded as exc:
            raise CommitConflict(f"{path}: snapshot {snapshot_id} was rewritten by another writer") from exc
        except StorageError as exc:
            raise CommitStateUnknown(f"{path}: the rewrite of snapshot {snapshot_id} has an unknown outcome") from exc


def _document_graph(document: RepoDocument) -> tuple[dict[str, str | None], dict[str, int]]:
    return dict(document.parents), {sid: info.get("flushed_at", 0) for sid, info in document.snapshots.items()}


def _expire_format2(plan: VersionedExpiryPlan, storage: Storage) -> Expiry:
    """One repo object update (module docs); what it decided on the state it wrote over."""
    decided: list[Expiry] = []

    def change(document: RepoDocument) -> tuple[int, Record]:
        parents, flushed_at = _document_graph(document)
        tips = [*document.branches.values(), *document.tags.values()]
        expiry = decide(parents, flushed_at, tips, plan.cutoff_ms * 1000)
        decided[:] = [expiry]
        history = {sid: _logs(info) for sid, info in document.snapshots.items()}  # as read, before any change
        for snapshot_id, move in expiry.reparented.items():
            pruned = [log for ancestor in move.skipped for log in [*history[ancestor], decode_bytes(ancestor)]]
            info = document.snapshots[snapshot_id]
            document.snapshots[snapshot_id] = {**info, "pruned_ancestor_tx_logs": history[snapshot_id] + pruned}
            document.parents[snapshot_id] = move.parent
        for snapshot_id in expiry.expired:
            del document.snapshots[snapshot_id]
            del document.parents[snapshot_id]
        return fbs.EXPIRATION_RAN, {}

    update_repo(storage, plan.table_root, change)
    return decided[0]


def _logs(info: Record) -> list[bytes]:
    """A snapshot's ``pruned_ancestor_tx_logs``; with each skipped ancestor's own log (named by its id)
    after them, an ancestor's full transaction history."""
    return list(info.get("pruned_ancestor_tx_logs") or [])
