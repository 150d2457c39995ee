"""The change data feed of a Delta table: which rows each version inserted, deleted or updated.

Implements the reader side of "Add CDC File" and "Reader Requirements for AddCDCFile", "Change Data
Files", "Deletion Vectors" and "Column Mapping":

* A version with ``cdc`` actions is read *exclusively* from those change files; their
  ``_change_type`` column says what each row is (``insert``, ``delete``, ``update_preimage``,
  ``update_postimage``).
* Otherwise ``dataChange=true`` adds are inserts and ``dataChange=true`` removes are deletes;
  ``dataChange=false`` actions (OPTIMIZE, REORG) change no rows and are skipped.
* Deletion vectors: a remove and an add of the *same path* in one version change only the rows whose
  deleted state changed (rows in the new DV but not the old are deletes, rows in the old DV but not
  the new are re-inserts). A lone remove deletes the rows its DV still showed; a lone add inserts
  the rows its DV does not hide.
* Column mapping: files are read by physical name or field id and the rows come out by logical name.
* ``_commit_version`` is the log file's version. ``_commit_timestamp`` is the commit's
  ``inCommitTimestamp`` when present, else ``commitInfo.timestamp`` (what delta-rs reports, and Delta
  writers set it to the commit time), else the log file's modification time, which is what the
  protocol text names: copied or restored tables keep their commit times that way.

Planning reads only the log; :func:`read_change_rows` reads one planned file on an executor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict
from pyroaring import BitMap64

from lakeops.change_columns import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, DELTA_CHANGE_COLUMNS
from lakeops.delta.actions import Add, DeletionVectorDescriptor, Metadata, Remove
from lakeops.delta.commit_file import CommitActions, parse_commit
from lakeops.delta.deletion_vectors import dv_absolute_path, read_deletion_vector, row_indexes
from lakeops.delta.features import check_readable
from lakeops.delta.log_segment import LogListing, commit_timestamps, first_missing, list_log, read_log_file
from lakeops.delta.scan import with_partition_columns
from lakeops.delta.schema import (
    LONG,
    STRING,
    TIMESTAMP,
    ArrayType,
    ColumnMappingMode,
    DataType,
    MapType,
    StructField,
    StructType,
    column_mapping_mode,
    parse_schema,
    physical_name,
    read_data_file_as_logical,
    to_arrow_schema,
)
from lakeops.delta.snapshot import DeltaSnapshot, load_snapshot
from lakeops.errors import CorruptFile, InvalidArgument, NotFound, ProtocolError, UnsupportedFeature, VersionNotFound
from lakeops.storage import Storage
from lakeops.storage.uri import normalize

__all__ = [
    "ChangeFeed",
    "ChangeFile",
    "ChangeType",
    "VersionChanges",
    "change_feed_schema",
    "commit_timestamp_ms",
    "load_feed_end",
    "plan_change_feed",
    "read_change_rows",
    "require_files_present",
    "rows_by_change_type",
]

ChangeType = Literal["insert", "delete", "update_preimage", "update_postimage"]
CHANGE_TYPES: tuple[str, ...] = get_args(ChangeType)
#: Commit files read at once while planning (IO-bound: object store round trips).
_IO_THREADS = 16


class ChangeFile(BaseModel):
    """One file to read for the changes of one version, and which of its rows are changes.

    ``change_type`` is fixed for adds (``insert``) and removes (``delete``); it is ``None`` for the
    files of ``cdc`` actions, whose rows carry their own ``_change_type``.
    The changed rows are those of ``only`` (every row when ``None``) minus those of ``without``.
    """

    model_config = ConfigDict(frozen=True)

    version: int
    timestamp_ms: int
    path: str
    location: str
    size: int | None
    partition_values: dict[str, str | None]
    change_type: ChangeType | None
    only: DeletionVectorDescriptor | None = None
    without: DeletionVectorDescriptor | None = None


@dataclass(frozen=True)
class VersionChanges:
    """What one version changed: read from change files, from file actions, or nothing at all."""

    version: int
    timestamp_ms: int
    from_change_files: bool
    files: tuple[ChangeFile, ...]


@dataclass(frozen=True)
class ChangeFeed:
    """The planned change feed of versions ``from_version..to_version`` (inclusive).

    Rows are read in the logical schema of ``to_version`` (``snapshot``), as Delta readers do for a
    batch read: columns added later are null in older rows, renamed columns keep their data.
    """

    table_root: str
    from_version: int
    to_version: int
    snapshot: DeltaSnapshot
    versions: tuple[VersionChanges, ...]

    @property
    def schema(self) -> StructType:
        return parse_schema(self.snapshot.metadata.schema_string)

    @property
    def column_mapping_mode(self) -> ColumnMappingMode:
        return column_mapping_mode(self.snapshot.metadata, self.snapshot.protocol)

    @property
    def files(self) -> list[ChangeFile]:
        return [f for v in self.versions for f in v.files]


def commit_timestamp_ms(commit: CommitActions, file_time_ms: int) -> int:
    """The commit's time: ``inCommitTimestamp``, else ``commitInfo.timestamp``, else the file time."""
    info = commit.commit_info
    if info is not None:
        if info.in_commit_timestamp is not None:
            return info.in_commit_timestamp
        if info.timestamp is not None:
            return info.timestamp
    return file_time_ms


