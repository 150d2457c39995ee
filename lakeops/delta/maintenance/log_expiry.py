"""Delta log expiry: delete commits and checkpoints older than ``delta.logRetentionDuration``.

Implements "Metadata Cleanup" of the Delta protocol (https://github.com/delta-io/delta/blob/master/PROTOCOL.md,
"Additional Requirements for Writers" > "Checkpoints"; older revisions of the protocol lack that section
and only say, under "Checkpoints", that checkpoints "allow older JSON Delta log entries to be deleted
after a period of time"):

1. ``cutoff = now - retention``; the *cutoff version* is the newest commit not newer than it, dated
   as readers date commits (file modification time, made monotonic: :func:`commit_timestamps`).
2. The *cutoff checkpoint* is the newest **complete** checkpoint at or below the cutoff version
   ("Checkpoints": readers use only complete checkpoints) and at or below the floors of
   :class:`ExpiryOptions` (versions a change-feed consumer or ``retain_last`` still needs). Without
   one nothing is deleted.
3. Every versioned log file strictly below that checkpoint goes: commit JSONs, version checksum
   files (``n.crc``), classic and multi-part checkpoints (stale incomplete part sets included), log
   compaction files lying wholly below it, and Hadoop's hidden ``.<name>.crc`` sidecars of those.
   The checkpoint itself, its commit JSON (checkpoints do not keep ``commitInfo``), everything after
   it, ``_last_checkpoint``, UUID-named (v2) checkpoints and subdirectories are never touched.

"Last Checkpoint File": readers may trust the pointer, so before anything is deleted a pointer that
would dangle (it names a version below the cutoff checkpoint, or a checkpoint that is not there) is
rewritten to name the newest complete checkpoint. The retention check mirrors delta-rs's
``enforce_retention_duration``: a retention shorter than the table's property needs ``force``.

Deletions are few (a file or two per expired commit, a few checkpoint parts), so they run on the
driver with one batched ``delete_many``, oldest first; no Spark job is needed.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from lakeops.delta.features import check_writable
from lakeops.delta.last_checkpoint import LastCheckpoint, render_last_checkpoint
from lakeops.delta.log_segment import LAST_CHECKPOINT, LOG_DIR, Checkpoint, LogListing, commit_timestamps, list_log
from lakeops.delta.retention import DEFAULT_LOG_RETENTION, LOG_RETENTION_PROPERTY, resolve_retention
from lakeops.delta.snapshot import DeltaSnapshot, load_snapshot
from lakeops.errors import CorruptFile, LakeopsError, UnsafeOperation
from lakeops.quarantine import remove
from lakeops.storage import Storage
from lakeops.storage.uri import join, require_within
from lakeops.units import format_duration

__all__ = [
    "ExpiryOptions",
    "ExpiryPlan",
    "LogFile",
    "execute_expiry",
    "expired_log_files",
    "plan_expiry",
    "pointer_to",
]

#: When "false", Delta writers never clean the log up on their own; lakeops then needs ``force``.
CLEANUP_ENABLED_PROPERTY = "delta.enableExpiredLogCleanup"

LogFileKind = Literal["commit", "checksum", "checkpoint", "compacted", "hadoop-checksum"]

_VERSIONED: list[tuple[LogFileKind, re.Pattern[str]]] = [
    ("commit", re.compile(r"^(\d{20})\.json$")),
    ("checksum", re.compile(r"^(\d{20})\.crc$")),
    ("checkpoint", re.compile(r"^(\d{20})\.checkpoint(?:\.\d{10}\.\d{10})?\.parquet$")),
    # A log compaction file ``x.y.compacted.json`` covers versions x..y; it is dated by y.
    ("compacted", re.compile(r"^\d{20}\.(\d{20})\.compacted\.json$")),
]
_HADOOP_CRC = re.compile(r"^\.(.+)\.crc$")
_PARQUET_TAIL = 8  # 4-byte footer length + "PAR1"


# --- plan ----------------------------------------------------------------------------------------


class LogFile(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str
    size: int
    version: int
    kind: LogFileKind


class ExpiryOptions(BaseModel):
    """``retention`` None means "the table property, else 30 days".

    Floors on top of the retention: ``keep_from_version`` V keeps version V reconstructible and every
    commit from V on (a change-feed consumer that has extracted through V still needs them), and
    ``retain_last`` N does the same for the newest N versions. The cutoff checkpoint is then the
    newest complete one at or below the lowest floor as well as at or below the cutoff version.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    retention: timedelta | None = None
    force: bool = False
    keep_from_version: int | None = Field(default=None, ge=0)
    retain_last: int | None = Field(default=None, ge=1)


