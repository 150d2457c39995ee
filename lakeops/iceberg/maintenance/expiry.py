"""Snapshot expiry of Iceberg tables ("Snapshot Retention Policy", "Snapshot References",
"Table Metadata Fields": ``snapshot-log``, ``metadata-log``, ``statistics``; "Table Statistics").

Why: snapshots pin every file they reach, so a table only sheds replaced data once its old
snapshots leave the metadata. Three steps, in an order that never loses a file a reader needs:

1. :func:`decide_retention` — the spec's policy, to the letter: drop refs (never ``main``) whose
   snapshot is older than ``max-ref-age-ms``; retain every remaining branch and tag head; retain a
   branch's ancestors while they are younger than ``max-snapshot-age-ms`` *or* among its first
   ``min-snapshots-to-keep``; expire everything else, including snapshots no ref reaches. Per-ref
   fields override the table properties ``history.expire.*`` (defaults as the reference
   implementation's: 5 days, 1 snapshot, refs forever); ``older_than_ms``/``retain_last`` override
   both for every branch. Explicitly named snapshots also expire, but never a ref head.
   ``keep_from_sequence_number`` keeps every snapshot from that sequence number on whatever its age
   (a changelog consumer's watermark: the snapshots it has yet to read, and the one it stopped at).
2. :func:`expire_metadata` — the new metadata: expired snapshots, dropped refs, their statistics
   entries, and every ``snapshot-log`` entry up to the last expired one are removed ("all entries
   before a snapshot that has expired should be removed"). :class:`ExpireSnapshots` commits it with
   :func:`~lakeops.iceberg.commit.commit_change`, which trims ``metadata-log`` per
   ``write.metadata.previous-versions-max``; on a conflict the policy is re-applied to the new base,
   so snapshots committed meanwhile stay.
3. :func:`files_to_delete` — after the commit, what the expired snapshots reached (manifest lists,
   manifests, data and delete files, statistics files) minus everything the committed metadata's
   snapshots reach, every ref head among them. Expired snapshots are those of the base the commit
   applied to that the committed metadata lacks — not the plan's guess. Only files inside the
   table location are deleted, never the current metadata file. An unknown commit outcome raises
   before anything is computed, so nothing is deleted.

Like every cleanup, a retention shorter than the table's own needs ``force`` (docs/architecture.md,
"Safety rules"): a reader or writer that started before the horizon may still need those snapshots.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from lakeops.deletion import BatchResult, Candidate, DeleteBatch, delete_batch, make_batches
from lakeops.errors import InvalidArgument, NotFound, ProtocolError, UnsafeOperation
from lakeops.iceberg.commit import commit_change
from lakeops.iceberg.manifest import FileContent, read_manifest
from lakeops.iceberg.manifest_list import ManifestFile
from lakeops.iceberg.metadata import (
    MAIN_BRANCH,
    PartitionStatisticsFile,
    SnapshotLogEntry,
    SnapshotRef,
    StatisticsFile,
    TableMetadata,
)
from lakeops.iceberg.properties import MAX_REF_AGE_MS, MAX_SNAPSHOT_AGE_MS, MIN_SNAPSHOTS_TO_KEEP
from lakeops.iceberg.reachability import (
    MANIFEST_READ_THREADS,
    reachable_files,
    snapshot_manifest_paths,
    snapshot_manifests,
)
from lakeops.iceberg.table import IcebergTable, TableRef, load_table
from lakeops.storage import Storage, StorageOptions
from lakeops.storage.uri import is_within, normalize
from lakeops.units import format_duration, format_size

__all__ = [
    "DEFAULT_MAX_SNAPSHOT_AGE_MS",
    "DEFAULT_MIN_SNAPSHOTS_TO_KEEP",
    "DATA_FILE",
    "DELETE_BATCH_SIZE",
    "DELETE_FILE",
    "MANIFEST",
    "MANIFEST_LIST",
    "STATISTICS_FILE",
    "DeletionSet",
    "ExpireOptions",
    "ExpirePlan",
    "ExpireSnapshots",
    "ExpiryCommit",
    "RetentionDecision",
    "commit_expiry",
    "decide_retention",
    "expire_metadata",
    "files_to_delete",
    "plan_expiry",
]

DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 24 * 3600 * 1000
DEFAULT_MIN_SNAPSHOTS_TO_KEEP = 1
#: Files one Spark task deletes.
DELETE_BATCH_SIZE = 1000

#: Candidate kinds, as reports count them.
MANIFEST_LIST = "manifest-list"
MANIFEST = "manifest"
DATA_FILE = "data"
DELETE_FILE = "delete"
STATISTICS_FILE = "statistics"


class ExpireOptions(BaseModel):
    """Overrides of the retention policy. ``older_than_ms``: max snapshot age for every branch;
    ``retain_last``: min snapshots to keep for every branch; ``snapshot_ids``: expire these too;
    ``keep_from_sequence_number``: keep every snapshot with at least this sequence number;
    ``force``: allow a retention shorter than the table's, or a named snapshot younger than it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    older_than_ms: int | None = Field(default=None, ge=0)
    retain_last: int | None = Field(default=None, ge=1)
    snapshot_ids: tuple[int, ...] = ()
    keep_from_sequence_number: int | None = Field(default=None, ge=0)
    force: bool = False


