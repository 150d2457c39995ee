"""Rewriting (merging) the manifests of an Iceberg table's current snapshot, committed as a ``replace``
snapshot with no data change ("Manifests", "Manifest Entry Fields", "Sequence Number Inheritance",
"Snapshots" (operation ``replace``), "Manifest Lists", "Commit Conflict Resolution and Retry").

Why: every fast append adds a manifest and planning reads every manifest, so many small manifests
make every scan slow. The rules follow the reference implementation's ``rewrite_manifests`` action:

- the target size is ``commit.manifest.target-size-bytes`` (default 8 MB) or the option; manifests
  of each partition spec and content (data, deletes) are merged separately, because a manifest
  holds the tuples of one spec and one kind of file; only manifests below the target are rewritten
  (unless ``rewrite_all``), and a lone manifest that would become one manifest is left alone;
- live entries (ADDED, EXISTING) are written as EXISTING with their snapshot id and both sequence
  numbers explicit, as the spec requires of a file written to a new manifest: the data sequence
  number decides which deletes apply to a file and must never change. DELETED entries are dropped:
  they only describe the snapshot that deleted the file, which keeps its own manifests;
- entries are sorted by partition tuple (then path) and cut into ``ceil(bytes / target)`` manifests
  of equal entry counts, so a partition's files sit together and partition summaries are tight;
- no file is added or removed: the totals carry over and the summary holds the reference's
  ``manifests-created``, ``manifests-kept``, ``manifests-replaced`` and ``entries-processed``.

Each output manifest is written by one Spark task (:func:`write_output`). Its unit names the source
manifests and, per source, the ranges of live-entry positions it takes — a few integers per entry
rather than the entries themselves, so the payload does not grow with the width of the files'
metrics; the sources are below the target size, so a task re-reading them is cheap. The task sorts
with the same key as the driver, so the order is the one planned.

The commit (:class:`RewriteManifests`) applies on top of any newer snapshot that still lists every
replaced manifest (manifests committed meanwhile are carried over); otherwise it is a
:class:`~lakeops.errors.CommitConflict` and the manifests this rewrite wrote are deleted. The new
snapshot's id is chosen at planning, but the manifests do not record it (all their entries are
EXISTING), so a retry that must pick another id only restamps the manifest-list records.
"""

from __future__ import annotations

import math
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from lakeops.errors import CommitConflict, InvalidArgument, ProtocolError
from lakeops.iceberg.commit import CatalogCommit, commit_change
from lakeops.iceberg.manifest import EntryStatus, ManifestEntry, manifests_of, read_manifest, write_manifest
from lakeops.iceberg.manifest_list import ManifestContent, ManifestFile, write_manifest_list
from lakeops.iceberg.metadata import MAIN_BRANCH, Snapshot, TableMetadata
from lakeops.iceberg.partitioning import PartitionSpec
from lakeops.iceberg.properties import MANIFEST_TARGET_SIZE_BYTES
from lakeops.iceberg.scan import LiveFile, read_live_files
from lakeops.iceberg.snapshot_update import (
    add_snapshot,
    assign_row_ids,
    inside_location,
    landed_snapshot,
    metadata_dir,
    new_snapshot_id,
    summarize_changes,
)
from lakeops.iceberg.table import IcebergTable, TableRef, load_table
from lakeops.iceberg.types import Schema, StructType
from lakeops.plan import CommitOutcome, MaintenancePlan
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize
from lakeops.units import format_size

__all__ = [
    "DEFAULT_TARGET_MANIFEST_SIZE",
    "OutputManifest",
    "RewriteManifests",
    "RewriteManifestsOptions",
    "RewriteManifestsPlan",
    "SourceSlice",
    "WrittenManifest",
    "cluster",
    "commit_rewrite",
    "discard",
    "entry_order",
    "output_count",
    "plan_rewrite_manifests",
    "write_output",
]

#: ``commit.manifest.target-size-bytes`` default.
DEFAULT_TARGET_MANIFEST_SIZE = 8 * 1024 * 1024


class RewriteManifestsOptions(BaseModel):
    """``target_manifest_size`` (None: the table property, else 8 MB); ``rewrite_all``: rewrite
    manifests at or above the target too."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target_manifest_size: int | None = Field(default=None, gt=0)
    rewrite_all: bool = False


class SourceSlice(BaseModel):
    """The live entries an output manifest takes from one source manifest: ``[start, stop)`` ranges
    of positions among the source's live entries, in file order."""

    model_config = ConfigDict(frozen=True)

    manifest: ManifestFile
    ranges: list[tuple[int, int]]

    @property
    def entries(self) -> int:
        return sum(stop - start for start, stop in self.ranges)


