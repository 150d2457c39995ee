"""Branches, tags and the snapshot graph of an Icechunk format 1 or 2 repository.

Format 2 (https://github.com/earth-mover/icechunk/blob/main/docs/docs/spec.md#repo-info-file): one
mutable object ``$ROOT/repo`` (``repo.fbs``'s ``Repo``) holds the branches and tags (``Ref``: a name
and an index into ``snapshots``) and every snapshot's ``SnapshotInfo`` (id, ``parent_offset``: the
parent's index in that list, -1 for none; ``flushed_at`` in microseconds; the message; since spec 2.1
``pruned_ancestor_tx_logs``, field 5, "Changes from spec version 2 to 2.1").

Format 1 (spec version 1, "Reference Files" of https://icechunk.io/en/stable/spec/): each branch and
tag is ``refs/branch.NAME/ref.json`` or ``refs/tag.NAME/ref.json`` holding ``{"snapshot": ID}``; a
deleted tag keeps its ``ref.json`` beside a ``ref.json.deleted`` marker; a snapshot's parent is its
own ``parent_id``. :class:`RepoInfo` is the same view of both.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from lakeops.errors import CorruptFile, NotATable, UnsafeOperation
from lakeops.icechunk.binary import FileType, read_payload
from lakeops.icechunk.flatbuf import Table
from lakeops.icechunk.ids import encode_bytes, validate_id
from lakeops.icechunk.objects import Snapshot, object_id
from lakeops.icechunk.refs import BRANCH_PREFIX, REFS_DIR, TAG_FILE, TAG_PREFIX
from lakeops.storage import Storage, join, relative_to

__all__ = [
    "REPO_OBJECT",
    "RepoInfo",
    "RepoStatus",
    "SnapshotInfo",
    "decode_repo_object",
    "read_repo_info",
    "require_online",
]

#: The repo info object of format 2.
REPO_OBJECT = "repo"
_DELETED_MARKER = TAG_FILE + ".deleted"
_ID12 = 12


class SnapshotInfo(BaseModel):
    """A snapshot as the ref graph sees it (``SnapshotInfo`` with the parent resolved to its id)."""

    model_config = ConfigDict(frozen=True)

    id: str
    parent_id: str | None
    #: Microseconds since the epoch.
    flushed_at: int
    message: str
    #: Spec 2.1: transaction logs of ancestors expiry removed, oldest first; with the snapshot's own log
    #: they are its full transaction history, so they outlive those ancestors.
    pruned_ancestor_tx_logs: list[str] = []


class RepoStatus(BaseModel):
    """Format 2's ``RepoStatus``: ``availability`` 0 Online, 1 ReadOnly, 2 Offline (``RepoAvailability``)."""

    model_config = ConfigDict(frozen=True)

    availability: int = 0
    #: Microseconds since the epoch.
    set_at: int = 0
    limited_availability_reason: str | None = None

    @property
    def online(self) -> bool:
        return self.availability == 0


class RepoInfo(BaseModel):
    """What the refs say, whichever format holds them."""

    model_config = ConfigDict(frozen=True)

    #: Where the refs were read: the repo object, or the ``refs/`` directory.
    source: str
    spec_version: int
    branches: dict[str, str]
    tags: dict[str, str]
    deleted_tags: list[str]
    #: Every snapshot the graph knows (format 2: the repo object's list; format 1: the refs' ancestry).
    snapshots: dict[str, SnapshotInfo]
    #: Format 1 has no status: always online.
    status: RepoStatus = RepoStatus()

    def ancestry(self, snapshot_id: str) -> list[SnapshotInfo]:
        """``snapshot_id`` and its parents, newest first."""
        line: list[SnapshotInfo] = []
        current: str | None = snapshot_id
        while current is not None:
            info = self.snapshots.get(current)
            if info is None:
                raise CorruptFile(f"{self.source}: snapshot {current} is in a history but not in the repository")
            if len(line) > len(self.snapshots):
                raise CorruptFile(f"{self.source}: the parents of snapshot {snapshot_id} form a cycle")
            line.append(info)
            current = info.parent_id
        return line


def require_online(info: RepoInfo, operation: str) -> None:
    """Refuse ``operation``, which changes the repository, unless its ``RepoStatus`` is Online (format 2
    can be read-only or offline)."""
    status = info.status
    if not status.online:
        state = {1: "read-only", 2: "offline"}.get(status.availability, f"availability {status.availability}")
        reason = status.limited_availability_reason or "no reason given"
        raise UnsafeOperation(
            f"{info.source}: the repository is {state} ({reason}); {operation} changes it and is refused"
        )