class RetentionDecision(BaseModel):
    """What the policy keeps and expires (snapshot ids ascending) and which refs it drops."""

    model_config = ConfigDict(frozen=True)

    retained: tuple[int, ...]
    expired: tuple[int, ...]
    dropped_refs: tuple[str, ...]

    @property
    def changes_table(self) -> bool:
        return bool(self.expired or self.dropped_refs)


@dataclass(frozen=True)
class _TablePolicy:
    """The table-level settings: properties, else the defaults."""

    max_snapshot_age_ms: int
    min_snapshots_to_keep: int
    max_ref_age_ms: int | None  # None: refs never expire

    @classmethod
    def of(cls, metadata: TableMetadata, table: str) -> _TablePolicy:
        def positive(name: str, default: int | None) -> int | None:
            if name not in metadata.properties:
                return default
            value = metadata.int_property(name, 0)
            if value <= 0:
                raise ProtocolError(f"{table}: table property {name}={value} must be a positive number")
            return value

        age = positive(MAX_SNAPSHOT_AGE_MS, DEFAULT_MAX_SNAPSHOT_AGE_MS)
        keep = positive(MIN_SNAPSHOTS_TO_KEEP, DEFAULT_MIN_SNAPSHOTS_TO_KEEP)
        assert age is not None and keep is not None
        return cls(age, keep, positive(MAX_REF_AGE_MS, None))


def _days(ms: int) -> str:
    return f"{ms / 86_400_000:g}d"


def _settings(metadata: TableMetadata, table_value: int, prop: str, field: str) -> dict[str, int]:
    """One retention setting as the table and every branch that overrides it set it, by name."""
    branches = {name: ref for name, ref in metadata.refs.items() if ref.type == "branch"}
    alias = SnapshotRef.model_fields[field].alias
    overrides = {f"branch {name!r} {alias}": getattr(ref, field) for name, ref in branches.items()}
    return {prop: table_value} | {name: value for name, value in overrides.items() if value is not None}


def _check_floor(metadata: TableMetadata, options: ExpireOptions, policy: _TablePolicy, table: str) -> None:
    """Refuse, without ``force``, an override shorter than a setting of the table or of a branch."""
    if options.force:
        return
    if options.older_than_ms is not None:
        ages = _settings(metadata, policy.max_snapshot_age_ms, MAX_SNAPSHOT_AGE_MS, "max_snapshot_age_ms")
        for setting, age in ages.items():
            if options.older_than_ms < age:
                raise UnsafeOperation(
                    f"{table}: --older-than {_days(options.older_than_ms)} is shorter than the table's {setting} "
                    f"({_days(age)}); snapshots that readers, writers or time travel still use could expire. "
                    "Pass --force only if nothing uses the table from before that horizon"
                )
    if options.retain_last is not None:
        counts = _settings(metadata, policy.min_snapshots_to_keep, MIN_SNAPSHOTS_TO_KEEP, "min_snapshots_to_keep")
        for setting, count in counts.items():
            if options.retain_last < count:
                raise UnsafeOperation(
                    f"{table}: --retain-last {options.retain_last} keeps fewer snapshots than the table's {setting} "
                    f"({count}). Pass --force to keep fewer"
                )