class OutputManifest(BaseModel):
    """One manifest to write: the unit of one Spark task."""

    model_config = ConfigDict(frozen=True)

    unit_id: int
    table: str
    storage: StorageOptions
    #: The table location: the task may write only below it or the manifest directory it was given.
    table_location: str
    location: str
    format_version: int
    #: The snapshot the plan commits (manifest-list records are restamped if a retry needs another).
    snapshot_id: int
    content: Literal["data", "deletes"]
    spec: PartitionSpec
    table_schema: Schema
    partition_type: StructType
    sources: list[SourceSlice]

    @property
    def entries(self) -> int:
        return sum(s.entries for s in self.sources)


class WrittenManifest(BaseModel):
    unit_id: int
    manifest: ManifestFile
    entries: int
    seconds: float


class RewriteManifestsPlan(BaseModel, MaintenancePlan[OutputManifest, WrittenManifest]):
    """Immutable, printable plan pinned to the current snapshot of the table: one ``replace`` snapshot."""

    model_config = ConfigDict(frozen=True)
    format: ClassVar[str] = "iceberg"
    #: The report's status once written.
    done_status: ClassVar[str] = "committed"
    unit_noun: ClassVar[str] = "manifests"

    table: TableRef
    table_name: str
    location: str
    metadata_location: str
    snapshot_id: int | None
    new_snapshot_id: int
    target_manifest_size: int
    manifests_before: int
    replaced: list[ManifestFile]
    #: Live entries of the replaced manifests: what the new manifests hold.
    entries: int
    outputs: list[OutputManifest]

    @property
    def replaced_bytes(self) -> int:
        return sum(m.manifest_length for m in self.replaced)

    @property
    def manifests_after(self) -> int:
        return self.manifests_before - len(self.replaced) + len(self.outputs)

    @property
    def has_work(self) -> bool:
        return bool(self.replaced)

    @property
    def idle_status(self) -> str:
        """The report's status when nothing is written: a dry run's, or why there is nothing to do."""
        return "planned" if self.replaced else "nothing to rewrite"

    def describe(self) -> str:
        return (
            f"snapshot {self.snapshot_id}: {len(self.replaced)} of {self.manifests_before} manifests "
            f"({format_size(self.replaced_bytes)}, {self.entries} entries) into {len(self.outputs)}"
        )

    def describe_commit(self, outcome: CommitOutcome) -> str:
        return f"committed snapshot {outcome.snapshot_id} ({outcome.metrics.get('manifests_after')} manifests)"

    def report_fields(self) -> dict[str, int | None]:
        """The plan's figures, named as the checkpoint report's fields."""
        return {
            "snapshot_id": self.snapshot_id,
            "manifests_before": self.manifests_before,
            "manifests_after": self.manifests_after,
            "manifests_replaced": len(self.replaced),
            "manifests_created": len(self.outputs),
            "entries": self.entries,
            "replaced_bytes": self.replaced_bytes,
        }

    def table_label(self) -> str:
        return self.table_name

    def work_units(self) -> list[OutputManifest]:
        return self.outputs

    def task(self) -> Callable[[OutputManifest], WrittenManifest]:
        return write_output

    def result_type(self) -> type[WrittenManifest]:
        return WrittenManifest

    def commit(
        self,
        units: Sequence[OutputManifest],
        results: Sequence[WrittenManifest],
        storage_options: StorageOptions,
        *,
        final: bool,
    ) -> CommitOutcome:
        done = commit_rewrite(self, results, storage_options)
        if done is None:
            return CommitOutcome()
        committed = done.metadata.current_snapshot()
        assert committed is not None  # the snapshot just committed
        return CommitOutcome(
            version=committed.sequence_number,
            snapshot_id=committed.snapshot_id,
            attempts=done.attempts,
            metrics={
                "manifests_after": int((committed.summary or {}).get("manifests-kept", 0)) + len(results),
                "bytes": sum(w.manifest.manifest_length for w in results),
            },
        )

    def discard(self, results: Sequence[WrittenManifest], storage_options: StorageOptions) -> int:
        return discard(self, results, storage_options)


# --- plan: driver ----------------------------------------------------------------------------------


