"""Delta OPTIMIZE: bin-packing compaction per partition, with deletion vectors purged on rewrite.

Implements the writer side of "Add File and Remove File" (``dataChange=false`` rewrites), "Deletion
Vectors" (rows a DV hides are dropped when the file is rewritten), "Column Mapping" (new files carry
physical names and field ids), "Per-file Statistics" (full stats on every new file), "Row Tracking"
(fresh row ids for the new files, stable ones materialised: :mod:`lakeops.delta.row_tracking`) and
"Clustered Table" (a clustered table is compacted along the Hilbert curve of its clustering columns:
:mod:`lakeops.delta.clustering`).

plan (driver) → :func:`rewrite_group` per bin (Spark task) → :func:`commit_compaction` (driver).

Concurrency: a ``dataChange=false`` rewrite only rearranges rows
(https://github.com/delta-io/delta/blob/master/PROTOCOL.md#add-file-and-remove-file), so a version
that lands first invalidates a bin only if it removed one of the bin's files (a delete, an update, a
new deletion vector: each removes the file's ``(path, dvId)``), and the whole rewrite only if it
changed the schema, partitioning or column mapping the new files were written for, or moved to a
protocol lakeops does not write. Appends, transaction identifiers and other property changes commute
with it. Delta's own OPTIMIZE retries under the same rules (snapshot isolation: the files it read are
still there and the partition schema is unchanged; lakeops also keeps the schema and column mapping
its new files were written for). A bin a winner touched is dropped and the others committed, so one
hot partition does not hold back the rest (Delta's OPTIMIZE gets part of that by committing its bins
in independent batches); the dropped bins' new files are deleted once the outcome is known.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SerializerFunctionWrapHandler, model_serializer

from lakeops.delta import clustering, row_tracking
from lakeops.delta.actions import ActionModel, Add, DomainMetadata, Remove
from lakeops.delta.checkpoint_reader import AddColumn
from lakeops.delta.commit import commit_pending, file_actions_summary
from lakeops.delta.commit_file import CommitActions
from lakeops.delta.commit_time import ict_enablement_version
from lakeops.delta.features import check_writable, enabled_features
from lakeops.delta.live_files import LiveFiles
from lakeops.delta.maintenance.compaction_rows import PartitionKey, SourceRows, locations, partitions
from lakeops.delta.maintenance.defaults import (
    table_target_file_size,
)
from lakeops.delta.maintenance.options import DeltaCompactionOptions
from lakeops.delta.partitions import parse_partition_value
from lakeops.delta.properties import COLUMN_MAPPING_MODE
from lakeops.delta.scan import read_logical_file
from lakeops.delta.schema import (
    ColumnMappingMode,
    StructType,
    column_mapping_mode,
    parse_schema,
    physical_name,
    type_to_json,
)
from lakeops.delta.snapshot import DeltaSnapshot
from lakeops.delta.writer import DataFileWriter, WrittenFile
from lakeops.errors import InvalidArgument, ProtocolError, UnsupportedFeature
from lakeops.ordering import Curve, order_indices
from lakeops.packing import UNBOUNDED_ROWS, first_fit_decreasing, rows_per_file, write_files
from lakeops.plan import CommitOutcome, MaintenancePlan
from lakeops.predicate import parse_predicate
from lakeops.storage import Storage, StorageOptions, open_storage

#: Puts after the first that a commit losing races may make, and the time they may take (as Iceberg's
#: ``commit.retry.total-timeout-ms`` default): a writer committing every second costs a retry or two.
DEFAULT_COMMIT_RETRIES = 10
DEFAULT_COMMIT_TIMEOUT = timedelta(minutes=30)
#: The ``add.tags`` key an ordered rewrite marks its files with (:class:`Ordering`): a file tag is free
#: metadata that readers ignore ("Add File and Remove File", ``tags``).
ORDER_TAG = "lakeops.ordering"


class Ordering(BaseModel):
    """Rows of each rewritten partition written in ``curve`` order of ``columns``
    (:mod:`lakeops.ordering`); ``run`` tags the files of one ordered rewrite, so a partition whose
    live files all carry the same tag is already ordered and is not rewritten again."""

    model_config = ConfigDict(frozen=True)

    curve: Curve
    columns: list[str] = Field(min_length=1)
    run: str = ""
    #: Set when this order clusters a clustered table: the new files' ``clusteringProvider``.
    provider: str | None = None

    def tag(self) -> str:
        return json.dumps({"curve": self.curve, "columns": self.columns, "run": self.run})

    def matches(self, tag: str | None) -> bool:
        """``tag`` is a file tag of a rewrite in this order (whichever run)."""
        try:
            found = json.loads(tag) if tag else None
        except ValueError:
            return False
        return isinstance(found, dict) and (found.get("curve"), found.get("columns")) == (self.curve, self.columns)


def requested_ordering(options: DeltaCompactionOptions) -> Ordering | None:
    """The row order ``options`` ask for, if any (``zorder_by`` and ``sort_by`` exclude each other)."""
    if options.zorder_by is not None and options.sort_by is not None:
        raise InvalidArgument("--zorder-by and --sort-by exclude each other: choose one row order")
    if options.zorder_by is not None:
        return Ordering(curve="zorder", columns=options.zorder_by)
    if options.sort_by is not None:
        return Ordering(curve="linear", columns=options.sort_by)
    return None


class SourceFile(BaseModel):
    model_config = ConfigDict(frozen=True)

    add: dict[str, Any]
    location: str
    size: int
    num_records: int | None
    deleted_rows: int
    purge: bool = False


class RewriteGroup(BaseModel):
    """One bin: files of one partition rewritten together by one task.

    Its input files are ``file_objects`` plus, on the driver that planned it, rows of the snapshot's
    Arrow adds (:class:`~lakeops.delta.maintenance.compaction_rows.SourceRows`) whose ``SourceFile`` objects
    are built when :attr:`files` is read; serialized (for a task), the group holds them all as objects.
    """

    model_config = ConfigDict(frozen=True)

    group_id: int
    table_root: str
    storage: StorageOptions
    partition_values: dict[str, str | None]
    file_objects: list[SourceFile] = []
    schema_string: str
    partition_columns: list[str]
    configuration: dict[str, str]
    column_mapping_mode: str
    target_file_size: int
    output_dir: str
    ordering: Ordering | None = None
    #: Row tracking is enabled: the hidden columns (row id, row commit version) that keep copied rows'
    #: stable values.
    materialized_columns: list[str] | None = None
    _rows: tuple[SourceRows, ...] = PrivateAttr(default=())

    def with_rows(self, rows: Sequence[SourceRows]) -> RewriteGroup:
        self._rows = tuple(rows)
        return self

    @model_serializer(mode="wrap")
    def _all_as_objects(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self._rows:
            data["file_objects"] = [f.model_dump() for f in self.files]
        return data

    @property
    def files(self) -> list[SourceFile]:
        """Every input file, in location order."""
        if not self._rows:
            return self.file_objects
        built = [
            _source_file_of(add, location)
            for rows in self._rows
            for add, location in zip(
                AddColumn(rows.column.struct.take(rows.rows)).build(0, len(rows)),
                locations(self.table_root, rows.paths()).to_pylist(),
                strict=True,
            )
        ]
        return sorted([*self.file_objects, *built], key=lambda f: f.location)

    @property
    def file_count(self) -> int:
        return len(self.file_objects) + sum(len(rows) for rows in self._rows)

    @property
    def materialized(self) -> row_tracking.MaterializedColumns | None:
        return row_tracking.MaterializedColumns(*self.materialized_columns) if self.materialized_columns else None

    @property
    def bytes(self) -> int:
        listed = sum(pc.sum(rows.sizes()).as_py() or 0 for rows in self._rows)
        return listed + sum(f.size for f in self.file_objects)


class RewriteResult(BaseModel):
    group_id: int
    written: list[WrittenFile]
    rows_read: int
    rows_dropped_by_dv: int
    bytes_read: int
    seconds: float

    @property
    def rows_written(self) -> int:
        return sum(w.rows for w in self.written)

    @property
    def bytes_written(self) -> int:
        return sum(int(w.add["size"]) for w in self.written)

    @property
    def rows_deleted(self) -> int:
        """Rows removed by deletes other than deletion vectors: Delta has none."""
        return 0


class CompactionPlan(BaseModel, MaintenancePlan[RewriteGroup, RewriteResult]):
    """Immutable, printable plan pinned to ``read_version``: one ``OPTIMIZE`` commit of every bin."""

    model_config = ConfigDict(frozen=True)
    format: ClassVar[str] = "delta"

    table_root: str
    read_version: int
    target_file_size: int
    min_input_files: int
    where: str | None
    live_files: int
    live_bytes: int
    candidate_files: int
    partitions_compacted: int
    groups: list[RewriteGroup]
    ordering: Ordering | None = None
    #: The table dates commits by in-commit timestamps: the OPTIMIZE commit must carry one.
    in_commit_timestamps: bool = False
    #: The table assigns row ids: the ``rowIdHighWaterMark`` read (-1: none yet); None: it does not.
    row_id_high_water_mark: int | None = None
    commit_retries: int = DEFAULT_COMMIT_RETRIES
    commit_timeout: timedelta = DEFAULT_COMMIT_TIMEOUT
    #: Groups per ``OPTIMIZE`` commit; None: one commit of every group.
    partial_progress: int | None = None

    @property
    def input_files(self) -> int:
        return sum(g.file_count for g in self.groups)

    @property
    def input_bytes(self) -> int:
        return sum(g.bytes for g in self.groups)

    @property
    def version_noun(self) -> str:
        return "versions"

    @property
    def snapshot_id(self) -> None:
        """:class:`~lakeops.plan.RewritePlan`: a Delta version has no id but its number."""
        return None

    @property
    def dangling_deletes(self) -> list[str]:
        """:class:`~lakeops.plan.RewritePlan`: Delta has no delete files (deletion vectors go with their file)."""
        return []

    def table_label(self) -> str:
        return self.table_root

    def work_units(self) -> list[RewriteGroup]:
        return self.groups

    def task(self) -> Callable[[RewriteGroup], RewriteResult]:
        return rewrite_group

    def result_type(self) -> type[RewriteResult]:
        return RewriteResult

    def work_bytes(self, units: Sequence[RewriteGroup]) -> int:
        return sum(g.bytes for g in units)

    def commit(
        self,
        units: Sequence[RewriteGroup],
        results: Sequence[RewriteResult],
        storage_options: StorageOptions,
        *,
        final: bool,
    ) -> CommitOutcome:
        return commit_compaction(self, results, storage_options, groups=units)

    def commit_batches(self) -> list[list[RewriteGroup]]:
        """All groups in one version, or ``partial_progress`` groups per version."""
        step = self.partial_progress or len(self.groups) or 1
        return [self.groups[i : i + step] for i in range(0, len(self.groups), step)] or [[]]

    def discard(self, results: Sequence[RewriteResult], storage_options: StorageOptions) -> int:
        paths = written_locations(results)
        return open_storage(self.table_root, storage_options).delete_many(paths) if paths else 0


def effective_target_size(snapshot: DeltaSnapshot, options: DeltaCompactionOptions) -> int:
    if options.target_file_size is not None:
        return options.target_file_size
    return table_target_file_size(snapshot.metadata.configuration)


def _typed_partition(
    schema: StructType, mode: ColumnMappingMode, partition_columns: list[str], values: dict[str, str | None]
) -> dict[str, Any]:
    """Typed partition values by display name (the log keys them by physical name under column mapping)."""
    typed: dict[str, Any] = {}
    for name in partition_columns:
        f = schema.get(name)
        if f is None:
            raise ProtocolError(f"partition column {name!r} is not in the table schema")
        text = values.get(physical_name(f, mode), values.get(name))
        delta_type = type_to_json(f.type)
        typed[name] = parse_partition_value(text, str(delta_type), context=f"partition column {name}")
    return typed


def _output_dir(add_path: str) -> str:
    """New files go next to the first input file (same partition directory), never outside the root."""
    if "://" in add_path or add_path.startswith("/"):
        return ""
    return add_path.rsplit("/", 1)[0] if "/" in add_path else ""


def _source_file_of(add: Add, location: str, deleted_rows: int = 0, purge: bool = False) -> SourceFile:
    return SourceFile(
        add=add.to_json_dict(),
        location=location,
        size=add.size,
        num_records=add.num_records,
        deleted_rows=deleted_rows,
        purge=purge,
    )


def _bins(
    objects: list[SourceFile], rows: list[SourceRows], target: int, table_root: str
) -> list[tuple[list[SourceFile], list[SourceRows]]]:
    """Bins of at most ``target`` bytes (a lone big file that needs a DV purge gets its own bin) of a
    partition's files, objects and Arrow rows alike: items are numbered objects first, then each
    ``rows`` in turn, and packed by size then location (the ``SourceFile`` order)."""
    sizes = [f.size for f in objects]
    names = [f.location for f in objects]
    for source in rows:
        sizes += source.sizes().to_pylist()
        names += locations(table_root, source.paths()).to_pylist()
    packed = first_fit_decreasing(range(len(sizes)), sizes.__getitem__, names.__getitem__, target)
    starts = np.cumsum([len(objects), *(len(r) for r in rows)])
    bins = []
    for items in packed:
        numbers = np.sort(np.asarray(items, dtype=np.int64))
        source_of = np.searchsorted(starts, numbers, side="right")  # 0: objects, j: rows[j - 1]
        taken = [
            SourceRows(rows[j - 1].column, rows[j - 1].rows.take(pa.array(numbers[source_of == j] - starts[j - 1])))
            for j in range(1, len(starts))
            if np.any(source_of == j)
        ]
        bins.append(([objects[i] for i in numbers[source_of == 0]], taken))
    return bins


def _first_path(objects: list[SourceFile], rows: list[SourceRows], table_root: str) -> str:
    """The action path of the bin's file first in location order."""
    firsts = [(f.location, str(f.add["path"])) for f in objects[:1]]
    for source in rows:
        names = locations(table_root, source.paths())
        at = pc.index(names, pc.min(names)).as_py()
        firsts.append((names[at].as_py(), source.column.paths[source.rows[at].as_py()].as_py()))
    return min(firsts)[1]