def _kept_refs(
    metadata: TableMetadata, policy: _TablePolicy, *, now_ms: int
) -> tuple[dict[str, SnapshotRef], list[str]]:
    """Step 2: the refs that stay and the names of those older than their ``max-ref-age-ms``."""
    timestamps = {s.snapshot_id: s.timestamp_ms for s in metadata.snapshots}
    kept: dict[str, SnapshotRef] = {}
    dropped: list[str] = []
    for name, ref in sorted(metadata.refs.items()):
        max_age = ref.max_ref_age_ms or policy.max_ref_age_ms
        if name != MAIN_BRANCH and max_age is not None and now_ms - timestamps[ref.snapshot_id] > max_age:
            dropped.append(name)
        else:
            kept[name] = ref
    return kept, dropped


def _named_snapshots(
    metadata: TableMetadata,
    options: ExpireOptions,
    refs: Mapping[str, SnapshotRef],
    policy: _TablePolicy,
    table: str,
    *,
    now_ms: int,
) -> set[int]:
    """The explicitly named snapshots: each must exist, head no ref, and (without ``force``) be older
    than the age in force."""
    timestamps = {s.snapshot_id: s.timestamp_ms for s in metadata.snapshots}
    floor = options.older_than_ms if options.older_than_ms is not None else policy.max_snapshot_age_ms
    for snapshot_id in options.snapshot_ids:
        if snapshot_id not in timestamps:
            raise InvalidArgument(f"{table}: --snapshot-id {snapshot_id}: the table has no such snapshot")
        heads = sorted(f"{ref.type} {name!r}" for name, ref in refs.items() if ref.snapshot_id == snapshot_id)
        if heads:
            raise InvalidArgument(
                f"{table}: --snapshot-id {snapshot_id} is the head of {' and '.join(heads)}; "
                "a ref's snapshot cannot expire (remove or move the ref first)"
            )
        age = now_ms - timestamps[snapshot_id]
        if age <= floor and not options.force:
            raise UnsafeOperation(
                f"{table}: --snapshot-id {snapshot_id} is only {_days(age)} old, younger than the "
                f"retention ({_days(floor)}); pass --force to expire it anyway"
            )
    return set(options.snapshot_ids)


def decide_retention(
    metadata: TableMetadata, options: ExpireOptions, *, now_ms: int, table: str | None = None
) -> RetentionDecision:
    """The spec's Snapshot Retention Policy at ``now_ms`` (see the module docstring)."""
    table = table or metadata.location
    policy = _TablePolicy.of(metadata, table)
    _check_floor(metadata, options, policy, table)
    refs, dropped = _kept_refs(metadata, policy, now_ms=now_ms)
    retained = {ref.snapshot_id for ref in refs.values()}
    for ref in refs.values():
        if ref.type != "branch":
            continue
        max_age = options.older_than_ms
        if max_age is None:
            max_age = ref.max_snapshot_age_ms or policy.max_snapshot_age_ms
        min_keep = options.retain_last or ref.min_snapshots_to_keep or policy.min_snapshots_to_keep
        for position, snapshot in enumerate(metadata.ancestors(ref.snapshot_id), start=1):
            if position > min_keep and now_ms - snapshot.timestamp_ms > max_age:
                break
            retained.add(snapshot.snapshot_id)
    retained -= _named_snapshots(metadata, options, refs, policy, table, now_ms=now_ms)
    if options.keep_from_sequence_number is not None:
        floor = options.keep_from_sequence_number
        needed = {s.snapshot_id for s in metadata.snapshots if s.sequence_number >= floor}
        for snapshot_id in sorted(needed & set(options.snapshot_ids)):
            raise InvalidArgument(
                f"{table}: --snapshot-id {snapshot_id} is kept: its sequence number is at least {floor}, "
                "which a changelog consumer has yet to read"
            )
        retained |= needed
    ids = sorted(s.snapshot_id for s in metadata.snapshots)
    return RetentionDecision(
        retained=tuple(i for i in ids if i in retained),
        expired=tuple(i for i in ids if i not in retained),
        dropped_refs=tuple(dropped),
    )


