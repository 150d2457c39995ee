"""Committing a new version with optimistic concurrency ("Creation of New Log Entries", "Delta Log
Entries", "Action Reconciliation").

``n.json`` is created with put-if-absent and never overwritten. When another writer took the version
first, the loop waits (backoff with jitter), reads back every version that landed since, lets the
pending commit decide against each whether it still applies on top (rebase) and puts at the first
free version straight away, so what it validated against is never older than one round trip. A
:class:`PendingCommit` may also narrow itself on a winner: compaction drops the groups a winning
version touched and commits the rest. When nothing of it still applies, :class:`CommitConflict`.
Retries are bounded by attempts and, optionally, total time. No answer decides the outcome
(:mod:`lakeops.commit_outcome`): after a refusal or a lost answer the version is read back, and our
attempt landed if it carries our ``txnId`` (an S3 client that re-sent a put which had landed is refused
with 412); while the version is still free the same commit is sent again, and when that cannot go on,
:class:`CommitStateUnknown` tells the caller to delete nothing. Once our version
has landed, its version checksum file ``n.crc`` is written from the replay of that version
(:mod:`lakeops.delta.version_checksum`); a failure there is a warning of the result, never an error.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from lakeops import __version__
from lakeops.commit_outcome import Answer, Landmarks, created_file, settle
from lakeops.delta.actions import ActionModel, Add, CommitInfo, DomainMetadata, Remove, action_to_line
from lakeops.delta.commit_file import CommitActions, parse_commit
from lakeops.delta.commit_time import ict_enabled, next_in_commit_timestamp
from lakeops.delta.features import check_writable
from lakeops.delta.log_segment import LOG_DIR, commit_file_name
from lakeops.delta.version_checksum import write_version_checksum
from lakeops.errors import (
    AlreadyExists,
    CommitConflict,
    CommitPending,
    LakeopsError,
    NotFound,
    UnsupportedFeature,
)
from lakeops.storage import Storage
from lakeops.storage.uri import join

ENGINE_INFO = f"lakeops/{__version__}"

#: Decides whether our actions still apply after a concurrent ``winner`` commit: returns a reason to
#: abort, or None to retry at the next version.
ConflictRule = Callable[[CommitActions], str | None]


class PendingCommit(Protocol):
    """What the next attempt writes, and how it meets a version that landed first."""

    def actions(self) -> Sequence[ActionModel]:
        """The actions of the next attempt (after a rebase, possibly fewer than before)."""
        ...

    def operation_metrics(self) -> dict[str, object]:
        """``commitInfo.operationMetrics`` of the next attempt."""
        ...

    def rebase(self, winner: CommitActions) -> str | None:
        """Adapt to ``winner``, committed after our read version: a reason to abort, or None to go on."""
        ...


@dataclass(frozen=True)
class _FixedCommit:
    """Actions that either apply on top of a winner unchanged or not at all."""

    fixed: Sequence[ActionModel]
    metrics: dict[str, object]
    rule: ConflictRule

    def actions(self) -> Sequence[ActionModel]:
        return self.fixed

    def operation_metrics(self) -> dict[str, object]:
        return self.metrics

    def rebase(self, winner: CommitActions) -> str | None:
        return self.rule(winner)


@dataclass(frozen=True)
class CommitResult:
    version: int
    attempts: int
    txn_id: str
    #: What went wrong after the commit landed without undoing it (its version checksum file).
    warnings: tuple[str, ...] = ()


def _landed(storage: Storage, table_root: str, version: int, attempts: int, txn_id: str) -> CommitResult:
    """Our commit is ``version``: its checksum file follows it, best effort (see :mod:`.version_checksum`)."""
    warning = write_version_checksum(storage, table_root, version, txn_id)
    return CommitResult(version, attempts, txn_id, () if warning is None else (warning,))


#: A commit of more actions than this is written piece by piece (``put_if_absent_stream``), its file
#: never whole in memory: an OPTIMIZE of millions of files renders gigabytes of NDJSON.
STREAM_ACTIONS = 20_000
_LINES_PER_CHUNK = 5_000


def _rendered(actions: Sequence[ActionModel], info: CommitInfo) -> Iterator[bytes]:
    """The commit file's newline-delimited JSON, ``commitInfo`` first, a few thousand lines at a time."""
    lines = [action_to_line(info)]
    for action in actions:
        lines.append(action_to_line(action))
        if len(lines) >= _LINES_PER_CHUNK:
            yield ("\n".join(lines) + "\n").encode("utf-8")
            lines = []
    if lines:
        yield ("\n".join(lines) + "\n").encode("utf-8")


