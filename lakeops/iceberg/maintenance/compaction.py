"""Iceberg data-file compaction: bin-pack rewriting with deletes applied, committed as ``replace``.

Selection follows the reference implementation's bin-pack rewrite: per partition (spec and values),
files smaller than ``min-file-size`` (75% of the target) or larger than ``max-file-size`` (180%), or
with at least ``delete-file-threshold`` delete files applied, are grouped into file groups of at most
``max-file-group-size`` bytes. A group is rewritten when it has ``min-input-files`` files, or holds
more than a target file's worth of data in several files, or contains a file that is too large or
has too many deletes.

Each group is one Spark task (:func:`rewrite_group`): it reads every file by field id ("Column
Projection"), applies the position and equality deletes the scan planner attached ("Scan Planning"),
optionally sorts by the table's sort order ("Sorting") and writes files of about the target size with
full metrics. The commit (:func:`commit_groups`) is a ``replace`` snapshot validated from the starting
snapshot (:class:`~lakeops.iceberg.snapshot_update.ReplaceFiles`); new files carry the starting
snapshot's data sequence number so equality deletes committed meanwhile still apply to their rows.
Delete files left with no data file they could apply to are removed in the same snapshot.

When a commit lands first, each retry drops the groups it invalidated — a rewritten file gone, or a
position delete added since that may apply to one
(https://iceberg.apache.org/spec/#commit-conflict-resolution-and-retry) — and commits the others, as
the reference implementation's partial progress does per file group; the dropped groups' new files
are deleted once the outcome is known. Dropping a group keeps its old files, to which a delete file
planned as dangling may still apply, so then no delete file is removed.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar
from urllib.parse import quote_plus

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, PrivateAttr

from lakeops.errors import CommitConflict, InvalidArgument, UnsupportedFeature
from lakeops.iceberg.commit import RetryPolicy, commit_change
from lakeops.iceberg.data_reader import iter_parquet
from lakeops.iceberg.data_writer import ParquetDataWriter, WrittenFile
from lakeops.iceberg.deletes import (
    apply_equality_deletes,
    apply_position_deletes,
    read_equality_deletes,
    read_position_deletes,
)
from lakeops.iceberg.maintenance.options import IcebergCompactionOptions
from lakeops.iceberg.manifest import DataFile, DeletionVectorRef, FileContent
from lakeops.iceberg.metadata import TableMetadata
from lakeops.iceberg.partitioning import PartitionSpec, SortOrder
from lakeops.iceberg.properties import DEFAULT_NAME_MAPPING, WRITE_DATA_PATH, WRITE_TARGET_FILE_SIZE_BYTES
from lakeops.iceberg.row_lineage import LINEAGE_FIELDS, inherit
from lakeops.iceberg.scan import (
    FileScanTask,
    LiveFile,
    ManifestReader,
    PartitionFilter,
    ScanPlan,
    may_reference,
    plan_selected_scan,
)
from lakeops.iceberg.single_values import from_json, to_json
from lakeops.iceberg.snapshot_update import ReplaceFiles
from lakeops.iceberg.table import IcebergTable, TableRef, load_table, read_metadata, table_storage
from lakeops.iceberg.transforms import parse_transform
from lakeops.iceberg.types import NestedField, Schema, StructType
from lakeops.packing import first_fit_decreasing, write_files
from lakeops.packing import rows_per_file as estimate_rows_per_file
from lakeops.plan import CommitOutcome, MaintenancePlan
from lakeops.predicate import parse_predicate
from lakeops.storage import Storage, StorageOptions, open_storage
from lakeops.storage.uri import normalize

__all__ = [
    "DEFAULT_TARGET_FILE_SIZE",
    "CompactionPlan",
    "RewriteGroup",
    "RewriteResult",
    "commit_groups",
    "extra_read_fields",
    "plan_compaction",
    "rewrite_group",
    "size_bounds",
    "written_locations",
]

#: ``write.target-file-size-bytes`` default.
DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024
#: Rows a task reads at a time: its memory is bounded by this, not by the size of its group.
READ_BATCH_ROWS = 131_072


class DeleteRef(BaseModel):
    """A delete file a task applies."""

    model_config = ConfigDict(frozen=True)

    path: str
    content: int  # 1 position, 2 equality
    equality_ids: tuple[int, ...] = ()
    deletion_vector: DeletionVectorRef | None = None  # v3: the DV blob in the Puffin file at ``path``

    @classmethod
    def of(cls, delete: LiveFile) -> DeleteRef:
        data = delete.entry.data_file
        return cls(
            path=delete.path,
            content=delete.content,
            equality_ids=tuple(data.equality_ids or ()),
            deletion_vector=data.deletion_vector(),
        )

    @property
    def key(self) -> tuple[str, int | None]:
        """The delete file's :attr:`~lakeops.iceberg.manifest.DataFile.key`."""
        return self.path, self.deletion_vector.content_offset if self.deletion_vector is not None else None

    def read_positions(self, storage: Storage) -> dict[str, pa.Array]:
        """Deleted positions by data file path (see :func:`read_position_deletes`)."""
        return read_position_deletes(storage, self.path, deletion_vector=self.deletion_vector)