def output_count(total_bytes: int, target: int, entries: int) -> int:
    """How many manifests ``entries`` live entries of ``total_bytes`` of source manifests become:
    ``ceil(bytes / target)``, at least one while there are entries, never more than the entries."""
    return min(max(1, math.ceil(total_bytes / target)), entries)


def _value_key(value: Any) -> tuple[int, Any]:
    """A total order on one partition field's canonical values: null first, NaN last."""
    if value is None:
        return (0, 0)
    if isinstance(value, float) and math.isnan(value):
        return (2, 0)
    return (1, value)


def entry_order(entry: ManifestEntry, names: Sequence[str]) -> tuple[Any, ...]:
    """The clustering key: the partition tuple in spec order, then the file path (unique in a
    snapshot, so the order is total and driver and tasks agree on it)."""
    partition = entry.data_file.partition
    return (tuple(_value_key(partition.get(name)) for name in names), entry.data_file.file_path)


def _ranges(positions: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted positions as ``[start, stop)`` runs."""
    runs: list[tuple[int, int]] = []
    for p in positions:
        if runs and runs[-1][1] == p:
            runs[-1] = (runs[-1][0], p + 1)
        else:
            runs.append((p, p + 1))
    return runs


def cluster(
    files: Sequence[LiveFile], manifests: Sequence[ManifestFile], names: Sequence[str], count: int
) -> list[list[SourceSlice]]:
    """Sort ``files`` (the live entries of ``manifests``, in manifest order as
    :func:`~lakeops.iceberg.scan.read_live_files` returns them) by :func:`entry_order` and cut them
    into ``count`` contiguous runs of equal size; each run as the slices of the sources it takes."""
    seen: dict[str, int] = defaultdict(int)
    positions = []
    for f in files:
        positions.append(seen[f.manifest_path])
        seen[f.manifest_path] += 1
    ordered = sorted(range(len(files)), key=lambda i: entry_order(files[i].entry, names))
    by_path = {m.manifest_path: m for m in manifests}
    unknown = set(seen) - set(by_path)
    if unknown:
        raise InvalidArgument(f"entries of {sorted(unknown)[0]}, which is not among the manifests to rewrite")
    groups: list[list[SourceSlice]] = []
    start = 0
    for k in range(count):
        stop = start + len(ordered) // count + (1 if k < len(ordered) % count else 0)
        taken: dict[str, list[int]] = defaultdict(list)
        for i in ordered[start:stop]:
            taken[files[i].manifest_path].append(positions[i])
        groups.append(
            [
                SourceSlice(manifest=m, ranges=_ranges(sorted(taken[m.manifest_path])))
                for m in manifests
                if m.manifest_path in taken
            ]
        )
        start = stop
    return groups


def _target_size(metadata: TableMetadata, options: RewriteManifestsOptions) -> int:
    target = options.target_manifest_size or metadata.int_property(
        MANIFEST_TARGET_SIZE_BYTES, DEFAULT_TARGET_MANIFEST_SIZE
    )
    if target <= 0:
        raise InvalidArgument(f"{metadata.location}: {MANIFEST_TARGET_SIZE_BYTES} must be positive, not {target}")
    return target


def plan_rewrite_manifests(
    table: IcebergTable, options: RewriteManifestsOptions, storage_options: StorageOptions
) -> RewriteManifestsPlan:
    """Read the current snapshot's manifests and choose which to merge into which new manifests."""
    table.metadata.check_writable("checkpoint")
    table.metadata.next_sequence_number()  # refused now, before any manifest is written, if there is none
    metadata, snapshot = table.metadata, table.metadata.current_snapshot()
    target = _target_size(metadata, options)
    manifests = manifests_of(table.storage, snapshot) if snapshot is not None else []
    by_kind: dict[tuple[int, int], list[ManifestFile]] = defaultdict(list)
    for m in manifests:
        if options.rewrite_all or m.manifest_length < target:
            by_kind[(m.partition_spec_id, int(m.content))].append(m)
    planned_id = new_snapshot_id(metadata)
    directory = metadata_dir(metadata)
    run = uuid.uuid4().hex
    schemas = metadata.schemas_newest_first()
    replaced: list[ManifestFile] = []
    outputs: list[OutputManifest] = []
    entries = 0
    for (spec_id, content), group in sorted(by_kind.items()):
        if len(group) == 1 and group[0].manifest_length <= target:
            continue  # one manifest would become the same one manifest
        files = read_live_files(table.storage, group)
        spec = metadata.spec_by_id(spec_id)
        ptype = spec.partition_type(schemas)
        count = output_count(sum(m.manifest_length for m in group), target, len(files))
        for sources in cluster(files, group, [f.name for f in ptype.fields], count):
            outputs.append(
                OutputManifest(
                    unit_id=len(outputs),
                    table=table.name,
                    storage=storage_options,
                    table_location=metadata.location,
                    location=f"{directory}/{run}-r{len(outputs):05d}.avro",
                    format_version=metadata.format_version,
                    snapshot_id=planned_id,
                    content="deletes" if content == ManifestContent.DELETES else "data",
                    spec=spec,
                    table_schema=metadata.current_schema(),
                    partition_type=ptype,
                    sources=sources,
                )
            )
        replaced.extend(group)
        entries += len(files)
    return RewriteManifestsPlan(
        table=table.ref,
        table_name=table.name,
        location=metadata.location,
        metadata_location=table.metadata_location,
        snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
        new_snapshot_id=planned_id,
        target_manifest_size=target,
        manifests_before=len(manifests),
        replaced=replaced,
        entries=entries,
        outputs=outputs,
    )


# --- execute: runs inside a Spark task -------------------------------------------------------------


def write_output(unit: OutputManifest) -> WrittenManifest:
    """Write one new manifest: the unit's entries as EXISTING, numbers explicit, in clustering order."""
    # The manifest directory is a root of its own only when write.metadata.path puts it elsewhere.
    directory = normalize(unit.location.rsplit("/", 1)[0], literal=True)  # Iceberg paths: literal
    root = normalize(unit.table_location, literal=True)
    storage, started = open_storage(root, unit.storage, also=[directory]), time.monotonic()
    entries: list[ManifestEntry] = []
    for source in unit.sources:
        live = read_manifest(storage, source.manifest)
        for start, stop in source.ranges:
            if stop > len(live):
                raise ProtocolError(
                    f"{unit.table}: {source.manifest.describe()} has {len(live)} live entries, but the plan "
                    f"takes entries up to position {stop} (the manifest changed since planning)"
                )
            entries.extend(e.model_copy(update={"status": EntryStatus.EXISTING}) for e in live[start:stop])
    names = [f.name for f in unit.partition_type.fields]
    entries.sort(key=lambda e: entry_order(e, names))
    manifest = write_manifest(
        storage,
        unit.location,
        entries,
        format_version=unit.format_version,
        spec=unit.spec,
        schema=unit.table_schema,
        content=unit.content,
        snapshot_id=unit.snapshot_id,
        partition_type=unit.partition_type,
    )
    return WrittenManifest(
        unit_id=unit.unit_id, manifest=manifest, entries=len(entries), seconds=time.monotonic() - started
    )


# --- commit: driver --------------------------------------------------------------------------------


def _live_count(manifests: Sequence[ManifestFile]) -> int | None:
    """Live files the manifests list (None when a v1 list left a count unknown)."""
    total = 0
    for m in manifests:
        if m.added_files_count is None or m.existing_files_count is None:
            return None
        total += m.added_files_count + m.existing_files_count
    return total


@dataclass
class RewriteManifests:
    """Replace the ``replaced`` manifests of ``branch`` by ``added`` ones holding the same live
    entries, as a ``replace`` snapshot. ``table`` gives storage and the root files must be under."""

    table: IcebergTable
    replaced: Sequence[ManifestFile]
    added: Sequence[ManifestFile]
    snapshot_id: int
    branch: str = MAIN_BRANCH
    #: Manifest lists written by attempts (the added manifests are owned too, see :meth:`abandon`).
    _written: list[str] = field(default_factory=list)
    _commit_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def __post_init__(self) -> None:
        # The reference's guard: the rewrite must neither lose nor invent a file.
        replaced, added = _live_count(self.replaced), _live_count(self.added)
        if replaced is not None and replaced != added:
            raise InvalidArgument(
                f"{self.table.name}: the new manifests hold {added} live files, the replaced ones {replaced}"
            )

    @property
    def entries(self) -> int:
        return _live_count(self.added) or 0

    # --- TableChange -------------------------------------------------------------------------

    def validate(self, start: IcebergTable, current: IcebergTable) -> None:
        """Every replaced manifest must still be in the branch's snapshot."""
        self._kept(current)

    def apply(self, current: IcebergTable) -> TableMetadata:
        base = current.metadata
        kept = self._kept(current)
        parent = base.snapshot_for_ref(self.branch)
        assert parent is not None  # _kept refuses a branch without a snapshot
        if any(s.snapshot_id == self.snapshot_id for s in base.snapshots):
            self.snapshot_id = new_snapshot_id(base)
        added = [m.model_copy(update={"added_snapshot_id": self.snapshot_id}) for m in self.added]
        sequence_number = base.next_sequence_number()
        manifests, lineage = assign_row_ids(base, current.storage, [*added, *kept])
        manifest_list = f"{metadata_dir(base)}/snap-{self.snapshot_id}-{len(self._written)}-{self._commit_id}.avro"
        self._written.append(manifest_list)
        write_manifest_list(
            current.storage,
            manifest_list,
            manifests,
            format_version=base.format_version,
            snapshot_id=self.snapshot_id,
            parent_snapshot_id=parent.snapshot_id,
            sequence_number=sequence_number,
        )
        counters = {
            "manifests-created": str(len(added)),
            "manifests-kept": str(len(kept)),
            "manifests-replaced": str(len(self.replaced)),
            "entries-processed": str(self.entries),
            "lakeops.operation": "checkpoint",
        }
        snapshot = Snapshot.model_validate(
            {
                "snapshot-id": self.snapshot_id,
                "parent-snapshot-id": parent.snapshot_id,
                "sequence-number": sequence_number,
                "timestamp-ms": max(base.last_updated_ms, int(time.time() * 1000)),
                "manifest-list": manifest_list,
                "summary": summarize_changes("replace", [], [], parent, changed_partitions=0, extra=counters),
                "schema-id": base.current_schema_id,
                **lineage,
            }
        )
        return add_snapshot(base, snapshot, self.branch)

    def abandon(self, committed: TableMetadata | None) -> None:
        """Delete the manifest lists ``committed`` (the table read back) does not use, and the new
        manifests unless it does; our snapshot is found by its manifest list, wherever it is."""
        landed = landed_snapshot(committed, self._written)
        used = landed.manifest_list if landed is not None else None
        doomed = [p for p in self._written if p != used]
        if used is None:
            doomed += [m.manifest_path for m in self.added]
        doomed = inside_location(self.table.metadata.location, doomed)
        if doomed:
            self.table.storage.delete_many(doomed)
        self._written = [used] if used is not None else []

    def _kept(self, current: IcebergTable) -> list[ManifestFile]:
        """The branch's manifests other than the replaced ones; a conflict if one of those is gone."""
        head = current.metadata.snapshot_for_ref(self.branch)
        if head is None:
            raise CommitConflict(f"{current.name}: branch {self.branch!r} no longer has a snapshot")
        manifests = manifests_of(current.storage, head)
        replaced = {m.manifest_path for m in self.replaced}
        missing = sorted(replaced - {m.manifest_path for m in manifests})
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise CommitConflict(
                f"{current.name}: manifest {missing[0]}{more} is no longer in snapshot {head.snapshot_id}: a "
                "concurrent commit rewrote manifests this rewrite replaces"
            )
        return [m for m in manifests if m.manifest_path not in replaced]


def commit_rewrite(
    plan: RewriteManifestsPlan, results: Sequence[WrittenManifest], storage_options: StorageOptions
) -> CatalogCommit | None:
    """Commit the written manifests as one ``replace`` snapshot; None when the plan replaces nothing.
    A :class:`CommitConflict` has deleted every manifest this rewrite wrote."""
    by_id = {r.unit_id: r for r in results}
    if set(by_id) != {u.unit_id for u in plan.outputs}:
        raise InvalidArgument(f"{plan.table_name}: written manifests do not match the plan's outputs")
    if not plan.replaced:
        return None
    table = load_table(plan.table, storage_options)
    try:
        change = RewriteManifests(
            table=table,
            replaced=plan.replaced,
            added=[by_id[u.unit_id].manifest for u in plan.outputs],
            snapshot_id=plan.new_snapshot_id,
        )
    except InvalidArgument:
        discard(plan, results, storage_options)
        raise
    # The change validates itself in apply (the replaced manifests must be current), so the table
    # as loaded now is the right start: a plan from an older snapshot still commits if they are.
    return commit_change(table, change, operation="checkpoint")


def discard(plan: RewriteManifestsPlan, results: Sequence[WrittenManifest], storage_options: StorageOptions) -> int:
    """Delete manifests tasks wrote for a rewrite that will not commit (never outside the table)."""
    paths = [normalize(r.manifest.manifest_path, literal=True) for r in results]  # Iceberg paths: literal
    return open_storage(normalize(plan.location, literal=True), storage_options).delete_many(paths) if paths else 0