def _trim_snapshot_log(log: Iterable[SnapshotLogEntry], retained: set[int]) -> tuple[SnapshotLogEntry, ...]:
    """The log without every entry up to and including the last one of an expired snapshot."""
    kept: list[SnapshotLogEntry] = []
    for entry in log:
        if entry.snapshot_id in retained:
            kept.append(entry)
        else:
            kept.clear()
    return tuple(kept)


def expire_metadata(metadata: TableMetadata, decision: RetentionDecision) -> TableMetadata:
    """``metadata`` without the expired snapshots, the dropped refs and what pointed at them."""
    retained = set(decision.retained)
    return metadata.model_copy(
        update={
            "snapshots": tuple(s for s in metadata.snapshots if s.snapshot_id in retained),
            "refs": {name: ref for name, ref in metadata.refs.items() if name not in decision.dropped_refs},
            "snapshot_log": _trim_snapshot_log(metadata.snapshot_log, retained),
            "statistics": tuple(s for s in metadata.statistics if s.snapshot_id in retained),
            "partition_statistics": tuple(s for s in metadata.partition_statistics if s.snapshot_id in retained),
        }
    )


@dataclass
class ExpireSnapshots:
    """The expiry as a :class:`~lakeops.iceberg.commit.TableChange`; ``base`` and ``decision`` are
    those of the attempt applied last (after a commit: the one committed)."""

    options: ExpireOptions
    now_ms: int
    base: TableMetadata | None = None
    decision: RetentionDecision | None = None

    def validate(self, start: IcebergTable, current: IcebergTable) -> None:
        """Nothing can conflict: the policy is re-applied to the new base, whose new snapshots stay."""

    def apply(self, current: IcebergTable) -> TableMetadata:
        self.decision = decide_retention(current.metadata, self.options, now_ms=self.now_ms, table=current.name)
        self.base = current.metadata
        return expire_metadata(current.metadata, self.decision)

    def abandon(self, committed: TableMetadata | None) -> None:
        """Expiry writes no files of its own (the catalog writes the metadata file)."""


class DeletionSet(BaseModel):
    """Files only expired snapshots reached, by kind; ``outside_location``: such files that are not
    under the table location and are therefore left alone."""

    model_config = ConfigDict(frozen=True)

    files: list[Candidate] = []
    outside_location: list[str] = []


def _content_candidates(storage: Storage, manifest: ManifestFile) -> list[Candidate]:
    """Every file an expired manifest names, DELETED entries included (they name files the snapshot
    that wrote the manifest removed, which only its parents still reached)."""
    return [
        Candidate(
            path=normalize(entry.data_file.file_path, literal=True),
            size=entry.data_file.file_size_in_bytes,
            kind=DATA_FILE if entry.data_file.content == FileContent.DATA else DELETE_FILE,
        )
        for entry in read_manifest(storage, manifest, include_deleted=True)
    ]


def _sized(storage: Storage, paths: Iterable[str], kind: str) -> list[Candidate]:
    """Candidates for files the metadata gives no size for (manifest lists); gone ones are skipped."""

    def stat(path: str) -> Candidate | None:
        try:
            location = normalize(path, literal=True)
            return Candidate(path=location, size=storage.stat(location).size, kind=kind)
        except NotFound:
            return None

    listed = sorted(paths)
    if not listed:
        return []
    with ThreadPoolExecutor(max_workers=min(MANIFEST_READ_THREADS, len(listed)), thread_name_prefix="stat") as pool:
        return [c for c in pool.map(stat, listed) if c is not None]


