"""Scan planning: a snapshot's live data files and the delete files that apply to each ("Scan
Planning", "Sequence Numbers", "Delete Formats").

A delete file applies to a data file when (spec section "Scan Planning"):

- position deletes: data sequence number of the data file <= that of the delete file, and the same
  partition (spec id and partition values);
- equality deletes: data sequence number of the data file < that of the delete file, and the same
  partition, or the delete file's spec is unpartitioned (a global delete).

Position delete files whose ``file_path`` bounds exclude a data file's path cannot apply to it and
are not attached (the bounds are part of the file's metrics; "Delete File Stats").

Manifests are pruned with the manifest list's partition field summaries when a partition filter is
given, and read concurrently: on object storage a manifest read is a round trip, and tables have many.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from lakeops.errors import InvalidArgument, ProtocolError
from lakeops.iceberg.deletes import FILE_PATH_ID
from lakeops.iceberg.manifest import EntryStatus, FileContent, ManifestEntry, manifests_of, read_manifest
from lakeops.iceberg.manifest_list import ManifestFile
from lakeops.iceberg.metadata import Snapshot, TableMetadata
from lakeops.iceberg.partitioning import PartitionSpec
from lakeops.iceberg.single_values import from_bytes
from lakeops.iceberg.types import IcebergType, PrimitiveType, StructType
from lakeops.predicate import Condition, PartitionPredicate
from lakeops.storage import Storage

__all__ = [
    "FileScanTask",
    "LiveFile",
    "PartitionFilter",
    "ScanPlan",
    "human_partition",
    "may_reference",
    "plan_scan",
]

#: Manifests read at once: enough to hide object-store latency, few enough to stay polite.
MANIFEST_READ_THREADS = 16

_EPOCH = dt.datetime(1970, 1, 1)


@dataclass(frozen=True)
class LiveFile:
    """A live (added or existing) entry of a snapshot, with the manifest context it needs."""

    entry: ManifestEntry
    spec_id: int
    manifest_path: str

    @property
    def path(self) -> str:
        return self.entry.data_file.file_path

    @property
    def content(self) -> FileContent:
        return FileContent(self.entry.data_file.content)

    @property
    def data_sequence_number(self) -> int:
        return self.entry.sequence_number or 0

    @property
    def partition_key(self) -> tuple[int, tuple[Any, ...]]:
        """(spec id, partition values): files share a partition only when both are equal."""
        return self.spec_id, tuple(self.entry.data_file.partition.values())

    @property
    def file_size(self) -> int:
        return self.entry.data_file.file_size_in_bytes


@dataclass(frozen=True)
class FileScanTask:
    """A data file and every delete file that applies to it."""

    file: LiveFile
    deletes: tuple[LiveFile, ...] = ()


@dataclass(frozen=True)
class ScanPlan:
    snapshot: Snapshot | None
    tasks: list[FileScanTask]
    #: Every live delete file of the snapshot (also those no selected data file uses).
    delete_files: list[LiveFile]
    manifests_total: int = 0
    manifests_read: int = 0

    @property
    def data_files(self) -> list[LiveFile]:
        return [t.file for t in self.tasks]


def _human(type_: IcebergType, value: Any) -> Any:
    """A canonical partition value as a person writes it in ``--where``: dates and timestamps as
    such, everything else unchanged."""
    if value is None or not isinstance(type_, PrimitiveType):
        return value
    if type_.name == "date":
        return dt.date(1970, 1, 1) + dt.timedelta(days=value)
    if type_.name == "timestamp":
        return _EPOCH + dt.timedelta(microseconds=value)
    if type_.name == "timestamptz":
        return (_EPOCH + dt.timedelta(microseconds=value)).replace(tzinfo=dt.UTC)
    return value


def human_partition(
    spec: PartitionSpec, partition_type: StructType, values: Mapping[str, Any], source_names: Mapping[int, str]
) -> dict[str, Any]:
    """Partition values keyed by partition field name, and for identity fields also by the source
    column's name, typed for :class:`~lakeops.predicate.PartitionPredicate`."""
    typed: dict[str, Any] = {}
    for pfield, tfield in zip(spec.fields, partition_type.fields, strict=True):
        value = _human(tfield.type, values.get(pfield.name))
        typed[pfield.name] = value
        if pfield.transform == "identity" and pfield.source_id in source_names:
            typed.setdefault(source_names[pfield.source_id], value)
    return typed


