"""Branches, tags and the snapshot graph of an Icechunk format 1 or 2 repository.

Format 2 (https://github.com/earth-mover/icechunk/blob/main/docs/docs/spec.md#repo-info-file): one
mutable object ``$ROOT/repo`` (``repo.fbs``'s ``Repo``) holds the branches and tags (``Ref``: a name
and an index into ``snapshots``) and every snapshot's ``SnapshotInfo`` (id, ``parent_offset``: the
parent's index in that list, -1 for none; ``flushed_at`` in microseconds; the message; since spec 2.1
``pruned_ancestor_tx_logs``, field 5, "Changes from spec version 2 to 2.1").

Format 1 (spec version 1, "Reference Files" of https://icechunk.io/en/stable/spec/): each branch and
tag is ``refs/branch.NAME/ref.json`` or ``refs/tag.NAME/ref.json`` holding ``{"snapshot": ID}``; a
deleted tag keeps its ``ref.json`` beside a ``ref.json.deleted`` marker; a snapshot's parent is its
own ``parent_id``. :class:`RepoInfo` is the same view of both. The repo object is read whole with the
schema of :mod:`lakeops.icechunk.fbs` into a :class:`RepoDocument`, the form
:mod:`lakeops.icechunk.repo_update` also edits and writes back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from lakeops.errors import CorruptFile, NotATable, UnsafeOperation
from lakeops.icechunk import fbs
from lakeops.icechunk.binary import FileType, read_payload
from lakeops.icechunk.flatbuf_codec import Record, decode
from lakeops.icechunk.ids import decode_bytes, encode_bytes, validate_id
from lakeops.icechunk.objects import Snapshot
from lakeops.icechunk.refs import BRANCH_PREFIX, REFS_DIR, TAG_FILE, TAG_PREFIX
from lakeops.storage import Storage, join, relative_to

__all__ = [
    "RepoDocument",
    "REPO_OBJECT",
    "RepoInfo",
    "RepoStatus",
    "SnapshotInfo",
    "decode_repo_object",
    "read_repo_info",
]

#: The repo info object of format 2.
REPO_OBJECT = "repo"
_DELETED_MARKER = TAG_FILE + ".deleted"


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

    def require_online(self, operation: str) -> None:
        """Refuse ``operation``, which changes the repository, unless its ``RepoStatus`` is Online (format 2
        can be read-only or offline)."""
        status = self.status
        if not status.online:
            state = {1: "read-only", 2: "offline"}.get(status.availability, f"availability {status.availability}")
            reason = status.limited_availability_reason or "no reason given"
            raise UnsafeOperation(
                f"{self.source}: the repository is {state} ({reason}); {operation} changes it and is refused"
            )

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


@dataclass
class RepoDocument:
    """The repo object as a graph: ``SnapshotInfo`` records keyed by id with ``parent_id`` (an id, or
    None) instead of ``parent_offset``, refs as name to snapshot id; the rest of the record as read."""

    record: Record
    snapshots: dict[str, Record] = field(default_factory=dict)
    parents: dict[str, str | None] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_record(cls, record: Record, path: str) -> RepoDocument:
        infos: list[Record] = record.get("snapshots", [])
        if any("id" not in info for info in infos):
            raise CorruptFile(f"{path}: a SnapshotInfo has no id")
        ids = [encode_bytes(info["id"]) for info in infos]
        document = cls(record=record)
        for snapshot_id, info in zip(ids, infos, strict=True):
            offset = info.get("parent_offset", 0)
            if not -1 <= offset < len(ids):
                raise CorruptFile(f"{path}: SnapshotInfo {snapshot_id} has parent_offset {offset}")
            document.snapshots[snapshot_id] = info
            document.parents[snapshot_id] = None if offset < 0 else ids[offset]

        def refs(name: str) -> dict[str, str]:
            named = {}
            for ref in record.get(name, []):
                index = ref.get("snapshot_index", 0)
                if "name" not in ref or index >= len(ids):
                    raise CorruptFile(f"{path}: ref {ref.get('name')!r} points at snapshot index {index} of {len(ids)}")
                named[ref["name"]] = ids[index]
            return named

        document.branches, document.tags = refs("branches"), refs("tags")
        return document

    def add_snapshot(self, snapshot_id: str, parent_id: str | None, flushed_at: int, message: str) -> None:
        self.snapshots[snapshot_id] = {
            "id": decode_bytes(snapshot_id),
            "flushed_at": flushed_at,
            "message": message,
            "metadata": [],
        }
        self.parents[snapshot_id] = parent_id

    def to_record(self) -> Record:
        """The ``Repo`` record: snapshots sorted by id, refs by name, offsets recomputed."""
        ids = sorted(self.snapshots, key=decode_bytes)
        index = {snapshot_id: i for i, snapshot_id in enumerate(ids)}
        snapshots = []
        for snapshot_id in ids:
            parent = self.parents[snapshot_id]
            snapshots.append({**self.snapshots[snapshot_id], "parent_offset": -1 if parent is None else index[parent]})

        def refs(named: dict[str, str]) -> list[Record]:
            return [{"name": name, "snapshot_index": index[named[name]]} for name in sorted(named, key=str.encode)]

        return {**self.record, "snapshots": snapshots, "branches": refs(self.branches), "tags": refs(self.tags)}


def decode_repo_object(data: bytes, path: str) -> RepoInfo:
    """The repo object ``path`` (``repo.fbs``'s ``Repo``), read through :class:`RepoDocument`; fields a
    later spec adds are skipped, as a reader may."""
    version, table = read_payload(data, path, FileType.REPO_INFO)
    record = decode(table, fbs.REPO, to_rewrite=False)
    document = RepoDocument.from_record(record, path)
    snapshots = {
        snapshot_id: SnapshotInfo(
            id=snapshot_id,
            parent_id=document.parents[snapshot_id],
            flushed_at=info.get("flushed_at", 0),
            message=info.get("message") or "",
            pruned_ancestor_tx_logs=[encode_bytes(raw) for raw in info.get("pruned_ancestor_tx_logs", [])],
        )
        for snapshot_id, info in document.snapshots.items()
    }
    status = record.get("status") or {}
    return RepoInfo(
        source=path,
        spec_version=version,
        branches=document.branches,
        tags=document.tags,
        deleted_tags=record.get("deleted_tags", []),
        snapshots=snapshots,
        status=RepoStatus(
            availability=status.get("availability", 0),
            set_at=status.get("set_at", 0),
            limited_availability_reason=status.get("limited_availability_reason"),
        ),
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
