"""Delta log expiry: delete commits and checkpoints older than ``delta.logRetentionDuration``.

Implements "Metadata Cleanup" of the Delta protocol (https://github.com/delta-io/delta/blob/master/PROTOCOL.md,
"Additional Requirements for Writers" > "Checkpoints"; older revisions of the protocol lack that section
and only say, under "Checkpoints", that checkpoints "allow older JSON Delta log entries to be deleted
after a period of time"):

1. ``cutoff = now - retention``; the *cutoff version* is the newest commit not newer than it, dated
   as readers date commits (file modification time made monotonic, or in-commit timestamps:
   :class:`lakeops.delta.commit_time.CommitClock`).
2. The *cutoff checkpoint* is the newest **complete** checkpoint at or below the cutoff version
   ("Checkpoints": readers use only complete checkpoints) and at or below the floors of
   :class:`ExpiryOptions` (versions a change-feed consumer or ``retain_last`` still needs). Without
   one nothing is deleted.
3. Every versioned log file strictly below that checkpoint goes: commit JSONs, version checksum
   files (``n.crc``), classic, multi-part and UUID-named (V2) checkpoints (stale incomplete part sets
   included), log compaction files whose start version is at or below it (the protocol's rule: a
   replay from that checkpoint can never use them), and Hadoop's hidden ``.<name>.crc`` files of
   those. The checkpoint itself, its commit JSON (checkpoints do not keep ``commitInfo``), everything
   after it, ``_last_checkpoint`` and other subdirectories are never touched.
4. Sidecars (steps 4 and 5 of "Metadata Cleanup"): a file in ``_delta_log/_sidecars`` goes only when
   no checkpoint that stays names it and it was last modified before midnight UTC a day before now
   (an in-progress checkpoint may be writing it).

"Last Checkpoint File": readers may trust the pointer, so before anything is deleted a pointer that
would dangle (it names a version below the cutoff checkpoint, or a checkpoint that is not there) is
rewritten to name the newest complete checkpoint. The retention check mirrors delta-rs's
``enforce_retention_duration``: a retention shorter than the table's property needs ``force``.

Deletions are few (a file or two per expired commit, a few checkpoint parts), so they are one
deletion batch, deleted with one batched ``delete_many``, oldest first (:func:`delete_log_batch`):
executors delete a single batch in this process, so no Spark job is started. :func:`commit_expiry`
(the pointer, re-checked) runs before it, as Iceberg's snapshot expiry commits before it deletes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import ClassVar, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from lakeops.deletion import BatchResult, Candidate, DeleteBatch
from lakeops.delta.checkpoint_files import SIDECAR_DIR, sidecar_location, sidecars_of
from lakeops.delta.features import check_writable
from lakeops.delta.last_checkpoint import LastCheckpoint, render_last_checkpoint
from lakeops.delta.log_segment import LAST_CHECKPOINT, LOG_DIR, Checkpoint, LogListing, list_log
from lakeops.delta.properties import ENABLE_EXPIRED_LOG_CLEANUP, LOG_RETENTION_DURATION
from lakeops.delta.retention import DEFAULT_LOG_RETENTION, resolve_retention
from lakeops.delta.snapshot import DeltaSnapshot, load_snapshot
from lakeops.errors import CorruptFile, LakeopsError, UnsafeOperation
from lakeops.quarantine import remove
from lakeops.storage import Storage, StorageOptions, open_storage
from lakeops.storage.uri import join, require_within
from lakeops.units import format_duration, format_size, instant

__all__ = [
    "ExpiryOptions",
    "ExpiryPlan",
    "LogExpiryCommit",
    "LogFile",
    "commit_expiry",
    "delete_log_batch",
    "expired_log_files",
    "plan_expiry",
    "pointer_to",
]


LogFileKind = Literal["commit", "checksum", "checkpoint", "compacted", "hadoop-checksum", "sidecar"]

_VERSIONED: list[tuple[LogFileKind, re.Pattern[str]]] = [
    ("commit", re.compile(r"^(\d{20})\.json$")),
    ("checksum", re.compile(r"^(\d{20})\.crc$")),
    ("checkpoint", re.compile(r"^(\d{20})\.checkpoint(?:\.\d{10}\.\d{10})?\.parquet$")),
    ("checkpoint", re.compile(r"^(\d{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(?:json|parquet)$")),
    # A log compaction file ``x.y.compacted.json`` covers versions x..y; it is versioned by x.
    ("compacted", re.compile(r"^(\d{20})\.\d{20}\.compacted\.json$")),
]
_DAY_MS = 86_400_000
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
    """What one run deletes, pinned to the listing it was computed from. The steps of a run, as
    :mod:`lakeops.ops.expiry` drives every format's expiry: :meth:`commit`, then the returned batch
    deleted by :meth:`delete_task`."""

    model_config = ConfigDict(frozen=True)
    format: ClassVar[str] = "delta"

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

    def table_label(self) -> str:
        return self.table_root

    def describe(self) -> str:
        if self.note:
            return self.note
        return (
            f"keeping the checkpoint at version {self.checkpoint_version} and everything after it; "
            f"{len(self.files)} log files ({format_size(self.bytes)}) below it expire"
        )

    def paths(self) -> list[str]:
        """The files a run now would delete."""
        return [f.path for f in self.files]

    def report_fields(self) -> dict[str, object]:
        """The planned figures, named as the log expiry report's fields."""
        kinds = [f.kind for f in self.files]
        return {
            "read_version": self.read_version,
            "retention": format_duration(self.retention),
            "cutoff": instant(self.cutoff_ms).isoformat(timespec="seconds"),
            "cutoff_version": self.cutoff_version,
            "checkpoint_kept": self.checkpoint_version,
            "floor_version": self.floor_version,
            "deleted_files": len(self.files),
            "deleted_bytes": self.bytes,
            "deleted_commits": kinds.count("commit"),
            "deleted_checkpoint_files": kinds.count("checkpoint"),
            "deleted_checksum_files": kinds.count("checksum") + kinds.count("hadoop-checksum"),
            "deleted_other_files": kinds.count("compacted") + kinds.count("sidecar"),
            "last_checkpoint_rewritten": self.last_checkpoint_target is not None,
            "note": self.note,
        }

    def commit(self, storage_options: StorageOptions) -> LogExpiryCommit:
        return commit_expiry(self, storage_options)

    def delete_task(self) -> Callable[[DeleteBatch], BatchResult]:
        return delete_log_batch


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
            if version < keep_from or (kind == "compacted" and version == keep_from):
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