def _relaxed(dtype: DataType) -> DataType:
    """Every level nullable: rows from files written before a column existed hold nulls there."""
    if isinstance(dtype, StructType):
        return StructType(tuple(_relaxed_field(f) for f in dtype.fields))
    if isinstance(dtype, ArrayType):
        return ArrayType(_relaxed(dtype.element_type), True)
    if isinstance(dtype, MapType):
        return MapType(dtype.key_type, _relaxed(dtype.value_type), True)
    return dtype


def _relaxed_field(f: StructField) -> StructField:
    # Column mapping ids, generation expressions, identity and invariants belong to the source table;
    # only the human comment travels with the column.
    metadata = {"comment": f.metadata["comment"]} if "comment" in f.metadata else {}
    return StructField(f.name, _relaxed(f.type), True, metadata)


def change_feed_schema(schema: StructType) -> StructType:
    """The schema of change rows: the table's logical columns (nullable, plain) + the three CDF columns."""
    reserved = [f.name for f in schema.fields if f.name.lower() in DELTA_CHANGE_COLUMNS]
    if reserved:
        raise UnsupportedFeature(
            f"column {reserved[0]!r} clashes with a change data feed column; the change feed cannot be produced"
        )
    base = _relaxed(schema)
    assert isinstance(base, StructType)
    return StructType(
        (
            *base.fields,
            StructField(CHANGE_TYPE, STRING, False),
            StructField(COMMIT_VERSION, LONG, False),
            StructField(COMMIT_TIMESTAMP, TIMESTAMP, False),
        )
    )


# --- planning (driver) ------------------------------------------------------------------------------


def _single(actions: list[Add] | list[Remove], version: int, location: str) -> dict[str, Add | Remove]:
    by_path: dict[str, Add | Remove] = {}
    for action in actions:
        if action.path in by_path:
            raise ProtocolError(
                f"{location}: version {version} {type(action).__name__.lower()}s {action.path} twice with "
                "dataChange=true; its changes are ambiguous"
            )
        by_path[action.path] = action
    return by_path


class _RemovedPartitions:
    """Partition values of removes written without them (``extendedFileMetadata`` absent): taken from
    the add that made the file live, in the snapshot just before the removing version."""

    def __init__(self, storage: Storage, table_root: str, listing: LogListing) -> None:
        self.storage, self.table_root, self.listing = storage, table_root, listing
        self.cache: dict[int, DeltaSnapshot] = {}

    def lookup(self, remove: Remove, version: int) -> dict[str, str | None]:
        if version not in self.cache:
            try:
                self.cache[version] = load_snapshot(
                    self.storage, self.table_root, version=version - 1, listing=self.listing
                )
            except VersionNotFound as exc:
                raise VersionNotFound(
                    f"{self.table_root}: version {version} removes {remove.path} without its partition values, "
                    f"and version {version - 1}, which has them, cannot be reconstructed ({exc})"
                ) from exc
        add = self.cache[version].files.get(remove.key)
        if add is None:
            raise ProtocolError(
                f"{self.table_root}: version {version} removes {remove.path}, which is not live at version "
                f"{version - 1}, without its partition values"
            )
        return add.partition_values


