"""Changing the refs and snapshot graph of an Icechunk format 1 or 2 repository, atomically.

Format 2 (https://github.com/earth-mover/icechunk/blob/main/docs/docs/spec.md, "Repo Info File",
"Updates to the repo info file", "Write New Snapshot"): the ``repo`` object is the only mutable file.
An update reads it and changes it in memory (:class:`~lakeops.icechunk.repo_info.RepoDocument`:
snapshots by id, refs by name, every other field kept as read); copies the bytes it read to
``overwritten/repo.<ms until 3000-01-01>.<12 random bytes, Crockford base 32>``; records the operation
at the head of ``latest_updates`` (the previous head gets that backup as its ``backup_path``; beyond
:data:`UPDATES_KEPT` entries the oldest are dropped and ``repo_before_updates`` points at the backup
holding them); and replaces the object only if it is still the version read. A lost race re-reads
and re-applies the change.

Format 1 ("Reference Files" of https://icechunk.io/en/stable/spec/): a branch is the mutable
``refs/branch.NAME/ref.json`` (``{"snapshot": ID}``), replaced under the same compare-and-swap.

Either compare-and-swap never writes over a version lakeops did not read: ``If-Match`` on S3, and on
a local file system :meth:`~lakeops.storage.local.LocalStorage.replace_if_match`, which holds against
writers that take no lock (the icechunk package renames a staged file over the ref there). What it
cannot stop is such a writer renaming over lakeops' new version from a read it made before. So the
outcome is read back, never taken from the write's return (:func:`lakeops.commit_outcome.settle`, the
rule every format's commit follows): the update landed only if the object read afterwards holds it
(format 1: the new snapshot is the branch's tip or one of its ancestors; format 2: the object is the
one written, or a later one whose ``latest_updates`` carry this update's backup name). A refusal the
object read back confirms is a conflict (format 2 re-applies the change to the new version); anything
else is :class:`~lakeops.errors.CommitStateUnknown`, and the caller deletes nothing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lakeops.commit_outcome import Answer, Landmarks, settle
from lakeops.errors import CommitConflict, CommitPending, CommitStateUnknown, StorageError, Superseded
from lakeops.icechunk import fbs
from lakeops.icechunk.binary import FileType, file_bytes, read_payload
from lakeops.icechunk.flatbuf_codec import Record, decode, encode
from lakeops.icechunk.ids import encode_bytes
from lakeops.icechunk.objects import decode_snapshot
from lakeops.icechunk.refs import BRANCH_PREFIX, REFS_DIR, TAG_FILE, parse_ref
from lakeops.icechunk.repo_info import REPO_OBJECT, RepoDocument
from lakeops.icechunk.repository import SNAPSHOTS_DIR
from lakeops.storage import Storage, join

__all__ = [
    "OVERWRITTEN_DIR",
    "UPDATES_KEPT",
    "RepoDocument",
    "backup_name",
    "branch_ref_path",
    "replace_branch_ref",
    "update_repo",
]

OVERWRITTEN_DIR = "overwritten"
#: How many operations ``latest_updates`` keeps (the spec's default bound).
UPDATES_KEPT = 1000
_YEAR_3000_MS = int(datetime(3000, 1, 1, tzinfo=UTC).timestamp() * 1000)
_ATTEMPTS = 10


def backup_name(now_ms: int) -> str:
    """``repo.<ms until 3000-01-01>.<random id>``: newest backups list first."""
    return f"repo.{_YEAR_3000_MS - now_ms}.{encode_bytes(os.urandom(12))}"


def update_repo(
    storage: Storage,
    root: str,
    change: Callable[[RepoDocument], tuple[int, Record]],
    *,
    now: Callable[[], float] = time.time,
) -> RepoDocument:
    """Apply ``change`` to the repo object of ``root`` and write it, retrying lost races.

    ``change`` edits the document (raising :class:`~lakeops.errors.CommitConflict` when the state it
    needs is gone) and returns the ``Update`` to record: its ``UpdateType`` code and table. Returns the
    document written once the object read back holds it (module docs);
    :class:`~lakeops.errors.CommitStateUnknown` when the final write's outcome is unknown.
    """
    path = join(root, REPO_OBJECT)
    for _ in range(_ATTEMPTS):
        data, token = storage.read_versioned(path)
        version, table = read_payload(data, path, FileType.REPO_INFO)
        document = RepoDocument.from_record(decode(table, fbs.REPO), path)
        update = change(document)
        now_ms = int(now() * 1000)
        backup = backup_name(now_ms)
        storage.put_if_absent(join(root, OVERWRITTEN_DIR, backup), data)
        record = _with_update(document.to_record(), update, backup, now_ms)
        written = file_bytes(encode(record, fbs.REPO), FileType.REPO_INFO, version)
        answer, failure = _replace(storage, path, written, token)
        try:
            settle(path, answer, _repo_landmarks(storage, path, data, written, backup), failure=failure)
        except CommitConflict:
            continue  # another writer replaced it first: read theirs and apply the change again
        except CommitPending as exc:  # not re-sent: a new attempt writes a new backup and record
            raise CommitStateUnknown(str(exc)) from exc
        return document
    raise CommitConflict(f"{path}: other writers kept replacing the repo object ({_ATTEMPTS} attempts)")


def _replace(storage: Storage, path: str, data: bytes, token: str) -> tuple[Answer, StorageError | None]:
    """The answer to replacing ``path`` with ``data`` if it is still the version ``token`` names."""
    try:
        storage.replace_if_match(path, data, token)
    except Superseded as exc:
        return Answer.REFUSED, exc
    except StorageError as exc:
        return Answer.NO_VERDICT, exc
    return Answer.ACCEPTED, None


def _repo_landmarks(storage: Storage, path: str, read: bytes, written: bytes, backup: str) -> Landmarks[bytes]:
    """The repo object read back holds the update if it is ``written``, or a later version that built on
    it, whose ``latest_updates`` still hold the entry that gave ``backup`` as its backup; the update
    could still land while the object is the version it was made from (``read``)."""

    def holds(data: bytes) -> bool:
        if data == written:
            return True
        _, table = read_payload(data, path, FileType.REPO_INFO)
        updates: list[Record] = decode(table, fbs.REPO).get("latest_updates", [])
        return any(entry.get("backup_path") == backup for entry in updates)

    return Landmarks(read_back=lambda: storage.read(path), holds=holds, could_land=lambda data: data == read)


def _with_update(record: Record, update: tuple[int, Record], backup: str, now_ms: int) -> Record:
    updates: list[Record] = list(record.get("latest_updates", []))
    if updates:
        updates[0] = {**updates[0], "backup_path": backup}
    updates.insert(0, {"update_type": update, "updated_at": now_ms * 1000})
    out: dict[str, Any] = {**record, "latest_updates": updates[:UPDATES_KEPT]}
    if len(updates) > UPDATES_KEPT:
        out["repo_before_updates"] = backup
    return out


def branch_ref_path(root: str, branch: str) -> str:
    """Format 1's mutable file of ``branch``."""
    return join(root, REFS_DIR, f"{BRANCH_PREFIX}{branch}", TAG_FILE)