def plan_compaction(
    snapshot: DeltaSnapshot, options: DeltaCompactionOptions, storage_options: StorageOptions
) -> CompactionPlan:
    """Choose the bins to rewrite: per partition, files below the target size (and files whose DV
    hides more than ``dv_purge_ratio`` of their rows), packed into bins of at most the target size;
    a bin is kept when it has ``min_input_files`` files (never fewer than two: rewriting one file
    alone gains nothing) or purges such a deletion vector."""
    table = snapshot.table_root
    check_writable(snapshot.protocol, table, "compact")
    snapshot.require_next_commit()
    target = effective_target_size(snapshot, options)
    predicate = parse_predicate(options.where) if options.where else None
    if predicate is not None:
        predicate.require_columns(snapshot.partition_columns, table)
    mode = column_mapping_mode(snapshot.metadata, snapshot.protocol)
    schema = parse_schema(snapshot.metadata.schema_string)
    clustered = "clustering" in enabled_features(snapshot.protocol)
    ordering = _clustering_order(snapshot, schema, mode, options) if clustered else requested_ordering(options)
    if ordering is not None:
        _require_orderable(schema, snapshot.partition_columns, ordering, table)
        ordering = ordering.model_copy(update={"run": uuid.uuid4().hex})
    tracking = row_tracking.RowTracking.for_rewrite(snapshot.protocol, snapshot.metadata, table)

    # Arrow rows are planned as columns unless a row order or clustering needs each file's tags.
    files = snapshot.files
    arrow = isinstance(files, LiveFiles) and ordering is None and not clustered
    columns = files.columns if isinstance(files, LiveFiles) and arrow else []
    objects = files.objects.values() if isinstance(files, LiveFiles) and arrow else files.values()
    selected: dict[PartitionKey, bool] = {}

    def wanted(key: PartitionKey) -> bool:
        if predicate is None:
            return True
        if key not in selected:
            typed = _typed_partition(schema, mode, snapshot.partition_columns, dict(key))
            selected[key] = predicate.matches(typed)
        return selected[key]

    by_partition: dict[PartitionKey, list[SourceFile]] = defaultdict(list)
    rows_by_partition: dict[PartitionKey, list[SourceRows]] = defaultdict(list)
    candidates = 0
    for column in columns:
        sizes = column.struct.field("size")
        for key, positions in partitions(column):
            small = positions.filter(pc.less(sizes.take(positions), target)) if wanted(key) else positions[:0]
            if len(small):
                candidates += len(small)
                rows_by_partition[key].append(SourceRows(column, small))
    for add in objects:
        key = tuple(sorted(add.partition_values.items()))
        if not wanted(key):
            continue
        if clustered and (add.model_extra or {}).get("clusteringProvider") not in clustering.RECLUSTERED:
            continue  # clustered by another implementation: not ours to recluster
        dv = add.deletion_vector
        num_records = add.num_records
        deleted = dv.cardinality if dv else 0
        purge = dv is not None and (num_records is None or deleted > options.dv_purge_ratio * num_records)
        if ordering is None and add.size >= target and not purge:
            continue
        candidates += 1
        by_partition[key].append(_source_file_of(add, snapshot.file_location(add.path), deleted, purge))

    groups: list[RewriteGroup] = []
    partitions_compacted = 0
    kept: list[tuple[list[SourceFile], list[SourceRows]]]
    for key in sorted({*by_partition, *rows_by_partition}, key=lambda k: [(n, v or "") for n, v in k]):
        if ordering is not None:  # the whole partition in one order, unless one ordered rewrite wrote it
            kept = [] if _already_ordered(by_partition[key], ordering) else [(by_partition[key], [])]
        else:
            kept = [
                (objs, rows)
                for objs, rows in _bins(by_partition[key], rows_by_partition[key], target, table)
                if len(objs) + sum(len(r) for r in rows) >= max(2, options.min_input_files)
                or any(f.purge for f in objs)
            ]
        partitions_compacted += bool(kept)
        for objs, rows in kept:
            objs.sort(key=lambda f: f.location)
            group = RewriteGroup(
                group_id=len(groups),
                table_root=table,
                storage=storage_options,
                partition_values=dict(key),
                file_objects=objs,
                schema_string=snapshot.metadata.schema_string,
                partition_columns=snapshot.partition_columns,
                configuration=snapshot.metadata.configuration,
                column_mapping_mode=mode,
                target_file_size=target,
                output_dir=_output_dir(_first_path(objs, rows, table)),
                ordering=ordering,
                materialized_columns=tracking.materialized.names if tracking.materialized else None,
            )
            groups.append(group.with_rows(rows))
    live_bytes = sum(a.size for a in objects) + sum(pc.sum(c.struct.field("size")).as_py() or 0 for c in columns)
    return CompactionPlan(
        table_root=table,
        read_version=snapshot.version,
        target_file_size=target,
        min_input_files=options.min_input_files,
        where=options.where,
        live_files=len(snapshot.files),
        live_bytes=live_bytes,
        candidate_files=candidates,
        partitions_compacted=partitions_compacted,
        groups=groups,
        ordering=ordering,
        in_commit_timestamps=ict_enablement_version(snapshot.protocol, snapshot.metadata) is not None,
        row_id_high_water_mark=row_tracking.high_water_mark(snapshot.domains, table) if tracking.assigns else None,
        commit_retries=DEFAULT_COMMIT_RETRIES if options.commit_retries is None else options.commit_retries,
        commit_timeout=options.commit_timeout or DEFAULT_COMMIT_TIMEOUT,
        partial_progress=options.partial_progress,
    )