class ExpiryPlan(BaseModel):
    """What one run deletes, pinned to the listing it was computed from."""

    model_config = ConfigDict(frozen=True)

    table_root: str
    read_version: int
    retention: timedelta
    cutoff_ms: int
    cutoff_version: int | None
    checkpoint_version: int | None
    #: The lowest version the floors (``keep_from_version``, ``retain_last``) keep readable, if any.
    floor_version: int | None = None
    note: str | None
    files: list[LogFile]
    #: The version ``_last_checkpoint`` will be repointed to, when it would otherwise dangle.
    last_checkpoint_target: int | None

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


def _classify(name: str) -> tuple[LogFileKind, int] | None:
    for kind, pattern in _VERSIONED:
        if match := pattern.match(name):
            return kind, int(match.group(1))
    return None


def expired_log_files(storage: Storage, log_dir: str, keep_from: int) -> list[LogFile]:
    """Every versioned file directly in ``log_dir`` (and its Hadoop ``.crc`` sidecar) below ``keep_from``."""
    prefix = len(log_dir) + 1
    found: list[LogFile] = []
    sidecars: list[tuple[str, str, int]] = []
    for info in storage.list(log_dir):
        name = info.path[prefix:]
        if "/" in name:
            continue
        if classified := _classify(name):
            kind, version = classified
            if version < keep_from:
                found.append(LogFile(path=info.path, size=info.size, version=version, kind=kind))
        elif match := _HADOOP_CRC.match(name):
            sidecars.append((match.group(1), info.path, info.size))
    expired = {f.path.rsplit("/", 1)[1]: f.version for f in found}
    found += [
        LogFile(path=path, size=size, version=expired[owner], kind="hadoop-checksum")
        for owner, path, size in sidecars
        if owner in expired
    ]
    return sorted(found, key=lambda f: (f.version, f.path))


def _dangling_pointer(listing: LogListing, keep_from: int) -> bool:
    """Whether ``_last_checkpoint`` names a checkpoint that is missing or about to be deleted."""
    pointer = listing.last_checkpoint
    return pointer is not None and (pointer.version < keep_from or pointer.version not in listing.checkpoints)


def _require_readable(storage: Storage, snapshot: DeltaSnapshot, version: int) -> None:
    """Replay ``version`` from the checkpoint that will become the oldest state: once the commits
    before it are gone, a damaged checkpoint could no longer be worked around."""
    try:
        load_snapshot(storage, snapshot.table_root, version=version, listing=snapshot.listing)
    except LakeopsError as exc:
        raise UnsafeOperation(
            f"{snapshot.table_root}: the checkpoint at version {version} that expiry would keep as the oldest state "
            f"cannot be read ({exc}); nothing deleted"
        ) from exc


def plan_expiry(snapshot: DeltaSnapshot, storage: Storage, options: ExpiryOptions, *, now_ms: int) -> ExpiryPlan:
    """Find the cutoff checkpoint and the log files below it (see the module docstring)."""
    table = snapshot.table_root
    check_writable(snapshot.protocol, table)
    config = snapshot.metadata.configuration
    if config.get(CLEANUP_ENABLED_PROPERTY, "true").strip().lower() == "false" and not options.force:
        raise UnsafeOperation(
            f"{table}: table property {CLEANUP_ENABLED_PROPERTY}=false asks to keep the whole log; pass --force to "
            "expire it anyway"
        )
    retention = resolve_retention(
        snapshot,
        options.retention,
        property_name=LOG_RETENTION_PROPERTY,
        default=DEFAULT_LOG_RETENTION,
        override=options.force,
        override_flag="--force",
        allow_zero=False,
    )
    listing = snapshot.listing
    cutoff_ms = now_ms - int(retention.total_seconds() * 1000)
    old_enough = [v for v, ts in commit_timestamps(listing) if ts <= cutoff_ms]
    cutoff_version = max(old_enough) if old_enough else None
    floors = [options.keep_from_version, snapshot.version - options.retain_last + 1 if options.retain_last else None]
    floor = min((f for f in floors if f is not None), default=None)
    limit = cutoff_version if floor is None or cutoff_version is None else min(cutoff_version, floor)
    candidates = [v for v in listing.checkpoints if limit is not None and v <= limit]
    checkpoint_version = max(candidates) if candidates else None
    note: str | None = None
    files: list[LogFile] = []
    if cutoff_version is None:
        note = f"no commit is older than the retention ({format_duration(retention)}); nothing to expire"
    elif checkpoint_version is None:
        why = (
            "the newest commit older than the retention"
            if limit == cutoff_version
            else f"version {floor} and later must stay readable (keep_from_version / retain_last)"
        )
        note = f"no complete checkpoint at or below version {limit} ({why}); nothing is deleted until one exists"
    else:
        files = expired_log_files(storage, listing.log_dir, checkpoint_version)
        if not files:
            note = f"nothing below the checkpoint at version {checkpoint_version}"
        elif snapshot.segment.checkpoint_version != checkpoint_version:
            _require_readable(storage, snapshot, checkpoint_version)
    stale = checkpoint_version is not None and bool(files) and _dangling_pointer(listing, checkpoint_version)
    return ExpiryPlan(
        table_root=table,
        read_version=snapshot.version,
        retention=retention,
        cutoff_ms=cutoff_ms,
        cutoff_version=cutoff_version,
        checkpoint_version=checkpoint_version,
        floor_version=floor,
        note=note,
        files=files,
        last_checkpoint_target=max(listing.checkpoints) if stale else None,
    )


