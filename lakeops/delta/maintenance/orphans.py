"""Delta VACUUM: delete data files no version within the retention window can reach.

Implements the cleanup the protocol leaves to "the vacuum command" ("Overview"; "Add File and Remove
File": "a tombstone expires when current time ... exceeds the expiration threshold added to the remove
action timestamp"), with the file layout rules of "Data Files" (data lives in the root or in
non-hidden subdirectories), "Deletion Vector Files" and "Change Data Files", in the way Delta's own
``VacuumCommand`` applies them:

* **Retention** is ``delta.deletedFileRetentionDuration`` (default ``interval 1 week``) or the
  requested one; a shorter request than the table's is refused without an explicit override, like
  Delta's ``retentionDurationCheck`` and delta-rs's ``enforce_retention_duration``. ``cutoff = now -
  retention``.
* **Kept, always**: files of live ``add`` actions and of tombstones not yet expired
  (``deletionTimestamp >= cutoff``; a missing timestamp counts as 0, as in Delta), and the
  deletion-vector files (``u``/``p``, via ``absolutePath``) either of them names. Paths are the
  decoded action paths resolved against the root, compared in normalised form.
* **Never looked at**: ``_delta_log`` and every hidden file or directory (name starting with ``_``
  or ``.``), except the top-level ``_change_data`` directory and partition directories
  ``<partition column>=<value>`` (Delta's ``isHiddenDirectory``). Nothing outside the table root is
  listed, and every delete is re-checked against the root, symlinks resolved
  (:mod:`lakeops.storage.confined`).
* **lakeops' own temporary files** (``.<name>.<random>.lakeops-tmp``, the staging file of a local
  write; see :mod:`lakeops.storage.local`) are the one exception to the hidden rule, in
  ``_delta_log`` too: a process killed mid-write leaves one behind, no Delta writer or reader ever
  names it, and nothing else would ever remove it. The age floor applies to them as to any file.
* **Age floor**: a file whose modification time is not older than the cutoff is kept whatever the
  log says: it may be a concurrent writer's file that is not committed yet.
* Everything else is deleted and reported by kind: *tombstoned* (named by an expired tombstone or its
  DV), *untracked* (named by nothing) and *change data*.

``_change_data``: ``cdc`` actions are not part of a snapshot's state (they never become tombstones),
so Delta's VACUUM deletes change data files by age alone — the table's retention is also the change
data feed's horizon. lakeops follows that rule and adds one guard: a change data file named by a
commit made within the retention window (commit time ``>= cutoff``) is kept, because a change-feed
reader of a version inside the window may still need it.

Plan and listing run on the driver; the deletions run on Spark in batches of about 1000 paths
(:func:`delete_batch`). Just before deleting, :func:`recheck` re-validates the plan against any
commits made since its version (a RESTORE may have re-added an old file). VACUUM writes nothing to
the log (no ``VACUUM START``/``END`` commits).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from lakeops.deletion import BatchResult, Candidate, DeleteBatch, delete_batch, deleted_by_kind, make_batches
from lakeops.delta.actions import DeletionVectorDescriptor
from lakeops.delta.commit_file import parse_commit
from lakeops.delta.deletion_vectors import dv_absolute_path
from lakeops.delta.features import check_writable
from lakeops.delta.live_files import LiveFiles
from lakeops.delta.live_paths import LivePaths
from lakeops.delta.log_segment import LOG_DIR, list_log, read_log_file
from lakeops.delta.properties import DELETED_FILE_RETENTION_DURATION
from lakeops.delta.retention import DEFAULT_DELETED_FILE_RETENTION, resolve_retention
from lakeops.delta.schema import column_mapping_mode, parse_schema, physical_name
from lakeops.delta.snapshot import DeltaSnapshot, load_snapshot
from lakeops.quarantine import reserved_dirs
from lakeops.storage import FileInfo, Storage, StorageOptions, open_storage
from lakeops.storage.local import is_abandoned_temp
from lakeops.storage.uri import join, normalize, relative_to

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "BatchResult",
    "Candidate",
    "DeleteBatch",
    "VacuumOptions",
    "VacuumPlan",
    "delete_batch",
    "is_hidden",
    "plan_vacuum",
    "recheck",
]

CHANGE_DATA_DIR = "_change_data"
#: Paths per Spark task: S3's DeleteObjects limit, so one task is one request.
DEFAULT_BATCH_SIZE = 1000
#: Listed files tested against the live paths at a time (each test scans the live path columns once).
LISTED_CHUNK = 262_144

FileKind = Literal["tombstoned", "untracked", "change_data"]


class VacuumOptions(BaseModel):
    """``retention`` None means "table property, else one week"."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    retention: timedelta | None = None
    force_short_retention: bool = False
    batch_size: int = Field(default=DEFAULT_BATCH_SIZE, ge=1)