def _clustering_order(
    snapshot: DeltaSnapshot, schema: StructType, mode: ColumnMappingMode, options: DeltaCompactionOptions
) -> Ordering | None:
    """A clustered table is compacted along the Hilbert curve of its clustering columns (bin-packed when it has
    none); a user's own order is refused, as Delta refuses ``OPTIMIZE ZORDER BY`` on such a table."""
    asked = requested_ordering(options)
    if asked is not None:
        flag = "--zorder-by" if asked.curve == "zorder" else "--sort-by"
        raise UnsupportedFeature(
            f"{snapshot.table_root}: table feature clustering: {flag} is refused on a clustered table "
            "(compact orders it by its clustering columns)"
        )
    columns = clustering.clustering_columns(snapshot.domains, schema, mode, snapshot.table_root)
    return Ordering(curve="hilbert", columns=columns, provider=clustering.PROVIDER) if columns else None


def _require_orderable(schema: StructType, partition_columns: list[str], ordering: Ordering, table: str) -> None:
    """Ordering columns are top-level, non-partition columns of a primitive type."""
    if ordering.provider is not None:
        flag = "clustering column"
    else:
        flag = "--zorder-by" if ordering.curve == "zorder" else "--sort-by"
    for name in ordering.columns:
        f = schema.get(name)
        if f is None:
            raise InvalidArgument(f"{table}: {flag} {name!r} is not a column of the table")
        if name in partition_columns:
            raise InvalidArgument(f"{table}: {flag} {name!r} is a partition column: each partition holds one value")
        kind = type_to_json(f.type)
        if not isinstance(kind, str):
            raise InvalidArgument(f"{table}: {flag} {name!r} is a {kind.get('type')}, not a primitive column")