def _put_commit(storage: Storage, path: str, actions: Sequence[ActionModel], info: CommitInfo) -> None:
    if len(actions) > STREAM_ACTIONS:
        storage.put_if_absent_stream(path, _rendered(actions, info))
    else:
        storage.put_if_absent(path, b"".join(_rendered(actions, info)))


def _txn_id(commit: CommitActions) -> object:
    return (commit.commit_info.model_extra or {}).get("txnId") if commit.commit_info else None


def _commit_marks(storage: Storage, path: str, txn_id: str) -> Landmarks[object]:
    """The version at ``path``, read back, is our commit if it carries our ``txnId``."""
    return created_file(partial(storage.read, path), lambda raw: _txn_id(parse_commit(raw, -1, path)), txn_id)


def commit(
    storage: Storage,
    table_root: str,
    *,
    read_version: int,
    actions: Sequence[ActionModel],
    operation: str,
    operation_parameters: dict[str, object],
    operation_metrics: dict[str, object] | None = None,
    conflict_rule: ConflictRule,
    max_attempts: int = 10,
    backoff_s: float = 0.2,
    is_blind_append: bool = False,
    in_commit_timestamps: bool = False,
) -> CommitResult:
    """Commit ``actions`` as the next version after ``read_version``; ``conflict_rule`` decides
    whether they still apply on top of each version that landed first."""
    return commit_pending(
        storage,
        table_root,
        read_version=read_version,
        pending=_FixedCommit(actions, operation_metrics or {}, conflict_rule),
        operation=operation,
        operation_parameters=operation_parameters,
        max_attempts=max_attempts,
        backoff_s=backoff_s,
        is_blind_append=is_blind_append,
        in_commit_timestamps=in_commit_timestamps,
    )


def commit_pending(
    storage: Storage,
    table_root: str,
    *,
    read_version: int,
    pending: PendingCommit,
    operation: str,
    operation_parameters: dict[str, object],
    max_attempts: int = 10,
    backoff_s: float = 0.2,
    timeout_s: float | None = None,
    is_blind_append: bool = False,
    in_commit_timestamps: bool = False,
    rebased_domains: frozenset[str] = frozenset(),
    tags: dict[str, str] | None = None,
) -> CommitResult:
    """Commit ``pending`` as the next version after ``read_version``, rebasing it over versions that
    land first; at most ``max_attempts`` puts within ``timeout_s`` (None: no time bound). See the
    module docstring. ``rebased_domains``: domains ``pending`` re-derives in its rebase (the row-id
    high-water mark), which a winner writing them too does not conflict with; ``tags``: the
    ``commitInfo.tags``. ``in_commit_timestamps``: the table has them enabled, so the commit carries one
    (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#writer-requirements-for-in-commit-timestamps:
    ``commitInfo`` first, ``inCommitTimestamp`` the later of now and one past the previous commit's)."""
    txn_id = str(uuid.uuid4())
    log_dir = join(table_root, LOG_DIR)
    version = read_version + 1
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    previous_path = join(log_dir, commit_file_name(read_version))  # whose inCommitTimestamp ours follows
    previous_ict = _in_commit_timestamp(storage, previous_path) if in_commit_timestamps and read_version >= 0 else None
    for attempt in range(1, max_attempts + 1):
        now_ms = int(time.time() * 1000)
        provenance: dict[str, object] = {
            "timestamp": now_ms,
            "operation": operation,
            "operationParameters": operation_parameters,
            "operationMetrics": pending.operation_metrics(),
            "engineInfo": ENGINE_INFO,
            "txnId": txn_id,
            "isolationLevel": "SnapshotIsolation",
            "isBlindAppend": is_blind_append,
        }
        if read_version >= 0:  # a commit creating the table read no version
            provenance["readVersion"] = read_version
        if tags:
            provenance["tags"] = tags
        if in_commit_timestamps:
            provenance["inCommitTimestamp"] = next_in_commit_timestamp(now_ms, previous_ict, previous_path)
        info = CommitInfo.model_validate(provenance)
        path = join(log_dir, commit_file_name(version))
        answer = Answer.ACCEPTED
        failure: LakeopsError | None = None
        try:
            _put_commit(storage, path, pending.actions(), info)
        except AlreadyExists as exc:
            answer, failure = Answer.REFUSED, exc
        except LakeopsError as exc:  # the answer was lost or the store failed
            answer, failure = Answer.NO_VERDICT, exc
        try:
            settle(path, answer, _commit_marks(storage, path, txn_id), claimed=txn_id, failure=failure)
            return _landed(storage, table_root, version, attempt, txn_id)
        except CommitPending:
            if attempt == max_attempts:
                raise
            time.sleep(backoff_s * attempt)
            continue  # nothing landed yet: send the same commit (same txnId) again; a put-if-absent lands once
        except CommitConflict:
            pass
        # Someone else owns this version. Wait, then rebase over every version that landed meanwhile and
        # put at the first free one at once: the next attempt is based on what was just read.
        if attempt == max_attempts or (deadline is not None and time.monotonic() >= deadline):
            break
        time.sleep(backoff_s * attempt * (0.5 + random.random()))
        while True:
            try:
                raw = storage.read(path)
            except NotFound:
                break
            winner = parse_commit(raw, version, path)
            if _txn_id(winner) == txn_id:
                return _landed(storage, table_root, version, attempt, txn_id)
            _check_protocol(winner, table_root, operation, read_version)
            _check_domains(winner, pending.actions(), table_root, operation, read_version, rebased_domains)
            if winner.commit_info is not None and winner.commit_info.in_commit_timestamp is not None:
                previous_ict, previous_path = winner.commit_info.in_commit_timestamp, path
            if winner.metadata is not None:
                in_commit_timestamps = ict_enabled(winner.metadata)
            reason = pending.rebase(winner)
            if reason is not None:
                raise CommitConflict(f"{table_root}: {operation} based on version {read_version} aborted: {reason}")
            version += 1
            path = join(log_dir, commit_file_name(version))
    raise CommitConflict(
        f"{table_root}: {operation} based on version {read_version} gave up at version {version} after "
        f"{attempt} attempts (too much concurrent activity); nothing was committed"
    )