class VacuumPlan(BaseModel):
    """Immutable, printable plan pinned to ``read_version`` and one listing. Its figures shared with
    Iceberg's orphan plan have the same names (:mod:`lakeops.ops.orphans` reads them); the others are
    in :meth:`report_fields`."""

    model_config = ConfigDict(frozen=True)
    format: ClassVar[str] = "delta"

    table_root: str
    read_version: int
    retention: timedelta
    cutoff_ms: int
    files_scanned: int
    directories_scanned: int
    live_files: int
    tombstones_retained: int
    files_too_recent: int
    files_still_needed: int
    storage: StorageOptions
    batch_size: int
    batches: list[DeleteBatch]

    @property
    def candidates(self) -> list[Candidate]:
        return [c for b in self.batches for c in b.files]

    def table_label(self) -> str:
        return self.table_root

    def describe(self) -> str:
        return (
            f"version {self.read_version}: {self.files_scanned} files scanned in {self.directories_scanned} directories"
        )

    def rechecked(self) -> VacuumPlan:
        """:func:`recheck` against the table as it is now."""
        return recheck(self, open_storage(self.table_root, self.storage))

    def report_fields(self) -> dict[str, int]:
        """Delta's own figures, named as the orphans report's fields."""
        return {
            "read_version": self.read_version,
            "live_files": self.live_files,
            "tombstones_retained": self.tombstones_retained,
            **deleted_by_kind(self.candidates, ("tombstoned", "untracked", "change_data")),
        }


def is_hidden(relative: str, partition_columns: Iterable[str] = ()) -> bool:
    """Whether VACUUM must leave ``relative`` (a path below the table root) alone.

    A segment starting with ``_`` or ``.`` hides everything below it, except the top-level
    ``_change_data`` directory and partition directories (``<column>=...``).
    """
    columns = set(partition_columns)
    segments = relative.split("/")
    for depth, segment in enumerate(segments):
        if not segment.startswith(("_", ".")):
            continue
        is_dir = depth < len(segments) - 1
        if is_dir and depth == 0 and segment == CHANGE_DATA_DIR:
            continue
        if is_dir and "=" in segment and segment.split("=", 1)[0] in columns:
            continue
        return True
    return False


def _partition_dir_names(snapshot: DeltaSnapshot) -> set[str]:
    """Partition columns by display and by physical name (writers name directories either way)."""
    names = set(snapshot.partition_columns)
    schema = parse_schema(snapshot.metadata.schema_string)
    mode = column_mapping_mode(snapshot.metadata, snapshot.protocol)
    for name in snapshot.partition_columns:
        field = schema.get(name)
        if field is not None:
            names.add(physical_name(field, mode))
    return names


def _file_and_dv(snapshot: DeltaSnapshot, path: str, dv: DeletionVectorDescriptor | None, table: str) -> list[str]:
    """The data file location and, for ``u``/``p`` deletion vectors, the DV file location."""
    locations = [snapshot.file_location(path)]
    if dv is not None and dv.storage_type != "i":
        locations.append(dv_absolute_path(dv, table))
    return locations