def _already_ordered(files: list[SourceFile], ordering: Ordering) -> bool:
    """Every live file of the partition comes from one rewrite in this order and none needs a DV purge."""
    tags = {(f.add.get("tags") or {}).get(ORDER_TAG) for f in files}
    return len(tags) == 1 and ordering.matches(next(iter(tags))) and not any(f.deleted_rows for f in files)


# --- execute: runs inside a Spark task -------------------------------------------------------------


def iter_live_tables(group: RewriteGroup) -> Iterator[tuple[SourceFile, pa.Table]]:
    """Each input file of the bin as logical rows (no partition columns), its deletion vector applied."""
    storage = open_storage(group.table_root, group.storage)
    schema = parse_schema(group.schema_string)
    mode = cast(ColumnMappingMode, group.column_mapping_mode)
    for source in group.files:
        add = Add.model_validate(source.add)
        # A bin is a unit and units run one per core (driver threads, Spark task slots): the file is decoded
        # on this thread, not handed to Arrow's pool (2 GB compaction on 2 cores: about 10 % less wall).
        logical = read_logical_file(
            storage,
            group.table_root,
            source.location,
            add,
            schema,
            mode,
            group.partition_columns,
            group.materialized,
            threads=False,
        )
        yield source, logical


def _rows_per_file(group: RewriteGroup) -> int:
    """Rows per output file; without row counts, one file per bin (a bin never exceeds the target)."""
    if any(f.num_records is None for f in group.files):
        return UNBOUNDED_ROWS
    return rows_per_file(group.target_file_size, group.bytes, sum(f.num_records or 0 for f in group.files))