def _file_changes(
    commit: CommitActions,
    timestamp_ms: int,
    locate: Callable[[str], str],
    partitions_of: Callable[[Remove], dict[str, str | None]],
    location: str,
) -> list[ChangeFile]:
    """Changes from ``dataChange=true`` adds and removes, with same-path pairs diffed by DV."""
    version = commit.version
    adds = _single([a for a in commit.adds if a.data_change], version, location)
    removes = _single([r for r in commit.removes if r.data_change], version, location)

    def change(
        action: Add | Remove,
        change_type: ChangeType,
        only: DeletionVectorDescriptor | None,
        without: DeletionVectorDescriptor | None,
    ) -> ChangeFile:
        # An add always carries its partition values; a remove may not (old writers).
        values = action.partition_values if isinstance(action, Add) else partitions_of(action)
        return ChangeFile(
            version=version,
            timestamp_ms=timestamp_ms,
            path=action.path,
            location=locate(action.path),
            size=action.size,
            partition_values=values,
            change_type=change_type,
            only=only,
            without=without,
        )

    out: list[ChangeFile] = []
    for path in sorted(removes.keys() | adds.keys()):
        removed, added = removes.get(path), adds.get(path)
        if removed is not None and added is not None:
            old, new = removed.deletion_vector, added.deletion_vector
            if new is not None:  # rows newly hidden: deleted in this version
                out.append(change(added, "delete", new, old))
            if old is not None:  # rows no longer hidden: back again (RESTORE)
                out.append(change(added, "insert", old, new))
        elif removed is not None:
            out.append(change(removed, "delete", None, removed.deletion_vector))
        elif added is not None:
            out.append(change(added, "insert", None, added.deletion_vector))
    return out


def _change_file_changes(commit: CommitActions, timestamp_ms: int, locate: Callable[[str], str]) -> list[ChangeFile]:
    return [
        ChangeFile(
            version=commit.version,
            timestamp_ms=timestamp_ms,
            path=cdc.path,
            location=locate(cdc.path),
            size=cdc.size,
            partition_values=cdc.partition_values,
            change_type=None,
        )
        for cdc in sorted(commit.cdcs, key=lambda c: c.path)
    ]


def _read_commits(storage: Storage, listing: LogListing, versions: range) -> list[CommitActions]:
    infos = [listing.commits[v] for v in versions]
    with ThreadPoolExecutor(max_workers=min(_IO_THREADS, max(1, len(infos)))) as pool:
        raws = list(pool.map(lambda info: read_log_file(storage, info), infos))
    return [parse_commit(raw, v, info.path) for v, info, raw in zip(versions, infos, raws, strict=True)]


def load_feed_end(
    storage: Storage, table_root: str, to_version: int | None = None, *, latest: DeltaSnapshot | None = None
) -> DeltaSnapshot:
    """The table at the last version of a change range (default: the latest), whose schema the feed
    is read in; ``latest``, the latest snapshot when the caller has read it already, is that end when
    the range ends there. Raises :class:`VersionNotFound` for a version past the latest."""
    table_root = normalize(table_root)
    listing = latest.listing if latest is not None else list_log(storage, table_root)
    newest = listing.latest_version
    if to_version is not None and newest is not None and to_version > newest:
        raise VersionNotFound(f"{table_root}: version {to_version} does not exist (latest is {newest})")
    if latest is not None and to_version in (None, latest.version):
        end = latest
    else:
        end = load_snapshot(storage, table_root, version=to_version, listing=listing)
    check_readable(end.protocol, table_root, "cdc")
    return end


def _check_range(listing: LogListing, table_root: str, from_version: int, end: int) -> None:
    if from_version < 0:
        raise InvalidArgument(f"{table_root}: the first version of a change range must be >= 0, got {from_version}")
    if end < from_version:
        raise InvalidArgument(
            f"{table_root}: the change range {from_version}..{end} is empty (it ends before it starts)"
        )
    missing = first_missing(listing, from_version, end)
    if missing is not None:
        kept = [v for v in listing.commits if v <= end]
        earliest = min(kept) if kept else None
        raise VersionNotFound(
            f"{table_root}: the changes of versions {from_version}..{end} cannot be read: commit file "
            f"{missing:020d}.json has expired from the log (delta.logRetentionDuration); "
            f"the earliest commit kept is {earliest}, start the range there or later"
        )