def _in_commit_timestamp(storage: Storage, path: str) -> int | None:
    """The ``inCommitTimestamp`` of the commit at ``path`` (None: none, or no such file)."""
    try:
        info = parse_commit(storage.read(path), -1, path).commit_info
    except NotFound:
        return None
    return info.in_commit_timestamp if info is not None else None


def _check_protocol(winner: CommitActions, table_root: str, operation: str, read_version: int) -> None:
    """A winner's protocol must still be one lakeops writes ("Protocol Evolution"): otherwise nothing
    of ours may land on top of it."""
    if winner.protocol is None:
        return
    try:
        check_writable(winner.protocol, table_root, "commit")
    except UnsupportedFeature as exc:
        raise CommitConflict(
            f"{table_root}: {operation} based on version {read_version} aborted: version {winner.version} "
            f"changed the protocol: {exc}"
        ) from exc


def _check_domains(
    winner: CommitActions,
    ours: Sequence[ActionModel],
    table_root: str,
    operation: str,
    read_version: int,
    rebased: frozenset[str],
) -> None:
    """Two overlapping transactions conflict when both hold a ``domainMetadata`` action for the same
    domain (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#domain-metadata), unless ours is
    re-derived from the winner's on rebase (``rebased``)."""
    changed = {d.domain for d in winner.domains} - rebased
    clash = sorted(changed & {a.domain for a in ours if isinstance(a, DomainMetadata)})
    if clash:
        raise CommitConflict(
            f"{table_root}: {operation} based on version {read_version} aborted: version {winner.version} "
            f"changed metadata domain{'s' if len(clash) > 1 else ''} {', '.join(clash)} that this commit writes too"
        )


def file_actions_summary(adds: Sequence[Add], removes: Sequence[Remove]) -> dict[str, int]:
    """operationMetrics in the shape Delta's OPTIMIZE reports them."""
    return {
        "numAddedFiles": len(adds),
        "numRemovedFiles": len(removes),
        "numAddedBytes": sum(a.size for a in adds),
        "numRemovedBytes": sum(r.size or 0 for r in removes),
    }