class GroupFile(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str
    size: int
    record_count: int
    deletes: tuple[int, ...] = ()  # indexes into RewriteGroup.deletes
    #: v3 row lineage: the file's (inherited) first_row_id and data sequence number.
    first_row_id: int | None = None
    data_sequence_number: int = 0


class RewriteGroup(BaseModel):
    """One file group of one partition, rewritten by one Spark task."""

    model_config = ConfigDict(frozen=True)

    group_id: int
    table: str
    storage: StorageOptions
    files: list[GroupFile]
    deletes: list[DeleteRef]
    table_schema: dict[str, Any]
    #: Columns read besides the schema's: equality-delete columns dropped from the schema since.
    extra_read_fields: list[dict[str, Any]] = []
    spec_id: int
    partition: dict[str, Any]  # partition field name -> JSON single value (Appendix D)
    #: The table location: with ``properties`` it bounds where the task may write (never ``output_dir``
    #: alone, which may itself be a symlink out of the table).
    table_location: str
    output_dir: str
    target_file_size: int
    sort_order_json: dict[str, Any] | None = None
    properties: dict[str, str] = {}
    #: v3: copy each row's ``_row_id`` and ``_last_updated_sequence_number`` into the new files.
    row_lineage: bool = False

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def record_count(self) -> int:
        return sum(f.record_count for f in self.files)


class RewriteResult(BaseModel):
    group_id: int
    written: list[WrittenFile]
    rows_read: int
    #: Rows position and equality deletes removed.
    rows_deleted: int
    bytes_read: int
    seconds: float

    @property
    def rows_written(self) -> int:
        return sum(w.record_count for w in self.written)

    @property
    def bytes_written(self) -> int:
        return sum(w.file_size_in_bytes for w in self.written)

    @property
    def rows_dropped_by_dv(self) -> int:
        """Deletion vectors are Delta's: none here."""
        return 0


class CompactionPlan(BaseModel, MaintenancePlan[RewriteGroup, RewriteResult]):
    """Immutable, printable plan pinned to one snapshot of the table: one ``replace`` snapshot of every
    group, or of ``partial_progress`` groups at a time."""

    model_config = ConfigDict(frozen=True)
    format: ClassVar[str] = "iceberg"

    table: TableRef
    table_name: str
    metadata_location: str
    snapshot_id: int | None
    sequence_number: int
    target_file_size: int
    min_file_size: int
    max_file_size: int
    min_input_files: int
    where: str | None
    live_files: int
    live_bytes: int
    delete_files: int
    candidate_files: int
    skipped_files: int  # candidates in a format lakeops cannot rewrite (Avro, ORC)
    partitions_compacted: int
    groups: list[RewriteGroup]
    dangling_deletes: list[DeleteRef]
    commit_retries: int | None = None
    commit_timeout: timedelta | None = None
    partial_progress: int | None = None
    _scan: ScanPlan | None = PrivateAttr(default=None)

    @property
    def input_files(self) -> int:
        return sum(len(g.files) for g in self.groups)

    @property
    def input_bytes(self) -> int:
        return sum(g.bytes for g in self.groups)

    @property
    def read_version(self) -> int:
        """The sequence number of the snapshot planned from."""
        return self.sequence_number

    @property
    def version_noun(self) -> str:
        return "snapshots"

    def table_label(self) -> str:
        return self.table_name

    def work_units(self) -> list[RewriteGroup]:
        return self.groups

    def task(self) -> Callable[[RewriteGroup], RewriteResult]:
        return rewrite_group

    def result_type(self) -> type[RewriteResult]:
        return RewriteResult

    def work_bytes(self, units: Sequence[RewriteGroup]) -> int:
        return sum(g.bytes for g in units)

    def commit_batches(self) -> list[list[RewriteGroup]]:
        """All groups in one snapshot, or ``partial_progress`` groups per snapshot."""
        step = self.partial_progress or len(self.groups) or 1
        return [self.groups[i : i + step] for i in range(0, len(self.groups), step)] or [[]]

    def commit(
        self,
        units: Sequence[RewriteGroup],
        results: Sequence[RewriteResult],
        storage_options: StorageOptions,
        *,
        final: bool,
    ) -> CommitOutcome:
        """One ``replace`` snapshot of ``units``; the dangling delete files go with the ``final`` one."""
        return commit_groups(self, units, results, storage_options, include_dangling=final)

    def discard(self, results: Sequence[RewriteResult], storage_options: StorageOptions) -> int:
        paths = written_locations(results)
        if not paths:
            return 0
        root = normalize(load_table(self.table, storage_options).metadata.location, literal=True)
        return open_storage(root, storage_options).delete_many(paths)


def size_bounds(metadata: TableMetadata, options: IcebergCompactionOptions) -> tuple[int, int, int]:
    """``(target, low, high)``: the target file size and the bounds outside which a file is rewritten."""
    target = options.target_file_size or metadata.int_property(WRITE_TARGET_FILE_SIZE_BYTES, DEFAULT_TARGET_FILE_SIZE)
    low = options.min_file_size if options.min_file_size is not None else int(target * 0.75)
    high = options.max_file_size or int(target * 1.8)
    if not low <= target <= high:
        raise InvalidArgument(
            f"{metadata.location}: file sizes must satisfy min-file-size <= target-file-size <= max-file-size "
            f"(got {low} <= {target} <= {high})"
        )
    return target, low, high


def _partition_path(spec: PartitionSpec, ptype: StructType, values: dict[str, Any], source: Schema) -> str:
    """``name=human-value/...`` as Iceberg writers name partition directories: form-encoded, as Java's
    ``URLEncoder`` and PyIceberg's ``quote_plus`` do (``a b`` -> ``a+b``, ``100%`` -> ``100%25``). The
    result is part of an Iceberg path, which readers take literally."""
    types = dict(source.fields_by_id())
    parts = []
    for pfield, tfield in zip(spec.fields, ptype.fields, strict=True):
        value = values.get(pfield.name)
        source_type = types[pfield.source_id][1] if pfield.source_id in types else tfield.type
        human = "null" if value is None else parse_transform(pfield.transform).to_human(source_type, value)
        parts.append(f"{quote_plus(pfield.name, safe='')}={quote_plus(human, safe='')}")
    return "/".join(parts)


def extra_read_fields(metadata: TableMetadata, equality_ids: set[int]) -> list[NestedField]:
    """Top-level fields of older schemas holding equality-delete columns the current schema dropped."""
    current = metadata.current_schema().fields_by_id()
    extra: dict[int, NestedField] = {}
    for field_id in sorted(equality_ids - set(current)):
        for schema in metadata.schemas_newest_first()[1:]:
            found = next((f for f in schema.fields if field_id in _ids_below(f)), None)
            if found is not None:
                extra.setdefault(found.id, found.model_copy(update={"required": False}))
                break
        else:
            raise InvalidArgument(
                f"{metadata.location}: an equality delete file compares field id {field_id}, which no schema has"
            )
    return list(extra.values())


def _ids_below(f: NestedField) -> set[int]:
    return {fid for _, fid, _, _ in Schema(fields=(f,)).walk()}


def _dangling(plan: ScanPlan, removed: set[str], unpartitioned: set[int], filtered: bool) -> list[LiveFile]:
    """Delete files that no data file left after the rewrite can be affected by. Compaction output
    has the starting sequence number, which equality deletes of the start no longer reach, and new
    paths that no existing position delete names. With a partition filter only the rewritten
    partitions are fully known, so global (unpartitioned) deletes are left alone."""
    remaining: dict[tuple[int, tuple[Any, ...]], list[LiveFile]] = defaultdict(list)
    for task in plan.tasks:
        if task.file.path not in removed:
            remaining[task.file.partition_key].append(task.file)
    touched = {t.file.partition_key for t in plan.tasks if t.file.path in removed}
    everything = [f for files in remaining.values() for f in files]
    gone: list[LiveFile] = []
    for delete in plan.delete_files:
        seq = delete.data_sequence_number
        if delete.content is FileContent.POSITION_DELETES:
            if delete.partition_key in touched and not any(
                f.data_sequence_number <= seq and may_reference(delete, f.path) for f in remaining[delete.partition_key]
            ):
                gone.append(delete)
        elif delete.spec_id in unpartitioned:
            if not filtered and removed and not any(f.data_sequence_number < seq for f in everything):
                gone.append(delete)
        elif delete.partition_key in touched and not any(
            f.data_sequence_number < seq for f in remaining[delete.partition_key]
        ):
            gone.append(delete)
    return gone


def plan_compaction(
    table: IcebergTable,
    options: IcebergCompactionOptions,
    storage_options: StorageOptions,
    *,
    reader: ManifestReader | None = None,
) -> CompactionPlan:
    """Scan the current snapshot and choose the file groups to rewrite. The data manifests are read as
    planning columns (by ``reader``: driver threads unless given), and only the files outside the size
    bounds or that delete files may apply to are held as objects, so a table of millions of files
    plans in memory bounded by its work, not its size."""
    metadata = table.metadata
    metadata.check_writable("compact")
    metadata.next_sequence_number()  # refused now, before any file is written, if there is none
    target, low, high = size_bounds(metadata, options)
    partition_filter = PartitionFilter(parse_predicate(options.where), metadata) if options.where else None
    snapshot = metadata.current_snapshot()
    scan = plan_selected_scan(
        table.storage, metadata, snapshot, low=low, high=high, partition_filter=partition_filter, reader=reader
    )
    schemas = metadata.schemas_newest_first()
    schema = metadata.current_schema()
    sort_order = metadata.default_sort_order() if options.sort else None
    data_dir = metadata.properties.get(WRITE_DATA_PATH) or f"{metadata.location.rstrip('/')}/data"

    by_partition: dict[tuple[int, tuple[Any, ...]], list[FileScanTask]] = defaultdict(list)
    candidates = skipped = 0
    for task in scan.tasks:
        f = task.file
        threshold_hit = options.delete_file_threshold is not None and len(task.deletes) >= options.delete_file_threshold
        if low <= f.file_size <= high and not threshold_hit:
            continue
        candidates += 1
        if f.entry.data_file.file_format.lower() != "parquet":
            skipped += 1
            continue
        by_partition[f.partition_key].append(task)

    groups: list[RewriteGroup] = []
    partitions = 0
    for key in sorted(by_partition, key=lambda k: (k[0], [(v is None, str(v)) for v in k[1]])):
        tasks = by_partition[key]
        spec = metadata.spec_by_id(key[0])
        ptype = spec.partition_type(schemas)
        kept = [
            g
            for g in first_fit_decreasing(
                tasks, lambda t: t.file.file_size, lambda t: t.file.path, options.max_file_group_size
            )
            if _worth_rewriting(g, options, target, high)
        ]
        partitions += bool(kept)
        for group in kept:
            values = dict(group[0].file.entry.data_file.partition)
            unit = _unit(len(groups), table, storage_options, group, metadata, spec, ptype, values, sort_order)
            output_dir = _output_dir(data_dir, spec, ptype, values, schema)
            groups.append(unit.model_copy(update={"output_dir": output_dir, "target_file_size": target}))
    removed = {f.path for g in groups for f in g.files}
    unpartitioned = {s.spec_id for s in metadata.partition_specs if s.is_unpartitioned}
    dangling = (
        _dangling(scan, removed, unpartitioned, partition_filter is not None) if options.remove_dangling_deletes else []
    )
    plan = CompactionPlan(
        table=table.ref,
        table_name=table.name,
        metadata_location=table.metadata_location,
        snapshot_id=snapshot.snapshot_id if snapshot else None,
        sequence_number=snapshot.sequence_number if snapshot else 0,
        target_file_size=target,
        min_file_size=low,
        max_file_size=high,
        min_input_files=options.min_input_files,
        where=options.where,
        live_files=scan.live_files,
        live_bytes=scan.live_bytes,
        delete_files=len(scan.delete_files),
        candidate_files=candidates,
        skipped_files=skipped,
        partitions_compacted=partitions,
        groups=groups,
        dangling_deletes=[DeleteRef.of(d) for d in dangling],
        commit_retries=options.commit_retries,
        commit_timeout=options.commit_timeout,
        partial_progress=options.partial_progress,
    )
    plan._scan = scan
    return plan


def _output_dir(data_dir: str, spec: PartitionSpec, ptype: StructType, values: dict[str, Any], schema: Schema) -> str:
    path = _partition_path(spec, ptype, values, schema) if spec.fields else ""
    return f"{data_dir}/{path}" if path else data_dir


def _worth_rewriting(group: list[FileScanTask], options: IcebergCompactionOptions, target: int, high: int) -> bool:
    total = sum(t.file.file_size for t in group)
    threshold = options.delete_file_threshold
    return (
        len(group) >= options.min_input_files
        or (len(group) > 1 and total > target)
        or any(t.file.file_size > high for t in group)
        or (threshold is not None and any(len(t.deletes) >= threshold for t in group))
    )


def _unit(
    group_id: int,
    table: IcebergTable,
    storage_options: StorageOptions,
    group: list[FileScanTask],
    metadata: TableMetadata,
    spec: PartitionSpec,
    ptype: StructType,
    values: dict[str, Any],
    sort_order: SortOrder | None,
) -> RewriteGroup:
    """The task unit of one group; its output directory and target size are filled in by the caller."""
    deletes: list[DeleteRef] = []
    index: dict[tuple[str, int | None], int] = {}
    files = []
    for task in sorted(group, key=lambda t: t.file.path):
        refs = []
        for delete in task.deletes:
            key = delete.entry.data_file.key
            if key not in index:
                index[key] = len(deletes)
                deletes.append(DeleteRef.of(delete))
            refs.append(index[key])
        data = task.file.entry.data_file
        files.append(
            GroupFile(
                path=data.file_path,
                size=data.file_size_in_bytes,
                record_count=data.record_count,
                deletes=tuple(refs),
                first_row_id=data.first_row_id,
                data_sequence_number=task.file.data_sequence_number,
            )
        )
    equality_ids = {i for d in deletes for i in d.equality_ids}
    return RewriteGroup(
        group_id=group_id,
        table=table.name,
        storage=storage_options,
        files=files,
        deletes=deletes,
        table_schema=metadata.current_schema().to_json(),
        extra_read_fields=[
            f.model_dump(mode="json", by_alias=True, exclude_none=True)
            for f in extra_read_fields(metadata, equality_ids)
        ],
        spec_id=spec.spec_id,
        partition={f.name: to_json(f.type, values.get(f.name)) for f in ptype.fields},
        table_location=metadata.location,
        output_dir="",
        target_file_size=0,
        sort_order_json=sort_order.to_json() if sort_order is not None and not sort_order.is_unsorted else None,
        properties=dict(metadata.properties),
        row_lineage=metadata.format_version >= 3,
    )


# --- execute: runs inside a Spark task -------------------------------------------------------------


def _live_batches(
    group: RewriteGroup, schema: Schema, projection: StructType
) -> Iterator[tuple[pa.RecordBatch | pa.Table, int, int]]:
    """Each input file's rows with its deletes applied, batch by batch: (rows, rows read, rows deleted)."""
    storage = open_storage(normalize(group.output_dir, literal=True), group.storage)  # Iceberg paths: literal
    positions: dict[int, dict[str, pa.Array]] = {}
    equality: dict[int, tuple[list[int], pa.Table]] = {}
    for i, delete in enumerate(group.deletes):
        if delete.content == FileContent.POSITION_DELETES:
            positions[i] = delete.read_positions(storage)
        else:
            ids = list(delete.equality_ids)
            equality[i] = (ids, read_equality_deletes(storage, delete.path, ids, projection))
    names = [f.name for f in schema.fields]
    name_mapping = group.properties.get(DEFAULT_NAME_MAPPING)  # ids for imported files' columns
    for source in group.files:
        file_positions = [positions[i].get(source.path) for i in source.deletes if i in positions]
        merged = _merge_positions([p for p in file_positions if p is not None])
        eq = [equality[i] for i in source.deletes if i in equality]
        start = 0
        batches = iter_parquet(storage, source.path, projection, name_mapping=name_mapping, batch_rows=READ_BATCH_ROWS)
        for batch in batches:
            rows = batch.num_rows
            if group.row_lineage:  # before deletes: a row's id is its position in its file
                batch = inherit(batch, source.first_row_id, source.data_sequence_number, start)
            live: pa.RecordBatch | pa.Table = batch
            if merged is not None:
                live = apply_position_deletes(live, start, merged)
            if eq:
                live = apply_equality_deletes(
                    pa.Table.from_batches([live]) if isinstance(live, pa.RecordBatch) else live, eq, projection
                )
            start += rows
            live = live.select(names)
            yield live, rows, rows - live.num_rows


def _merge_positions(arrays: Sequence[pa.Array]) -> pa.Array | None:
    if not arrays:
        return None
    if len(arrays) == 1:
        return arrays[0]
    return pc.unique(pa.concat_arrays([a.cast(pa.int64()) for a in arrays])).sort()


def sort_table(table: pa.Table, order: SortOrder, schema: Schema) -> pa.Table:
    """Rows in ``order`` ("Sorting"): each sort field's transform applied to its source column,
    nulls first or last per field, ascending or descending."""
    by_id = schema.fields_by_id()
    keys: list[tuple[str, str]] = []
    columns: dict[str, pa.Array] = {}
    for i, sf in enumerate(order.fields):
        if sf.source_id not in by_id:
            raise UnsupportedFeature(f"sort order {order.order_id}: source column {sf.source_id} is not in the schema")
        path, type_, _ = by_id[sf.source_id]
        values: Any = table.column(path[0]).combine_chunks()
        for name in path[1:]:
            values = pc.struct_field(values, name)
        if sf.transform != "identity":
            values = parse_transform(sf.transform).apply_arrow(type_, values)
        nulls = pc.is_null(values)
        columns[f"n{i}"], columns[f"v{i}"] = nulls, values
        keys.append((f"n{i}", "descending" if sf.null_order == "nulls-first" else "ascending"))
        keys.append((f"v{i}", "ascending" if sf.direction == "asc" else "descending"))
    indices = pc.sort_indices(pa.table(columns), sort_keys=keys)
    return table.take(indices)


@dataclass
class _OutputFile:
    """One new data file of a group (:class:`lakeops.packing.OutputFile`): stored only when it has rows."""

    writer: ParquetDataWriter

    def write(self, data: pa.Table | pa.RecordBatch) -> None:
        self.writer.write(data)

    def finish(self) -> WrittenFile | None:
        if not self.writer.rows:
            self.writer.abort()
            return None
        return self.writer.finish()

    def abort(self) -> None:
        self.writer.abort()


def rewrite_group(group: RewriteGroup) -> RewriteResult:
    """Rewrite one group into files of about the target size, deletes applied.

    Unsorted, a task holds one read batch and one output file's buffer; sorted, it holds the group's
    rows (sorting needs them all). A task that fails deletes what it already stored before it dies.
    """
    started = time.monotonic()
    storage = table_storage(group.table_location, group.properties, group.storage)
    schema = Schema.model_validate(group.table_schema)
    if group.row_lineage:  # read (null when absent) and written like the table's columns
        schema = schema.model_copy(update={"fields": (*schema.fields, *LINEAGE_FIELDS)})
    projection = StructType(fields=(*schema.fields, *(NestedField.model_validate(f) for f in group.extra_read_fields)))
    rows_per_file = estimate_rows_per_file(group.target_file_size, group.bytes, group.record_count)
    run = uuid.uuid4().hex[:16]
    rows_read = deleted = 0

    def open_file(index: int) -> _OutputFile:
        location = f"{group.output_dir}/{run}-{group.group_id:05d}-{index:05d}.parquet"
        return _OutputFile(ParquetDataWriter(storage, location, schema, properties=group.properties))

    def live() -> Iterator[pa.RecordBatch | pa.Table]:
        nonlocal rows_read, deleted
        for batch, read, gone in _live_batches(group, schema, projection):
            rows_read, deleted = rows_read + read, deleted + gone
            yield batch

    chunks: Iterable[pa.RecordBatch | pa.Table] = live()
    if group.sort_order_json is not None:  # sorting needs every row of the group
        tables = [pa.Table.from_batches([b]) if isinstance(b, pa.RecordBatch) else b for b in live()]
        order = SortOrder.model_validate(group.sort_order_json)
        chunks = [sort_table(pa.concat_tables(tables), order, schema)] if tables else []
    written = write_files(
        chunks,
        rows_per_file,
        open_file,
        lambda done: storage.delete_many([normalize(w.location, literal=True) for w in done]),
    )
    return RewriteResult(
        group_id=group.group_id,
        written=written,
        rows_read=rows_read,
        rows_deleted=deleted,
        bytes_read=group.bytes,
        seconds=time.monotonic() - started,
    )


# --- commit: driver --------------------------------------------------------------------------------


@dataclass
class _GroupsChange:
    """The pending ``replace`` of the groups still in it (a :class:`~lakeops.iceberg.commit.TableChange`):
    validating against a newer base drops the groups it invalidated (see the module docstring)."""

    start: IcebergTable
    #: group id -> (data files it removes, files it adds with their spec id)
    groups: dict[int, tuple[list[LiveFile], list[tuple[int, DataFile]]]]
    dangling: list[LiveFile]
    data_sequence_number: int | None
    dropped: dict[int, str] = field(default_factory=dict)
    _change: ReplaceFiles = field(init=False)

    def __post_init__(self) -> None:
        self._change = self._replace()

    def _replace(self) -> ReplaceFiles:
        return ReplaceFiles(
            start=self.start,
            removed=[f for removed, _ in self.groups.values() for f in removed] + self.dangling,
            added=[a for _, added in self.groups.values() for a in added],
            data_sequence_number=self.data_sequence_number,
            extra_summary={"lakeops.operation": "compact"},
        )

    def validate(self, start: IcebergTable, current: IcebergTable) -> None:
        conflicts = self._change.conflicts(current)
        if not conflicts:
            return
        for group_id, (removed, _) in list(self.groups.items()):
            why = next((conflicts[f.path] for f in removed if f.path in conflicts), None)
            if why is not None:
                self.dropped[group_id] = why
                del self.groups[group_id]
        if self.dropped or any(d.path in conflicts for d in self.dangling):
            self.dangling = []  # they may still apply to a dropped group's files, or are gone already
        if not self.groups and not self.dangling:
            raise CommitConflict(f"{current.name}: {conflicts[min(conflicts)]} (every file group conflicted)")
        self._change.abandon(None)  # its manifests list what was dropped; none was committed
        self._change = self._replace()

    def apply(self, current: IcebergTable) -> TableMetadata:
        return self._change.apply(current)

    def abandon(self, committed: TableMetadata | None) -> None:
        self._change.abandon(committed)


def commit_groups(
    plan: CompactionPlan,
    groups: Sequence[RewriteGroup],
    results: Sequence[RewriteResult],
    storage_options: StorageOptions,
    *,
    include_dangling: bool = True,
) -> CommitOutcome:
    """Commit the rewritten ``groups`` as one ``replace`` snapshot, dropping those that commits landing
    first invalidated (``dropped``: by position in ``groups``, with the file a concurrent commit removed
    or added deletes to); nothing committed when there is nothing to commit."""
    by_id = {r.group_id: r for r in results}
    if set(by_id) != {g.group_id for g in groups}:
        raise InvalidArgument(f"{plan.table_name}: rewrite results do not match the plan's groups")
    dangling = {d.key for d in plan.dangling_deletes} if include_dangling else set()
    if not groups and not dangling:
        return CommitOutcome()
    table = load_table(plan.table, storage_options)
    start = _start_state(plan, table, storage_options)
    scan = plan._scan or plan_selected_scan(
        start.storage,
        start.metadata,
        start.metadata.current_snapshot(),
        low=plan.min_file_size,
        high=plan.max_file_size,
    )
    live = {t.file.path: t.file for t in scan.tasks}
    schemas = start.metadata.schemas_newest_first()
    members: dict[int, tuple[list[LiveFile], list[tuple[int, DataFile]]]] = {}
    for group in groups:
        spec = start.metadata.spec_by_id(group.spec_id)
        ptype = spec.partition_type(schemas)
        order_id = SortOrder.model_validate(group.sort_order_json).order_id if group.sort_order_json else None
        partition = {f.name: from_json(f.type, group.partition.get(f.name)) for f in ptype.fields}
        members[group.group_id] = (
            [live[f.path] for f in group.files],
            [(group.spec_id, w.data_file(partition, sort_order_id=order_id)) for w in by_id[group.group_id].written],
        )
    change = _GroupsChange(
        start=start,
        groups=members,
        dangling=[d for d in scan.delete_files if d.entry.data_file.key in dangling],
        data_sequence_number=plan.sequence_number if start.metadata.format_version >= 2 else None,
    )
    policy = RetryPolicy.of(table.metadata)
    if plan.commit_retries is not None:
        policy = dataclasses.replace(policy, num_retries=plan.commit_retries)
    if plan.commit_timeout is not None:
        policy = dataclasses.replace(policy, total_timeout_ms=int(plan.commit_timeout.total_seconds() * 1000))
    done = commit_change(start, change, current=table, policy=policy, operation="compact")
    committed = done.metadata.current_snapshot()
    assert committed is not None  # the snapshot just committed
    position = {g.group_id: i for i, g in enumerate(groups)}
    return CommitOutcome(
        version=committed.sequence_number,
        snapshot_id=committed.snapshot_id,
        attempts=done.attempts,
        dropped={position[group]: why for group, why in change.dropped.items()},
        metrics={"delete_files_removed": len(change.dangling)},
    )


def _start_state(plan: CompactionPlan, current: IcebergTable, storage_options: StorageOptions) -> IcebergTable:
    """The table as the plan saw it: validation starts from the plan's snapshot."""
    if current.metadata_location == plan.metadata_location:
        return current
    metadata = read_metadata(
        open_storage(normalize(plan.metadata_location, literal=True), storage_options),
        plan.metadata_location,
        plan.table_name,
    )
    return IcebergTable(plan.table, current.catalog, storage_options, plan.metadata_location, metadata)


def written_locations(results: Sequence[RewriteResult]) -> list[str]:
    """Every file these results wrote, as canonical locations (Iceberg paths are literal): the only data
    files an abort may delete."""
    return [normalize(w.location, literal=True) for r in results for w in r.written]
