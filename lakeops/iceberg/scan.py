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
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict

from lakeops.errors import InvalidArgument, ProtocolError
from lakeops.iceberg.deletes import FILE_PATH_ID
from lakeops.iceberg.manifest import DataFile, EntryStatus, FileContent, ManifestEntry, manifests_of, read_manifest
from lakeops.iceberg.manifest_columns import read_planning_columns
from lakeops.iceberg.manifest_list import ManifestFile
from lakeops.iceberg.metadata import Snapshot, TableMetadata
from lakeops.iceberg.partitioning import PartitionSpec
from lakeops.iceberg.single_values import from_bytes, from_json, to_json
from lakeops.iceberg.types import IcebergType, PrimitiveType, StructType
from lakeops.predicate import Condition, PartitionPredicate
from lakeops.storage import Storage

__all__ = [
    "FileScanTask",
    "FileSelection",
    "LiveFile",
    "ManifestReader",
    "ManifestSelection",
    "PartitionFilter",
    "ScanPlan",
    "human_partition",
    "may_reference",
    "partition_json",
    "plan_scan",
    "plan_selected_scan",
    "read_in_threads",
    "select_from_manifest",
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
    #: Live data files (and their bytes) the filter matched, of which ``tasks`` may hold only those a
    #: :class:`FileSelection` chose; None: ``tasks`` holds them all.
    files_matched: int | None = None
    bytes_matched: int | None = None

    @property
    def live_files(self) -> int:
        return len(self.tasks) if self.files_matched is None else self.files_matched

    @property
    def live_bytes(self) -> int:
        return sum(t.file.file_size for t in self.tasks) if self.bytes_matched is None else self.bytes_matched

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
    manifests = _Manifests.of(storage, metadata, snapshot, partition_filter)
    tasks = [
        FileScanTask(data, manifests.index.for_data_file(data))
        for data in read_live_files(storage, manifests.data)
        if partition_filter is None or partition_filter.matches(data.spec_id, data.entry.data_file.partition)
    ]
    return manifests.plan(snapshot, tasks)


@dataclass(frozen=True)
class _Manifests:
    """A snapshot's manifests as a scan reads them: the data manifests the filter may match, and
    every delete file, read whole (an unpartitioned, global delete applies everywhere), indexed."""

    total: int
    data: list[ManifestFile]
    deletes: list[LiveFile]
    read: int
    index: DeleteIndex
    unpartitioned: set[int]

    @classmethod
    def of(
        cls, storage: Storage, metadata: TableMetadata, snapshot: Snapshot, partition_filter: PartitionFilter | None
    ) -> _Manifests:
        manifests = manifests_of(storage, snapshot)
        selected = [m for m in manifests if partition_filter is None or partition_filter.may_match(m)]
        delete_manifests = [m for m in manifests if m.content == 1]
        data = [m for m in selected if m.content == 0]
        deletes = read_live_files(storage, delete_manifests)
        unpartitioned = {s.spec_id for s in metadata.partition_specs if s.is_unpartitioned}
        index = DeleteIndex(deletes, unpartitioned)
        return cls(len(manifests), data, deletes, len(data) + len(delete_manifests), index, unpartitioned)

    def plan(self, snapshot: Snapshot, tasks: list[FileScanTask], **matched: int) -> ScanPlan:
        return ScanPlan(snapshot, tasks, self.deletes, manifests_total=self.total, manifests_read=self.read, **matched)


# --- planning from columns: millions of entries, objects only for the files a plan acts on ----------


class FileSelection(BaseModel):
    """Which live data files a plan needs whole, decided from each manifest's planning columns
    (:mod:`lakeops.iceberg.manifest_columns`): those whose size is outside ``low``..``high``, every file
    of the ``partitions`` (spec id, partition JSON) some delete file may apply to, or every file when
    ``every_file`` (a global equality delete applies everywhere). The other files are only counted.
    A model: it travels to executor tasks with the manifests they read."""

    model_config = ConfigDict(frozen=True)

    low: int
    high: int
    partitions: frozenset[tuple[int, str]] = frozenset()
    every_file: bool = False


@dataclass(frozen=True)
class ManifestSelection:
    """:func:`select_from_manifest`'s answer: ``chosen`` rows, ``totals`` (partition,
    file_size_in_bytes_count, file_size_in_bytes_sum)."""

    spec_id: int
    chosen: pa.Table
    totals: pa.Table


def select_from_manifest(storage: Storage, manifest: ManifestFile, selection: FileSelection) -> ManifestSelection:
    """One data manifest's live entries: the planning columns of the files ``selection`` chooses
    (with ``manifest_path``), and the count and bytes of every live file per partition. Runs on the
    driver or in an executor task; either way nothing per entry outlives the manifest."""
    batch = read_planning_columns(storage, manifest)
    sizes = batch.column("file_size_in_bytes")
    if selection.every_file:
        mask = pa.array([True] * batch.num_rows, pa.bool_())
    else:
        mask = pc.or_(pc.less(sizes, selection.low), pc.greater(sizes, selection.high))
        here = [p for spec_id, p in selection.partitions if spec_id == manifest.partition_spec_id]
        if here:
            mask = pc.or_(mask, pc.is_in(batch.column("partition"), value_set=pa.array(here, pa.string())))
    chosen = pa.Table.from_batches([batch.filter(mask)])
    chosen = chosen.append_column("manifest_path", pa.array([manifest.manifest_path] * chosen.num_rows, pa.string()))
    totals = (
        pa.Table.from_batches([batch.select(["partition", "file_size_in_bytes"])])
        .group_by("partition")
        .aggregate([("file_size_in_bytes", "count"), ("file_size_in_bytes", "sum")])
    )
    return ManifestSelection(manifest.partition_spec_id, chosen, totals)


ManifestReader = Callable[[Sequence[ManifestFile], FileSelection], Iterable[ManifestSelection]]


def read_in_threads(storage: Storage, *, threads: int = MANIFEST_READ_THREADS) -> ManifestReader:
    """Read the manifests' selections in driver threads."""

    def read(manifests: Sequence[ManifestFile], selection: FileSelection) -> Iterable[ManifestSelection]:
        if not manifests:
            return []
        with ThreadPoolExecutor(max_workers=min(threads, len(manifests)), thread_name_prefix="manifest") as pool:
            return list(pool.map(lambda m: select_from_manifest(storage, m, selection), manifests))

    return read


def partition_json(partition_type: StructType, values: Mapping[str, Any]) -> str:
    """A partition tuple as the ``partition`` planning column spells it."""
    return json.dumps([to_json(f.type, values.get(f.name)) for f in partition_type.fields])


def plan_selected_scan(
    storage: Storage,
    metadata: TableMetadata,
    snapshot: Snapshot | None,
    *,
    low: int,
    high: int,
    partition_filter: PartitionFilter | None = None,
    reader: ManifestReader | None = None,
) -> ScanPlan:
    """:func:`plan_scan` for a plan that acts on few of many files: every delete file is read whole,
    the data manifests as planning columns (by ``reader``, driver threads by default), and only the
    data files a :class:`FileSelection` of ``low``/``high`` chooses become tasks, each with the
    deletes that apply to it (the same rules as :func:`plan_scan`); the others are counted in
    ``files_matched``/``bytes_matched``. A task's entry holds the planning fields only (path, format,
    partition, counts, size, sequence number, first row id): what bin-packing, delete matching and a
    ``replace`` commit (which rewrites the manifests from their own entries) read."""
    if snapshot is None:
        return ScanPlan(snapshot, [], [], files_matched=0, bytes_matched=0)
    manifests = _Manifests.of(storage, metadata, snapshot, partition_filter)
    deletes, unpartitioned = manifests.deletes, manifests.unpartitioned
    schemas = metadata.schemas_newest_first()
    types = {s.spec_id: s.partition_type(schemas) for s in metadata.partition_specs}
    selection = FileSelection(
        low=low,
        high=high,
        partitions=frozenset(
            (d.spec_id, partition_json(types[d.spec_id], d.entry.data_file.partition)) for d in deletes
        ),
        every_file=any(d.content is FileContent.EQUALITY_DELETES and d.spec_id in unpartitioned for d in deletes),
    )
    values: dict[tuple[int, str], dict[str, Any]] = {}

    def partition(spec_id: int, text: str) -> dict[str, Any]:
        key = (spec_id, text)
        if key not in values:
            ptype = types[spec_id]
            values[key] = {f.name: from_json(f.type, v) for f, v in zip(ptype.fields, json.loads(text), strict=True)}
        return values[key]

    def matches(spec_id: int, text: str) -> bool:
        return partition_filter is None or partition_filter.matches(spec_id, partition(spec_id, text))

    tasks: list[FileScanTask] = []
    files = total_bytes = 0
    for found in (reader or read_in_threads(storage))(manifests.data, selection):
        totals = found.totals
        for text, count, size in zip(
            totals.column("partition").to_pylist(),
            totals.column("file_size_in_bytes_count").to_pylist(),
            totals.column("file_size_in_bytes_sum").to_pylist(),
            strict=True,
        ):
            if matches(found.spec_id, text):
                files, total_bytes = files + count, total_bytes + size
        for row in found.chosen.to_pylist():
            if not matches(row["spec_id"], row["partition"]):
                continue
            entry = ManifestEntry(
                status=EntryStatus(row["status"]),
                sequence_number=row["data_sequence_number"],
                data_file=DataFile(
                    content=FileContent(row["content"]),
                    file_path=row["file_path"],
                    file_format=row["file_format"],
                    partition=partition(row["spec_id"], row["partition"]),
                    record_count=row["record_count"],
                    file_size_in_bytes=row["file_size_in_bytes"],
                    first_row_id=row["first_row_id"],
                ),
            )
            live = LiveFile(entry, row["spec_id"], row["manifest_path"])
            tasks.append(FileScanTask(live, manifests.index.for_data_file(live)))
    return manifests.plan(snapshot, tasks, files_matched=files, bytes_matched=total_bytes)