@dataclass
class PartitionFilter:
    """A ``--where`` filter on partition fields (by name) or identity-partitioned source columns."""

    predicate: PartitionPredicate
    metadata: TableMetadata
    _types: dict[int, StructType] = field(default_factory=dict)

    def __post_init__(self) -> None:
        schema = self.metadata.current_schema()
        self._sources = {fid: path[-1] for fid, (path, _, _) in schema.fields_by_id().items() if len(path) == 1}
        known: set[str] = set()
        for spec in self.metadata.partition_specs:
            self._types[spec.spec_id] = spec.partition_type(self.metadata.schemas_newest_first())
            for f in spec.fields:
                known.add(f.name)
                if f.transform == "identity" and f.source_id in self._sources:
                    known.add(self._sources[f.source_id])
        self.predicate.require_columns(sorted(known), self.metadata.location)

    def typed(self, spec_id: int, values: Mapping[str, Any]) -> dict[str, Any]:
        spec = self.metadata.spec_by_id(spec_id)
        return human_partition(spec, self._types[spec_id], values, self._sources)

    def matches(self, spec_id: int, values: Mapping[str, Any]) -> bool:
        """Whether a file of this spec and partition is selected. A spec without a column the filter
        names cannot prove a match, so its files are not selected."""
        typed = self.typed(spec_id, values)
        lowered = {k.lower() for k in typed}
        if any(c.column.lower() not in lowered for c in self.predicate.conditions):
            return False
        return self.predicate.matches(typed)

    def may_match(self, manifest: ManifestFile) -> bool:
        """Whether the manifest's partition summaries allow a match (conservative: unknown → True)."""
        spec = self.metadata.spec_by_id(manifest.partition_spec_id)
        if manifest.partitions is None or len(manifest.partitions) != len(spec.fields):
            return True
        ptype = self._types[spec.spec_id]
        ranges: dict[str, tuple[Any, Any, bool]] = {}
        for pfield, tfield, summary in zip(spec.fields, ptype.fields, manifest.partitions, strict=True):
            lower = _human(tfield.type, _decode(tfield.type, summary.lower_bound))
            upper = _human(tfield.type, _decode(tfield.type, summary.upper_bound))
            bounds = (lower, upper, summary.contains_null)
            ranges[pfield.name.lower()] = bounds
            if pfield.transform == "identity" and pfield.source_id in self._sources:
                ranges.setdefault(self._sources[pfield.source_id].lower(), bounds)
        for cond in self.predicate.conditions:
            found = ranges.get(cond.column.lower())
            if found is None:
                return False  # as in matches(): this spec cannot be filtered on that column
            if not _range_may_satisfy(cond, *found, text=self.predicate.text):
                return False
        return True


def _decode(type_: IcebergType, raw: bytes | None) -> Any:
    return None if raw is None else from_bytes(type_, raw)


def _holds(cond: Condition, value: Any, text: str) -> bool:
    return PartitionPredicate(text, (cond,)).matches({cond.column: value})


def _range_may_satisfy(cond: Condition, lower: Any, upper: Any, contains_null: bool, *, text: str) -> bool:
    """Whether some value in [lower, upper] (or a null, if present) can satisfy ``cond``."""
    if cond.op == "is null":
        return contains_null
    if lower is None or upper is None or cond.op == "is not null":
        return True  # bounds unknown (or only nulls): cannot rule the manifest out
        return True

    def at_most(value: Any, literal: Any) -> bool:
        return _holds(Condition(cond.column, "<=", (literal,)), value, text)

    def at_least(value: Any, literal: Any) -> bool:
        return _holds(Condition(cond.column, ">=", (literal,)), value, text)

    literals = cond.values
    if cond.op in ("=", "=="):
        return at_most(lower, literals[0]) and at_least(upper, literals[0])
    if cond.op == "in":
        return any(at_most(lower, lit) and at_least(upper, lit) for lit in literals)
    if cond.op in ("<", "<="):
        return _holds(cond, lower, text)
    if cond.op in (">", ">="):
        return _holds(cond, upper, text)
    if cond.op in ("!=", "<>"):
        return not (_holds(Condition(cond.column, "=", literals), lower, text) and lower == upper)
    raise InvalidArgument(f"--where {text!r}: unsupported operator {cond.op!r}")