def expired_sidecars(storage: Storage, listing: LogListing, keep_from: int, now_ms: int) -> list[LogFile]:
    """The files of ``_delta_log/_sidecars`` no checkpoint at or after ``keep_from`` names, last
    modified before midnight UTC a day before ``now_ms`` (with their Hadoop ``.crc`` files)."""
    directory = join(listing.log_dir, SIDECAR_DIR)
    before_ms = (now_ms // _DAY_MS - 1) * _DAY_MS
    old = [info for info in storage.list(directory) if "/" not in info.path[len(directory) + 1 :]]
    old = [info for info in old if info.mtime_ms < before_ms]
    if not old:
        return []  # most tables have no sidecars: no checkpoint is opened
    # Every checkpoint file that stays, not only the one per version replay picks: two writers may
    # have checkpointed one version, each with its own sidecars.
    kept = {f.path for v, c in listing.checkpoints.items() if v >= keep_from for f in c.files}
    kept |= {f.path for f in listing.v2_checkpoints if int(f.path[len(listing.log_dir) + 1 :][:20]) >= keep_from}
    named = {sidecar_location(listing.log_dir, s) for path in sorted(kept) for s in sidecars_of(storage, path)}
    found: list[LogFile] = []
    for info in old:
        name = info.path[len(directory) + 1 :]
        owner = match.group(1) if (match := _HADOOP_CRC.match(name)) else name
        if join(directory, owner) not in named:
            found.append(LogFile(path=info.path, size=info.size, version=keep_from, kind="sidecar"))
    return found


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
    check_writable(snapshot.protocol, table, "expire")
    config = snapshot.metadata.configuration
    if config.get(ENABLE_EXPIRED_LOG_CLEANUP, "true").strip().lower() == "false" and not options.force:
        raise UnsafeOperation(
            f"{table}: table property {ENABLE_EXPIRED_LOG_CLEANUP}=false asks to keep the whole log; pass --force to "
            "expire it anyway"
        )
    retention = resolve_retention(
        snapshot,
        options.retention,
        property_name=LOG_RETENTION_DURATION,
        default=DEFAULT_LOG_RETENTION,
        override=options.force,
        override_flag="--force",
        allow_zero=False,
    )
    listing = snapshot.listing
    cutoff_ms = now_ms - int(retention.total_seconds() * 1000)
    cutoff_version = snapshot.clock(storage).latest_at_or_before(cutoff_ms)
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
        if files and snapshot.segment.checkpoint_version != checkpoint_version:
            _require_readable(storage, snapshot, checkpoint_version)
        # Sorted after the checkpoints that may name them ("Metadata Cleanup", steps 4 and 5).
        files += expired_sidecars(storage, listing, checkpoint_version, now_ms)
        if not files:
            note = f"nothing below the checkpoint at version {checkpoint_version}"
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


# --- commit and delete ---------------------------------------------------------------------------


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


def _actions_in(storage: Storage, path: str, size: int) -> int:
    """The actions a checkpoint file holds: a JSON (V2) checkpoint's lines, a parquet one's rows."""
    if path.endswith(".json"):
        return sum(1 for line in storage.read(path).split(b"\n") if line.strip())
    return _parquet_rows(storage, path, size)


def pointer_to(storage: Storage, checkpoint: Checkpoint) -> LastCheckpoint:
    """A ``_last_checkpoint`` naming ``checkpoint``: version, action count (rows, a V2 checkpoint's
    sidecars included), parts and bytes."""
    rows = sum(_actions_in(storage, f.path, f.size) for f in checkpoint.files)
    log_dir = checkpoint.files[0].path.rsplit("/", 1)[0]
    for f in checkpoint.files:
        for sidecar in sidecars_of(storage, f.path):
            rows += _parquet_rows(storage, sidecar_location(log_dir, sidecar), sidecar.size_in_bytes)
    return LastCheckpoint.model_validate(
        {
            "version": checkpoint.version,
            "size": rows,
            "parts": checkpoint.parts if checkpoint.parts > 1 else None,
            "sizeInBytes": sum(f.size for f in checkpoint.files),
        }
    )


class LogExpiryCommit(BaseModel):
    """What :func:`commit_expiry` did: whether ``_last_checkpoint`` was rewritten, and the batch of
    expired files to delete now (none when nothing expires)."""

    model_config = ConfigDict(frozen=True)

    last_checkpoint_rewritten: bool
    batches: list[DeleteBatch]

    def describe(self) -> str | None:
        """Nothing to announce: the pointer is rewritten only when it would dangle."""
        return None

    def report_fields(self) -> dict[str, object]:
        return {"last_checkpoint_rewritten": self.last_checkpoint_rewritten}


def commit_expiry(plan: ExpiryPlan, storage_options: StorageOptions) -> LogExpiryCommit:
    """Make the planned deletions safe: re-check against a fresh listing that the checkpoint the plan
    keeps is still complete, and repair a pointer that would dangle (a concurrent checkpoint may have
    moved it already: only a pointer that still names a missing or expiring checkpoint is replaced).
    Returns the one batch of the planned files, oldest first (:func:`delete_log_batch`)."""
    if not plan.files or plan.checkpoint_version is None:
        return LogExpiryCommit(last_checkpoint_rewritten=False, batches=[])
    rewritten = False
    storage = open_storage(plan.table_root, storage_options)
    listing = list_log(storage, plan.table_root)
    if plan.checkpoint_version not in listing.checkpoints:
        raise UnsafeOperation(
            f"{plan.table_root}: the checkpoint at version {plan.checkpoint_version} the plan keeps is no longer "
            "complete; nothing deleted"
        )
    if _dangling_pointer(listing, plan.checkpoint_version):
        newest = listing.checkpoints[max(listing.checkpoints)]
        log_dir = join(plan.table_root, LOG_DIR)
        storage.write(join(log_dir, LAST_CHECKPOINT), render_last_checkpoint(pointer_to(storage, newest)))
        rewritten = True
    files = [Candidate(path=f.path, size=f.size, kind=f.kind) for f in plan.files]
    batch = DeleteBatch(batch_id=0, table_root=plan.table_root, storage=storage_options, files=files)
    return LogExpiryCommit(last_checkpoint_rewritten=rewritten, batches=[batch])


def delete_log_batch(batch: DeleteBatch) -> BatchResult:
    """Delete (``quarantine_run``: move to that run's trash, :mod:`lakeops.quarantine`) the batch's
    files in their order, refusing any outside ``_delta_log``."""
    log_dir = join(batch.table_root, LOG_DIR)
    files = [(require_within(log_dir, c.path), c.size, c.kind) for c in batch.files]
    remove(
        open_storage(batch.table_root, batch.storage),
        batch.table_root,
        files,
        quarantine_run=batch.quarantine_run,
        operation=batch.operation,
        batch_id=batch.batch_id,
    )
    return BatchResult(batch_id=batch.batch_id, files=len(files), bytes=sum(c.size for c in batch.files))