def _referenced(snapshot: DeltaSnapshot, cutoff_ms: int) -> tuple[LivePaths, set[str], int]:
    """(locations to keep, locations named by expired tombstones, unexpired tombstone count); an
    expired tombstone's location may also be kept (a file re-added): keeping wins."""
    table = snapshot.table_root
    files = snapshot.files
    columns = files.columns if isinstance(files, LiveFiles) else []
    objects = files.objects if isinstance(files, LiveFiles) else files
    keep: set[str] = set()
    expired: set[str] = set()
    retained = 0
    for add in objects.values():
        keep.update(_file_and_dv(snapshot, add.path, add.deletion_vector, table))
    for remove in snapshot.tombstones.values():
        locations = _file_and_dv(snapshot, remove.path, remove.deletion_vector, table)
        if (remove.deletion_timestamp or 0) >= cutoff_ms:
            keep.update(locations)
            retained += 1
        else:
            expired.update(locations)
    return LivePaths(table, columns, keep), expired, retained


def _change_data_in_window(storage: Storage, snapshot: DeltaSnapshot, cutoff_ms: int) -> set[str]:
    """Change data files named by commits made at or after the cutoff (commits already expired from
    the log are older than any log retention and protect nothing)."""
    listing = snapshot.listing
    named: set[str] = set()
    for version, ts in snapshot.clock(storage).all():
        if ts >= cutoff_ms:
            info = listing.commits[version]
            commit = parse_commit(read_log_file(storage, info), version, info.path)
            named.update(snapshot.file_location(cdc.path) for cdc in commit.cdcs)
    return named


def _batches(table: str, storage_options: StorageOptions, candidates: list[Candidate], size: int) -> list[DeleteBatch]:
    """Delete batches that also refuse anything inside the log, whatever the plan said — but for
    abandoned temporary files, which get batches of their own."""
    temps: list[Candidate] = []
    others: list[Candidate] = []
    for candidate in candidates:
        (temps if is_abandoned_temp(candidate.path) else others).append(candidate)
    batches = make_batches(table, storage_options, others, size, protected=[join(table, LOG_DIR)])
    extra = make_batches(table, storage_options, temps, size)
    return batches + [b.model_copy(update={"batch_id": len(batches) + b.batch_id}) for b in extra]


def _below(table: str, path: str) -> tuple[str, str]:
    """``path``'s location relative to ``table`` and its normalised form. A listing spells every path
    as the normalised root, a slash and the rest (the storage contract), which is taken as it is: the
    general routes normalise each path several times over, a tenth of VACUUM's time at 100,000 files."""
    prefix = table + "/"
    if path.startswith(prefix) and "//" not in path[len(prefix) :]:
        return path[len(prefix) :], path
    return relative_to(table, path), normalize(path)