@dataclass
class _OutputFile:
    """One new data file of a bin (:class:`lakeops.packing.OutputFile`): buffered until stored."""

    group: RewriteGroup
    storage: Storage
    writer: DataFileWriter

    def write(self, data: pa.Table | pa.RecordBatch) -> None:
        self.writer.write(data if isinstance(data, pa.Table) else pa.Table.from_batches([data]))

    def finish(self) -> WrittenFile | None:
        ordering = self.group.ordering
        written = self.writer.finish(
            self.storage,
            self.group.table_root,
            directory=self.group.output_dir,
            partition_values=self.group.partition_values,
            data_change=False,
            tags={ORDER_TAG: ordering.tag()} if ordering is not None else None,
        )
        if written is not None and ordering is not None and ordering.provider is not None:
            written.add["clusteringProvider"] = ordering.provider
        return written

    def abort(self) -> None:
        """Nothing is stored before :meth:`finish`: the buffer goes with the writer."""


def rewrite_group(group: RewriteGroup) -> RewriteResult:
    """Rewrite one bin into files of about the target size; returns their ``add`` actions.

    Rows stream through one :class:`DataFileWriter` at a time (:func:`lakeops.packing.write_files`),
    so a task holds one row group and one encoded output file in memory, whatever the size of the
    bin. A task that fails deletes what it already stored before it dies.
    """
    started = time.monotonic()
    storage = open_storage(group.table_root, group.storage)
    schema = parse_schema(group.schema_string)
    mode = cast(ColumnMappingMode, group.column_mapping_mode)
    rows_read = dropped = 0

    def open_file(_: int) -> _OutputFile:
        writer = DataFileWriter(
            schema,
            mode=mode,
            partition_columns=group.partition_columns,
            configuration=group.configuration,
            hidden_columns=group.materialized_columns or (),
        )
        return _OutputFile(group, storage, writer)

    def live_tables() -> Iterator[pa.Table]:
        nonlocal rows_read, dropped
        for source, table in iter_live_tables(group):
            rows_read += table.num_rows
            dropped += source.deleted_rows
            yield table

    chunks: Iterable[pa.Table] = live_tables()
    if group.ordering is not None:  # an order needs every row of the partition
        tables = list(live_tables())
        rows = pa.concat_tables(tables, promote_options="default") if tables else None
        chunks = [rows.take(order_indices(rows, group.ordering.columns, group.ordering.curve))] if rows else []
    written = write_files(
        chunks, _rows_per_file(group), open_file, lambda done: storage.delete_many([w.location for w in done])
    )
    return RewriteResult(
        group_id=group.group_id,
        written=written,
        rows_read=rows_read,
        rows_dropped_by_dv=dropped,
        bytes_read=group.bytes,
        seconds=time.monotonic() - started,
    )