def _ref_map(refs: list[Table], snapshot_ids: list[str], path: str) -> dict[str, str]:
    named: dict[str, str] = {}
    for ref in refs:
        name, index = ref.string(0), ref.scalar(1, "I")
        if name is None or index >= len(snapshot_ids):
            raise CorruptFile(f"{path}: ref {name!r} points at snapshot index {index} of {len(snapshot_ids)}")
        named[name] = snapshot_ids[index]
    return named


def decode_repo_object(data: bytes, path: str) -> RepoInfo:
    """The repo object ``path`` (``repo.fbs``'s ``Repo``: tags 1, branches 2, deleted_tags 3, snapshots 4)."""
    version, repo = read_payload(data, path, FileType.REPO_INFO)
    entries = repo.tables(4)
    ids = [object_id(entry, 0) or "" for entry in entries]
    snapshots: dict[str, SnapshotInfo] = {}
    for entry, snapshot_id in zip(entries, ids, strict=True):
        parent = entry.scalar(1, "i")
        if not snapshot_id or parent >= len(ids) or parent < -1:
            raise CorruptFile(f"{path}: SnapshotInfo {snapshot_id or '?'} has parent_offset {parent}")
        snapshots[snapshot_id] = SnapshotInfo(
            id=snapshot_id,
            parent_id=None if parent < 0 else ids[parent],
            flushed_at=entry.scalar(2, "Q"),
            message=entry.string(3) or "",
            pruned_ancestor_tx_logs=[encode_bytes(raw) for raw in entry.structs(5, _ID12)],
        )
    return RepoInfo(
        source=path,
        spec_version=version,
        branches=_ref_map(repo.tables(2), ids, path),
        tags=_ref_map(repo.tables(1), ids, path),
        deleted_tags=repo.strings(3),
        snapshots=snapshots,
        status=_status(repo.table(5)),
    )


def _status(table: Table | None) -> RepoStatus:
    if table is None:
        return RepoStatus()
    return RepoStatus(
        availability=table.scalar(0, "B"), set_at=table.scalar(1, "Q"), limited_availability_reason=table.string(2)
    )


def _ref_target(storage: Storage, path: str) -> str:
    try:
        return validate_id(json.loads(storage.read(path))["snapshot"], "snapshot id")
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptFile(f'{path}: not a ref file ({{"snapshot": ID}}): {exc}') from exc


def _format1(storage: Storage, root: str, load: Callable[[str], Snapshot]) -> RepoInfo:
    refs_dir = join(root, REFS_DIR)
    files = {relative_to(refs_dir, info.path) for info in storage.list(refs_dir)}
    branches: dict[str, str] = {}
    tags: dict[str, str] = {}
    deleted: list[str] = []
    for name in sorted(files):
        directory, _, file = name.partition("/")
        if file != TAG_FILE:
            continue
        if directory.startswith(BRANCH_PREFIX):
            branches[directory.removeprefix(BRANCH_PREFIX)] = _ref_target(storage, join(refs_dir, name))
        elif directory.startswith(TAG_PREFIX):
            tag = directory.removeprefix(TAG_PREFIX)
            if f"{directory}/{_DELETED_MARKER}" in files:
                deleted.append(tag)
            else:
                tags[tag] = _ref_target(storage, join(refs_dir, name))
    snapshots: dict[str, SnapshotInfo] = {}
    pending = [*branches.values(), *tags.values()]
    while pending:
        snapshot_id = pending.pop()
        if snapshot_id in snapshots:
            continue
        snapshot = load(snapshot_id)
        snapshots[snapshot_id] = SnapshotInfo(
            id=snapshot_id, parent_id=snapshot.parent_id, flushed_at=snapshot.flushed_at, message=snapshot.message
        )
        if snapshot.parent_id is not None:
            pending.append(snapshot.parent_id)
    return RepoInfo(
        source=refs_dir, spec_version=1, branches=branches, tags=tags, deleted_tags=deleted, snapshots=snapshots
    )


def read_repo_info(storage: Storage, root: str, load: Callable[[str], Snapshot]) -> RepoInfo:
    """The refs of the repository at ``root``: its ``repo`` object, else its ``refs/`` (``load`` reads a
    snapshot, for format 1's parents). :class:`~lakeops.errors.NotATable` without a ``main`` branch."""
    path = join(root, REPO_OBJECT)
    info = decode_repo_object(storage.read(path), path) if storage.exists(path) else _format1(storage, root, load)
    if "main" not in info.branches:
        raise NotATable(f"{root}: Icechunk repository without a main branch")
    return info
