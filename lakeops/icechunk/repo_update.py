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
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lakeops.errors import CommitConflict, CommitStateUnknown, StorageError, Superseded
from lakeops.icechunk import fbs
from lakeops.icechunk.binary import FileType, file_bytes, read_payload
from lakeops.icechunk.flatbuf_codec import Record, decode, encode
from lakeops.icechunk.ids import encode_bytes
from lakeops.icechunk.refs import BRANCH_PREFIX, REFS_DIR, TAG_FILE
from lakeops.icechunk.repo_info import REPO_OBJECT, RepoDocument
from lakeops.storage import Storage, join

__all__ = [
    "OVERWRITTEN_DIR",
    "UPDATES_KEPT",
    "RepoDocument",
    "backup_name",
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
    document written. :class:`~lakeops.errors.CommitStateUnknown` when the final write's outcome is unknown.
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
        try:
            storage.replace_if_match(path, file_bytes(encode(record, fbs.REPO), FileType.REPO_INFO, version), token)
        except Superseded:
            continue
        except StorageError as exc:
            raise CommitStateUnknown(f"{path}: the repo object update's outcome is unknown ({exc})") from exc
        return document
    raise CommitConflict(f"{path}: other writers kept replacing the repo object ({_ATTEMPTS} attempts)")


def _with_update(record: Record, update: tuple[int, Record], backup: str, now_ms: int) -> Record:
    updates: list[Record] = list(record.get("latest_updates", []))
    if updates:
        updates[0] = {**updates[0], "backup_path": backup}
    updates.insert(0, {"update_type": update, "updated_at": now_ms * 1000})
    out: dict[str, Any] = {**record, "latest_updates": updates[:UPDATES_KEPT]}
    if len(updates) > UPDATES_KEPT:
        out["repo_before_updates"] = backup
    return out


def replace_branch_ref(storage: Storage, root: str, branch: str, expected: str, snapshot_id: str) -> None:
    """Point format 1's ``branch`` at ``snapshot_id`` if it still points at ``expected``.

    :class:`~lakeops.errors.CommitConflict` when another writer moved or deleted the branch;
    :class:`~lakeops.errors.CommitStateUnknown` when the write's outcome is unknown.
    """
    path = join(root, REFS_DIR, f"{BRANCH_PREFIX}{branch}", TAG_FILE)
    data, token = storage.read_versioned(path)
    current = json.loads(data).get("snapshot")
    if current != expected:
        raise CommitConflict(f"{path}: branch {branch} moved to {current} since {expected} was read")
    try:
        storage.replace_if_match(path, json.dumps({"snapshot": snapshot_id}).encode(), token)
    except Superseded as exc:
        raise CommitConflict(f"{path}: branch {branch} was updated by another writer") from exc
    except StorageError as exc:
        raise CommitStateUnknown(f"{path}: the branch update's outcome is unknown ({exc})") from exc