# --- commit: driver --------------------------------------------------------------------------------


def _remove_of(source: SourceFile, now_ms: int) -> Remove:
    return Remove.model_validate(
        {
            "path": source.add["path"],
            "deletionTimestamp": now_ms,
            "dataChange": False,
            "extendedFileMetadata": True,
            "partitionValues": source.add.get("partitionValues", {}),
            "size": source.size,
            "tags": source.add.get("tags"),
            "deletionVector": source.add.get("deletionVector"),
            # "Writer Requirements for Row Tracking": a remove carries its add's row id base and version.
            **{name: source.add[name] for name in row_tracking.FILE_FIELDS if name in source.add},
        }
    )


@dataclass
class _OptimizeCommit:
    """The pending ``OPTIMIZE`` version: the bins still in it, rebased over each winning version (see
    the module docstring for the rules)."""

    plan: CompactionPlan
    groups: Sequence[RewriteGroup]
    results: dict[int, RewriteResult]
    now_ms: int
    kept: list[RewriteGroup] = field(init=False)
    dropped: dict[int, str] = field(default_factory=dict)
    _group_of: dict[str, int] = field(init=False)
    #: Fresh row ids for the new files, re-derived for the version each attempt lands at.
    _row_ids: row_tracking.RowIdAssignment | None = field(init=False)

    def __post_init__(self) -> None:
        self.kept = list(self.groups)
        self._group_of = {f.add["path"]: g.group_id for g in self.groups for f in g.files}
        mark = self.plan.row_id_high_water_mark
        rows = sum(w.rows for g in self.groups for w in self.results[g.group_id].written)
        self._row_ids = (
            None
            if mark is None
            else row_tracking.RowIdAssignment(self.plan.table_root, mark, self.plan.read_version + 1, rows)
        )

    def _removes(self) -> list[Remove]:
        return [_remove_of(f, self.now_ms) for g in self.kept for f in g.files]

    def _adds(self) -> tuple[list[Add], list[DomainMetadata]]:
        """The new files' adds, numbered when the table tracks rows, and the row-tracking domain."""
        written = [w for g in self.kept for w in self.results[g.group_id].written]
        adds = [Add.model_validate(w.add) for w in written]
        if self._row_ids is None:
            return adds, []
        numbered, domain = self._row_ids.assign(adds, [w.rows for w in written])
        return numbered, [domain] if domain is not None else []

    def actions(self) -> Sequence[ActionModel]:
        adds, domains = self._adds()
        return [*self._removes(), *adds, *domains]

    def operation_metrics(self) -> dict[str, object]:
        """In the shape Delta's OPTIMIZE reports them, for the groups still in the commit."""
        removes = self._removes()
        return {
            **file_actions_summary(self._adds()[0], removes),
            "numBatches": len(self.kept),
            "numPartitionsOptimized": len({tuple(sorted(g.partition_values.items())) for g in self.kept}),
            "numDeletionVectorsRemoved": sum(1 for r in removes if r.deletion_vector is not None),
        }

    def rebase(self, winner: CommitActions) -> str | None:
        if winner.metadata is not None and (reason := self._metadata_conflict(winner)) is not None:
            return reason
        if winner.protocol is not None and self._row_ids is None and "rowTracking" in enabled_features(winner.protocol):
            return f"version {winner.version} enables row tracking, which the rewrite's files were not numbered for"
        if self._row_ids is not None:
            self._row_ids.rebase(winner)
        touched: dict[int, str] = {}
        changed = {a.path for a in winner.adds}
        for remove in winner.removes:
            if (group := self._group_of.get(remove.path)) is not None:
                verb = "changed the deletion vector of" if remove.path in changed else "removed"
                touched.setdefault(group, f"version {winner.version} {verb} {remove.path}")
        for add in winner.adds:
            if (group := self._group_of.get(add.path)) is not None:
                touched.setdefault(group, f"version {winner.version} re-added {add.path}")
        for group, why in touched.items():
            self.dropped.setdefault(group, why)  # the first version that touched it says why
        self.kept = [g for g in self.kept if g.group_id not in touched]
        if not self.kept:
            why = next(iter(touched.values()))
            return f"{why}, which this rewrite replaces (every one of its {len(self.groups)} groups conflicted)"
        return None

    def _metadata_conflict(self, winner: CommitActions) -> str | None:
        """Whether the winner's metadata invalidates files written for the plan's ("Change Metadata")."""
        assert winner.metadata is not None
        group = self.plan.groups[0]
        new = winner.metadata
        if new.schema_string != group.schema_string:
            return f"version {winner.version} changed the table schema"
        if new.partition_columns != group.partition_columns:
            return f"version {winner.version} changed the partition columns"
        if new.configuration.get(COLUMN_MAPPING_MODE) != group.configuration.get(COLUMN_MAPPING_MODE):
            return f"version {winner.version} changed the column mapping mode"
        changed = [k for k in row_tracking.PROPERTIES if new.configuration.get(k) != group.configuration.get(k)]
        if changed:
            return f"version {winner.version} changed row tracking ({', '.join(changed)})"
        return None


