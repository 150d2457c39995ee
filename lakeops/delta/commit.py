"""Committing a new version with optimistic concurrency ("Creation of New Log Entries", "Delta Log
Entries", "Action Reconciliation").

``n.json`` is created with put-if-absent and never overwritten. When another writer took the version
first, its actions are read back and the operation's conflict rule decides whether our actions still
apply on top (retry at the next version) or not (:class:`CommitConflict`). When the store's answer is
lost, the version is re-read to find out whether our attempt landed (the commit carries a ``txnId``);
if that cannot be decided, :class:`CommitStateUnknown` tells the caller to delete nothing.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lakeops import __version__
from lakeops.delta.actions import Add, CommitInfo, Remove, _Action, action_to_line
from lakeops.delta.commit_file import CommitActions, parse_commit
from lakeops.delta.features import check_writable
from lakeops.delta.log_segment import LOG_DIR, commit_file_name
from lakeops.errors import (
    AlreadyExists,
    CommitConflict,
    CommitStateUnknown,
    LakeopsError,
    NotFound,
)
from lakeops.storage import Storage
from lakeops.storage.uri import join

ENGINE_INFO = f"lakeops/{__version__}"

#: Decides whether our actions still apply after a concurrent ``winner`` commit: returns a reason to
#: abort, or None to retry at the next version.
ConflictRule = Callable[[CommitActions], str | None]


@dataclass(frozen=True)
class CommitResult:
    version: int
    attempts: int
    txn_id: str


def rewrite_conflicts(removed: Sequence[Remove]) -> ConflictRule:
    """The rule for rewrites (OPTIMIZE): any concurrent change to a file we rewrite, or to the table's
    metadata or protocol, invalidates the rewrite; concurrent appends do not."""
    keys = {r.key for r in removed}
    paths = {r.path for r in removed}

    def rule(winner: CommitActions) -> str | None:
        for remove in winner.removes:
            if remove.key in keys or remove.path in paths:
                return f"version {winner.version} removed or changed {remove.path}, which this rewrite replaces"
        for add in winner.adds:
            if add.path in paths:
                return f"version {winner.version} re-added {add.path} (deletion vector update?)"
        if winner.metadata is not None:
            return f"version {winner.version} changed the table metadata"
        if winner.protocol is not None:
            return f"version {winner.version} changed the table protocol"
        return None

    return rule


def _render(actions: Sequence[_Action], info: CommitInfo) -> bytes:
    lines = [action_to_line(info)] + [action_to_line(a) for a in actions]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _txn_id(commit: CommitActions) -> object:
    return (commit.commit_info.model_extra or {}).get("txnId") if commit.commit_info else None


def _is_ours(storage: Storage, path: str, txn_id: str) -> bool | None:
    """Whether the commit at ``path`` is the one we sent (True/False), or None if it cannot be read."""
    try:
        return _txn_id(parse_commit(storage.read(path), -1, path)) == txn_id
    except NotFound:
        return False
    except LakeopsError:
        return None


def commit(
    storage: Storage,
    table_root: str,
    *,
    read_version: int,
    actions: Sequence[_Action],
    operation: str,
    operation_parameters: dict[str, object],
    operation_metrics: dict[str, object] | None = None,
    conflict_rule: ConflictRule,
    max_attempts: int = 10,
    backoff_s: float = 0.2,
    is_blind_append: bool = False,
) -> CommitResult:
    """Commit ``actions`` as the next version after ``read_version``; see the module docstring."""
    txn_id = str(uuid.uuid4())
    log_dir = join(table_root, LOG_DIR)
    version = read_version + 1
    for attempt in range(1, max_attempts + 1):
        provenance: dict[str, object] = {
            "timestamp": int(time.time() * 1000),
            "operation": operation,
            "operationParameters": operation_parameters,
            "operationMetrics": operation_metrics or {},
            "engineInfo": ENGINE_INFO,
            "txnId": txn_id,
            "isolationLevel": "SnapshotIsolation",
            "isBlindAppend": is_blind_append,
        }
        if read_version >= 0:  # a commit creating the table read no version
            provenance["readVersion"] = read_version
        info = CommitInfo.model_validate(provenance)
        path = join(log_dir, commit_file_name(version))
        try:
            storage.put_if_absent(path, _render(actions, info))
            return CommitResult(version, attempt, txn_id)
        except AlreadyExists:
            pass
        except LakeopsError as exc:
            # The answer was lost or the store failed: find out by reading the version back.
            ours = _is_ours(storage, path, txn_id)
            if ours is None or (not ours and not storage.exists(path) and attempt == max_attempts):
                raise CommitStateUnknown(
                    f"{table_root}: writing {path} failed ({exc}) and whether it landed cannot be established; "
                    "nothing may be deleted until the log is checked"
                ) from exc
            if ours:
                return CommitResult(version, attempt, txn_id)
            if not storage.exists(path):
                time.sleep(backoff_s * attempt)
                continue  # nothing landed yet: send the same commit (same txnId) again
        # Someone else owns this version: decide whether our actions still apply on top of theirs.
        while True:
            try:
                raw = storage.read(path)
            except NotFound:
                break
            winner = parse_commit(raw, version, path)
            if _txn_id(winner) == txn_id:
                return CommitResult(version, attempt, txn_id)
            reason = conflict_rule(winner)
            if reason is not None:
                raise CommitConflict(f"{table_root}: {operation} based on version {read_version} aborted: {reason}")
            if winner.protocol is not None:
                check_writable(winner.protocol, table_root)
            version += 1
            path = join(log_dir, commit_file_name(version))
        time.sleep(backoff_s * attempt * (0.5 + random.random()))
    raise CommitConflict(
        f"{table_root}: {operation} gave up after {max_attempts} attempts to commit (too much concurrent activity)"
    )


def file_actions_summary(adds: Sequence[Add], removes: Sequence[Remove]) -> dict[str, int]:
    """operationMetrics in the shape Delta's OPTIMIZE reports them."""
    return {
        "numAddedFiles": len(adds),
        "numRemovedFiles": len(removes),
        "numAddedBytes": sum(a.size for a in adds),
        "numRemovedBytes": sum(r.size or 0 for r in removes),
    }