def files_to_delete(storage: Storage, base: TableMetadata, committed: TableMetadata) -> DeletionSet:
    """What the snapshots of ``base`` missing from ``committed`` reached, minus everything every
    snapshot of ``committed`` reaches (each ref points at one of them), confined to the table location."""
    kept_ids = {s.snapshot_id for s in committed.snapshots}
    expired = [s for s in base.snapshots if s.snapshot_id not in kept_ids]
    if not expired:
        return DeletionSet()
    # Manifest paths first (cheap): only the expired snapshots that list a manifest no retained one
    # has are read in full, and retained data files matter only against those manifests' entries.
    # An append-only history has none: then no manifest is read at all.
    retained = reachable_files(storage, committed, committed.snapshots, read_content=False)
    listed = snapshot_manifest_paths(storage, expired)
    holding = [s for s, paths in zip(expired, listed, strict=True) if not retained.manifests.issuperset(paths)]
    manifests = [
        m for path, m in sorted(snapshot_manifests(storage, holding).items()) if path not in retained.manifests
    ]
    if manifests:
        retained = reachable_files(storage, committed, committed.snapshots)
    # Candidates carry canonical locations (Iceberg paths are literal, never percent-decoded), so the
    # delete batch deletes exactly the file compared here.
    found = [
        Candidate(path=normalize(m.manifest_path, literal=True), size=m.manifest_length, kind=MANIFEST)
        for m in manifests
    ]
    if manifests:
        threads = min(MANIFEST_READ_THREADS, len(manifests))
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="manifest") as pool:
            for candidates in pool.map(lambda m: _content_candidates(storage, m), manifests):
                found.extend(candidates)
    expired_ids = {s.snapshot_id for s in expired}
    statistics: list[StatisticsFile | PartitionStatisticsFile] = [*base.statistics, *base.partition_statistics]
    for stats in statistics:
        if stats.snapshot_id in expired_ids:
            location = normalize(stats.statistics_path, literal=True)
            found.append(Candidate(path=location, size=stats.file_size_in_bytes, kind=STATISTICS_FILE))
    keep = {normalize(p, literal=True) for p in retained.all()}
    root = normalize(base.location, literal=True)
    inside: dict[str, Candidate] = {}
    outside: set[str] = set()
    lists = {s.manifest_list for s in expired if s.manifest_list}
    for candidate in [*found, *_sized(storage, lists - retained.manifest_lists, MANIFEST_LIST)]:
        if candidate.path in keep:
            continue
        if is_within(root, candidate.path):
            inside.setdefault(candidate.path, candidate)
        else:
            outside.add(candidate.path)
    return DeletionSet(files=sorted(inside.values(), key=lambda c: c.path), outside_location=sorted(outside))


def _figures(snapshots_before: int, decision: RetentionDecision, deletion: DeletionSet) -> dict[str, object]:
    """What the policy decided and the files it frees, named as the snapshot expiry report's fields."""
    kinds = [c.kind for c in deletion.files]
    return {
        "snapshots_before": snapshots_before,
        "snapshots_expired": len(decision.expired),
        "snapshots_retained": len(decision.retained),
        "refs_dropped": len(decision.dropped_refs),
        "deleted_files": len(deletion.files),
        "deleted_bytes": sum(c.size for c in deletion.files),
        "deleted_manifest_lists": kinds.count(MANIFEST_LIST),
        "deleted_manifests": kinds.count(MANIFEST),
        "deleted_data_files": kinds.count(DATA_FILE),
        "deleted_delete_files": kinds.count(DELETE_FILE),
        "deleted_statistics_files": kinds.count(STATISTICS_FILE),
        "files_outside_location": len(deletion.outside_location),
        "expired_snapshot_ids": list(decision.expired),
        "dropped_refs": list(decision.dropped_refs),
    }


class ExpirePlan(BaseModel):
    """The policy applied to the table as read at planning, and what a commit now would delete. The
    steps of a run, as :mod:`lakeops.ops.expiry` drives every format's expiry: :meth:`commit` (the
    new metadata), then the returned batches deleted by :meth:`delete_task`."""

    model_config = ConfigDict(frozen=True)
    format: ClassVar[str] = "iceberg"

    table: TableRef
    table_name: str
    table_location: str
    metadata_location: str
    sequence_number: int
    now_ms: int
    options: ExpireOptions
    snapshots: int
    decision: RetentionDecision
    deletion: DeletionSet

    def table_label(self) -> str:
        return self.table_name

    def describe(self) -> str:
        decision, files = self.decision, self.deletion.files
        return (
            f"{len(decision.expired)} of {self.snapshots} snapshots expire, {len(decision.dropped_refs)} refs are "
            f"dropped; {len(files)} files ({format_size(sum(c.size for c in files))}) only they reach"
        )

    def paths(self) -> list[str]:
        """The files a run now would delete."""
        return [c.path for c in self.deletion.files]

    def report_fields(self) -> dict[str, object]:
        """The planned figures (what a run now would do), named as the report's fields."""
        options = self.options
        older_than = (
            format_duration(timedelta(milliseconds=options.older_than_ms))
            if options.older_than_ms is not None
            else None
        )
        return {
            "read_version": self.sequence_number,
            "older_than": older_than,
            "retain_last": options.retain_last,
            "metadata_location": self.metadata_location,
            **_figures(self.snapshots, self.decision, self.deletion),
        }

    def commit(self, storage_options: StorageOptions) -> ExpiryCommit:
        return commit_expiry(self, storage_options)

    def delete_task(self) -> Callable[[DeleteBatch], BatchResult]:
        return delete_batch