# --- execute: driver -----------------------------------------------------------------------------


def _parquet_rows(storage: Storage, path: str, size: int) -> int:
    """Row count from the footer alone (two ranged reads, never the whole checkpoint)."""
    tail = storage.read_range(path, max(0, size - _PARQUET_TAIL), _PARQUET_TAIL)
    if len(tail) != _PARQUET_TAIL or tail[4:] != b"PAR1":
        raise CorruptFile(f"{path}: checkpoint does not end with a parquet footer")
    footer_len = int.from_bytes(tail[:4], "little")
    if footer_len + _PARQUET_TAIL > size:
        raise CorruptFile(f"{path}: parquet footer length {footer_len} exceeds the file size {size}")
    footer = storage.read_range(path, size - _PARQUET_TAIL - footer_len, footer_len + _PARQUET_TAIL)
    try:
        return int(pq.read_metadata(pa.BufferReader(b"PAR1" + footer)).num_rows)
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorruptFile(f"{path}: checkpoint footer is not readable ({exc})") from exc


def pointer_to(storage: Storage, checkpoint: Checkpoint) -> LastCheckpoint:
    """A ``_last_checkpoint`` naming ``checkpoint``: version, action count (rows), parts and bytes."""
    rows = sum(_parquet_rows(storage, f.path, f.size) for f in checkpoint.files)
    return LastCheckpoint.model_validate(
        {
            "version": checkpoint.version,
            "size": rows,
            "parts": checkpoint.parts if checkpoint.parts > 1 else None,
            "sizeInBytes": sum(f.size for f in checkpoint.files),
        }
    )


def execute_expiry(plan: ExpiryPlan, storage: Storage, *, quarantine_run: str | None = None) -> bool:
    """Repair a pointer that would dangle, then delete the planned files (``quarantine_run``: move them
    to that run's trash, :mod:`lakeops.quarantine`), oldest first; returns whether
    ``_last_checkpoint`` was rewritten.

    The pointer is re-checked against a fresh listing first: a concurrent checkpoint may have moved
    it already, and only a pointer that still names a missing or expiring checkpoint is replaced.
    """
    if not plan.files or plan.checkpoint_version is None:
        return False
    log_dir = join(plan.table_root, LOG_DIR)
    rewritten = False
    listing = list_log(storage, plan.table_root)
    if plan.checkpoint_version not in listing.checkpoints:
        raise UnsafeOperation(
            f"{plan.table_root}: the checkpoint at version {plan.checkpoint_version} the plan keeps is no longer "
            "complete; nothing deleted"
        )
    if _dangling_pointer(listing, plan.checkpoint_version):
        newest = listing.checkpoints[max(listing.checkpoints)]
        storage.write(join(log_dir, LAST_CHECKPOINT), render_last_checkpoint(pointer_to(storage, newest)))
        rewritten = True
    files = [(require_within(log_dir, f.path), f.size, f.kind) for f in plan.files]
    remove(storage, plan.table_root, files, quarantine_run=quarantine_run, operation="expire")
    return rewritten