def replace_branch_ref(storage: Storage, root: str, branch: str, expected: str, snapshot_id: str) -> None:
    """Point format 1's ``branch`` at ``snapshot_id`` if it still points at ``expected``, and read it back.

    :class:`~lakeops.errors.CommitConflict` when another writer moved or deleted the branch first
    (nothing was written); :class:`~lakeops.errors.CommitStateUnknown` when the write's outcome is
    unknown, or the branch read back does not hold ``snapshot_id`` (module docs).
    """
    path = branch_ref_path(root, branch)
    data, token = storage.read_versioned(path)
    current = json.loads(data).get("snapshot")
    if current != expected:
        raise CommitConflict(f"{path}: branch {branch} moved to {current} since {expected} was read")
    answer, failure = _replace(storage, path, json.dumps({"snapshot": snapshot_id}).encode(), token)
    settle(path, answer, _branch_landmarks(storage, root, path, expected, snapshot_id), failure=failure)


def _branch_landmarks(storage: Storage, root: str, path: str, expected: str, snapshot_id: str) -> Landmarks[str | None]:
    """The branch read back holds ``snapshot_id`` if its tip is it or descends from it (parents followed
    down to the first snapshot flushed before it); the move could still land while the tip is ``expected``."""

    def parent_and_flushed_at(snapshot: str) -> tuple[str | None, int]:
        location = join(root, SNAPSHOTS_DIR, snapshot)
        decoded = decode_snapshot(storage.read(location), location)
        return decoded.parent_id, decoded.flushed_at

    def holds(tip: str | None) -> bool:
        if tip == snapshot_id:
            return True
        ours = parent_and_flushed_at(snapshot_id)[1]
        while tip is not None and tip != snapshot_id:
            parent, flushed_at = parent_and_flushed_at(tip)
            tip = parent if flushed_at >= ours else None
        return tip is not None

    return Landmarks(
        read_back=lambda: parse_ref(storage.read(path), path), holds=holds, could_land=lambda tip: tip == expected
    )