def plan_expiry(table: IcebergTable, options: ExpireOptions, *, now_ms: int) -> ExpirePlan:
    """Apply the policy to ``table`` and compute the files it would free (what a dry run reports)."""
    decision = decide_retention(table.metadata, options, now_ms=now_ms, table=table.name)
    after = expire_metadata(table.metadata, decision)
    return ExpirePlan(
        table=table.ref,
        table_name=table.name,
        table_location=normalize(table.metadata.location, literal=True),
        metadata_location=table.metadata_location,
        sequence_number=table.metadata.last_sequence_number,
        now_ms=now_ms,
        options=options,
        snapshots=len(table.metadata.snapshots),
        decision=decision,
        deletion=files_to_delete(table.storage, table.metadata, after),
    )


class ExpiryCommit(BaseModel):
    """What was committed (``attempts`` 0: nothing to expire, nothing committed) and the deletion
    batches for the files it freed."""

    model_config = ConfigDict(frozen=True)

    metadata_location: str
    attempts: int
    snapshots_before: int
    decision: RetentionDecision
    deletion: DeletionSet
    batches: list[DeleteBatch]

    def describe(self) -> str | None:
        return f"committed {self.metadata_location}" if self.attempts else None

    def report_fields(self) -> dict[str, object]:
        """What was committed and the files it freed, named as the report's fields."""
        return {
            "commit_attempts": self.attempts,
            "batches": len(self.batches),
            "metadata_location": self.metadata_location,
            **_figures(self.snapshots_before, self.decision, self.deletion),
        }


def commit_expiry(plan: ExpirePlan, storage_options: StorageOptions, *, batch_size: int | None = None) -> ExpiryCommit:
    """Commit the expiry on the table's current metadata (re-applying the policy on conflicts), then
    compute the deletion batches (``batch_size`` files each, default :data:`DELETE_BATCH_SIZE`) from
    what was committed. ``CommitStateUnknown`` propagates before any deletion is planned."""
    if not plan.decision.changes_table:
        return ExpiryCommit(
            metadata_location=plan.metadata_location,
            attempts=0,
            snapshots_before=plan.snapshots,
            decision=plan.decision,
            deletion=DeletionSet(),
            batches=[],
        )
    start = load_table(plan.table, storage_options)
    change = ExpireSnapshots(plan.options, plan.now_ms)
    outcome = commit_change(start, change, operation="expire")
    assert change.base is not None and change.decision is not None
    kept = {s.snapshot_id for s in outcome.metadata.snapshots}
    if start.metadata_location == plan.metadata_location and kept == set(plan.decision.retained):
        deletion = plan.deletion  # the table read back keeps exactly the planned snapshots of the planned base
    else:  # from what the table read back lists (a commit on top, a catalog that kept some): never the plan
        deletion = files_to_delete(outcome.table.storage, change.base, outcome.metadata)
    return ExpiryCommit(
        metadata_location=outcome.table.metadata_location,
        attempts=outcome.attempts,
        snapshots_before=len(change.base.snapshots),
        decision=change.decision,
        deletion=deletion,
        batches=make_batches(
            normalize(outcome.metadata.location, literal=True),
            storage_options,
            deletion.files,
            batch_size or DELETE_BATCH_SIZE,
            protected=[normalize(outcome.table.metadata_location, literal=True)],
        ),
    )