def plan_vacuum(
    snapshot: DeltaSnapshot,
    storage: Storage,
    options: VacuumOptions,
    storage_options: StorageOptions,
    *,
    now_ms: int,
    listed: Iterable[FileInfo] | None = None,
) -> VacuumPlan:
    """List the table once and choose the files to delete (rules in the module docstring). ``listed``:
    every file under the root, sorted by path, as a listing spread over executors found them
    (:func:`lakeops.listing.list_tree`); None: listed here."""
    table = snapshot.table_root
    check_writable(snapshot.protocol, table, "vacuum")  # VACUUM acts as a writer
    retention = resolve_retention(
        snapshot,
        options.retention,
        property_name=DELETED_FILE_RETENTION_DURATION,
        default=DEFAULT_DELETED_FILE_RETENTION,
        override=options.force_short_retention,
        override_flag="--force-short-retention",
        allow_zero=True,
    )
    cutoff_ms = now_ms - int(retention.total_seconds() * 1000)
    keep, expired, retained = _referenced(snapshot, cutoff_ms)
    partition_dirs = _partition_dir_names(snapshot)

    scanned = too_recent = 0
    directories = {""}
    candidates: list[Candidate] = []
    change_data: list[Candidate] = []
    pending: list[tuple[str, str, FileInfo]] = []

    def settle() -> None:
        """Classify the pending listed files, tested against the kept locations in one go."""
        nonlocal too_recent
        kept = keep.kept([location for _, location, _ in pending])
        for relative, location, info in pending:
            if location in kept:
                continue
            if info.mtime_ms >= cutoff_ms:
                too_recent += 1
            elif relative.startswith(f"{CHANGE_DATA_DIR}/"):
                change_data.append(Candidate.of(location, info.size, "change_data"))
            else:
                kind: FileKind = "tombstoned" if location in expired else "untracked"
                candidates.append(Candidate.of(location, info.size, kind))
        pending.clear()

    # lakeops's trash and audit records (staging files included), as prefixes below the root.
    reserved = tuple(relative_to(table, d) + "/" for d in reserved_dirs(table))
    # Per directory, decided once (a listing names thousands of files per directory): (reserved, hidden).
    by_directory: dict[str, tuple[bool, bool]] = {}
    for info in storage.list(table) if listed is None else listed:
        relative, location = _below(table, info.path)
        parent, _, name = relative.rpartition("/")
        state = by_directory.get(parent)
        if state is None:
            inside = f"{parent}/" if parent else ""
            state = by_directory[parent] = (inside.startswith(reserved), is_hidden(inside, partition_dirs))
        reserved_dir, hidden_dir = state
        if reserved_dir:
            continue
        if (hidden_dir or name.startswith(("_", "."))) and not is_abandoned_temp(name):
            continue
        scanned += 1
        if parent not in directories:
            parts = parent.split("/")
            directories.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        pending.append((relative, location, info))
        if len(pending) >= LISTED_CHUNK:
            settle()
    settle()
    still_needed = 0
    if change_data:
        in_window = _change_data_in_window(storage, snapshot, cutoff_ms)
        still_needed = sum(1 for c in change_data if c.path in in_window)
        candidates += [c for c in change_data if c.path not in in_window]

    return VacuumPlan(
        table_root=table,
        read_version=snapshot.version,
        retention=retention,
        cutoff_ms=cutoff_ms,
        files_scanned=scanned,
        directories_scanned=len(directories),
        live_files=len(snapshot.files),
        tombstones_retained=retained,
        files_too_recent=too_recent,
        files_still_needed=still_needed,
        storage=storage_options,
        batch_size=options.batch_size,
        batches=_batches(table, storage_options, candidates, options.batch_size),
    )


def recheck(plan: VacuumPlan, storage: Storage) -> VacuumPlan:
    """The plan re-validated against the table as it is now, just before deleting.

    When commits landed after ``plan.read_version``, the latest state is replayed and every path it
    keeps (at the plan's cutoff) is dropped from the plan: a RESTORE can re-add a long-tombstoned
    file whose modification time is old, which the age floor alone would not protect. A protocol
    the plan cannot write is refused.
    """
    listing = list_log(storage, plan.table_root)
    if listing.latest_version == plan.read_version:
        return plan
    snapshot = load_snapshot(storage, plan.table_root, listing=listing, row_counts_only=True)
    check_writable(snapshot.protocol, plan.table_root, "vacuum")
    live, _, _ = _referenced(snapshot, plan.cutoff_ms)
    keep = live.kept([c.path for c in plan.candidates])
    if any(c.kind == "change_data" for c in plan.candidates):
        keep |= _change_data_in_window(storage, snapshot, plan.cutoff_ms)
    kept = [c for c in plan.candidates if c.path not in keep]
    return plan.model_copy(
        update={
            "read_version": snapshot.version,
            "files_still_needed": plan.files_still_needed + len(plan.candidates) - len(kept),
            "batches": _batches(plan.table_root, plan.storage, kept, plan.batch_size),
        }
    )


# --- execute: runs inside a Spark task -------------------------------------------------------------