def _partitioning(metadata: Metadata) -> list[str]:
    """Partition columns by physical name: renaming a mapped partition column does not repartition."""
    schema = parse_schema(metadata.schema_string)
    mode = column_mapping_mode(metadata)
    fields = [schema.get(name) for name in metadata.partition_columns]
    return [
        physical_name(f, mode) if f is not None else name
        for f, name in zip(fields, metadata.partition_columns, strict=True)
    ]


def plan_change_feed(storage: Storage, end: DeltaSnapshot, from_version: int) -> ChangeFeed:
    """Which files hold the changes of versions ``from_version..end.version`` (``end`` from
    :func:`load_feed_end`).

    Reads only the log. Raises :class:`VersionNotFound` when a commit of the range has expired, and
    :class:`UnsupportedFeature` for a range that changes the partition columns or a protocol lakeops
    cannot read. It does not check that the files still exist: :func:`require_files_present` does.
    """
    table_root, listing = end.table_root, end.listing
    _check_range(listing, table_root, from_version, end.version)
    change_feed_schema(parse_schema(end.metadata.schema_string))  # refuse clashing names early
    file_times = dict(commit_timestamps(listing))
    removed_partitions = _RemovedPartitions(storage, table_root, listing)
    partitioned = bool(end.partition_columns)

    def partitions_of(version: int) -> Callable[[Remove], dict[str, str | None]]:
        def lookup(remove: Remove) -> dict[str, str | None]:
            if remove.partition_values is not None or not partitioned:
                return remove.partition_values or {}
            return removed_partitions.lookup(remove, version)

        return lookup

    versions: list[VersionChanges] = []
    for commit in _read_commits(storage, listing, range(from_version, end.version + 1)):
        location = listing.commits[commit.version].path
        if commit.protocol is not None:
            check_readable(commit.protocol, table_root, "cdc")
        if commit.metadata is not None and _partitioning(commit.metadata) != _partitioning(end.metadata):
            raise UnsupportedFeature(
                f"{location}: version {commit.version} partitions the table by {commit.metadata.partition_columns}, "
                f"version {end.version} by {end.partition_columns}; read the change feed on each side of "
                f"version {commit.version} separately"
            )
        ts = commit_timestamp_ms(commit, file_times[commit.version])
        if commit.cdcs:
            files = _change_file_changes(commit, ts, end.file_location)
        else:
            files = _file_changes(commit, ts, end.file_location, partitions_of(commit.version), location)
        versions.append(VersionChanges(commit.version, ts, bool(commit.cdcs), tuple(files)))
    return ChangeFeed(table_root, from_version, end.version, end, tuple(versions))


def _needed_files(feed: ChangeFeed) -> dict[str, tuple[int, str]]:
    """Every file the feed reads → (version, what it is), first use wins."""
    needed: dict[str, tuple[int, str]] = {}
    for change in feed.files:
        kind = "change data file" if change.change_type is None else "data file"
        needed.setdefault(change.location, (change.version, kind))
        for dv in (change.only, change.without):
            if dv is not None and dv.storage_type != "i":
                where = dv_absolute_path(dv, feed.table_root)
                needed.setdefault(where, (change.version, f"deletion vector file of {change.path}"))
    return needed


def require_files_present(storage: Storage, feed: ChangeFeed) -> None:
    """Refuse a range whose data, change or DV files were vacuumed, naming the first one missing and
    the first version from which the feed is still complete."""
    needed = _needed_files(feed)
    locations = list(needed)
    with ThreadPoolExecutor(max_workers=min(_IO_THREADS, max(1, len(locations)))) as pool:
        present = list(pool.map(storage.exists, locations))
    missing = [loc for loc, ok in zip(locations, present, strict=True) if not ok]
    if not missing:
        return
    first = min(missing, key=lambda loc: needed[loc][0])
    version, kind = needed[first]
    last_broken = max(needed[loc][0] for loc in missing)
    raise VersionNotFound(
        f"{feed.table_root}: the changes of version {version} cannot be read: {kind} {first} no longer "
        f"exists (vacuumed?); {len(missing)} file(s) of versions {feed.from_version}..{feed.to_version} are "
        f"missing, the change feed is complete only from version {last_broken + 1}"
    )