class DeleteIndex:
    """The live delete files of a snapshot, indexed by the partition they apply to."""

    def __init__(self, deletes: Iterable[LiveFile], unpartitioned_specs: set[int]) -> None:
        self._positional: dict[tuple[int, tuple[Any, ...]], list[tuple[int, LiveFile]]] = defaultdict(list)
        self._equality: dict[tuple[int, tuple[Any, ...]], list[tuple[int, LiveFile]]] = defaultdict(list)
        self._global: list[tuple[int, LiveFile]] = []
        for delete in deletes:
            item = (delete.data_sequence_number, delete)
            if delete.content is FileContent.POSITION_DELETES:
                self._positional[delete.partition_key].append(item)
            elif delete.spec_id in unpartitioned_specs:
                self._global.append(item)
            else:
                self._equality[delete.partition_key].append(item)
        for bucket in (*self._positional.values(), *self._equality.values(), self._global):
            bucket.sort(key=lambda item: (item[0], item[1].path))

    def for_data_file(self, data: LiveFile) -> tuple[LiveFile, ...]:
        seq = data.data_sequence_number
        found: list[LiveFile] = []
        positional = self._positional.get(data.partition_key, [])
        start = bisect.bisect_left(positional, seq, key=lambda item: item[0])  # delete seq >= data seq
        found.extend(d for _, d in positional[start:] if may_reference(d, data.path))
        vectors = [d for d in found if d.entry.data_file.deletion_vector() is not None]
        if len(vectors) > 1:  # "Deletion Vectors": at most one per data file in a snapshot
            raise ProtocolError(
                f"{data.path} has {len(vectors)} deletion vectors ({', '.join(sorted(d.path for d in vectors))}); "
                "a data file may have at most one"
            )
        for bucket in (self._equality.get(data.partition_key, []), self._global):
            start = bisect.bisect_right(bucket, seq, key=lambda item: item[0])  # delete seq > data seq
            found.extend(d for _, d in bucket[start:])
        return tuple(found)


def may_reference(delete: LiveFile, data_path: str) -> bool:
    """Whether a position delete file may hold deletes of ``data_path``: its ``referenced_data_file``
    (every DV has one) or else its ``file_path`` bounds admit it."""
    df = delete.entry.data_file
    if df.referenced_data_file is not None:
        return df.referenced_data_file == data_path
    lower = (df.lower_bounds or {}).get(FILE_PATH_ID)
    upper = (df.upper_bounds or {}).get(FILE_PATH_ID)
    string = PrimitiveType(name="string")
    if lower is not None and data_path < from_bytes(string, lower):
        return False
    return not (upper is not None and data_path > from_bytes(string, upper))


def read_live_files(
    storage: Storage, manifests: Sequence[ManifestFile], *, threads: int = MANIFEST_READ_THREADS
) -> list[LiveFile]:
    """Every live entry of the manifests, in manifest order (entries keep their manifest's order)."""

    def read(manifest: ManifestFile) -> list[LiveFile]:
        return [
            LiveFile(entry, manifest.partition_spec_id, manifest.manifest_path)
            for entry in read_manifest(storage, manifest)
            if entry.status != EntryStatus.DELETED
        ]

    if len(manifests) <= 1:
        return [f for m in manifests for f in read(m)]
    with ThreadPoolExecutor(max_workers=min(threads, len(manifests)), thread_name_prefix="manifest") as pool:
        return [f for files in pool.map(read, manifests) for f in files]


def plan_scan(
    storage: Storage,
    metadata: TableMetadata,
    snapshot: Snapshot | None,
    *,
    partition_filter: PartitionFilter | None = None,
) -> ScanPlan:
    """The data files of ``snapshot`` (selected by ``partition_filter``) and their delete files."""
    if snapshot is None:
        return ScanPlan(snapshot, [], [])
    manifests = manifests_of(storage, snapshot)
    selected = [m for m in manifests if partition_filter is None or partition_filter.may_match(m)]
    # Delete manifests are always read whole: an unpartitioned (global) delete applies everywhere.
    delete_manifests = [m for m in manifests if m.content == 1]
    data_manifests = [m for m in selected if m.content == 0]
    deletes = read_live_files(storage, delete_manifests)
    index = DeleteIndex(deletes, {s.spec_id for s in metadata.partition_specs if s.is_unpartitioned})
    tasks = [
        FileScanTask(data, index.for_data_file(data))
        for data in read_live_files(storage, data_manifests)
        if partition_filter is None or partition_filter.matches(data.spec_id, data.entry.data_file.partition)
    ]
    return ScanPlan(
        snapshot,
        tasks,
        deletes,
        manifests_total=len(manifests),
        manifests_read=len(data_manifests) + len(delete_manifests),
    )
