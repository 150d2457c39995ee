"""Producing a new snapshot: manifests, manifest list, summary and the metadata that adds it
("Snapshots", "Manifest Lists", "Manifest Entry Fields", "Sequence Number Inheritance", "Commit
Conflict Resolution and Retry").

:class:`ReplaceFiles` is the ``replace`` operation compaction commits: data and delete files are
removed and data files added without changing the table's rows. It follows the spec's rules:

- added files get a null file sequence number (inherited at commit, so one manifest serves every
  retry) and, when asked, an explicit *data* sequence number — compaction gives its output the
  starting snapshot's number, so equality deletes committed meanwhile still apply to the rows;
- a manifest holding a removed file is rewritten: the file becomes ``DELETED`` in the new snapshot,
  every other live entry ``EXISTING`` with its sequence numbers written explicitly;
- "replace operations must verify that the files that will be deleted are still in the table"
  (https://iceberg.apache.org/spec/#commit-conflict-resolution-and-retry): a file already gone is a
  conflict, and so is a position delete committed after the start that may apply to a rewritten data
  file (its rows would come back). Equality deletes committed meanwhile are not: rows of the new files
  keep the starting data sequence number, which they still apply to
  (https://iceberg.apache.org/spec/#scan-planning). :meth:`ReplaceFiles.conflicts` names each
  invalidated file, so a caller can drop what they belong to and commit the rest.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from lakeops.errors import CommitConflict, ProtocolError
from lakeops.iceberg.manifest import (
    DataFile,
    EntryStatus,
    FileContent,
    ManifestEntry,
    manifests_of,
    read_manifest,
    with_counts,
    write_manifest,
)
from lakeops.iceberg.manifest_list import ManifestFile, assign_first_row_ids, write_manifest_list
from lakeops.iceberg.metadata import LONG_MAX, MAIN_BRANCH, Snapshot, SnapshotLogEntry, SnapshotRef, TableMetadata
from lakeops.iceberg.properties import WRITE_METADATA_PATH
from lakeops.iceberg.scan import LiveFile, may_reference
from lakeops.iceberg.table import IcebergTable
from lakeops.storage import Storage
from lakeops.storage.uri import is_within, normalize

__all__ = [
    "ReplaceFiles",
    "add_snapshot",
    "assign_row_ids",
    "inside_location",
    "landed_snapshot",
    "metadata_dir",
    "new_snapshot_id",
    "summarize_changes",
]


def new_snapshot_id(metadata: TableMetadata) -> int:
    """A random positive 63-bit id not used by any snapshot of the table."""
    taken = {s.snapshot_id for s in metadata.snapshots}
    while True:
        value = uuid.uuid4().int
        candidate = ((value >> 64) ^ value) & (2**63 - 1)
        if candidate and candidate not in taken:
            return candidate


def inside_location(location: str, paths: Iterable[str]) -> list[str]:
    """The canonical locations of those ``paths`` inside the table ``location`` (Iceberg paths, taken
    literally): what a change that wrote them may delete again."""
    root = normalize(location, literal=True)
    return [p for p in (normalize(path, literal=True) for path in paths) if is_within(root, p)]


def metadata_dir(metadata: TableMetadata) -> str:
    """Where manifests and manifest lists go: ``write.metadata.path``, else ``<location>/metadata``."""
    return metadata.properties.get(WRITE_METADATA_PATH) or f"{metadata.location.rstrip('/')}/metadata"


def assign_row_ids(
    base: TableMetadata, storage: Storage, manifests: Sequence[ManifestFile]
) -> tuple[list[ManifestFile], dict[str, int]]:
    """Row lineage of a new snapshot of a v3 table (https://iceberg.apache.org/spec/#snapshot-row-ids):
    its ``first-row-id`` is the table's ``next-row-id`` (0 if an upgrade left it unset), from which the
    data manifests without a ``first_row_id`` are assigned theirs ("First Row ID Assignment", counted
    first where a v1 list left the counts unknown), and ``added-rows`` counts the ids assigned.
    Returns the manifests and the snapshot's fields (none before v3); :func:`add_snapshot` advances
    ``next-row-id``."""
    if base.format_version < 3:
        return list(manifests), {}
    first = base.next_row_id or 0
    assigned, added = assign_first_row_ids(with_counts(storage, manifests), first)
    if first + added > LONG_MAX:  # the next next-row-id is a long too
        raise ProtocolError(
            f"{base.location}: next-row-id is {first}: {added} more row ids would pass the largest long "
            f"({LONG_MAX}), so no snapshot can assign them"
        )
    return assigned, {"first-row-id": first, "added-rows": added}


def add_snapshot(base: TableMetadata, snapshot: Snapshot, branch: str = MAIN_BRANCH) -> TableMetadata:
    """``base`` with ``snapshot`` added and ``branch`` moved to it (the main branch is the current
    snapshot and gets a ``snapshot-log`` entry); a branch's retention settings are kept. A v3
    snapshot's ``added-rows`` advances the table's ``next-row-id``."""
    old = base.refs.get(branch)
    ref = (
        old.model_copy(update={"snapshot_id": snapshot.snapshot_id})
        if old is not None
        else SnapshotRef.model_validate({"snapshot-id": snapshot.snapshot_id, "type": "branch"})
    )
    if ref.type != "branch":
        raise CommitConflict(f"{base.location}: {branch!r} is a tag; snapshots are only committed to branches")
    update: dict[str, object] = {
        "snapshots": (*base.snapshots, snapshot),
        "refs": {**base.refs, branch: ref},
        "last_sequence_number": max(base.last_sequence_number, snapshot.sequence_number),
    }
    if snapshot.added_rows is not None:
        update["next_row_id"] = (base.next_row_id or 0) + snapshot.added_rows
    if branch == MAIN_BRANCH:
        update["current_snapshot_id"] = snapshot.snapshot_id
        update["snapshot_log"] = (
            *base.snapshot_log,
            SnapshotLogEntry.model_validate(
                {"snapshot-id": snapshot.snapshot_id, "timestamp-ms": snapshot.timestamp_ms}
            ),
        )
    return base.model_copy(update=update)


_TOTALS = {
    "total-records": "records",
    "total-files-size": "files-size",
    "total-data-files": "data-files",
    "total-delete-files": "delete-files",
    "total-position-deletes": "position-deletes",
    "total-equality-deletes": "equality-deletes",
}


def summarize_changes(
    operation: str,
    added: Sequence[DataFile],
    removed: Sequence[DataFile],
    parent: Snapshot | None,
    *,
    changed_partitions: int,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The snapshot summary with the standard counters; totals carry on from the parent's summary
    (omitted when the parent does not have them, rather than guessed)."""
    delta: dict[str, int] = defaultdict(int)
    counters: dict[str, int] = defaultdict(int)
    for sign, files, verb in ((1, added, "added"), (-1, removed, "removed")):
        for f in files:
            delta["files-size"] += sign * f.file_size_in_bytes
            counters[f"{verb}-files-size"] += f.file_size_in_bytes
            if f.content == FileContent.DATA:
                delta["records"] += sign * f.record_count
                delta["data-files"] += sign
                counters["added-data-files" if sign > 0 else "deleted-data-files"] += 1
                counters["added-records" if sign > 0 else "deleted-records"] += f.record_count
                continue
            delta["delete-files"] += sign
            counters[f"{verb}-delete-files"] += 1
            kind = "position" if f.content == FileContent.POSITION_DELETES else "equality"
            delta[f"{kind}-deletes"] += sign * f.record_count
            counters[f"{verb}-{kind}-delete-files"] += 1
            counters[f"{verb}-{kind}-deletes"] += f.record_count
    summary = {"operation": operation, **{k: str(v) for k, v in counters.items() if v}}
    summary["changed-partition-count"] = str(changed_partitions)
    previous = (parent.summary or {}) if parent is not None else {}
    for total, key in _TOTALS.items():
        if parent is None:
            summary[total] = str(max(delta[key], 0))
        elif total in previous and previous[total].lstrip("-").isdigit():
            summary[total] = str(int(previous[total]) + delta[key])
    return {**summary, **(extra or {})}


@dataclass
class ReplaceFiles:
    """Replace ``removed`` files by ``added`` ones (data or delete files) on ``branch``, from the
    ``start`` table state. ``operation`` is ``replace`` for rewrites; the same mechanics commit an
    ``append`` (nothing removed) or a ``delete``/``overwrite`` of specific files."""

    start: IcebergTable
    removed: Sequence[LiveFile]
    added: Sequence[tuple[int, DataFile]]  # (spec id, file)
    data_sequence_number: int | None = None
    operation: str = "replace"
    branch: str = MAIN_BRANCH
    extra_summary: dict[str, str] = field(default_factory=dict)
    #: Written once and reused by every attempt (their entries inherit the snapshot's numbers); the
    #: snapshot id stays too, as manifests name the snapshot that added them.
    _added_manifests: list[ManifestFile] | None = None
    _snapshot_id: int | None = None
    _written: list[str] = field(default_factory=list)
    _commit_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def __post_init__(self) -> None:
        self._removed = {f.entry.data_file.key: f for f in self.removed}  # a DV is one blob of its file
        start_snapshot = self.start.metadata.snapshot_for_ref(self.branch)
        self._start_snapshot_id = start_snapshot.snapshot_id if start_snapshot else None
        holding = {f.manifest_path for f in self.removed}
        start_manifests = manifests_of(self.start.storage, start_snapshot) if start_snapshot else []
        # Manifests are immutable: one the start state listed that held no removed file never will.
        self._clean_at_start = {m.manifest_path for m in start_manifests if m.manifest_path not in holding}

    # --- TableChange -------------------------------------------------------------------------

    def validate(self, start: IcebergTable, current: IcebergTable) -> None:
        """Every file this change removes is still in the table, and no new position delete reaches one."""
        conflicts = self.conflicts(current)
        if conflicts:
            more = f" (and {len(conflicts) - 1} more files)" if len(conflicts) > 1 else ""
            raise CommitConflict(f"{current.name}: {conflicts[min(conflicts)]}{more}")

    def conflicts(self, current: IcebergTable) -> dict[str, str]:
        """The removed files that commits since the start invalidated, each with why: gone from the
        branch, or a data file a position delete added since may apply to."""
        if not self._removed:
            return {}  # appends always apply
        storage = current.storage
        found: dict[str, str] = {}
        for snapshot in self._new_snapshots(current.metadata):
            for manifest in manifests_of(storage, snapshot):
                if manifest.content != 1 or manifest.added_snapshot_id != snapshot.snapshot_id:
                    continue
                for entry in read_manifest(storage, manifest):
                    if entry.status != EntryStatus.ADDED or entry.data_file.content != FileContent.POSITION_DELETES:
                        continue
                    delete = LiveFile(entry, manifest.partition_spec_id, manifest.manifest_path)
                    for target in self._removed.values():
                        if (
                            target.content == FileContent.DATA
                            and target.partition_key == delete.partition_key
                            and may_reference(delete, target.path)
                        ):
                            found.setdefault(
                                target.path,
                                f"snapshot {snapshot.snapshot_id} added position deletes {delete.path} that may "
                                f"apply to {target.path}, which this commit rewrites",
                            )
        head = current.metadata.snapshot_for_ref(self.branch)
        assert head is not None  # _new_snapshots refused a branch without a snapshot
        live: set[tuple[str, int | None]] = set()
        for manifest in manifests_of(storage, head):
            if manifest.manifest_path not in self._clean_at_start:
                live.update(
                    e.data_file.key
                    for e in read_manifest(storage, manifest)
                    if e.status != EntryStatus.DELETED and e.data_file.key in self._removed
                )
        for path, _ in sorted(self._removed.keys() - live, key=str):
            found.setdefault(
                path, f"{path} is no longer in the table: a concurrent commit removed a file this change replaces"
            )
        return found

    def apply(self, current: IcebergTable) -> TableMetadata:
        base = current.metadata
        storage = current.storage
        parent = base.snapshot_for_ref(self.branch)
        snapshot_id = self._claim_snapshot_id(base)
        sequence_number = base.next_sequence_number()
        directory = metadata_dir(base)
        manifests, lineage = assign_row_ids(
            base, storage, [*self._new_manifests(current, snapshot_id), *self._rewrite(current, parent, snapshot_id)]
        )
        manifest_list = f"{directory}/snap-{snapshot_id}-{len(self._written)}-{self._commit_id}.avro"
        self._written.append(manifest_list)
        write_manifest_list(
            storage,
            manifest_list,
            manifests,
            format_version=base.format_version,
            snapshot_id=snapshot_id,
            parent_snapshot_id=parent.snapshot_id if parent else None,
            sequence_number=sequence_number,
        )
        removed_files = [f.entry.data_file for f in self.removed]
        added_files = [f for _, f in self.added]
        partitions = {f.partition_key for f in self.removed} | {
            (spec_id, tuple(f.partition.values())) for spec_id, f in self.added
        }
        snapshot = Snapshot.model_validate(
            {
                "snapshot-id": snapshot_id,
                "parent-snapshot-id": parent.snapshot_id if parent else None,
                "sequence-number": sequence_number,
                "timestamp-ms": max(base.last_updated_ms, _now_ms()),
                "manifest-list": manifest_list,
                "summary": summarize_changes(
                    self.operation,
                    added_files,
                    removed_files,
                    parent,
                    changed_partitions=len(partitions),
                    extra=self.extra_summary,
                ),
                "schema-id": base.current_schema_id,
                **lineage,
            }
        )
        return add_snapshot(base, snapshot, self.branch)

    def abandon(self, committed: TableMetadata | None) -> None:
        """Delete this change's manifests and manifest lists that ``committed`` does not use. Our
        snapshot is found by its manifest list, wherever it is: ``committed`` is the table read back,
        where another writer's commit may already have followed ours on the branch."""
        keep: set[str] = set()
        snapshot = landed_snapshot(committed, self._written)
        if snapshot is not None and snapshot.manifest_list:
            keep.add(snapshot.manifest_list)
            keep.update(m.manifest_path for m in manifests_of(self.start.storage, snapshot))
        if committed is None:
            self._added_manifests = None
            self._snapshot_id = None
        doomed = inside_location(self.start.metadata.location, [p for p in self._written if p not in keep])
        if doomed:
            self.start.storage.delete_many(doomed)
        self._written = [p for p in self._written if p in keep]

    # --- pieces ------------------------------------------------------------------------------

    def _new_snapshots(self, metadata: TableMetadata) -> list[Snapshot]:
        """Snapshots committed to the branch since the start, oldest first."""
        head = metadata.snapshot_for_ref(self.branch)
        if head is None:
            raise CommitConflict(f"{metadata.location}: branch {self.branch!r} no longer has a snapshot")
        found: list[Snapshot] = []
        for snapshot in metadata.ancestors(head.snapshot_id):
            if snapshot.snapshot_id == self._start_snapshot_id:
                return list(reversed(found))
            found.append(snapshot)
        raise CommitConflict(
            f"{metadata.location}: snapshot {self._start_snapshot_id} is no longer an ancestor of branch "
            f"{self.branch!r} (rolled back or replaced); this change was planned on it"
        )

    def _claim_snapshot_id(self, base: TableMetadata) -> int:
        """The id of the snapshot this change commits: chosen once, unless a concurrent commit took it."""
        if self._snapshot_id is not None and all(s.snapshot_id != self._snapshot_id for s in base.snapshots):
            return self._snapshot_id
        if self._added_manifests is not None:  # written for the id that was taken: write them again
            self.start.storage.delete_many([normalize(m.manifest_path, literal=True) for m in self._added_manifests])
            self._written = [p for p in self._written if p not in {m.manifest_path for m in self._added_manifests}]
            self._added_manifests = None
        self._snapshot_id = new_snapshot_id(base)
        return self._snapshot_id

    def _manifest_path(self, directory: str) -> str:
        path = f"{directory}/{self._commit_id}-m{len(self._written)}.avro"
        self._written.append(path)
        return path

    def _new_manifests(self, current: IcebergTable, snapshot_id: int) -> list[ManifestFile]:
        """One manifest per partition spec and content (data, deletes) for the added files, written
        on the first attempt."""
        if self._added_manifests is not None:
            return self._added_manifests
        base = current.metadata
        by_kind: dict[tuple[int, str], list[DataFile]] = defaultdict(list)
        for spec_id, f in self.added:
            by_kind[(spec_id, "data" if f.content == FileContent.DATA else "deletes")].append(f)
        written = []
        for (spec_id, content), files in sorted(by_kind.items()):
            entries = [
                ManifestEntry(
                    status=EntryStatus.ADDED,
                    snapshot_id=None,
                    sequence_number=self.data_sequence_number if base.format_version >= 2 else None,
                    file_sequence_number=None,
                    data_file=f,
                )
                for f in files
            ]
            written.append(self._write(current.storage, base, spec_id, content, entries, snapshot_id))
        self._added_manifests = written
        return written

    def _write(
        self,
        storage: Storage,
        base: TableMetadata,
        spec_id: int,
        content: str,
        entries: Iterable[ManifestEntry],
        snapshot_id: int,
    ) -> ManifestFile:
        spec = base.spec_by_id(spec_id)
        return write_manifest(
            storage,
            self._manifest_path(metadata_dir(base)),
            entries,
            format_version=base.format_version,
            spec=spec,
            schema=base.current_schema(),
            content=content,  # type: ignore[arg-type]
            snapshot_id=snapshot_id,
            partition_type=spec.partition_type(base.schemas_newest_first()),
        )

    def _rewrite(self, current: IcebergTable, parent: Snapshot | None, snapshot_id: int) -> list[ManifestFile]:
        """The parent's manifests, with those that hold removed files rewritten."""
        if parent is None:
            if self._removed:
                raise CommitConflict(f"{current.name}: branch {self.branch!r} has no snapshot; nothing to replace")
            return []
        storage = current.storage
        kept: list[ManifestFile] = []
        found: set[tuple[str, int | None]] = set()
        for manifest in manifests_of(storage, parent):
            if manifest.manifest_path in self._clean_at_start:
                kept.append(manifest)
                continue
            entries = read_manifest(storage, manifest)
            hits = [e for e in entries if e.status != EntryStatus.DELETED and e.data_file.key in self._removed]
            if not hits:
                kept.append(manifest)
                continue
            found.update(e.data_file.key for e in hits)
            rewritten = [
                e.model_copy(
                    update={"status": EntryStatus.DELETED, "snapshot_id": snapshot_id}
                    if e.data_file.key in self._removed
                    else {"status": EntryStatus.EXISTING}
                )
                for e in entries
                if e.status != EntryStatus.DELETED
            ]
            content = "deletes" if manifest.content == 1 else "data"
            kept.append(
                self._write(storage, current.metadata, manifest.partition_spec_id, content, rewritten, snapshot_id)
            )
        missing = sorted({path for path, _ in set(self._removed) - found})
        if missing:
            more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
            raise CommitConflict(
                f"{current.name}: {', '.join(missing[:3])}{more} no longer in the table: a concurrent commit removed "
                "files this change replaces"
            )
        return kept


def _now_ms() -> int:
    return int(time.time() * 1000)


def landed_snapshot(committed: TableMetadata | None, written: Iterable[str]) -> Snapshot | None:
    """The snapshot of ``committed`` whose manifest list is one of ``written`` (the attempt that landed)."""
    lists = set(written)
    if committed is None or not lists:
        return None
    return next((s for s in committed.snapshots if s.manifest_list in lists), None)