# --- reading (executor) -----------------------------------------------------------------------------


def _read_parquet(storage: Storage, change: ChangeFile) -> pa.Table:
    try:
        raw = storage.read(change.location)
    except NotFound as exc:
        raise NotFound(
            f"{change.location}: file of version {change.version} disappeared after planning (vacuumed?)"
        ) from exc
    try:
        return pq.ParquetFile(pa.BufferReader(raw)).read()  # no pyarrow.dataset import (as scan.py)
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorruptFile(f"{change.location}: not readable parquet ({exc})") from exc


def _selected_rows(storage: Storage, table_root: str, change: ChangeFile, num_rows: int) -> pa.Array | None:
    """A boolean mask of the changed rows, or None when every row changed."""
    if change.only is None and change.without is None:
        return None

    def bitmap(dv: DeletionVectorDescriptor | None) -> BitMap64:
        if dv is None:
            return BitMap64()
        rows = read_deletion_vector(dv, storage, table_root, data_file=change.location)
        if len(rows) and rows.max() >= num_rows:
            raise CorruptFile(
                f"{change.location}: deletion vector {dv.unique_id} names row {rows.max()} "
                f"but the file has {num_rows} rows"
            )
        return rows

    without = bitmap(change.without)
    if change.only is not None:
        mask = np.zeros(num_rows, dtype=bool)
        mask[row_indexes(bitmap(change.only) - without).astype(np.int64)] = True
    else:
        mask = np.ones(num_rows, dtype=bool)
        mask[row_indexes(without).astype(np.int64)] = False
    return pa.array(mask)


def _change_types(raw: pa.Table, change: ChangeFile) -> pa.ChunkedArray:
    if CHANGE_TYPE not in raw.column_names:
        raise CorruptFile(f"{change.location}: change data file of version {change.version} has no {CHANGE_TYPE}")
    types = raw.column(CHANGE_TYPE).cast(pa.string())
    bad = pc.unique(pc.filter(types, pc.invert(pc.is_in(types, value_set=pa.array(CHANGE_TYPES)))))
    if len(bad):
        raise CorruptFile(
            f"{change.location}: change data file of version {change.version} has {CHANGE_TYPE} "
            f"{bad[0].as_py()!r} (expected one of {', '.join(CHANGE_TYPES)})"
        )
    return types


def read_change_rows(
    storage: Storage,
    table_root: str,
    change: ChangeFile,
    schema: StructType,
    mode: ColumnMappingMode,
    partition_columns: Iterable[str],
) -> pa.Table:
    """The changed rows of one planned file, in the schema of :func:`change_feed_schema` (``schema``
    being the table schema the feed is read in)."""
    partitions = list(partition_columns)
    raw = _read_parquet(storage, change)
    mask = _selected_rows(storage, table_root, change, raw.num_rows)
    if change.change_type is None:
        types = _change_types(raw, change)
    else:
        types = pa.chunked_array([pa.array([change.change_type] * raw.num_rows, pa.string())])
    logical = read_data_file_as_logical(raw, schema, mode, partition_columns=partitions, file_path=change.location)
    logical = with_partition_columns(logical, schema, mode, change.partition_values)
    n = raw.num_rows
    columns = [
        *logical.columns,
        types,
        pa.chunked_array([pa.array(np.full(n, change.version, dtype=np.int64))]),
        pa.chunked_array(
            [pa.array(np.full(n, change.timestamp_ms * 1000, dtype=np.int64)).cast(pa.timestamp("us", tz="UTC"))]
        ),
    ]
    table = pa.Table.from_arrays(columns, schema=to_arrow_schema(change_feed_schema(schema), include_metadata=False))
    return table.filter(mask) if mask is not None else table


def rows_by_change_type(table: pa.Table) -> dict[str, int]:
    """Row counts per ``_change_type`` (only the types present)."""
    return {str(e["values"]): int(e["counts"]) for e in pc.value_counts(table.column(CHANGE_TYPE)).to_pylist()}