def commit_compaction(
    plan: CompactionPlan,
    results: Sequence[RewriteResult],
    storage_options: StorageOptions,
    *,
    groups: Sequence[RewriteGroup] | None = None,
) -> CommitOutcome:
    """Commit the rewrite of ``groups`` (default: the plan's) as one version (``OPTIMIZE``), dropping
    bins that versions landing first touched (``dropped``: by position in ``groups``, with the winning
    version and the file it removed or changed); nothing committed when there was nothing to rewrite.
    A partial-progress batch is rebased from the plan's version, over earlier batches too: those never
    touch its files, but another writer's commit between them may."""
    groups = plan.groups if groups is None else groups
    if not groups:
        return CommitOutcome()
    storage = open_storage(plan.table_root, storage_options)
    by_id = {r.group_id: r for r in results}
    if set(by_id) != {g.group_id for g in groups}:
        raise InvalidArgument(f"{plan.table_root}: rewrite results do not match the plan's groups")
    pending = _OptimizeCommit(plan, groups, by_id, int(time.time() * 1000))
    result = commit_pending(
        storage,
        plan.table_root,
        read_version=plan.read_version,
        pending=pending,
        operation="OPTIMIZE",
        operation_parameters={
            "predicate": [plan.where] if plan.where else [],
            "targetSize": str(plan.target_file_size),
            "minInputFiles": str(plan.min_input_files),
            **_order_parameters(plan.ordering),
        },
        max_attempts=plan.commit_retries + 1,
        timeout_s=plan.commit_timeout.total_seconds(),
        in_commit_timestamps=plan.in_commit_timestamps,
        rebased_domains=frozenset() if plan.row_id_high_water_mark is None else frozenset({row_tracking.DOMAIN}),
        tags=_row_tracking_tags(plan),
    )
    position = {g.group_id: i for i, g in enumerate(groups)}
    dropped = {position[group]: why for group, why in pending.dropped.items()}
    return CommitOutcome(version=result.version, attempts=result.attempts, dropped=dropped, warnings=result.warnings)


def _row_tracking_tags(plan: CompactionPlan) -> dict[str, str]:
    """``delta.rowTracking.preserved``: true when every copied row kept its stable row id and commit
    version, which needs tracking enabled (materialised columns); only on tables that track rows."""
    if plan.row_id_high_water_mark is None:
        return {}
    preserved = all(g.materialized_columns for g in plan.groups)
    return {row_tracking.PRESERVED_TAG: "true" if preserved else "false"}


def _order_parameters(ordering: Ordering | None) -> dict[str, object]:
    """``zOrderBy`` as Delta's ``OPTIMIZE ZORDER BY`` records it (a JSON array in a string); ``sortBy``
    alike; ``clusterBy`` for a clustered table."""
    if ordering is None:
        return {}
    if ordering.provider is not None:
        return {"clusterBy": json.dumps(ordering.columns)}
    return {"zOrderBy" if ordering.curve == "zorder" else "sortBy": json.dumps(ordering.columns)}


def written_locations(results: Sequence[RewriteResult]) -> list[str]:
    """Every file this attempt wrote: the only files an abort may delete."""
    return [w.location for r in results for w in r.written]
