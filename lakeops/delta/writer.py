"""A small Delta table writer: create a table or append data files to it, idempotently.

Implements the writer side of "Creation of New Log Entries" (the first commit holds ``protocol`` and
``metaData``), "Add File and Remove File" (new files with full "Per-file Statistics", never
overwriting a path), "Transaction Identifiers" (an application's progress recorded atomically with
its data, and checked before writing again) and "Protocol Evolution" (plain tables need reader 1 /
writer 2, nothing more).

Data files are written first, under fresh names, by whoever holds the rows (a Spark task); the
driver then commits their ``add`` actions in one version. The writer only appends: it never removes
a file and never changes an existing table's schema.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from lakeops.delta import row_tracking
from lakeops.delta.actions import ActionModel, Add, Metadata, Protocol, Txn
from lakeops.delta.commit import CommitResult, ConflictRule, commit_pending
from lakeops.delta.commit_file import CommitActions
from lakeops.delta.commit_time import ict_enabled
from lakeops.delta.features import check_writable
from lakeops.delta.schema import (
    ColumnMappingMode,
    StructType,
    logical_to_physical,
    parse_schema,
    physical_arrow_schema,
    primitive_type_names,
    schema_to_string,
)
from lakeops.delta.snapshot import load_snapshot
from lakeops.delta.stats import DataSkippingConfig, delta_stats_json
from lakeops.errors import InvalidArgument, LakeopsError, NotATable, StorageError
from lakeops.parquet.statistics import nan_counts
from lakeops.storage import ConfinedStorage, Storage
from lakeops.storage.uri import join, normalize

__all__ = [
    "DataFileWriter",
    "TargetTable",
    "WrittenFile",
    "append_files",
    "new_table_metadata",
    "read_target",
    "require_writable_location",
    "txn_conflicts",
]

#: What a table with no table features needs: reader 1, writer 2 (invariants/appendOnly understood).
PLAIN_PROTOCOL = Protocol(minReaderVersion=1, minWriterVersion=2)


def new_table_protocol(schema: StructType) -> Protocol:
    """The protocol a new table with ``schema`` needs: plain, unless a column (nested ones included)
    is ``timestamp_ntz``, which needs reader 3 / writer 7 with ``timestampNtz`` in both feature lists
    (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#timestamp-without-timezone-timestampntz)."""
    if "timestamp_ntz" not in primitive_type_names(schema):
        return PLAIN_PROTOCOL
    # Writer 7 lists every writer feature the table uses: the legacy writer-2 ones a plain table had.
    return Protocol(
        minReaderVersion=3,
        minWriterVersion=7,
        readerFeatures=["timestampNtz"],
        writerFeatures=["appendOnly", "invariants", "timestampNtz"],
    )


class WrittenFile(BaseModel):
    """A data file written but not yet committed: its ``add`` action, where it is, how many rows."""

    add: dict[str, Any]
    location: str
    rows: int


@dataclass(frozen=True)
class TargetTable:
    """What a writer must know of the table it appends to; ``version`` is None if it does not exist."""

    root: str
    version: int | None
    metadata: Metadata | None = None
    txns: dict[str, Txn] = field(default_factory=dict)

    @property
    def exists(self) -> bool:
        return self.version is not None

    @property
    def in_commit_timestamps(self) -> bool:
        """The table dates commits by in-commit timestamps, so an append must carry one: its property
        says so (the protocol's ``inCommitTimestamp`` feature is what let it be set; read_target checked
        the protocol)."""
        return self.metadata is not None and ict_enabled(self.metadata)

    def txn_version(self, app_id: str) -> int | None:
        txn = self.txns.get(app_id)
        return txn.version if txn is not None else None


def read_target(storage: Storage, root: str) -> TargetTable:
    """The target's latest state, or a not-yet-existing target; refuses a table lakeops cannot write."""
    root = normalize(root)
    try:
        snapshot = load_snapshot(storage, root)
    except NotATable:
        return TargetTable(root, None)
    check_writable(snapshot.protocol, root, "write")
    snapshot.require_next_commit()
    return TargetTable(root, snapshot.version, snapshot.metadata, dict(snapshot.txns))


def new_table_metadata(schema: StructType, *, configuration: dict[str, str], name: str | None = None) -> Metadata:
    """The ``metaData`` of a new unpartitioned table with a fresh id."""
    return Metadata.model_validate(
        {
            "id": str(uuid.uuid4()),
            "name": name,
            "schemaString": schema_to_string(schema),
            "partitionColumns": [],
            "configuration": configuration,
            "createdTime": int(time.time() * 1000),
        }
    )


def require_writable_location(storage: Storage, root: str) -> None:
    """Fail early, before any data is produced, when the table location cannot be written.

    Writes and deletes an empty, uniquely named hidden object under the root (readers ignore hidden
    files); a location that refuses it raises :class:`StorageError` naming the table.
    """
    root = normalize(root)
    probe = join(root, f".lakeops-write-check-{uuid.uuid4().hex}")
    try:
        storage.put_if_absent(probe, b"")
    except LakeopsError as exc:
        raise StorageError(f"{root}: the table location is not writable ({exc}); nothing was written") from exc
    storage.delete_many([probe])


#: A row group is flushed once this many rows or bytes are buffered: few, large row groups read fast,
#: and memory stays bounded by one row group plus the encoded file. The row cap is parquet-rs' default
#: (``max_row_group_size``), which delta-rs writes with.
ROW_GROUP_ROWS = 1024 * 1024
ROW_GROUP_BYTES = 64 * 1024 * 1024
#: The codec and level delta-rs' OPTIMIZE writes (ZSTD level 4; dictionary encoding and column statistics
#: on, as both writers default), so a rewrite's files and time compare like for like with the peer's.
COMPRESSION = "zstd"
COMPRESSION_LEVEL = 4


class DataFileWriter:
    """Accumulates logical rows of one partition into one Parquet data file and stores it under a
    new name. Small batches are buffered into row groups of up to ``ROW_GROUP_ROWS`` rows /
    ``ROW_GROUP_BYTES`` bytes; files carry physical names and field ids under column mapping."""

    def __init__(
        self,
        schema: StructType,
        *,
        mode: ColumnMappingMode = "none",
        partition_columns: Sequence[str] = (),
        configuration: dict[str, str] | None = None,
        hidden_columns: Sequence[str] = (),
    ) -> None:
        self.schema = schema
        #: ``int64`` columns outside the schema written as given (row tracking's materialised columns).
        self.hidden_columns = list(hidden_columns)
        self.mode = mode
        self.partition_columns = list(partition_columns)
        self.configuration = configuration or {}
        self.sink = pa.BufferOutputStream()
        self.writer: pq.ParquetWriter | None = None
        self.pending: list[pa.Table] = []
        self.pending_rows = self.pending_bytes = 0
        self.rows = 0
        self.nans: Counter[tuple[str, ...]] = Counter()

    def write(self, table: pa.Table) -> None:
        """Buffer logical rows (columns by logical name, cast and checked against the schema)."""
        if not table.num_rows:
            return
        hidden = [table.column(name).cast(pa.int64()) for name in self.hidden_columns]
        physical = logical_to_physical(
            table.drop_columns(self.hidden_columns), self.schema, self.mode, partition_columns=self.partition_columns
        )
        for name, values in zip(self.hidden_columns, hidden, strict=True):
            physical = physical.append_column(pa.field(name, pa.int64()), values)
        self.pending.append(physical)
        self.pending_rows += physical.num_rows
        self.pending_bytes += physical.nbytes
        if self.pending_rows >= ROW_GROUP_ROWS:
            self._flush(whole=False)
        elif self.pending_bytes >= ROW_GROUP_BYTES:
            self._flush()

    def _flush(self, *, whole: bool = True) -> None:
        """Write the buffer as row groups of ``ROW_GROUP_ROWS`` rows (a cap, as parquet-rs'); the rest
        too when ``whole``, else it stays buffered for the next row group."""
        if not self.pending:
            return
        buffered = pa.concat_tables(self.pending)  # row groups of several chunks: no copy into one
        self.pending, self.pending_rows, self.pending_bytes = [], 0, 0
        while buffered.num_rows >= ROW_GROUP_ROWS or (whole and buffered.num_rows):
            group, buffered = buffered.slice(0, ROW_GROUP_ROWS), buffered.slice(ROW_GROUP_ROWS)
            self._write_group(group)
        if buffered.num_rows:
            self.pending, self.pending_rows, self.pending_bytes = [buffered], buffered.num_rows, buffered.nbytes

    def _write_group(self, group: pa.Table) -> None:
        if self.writer is None:
            schema = physical_arrow_schema(self.schema, self.mode, partition_columns=self.partition_columns)
            for name in self.hidden_columns:
                schema = schema.append(pa.field(name, pa.int64()))
            self.writer = pq.ParquetWriter(
                self.sink, schema, compression=COMPRESSION, compression_level=COMPRESSION_LEVEL, write_statistics=True
            )
        self.writer.write_table(group, row_group_size=group.num_rows)
        self.rows += group.num_rows
        self.nans.update(nan_counts(group))

    def finish(
        self,
        storage: Storage,
        root: str,
        *,
        directory: str = "",
        partition_values: dict[str, str | None] | None = None,
        data_change: bool = True,
        prefix: str = "part",
        tags: dict[str, str | None] | None = None,
    ) -> WrittenFile | None:
        """Store the file at ``<root>/<directory>/<prefix>-<uuid>.zstd.parquet`` (put-if-absent: a
        data file is never overwritten) and describe it as an ``add`` with full statistics; None
        when no rows were written. ``directory`` is relative and URI-encoded, as action paths are."""
        self._flush()
        if self.writer is None:
            return None
        self.writer.close()
        payload = self.sink.getvalue().to_pybytes()
        stats = delta_stats_json(
            pq.ParquetFile(pa.BufferReader(payload)).metadata,
            self.schema,
            mode=self.mode,
            partition_columns=self.partition_columns,
            config=DataSkippingConfig.from_configuration(self.configuration),
            nan_counts=dict(self.nans),
        )
        name = f"{prefix}-{uuid.uuid4()}.zstd.parquet"
        path = f"{directory}/{name}" if directory else name
        location = join(root, *(unquote(part) for part in path.split("/")))
        ConfinedStorage(storage, root).put_if_absent(location, payload)  # never outside the table
        add = Add(
            path=path,
            partitionValues=partition_values or {},
            size=len(payload),
            modificationTime=int(time.time() * 1000),
            dataChange=data_change,
            stats=stats,
            tags=tags,
        )
        return WrittenFile(add=add.to_json_dict(), location=location, rows=self.rows)


def txn_conflicts(app_id: str | None) -> ConflictRule:
    """Abort when a concurrent commit advanced the same application's progress (its rows may overlap
    ours) or changed the table's metadata or protocol (a concurrent create, a schema change)."""

    def rule(winner: CommitActions) -> str | None:
        for txn in winner.txns:
            if app_id is not None and txn.app_id == app_id:
                return f"version {winner.version} recorded progress {txn.version} of application {app_id} concurrently"
        if winner.metadata is not None:
            return f"version {winner.version} created the table or changed its metadata concurrently"
        if winner.protocol is not None:
            return f"version {winner.version} changed the table protocol concurrently"
        return None

    return rule


@dataclass
class _Append:
    """An append's pending commit: its ``add``s numbered for the version each attempt lands at when
    the table tracks rows ("Writer Requirements for Row Tracking")."""

    fixed: list[ActionModel]
    written: list[WrittenFile]
    metrics: dict[str, object]
    rule: ConflictRule
    row_ids: row_tracking.RowIdAssignment | None

    def actions(self) -> Sequence[ActionModel]:
        adds = [Add.model_validate(f.add) for f in self.written]
        if self.row_ids is None:
            return [*self.fixed, *adds]
        numbered, domain = self.row_ids.assign(adds, [f.rows for f in self.written])
        return [*self.fixed, *numbered, *([domain] if domain is not None else [])]

    def operation_metrics(self) -> dict[str, object]:
        return self.metrics

    def rebase(self, winner: CommitActions) -> str | None:
        reason = self.rule(winner)
        if reason is None and self.row_ids is not None:
            self.row_ids.rebase(winner)
        return reason


def _row_ids(storage: Storage, target: TargetTable, rows: int) -> row_tracking.RowIdAssignment | None:
    """Row-id numbering of ``rows`` rows above the high-water mark of the version the append is based
    on, when the existing table assigns row ids (a new table lakeops creates does not track rows)."""
    if target.version is None:
        return None
    snapshot = load_snapshot(storage, target.root, version=target.version)
    if not row_tracking.RowTracking.of(snapshot.protocol, snapshot.metadata, target.root).assigns:
        return None
    mark = row_tracking.high_water_mark(snapshot.domains, target.root)
    return row_tracking.RowIdAssignment(target.root, mark, target.version + 1, rows)


def append_files(
    storage: Storage,
    target: TargetTable,
    *,
    metadata: Metadata,
    files: list[WrittenFile],
    txn: Txn | None,
    operation_parameters: dict[str, object],
    operation_metrics: dict[str, object] | None = None,
) -> CommitResult:
    """Commit ``files`` (and ``txn``) as the next version of ``target``, creating the table with
    ``metadata`` when it does not exist yet. An existing table must have ``metadata``'s schema.

    Concurrency: the commit is put-if-absent; a concurrent commit is tolerated unless
    :func:`txn_conflicts` of ``txn``'s application says otherwise (:class:`CommitConflict`). On a table
    that tracks rows the new files are numbered above the high-water mark (renumbered over a concurrent
    append) and the commit says no row was copied (``delta.rowTracking.preserved``).
    """
    actions: list[ActionModel] = []
    if target.exists:
        assert target.metadata is not None
        if parse_schema(target.metadata.schema_string) != parse_schema(metadata.schema_string):
            raise InvalidArgument(
                f"{target.root}: the table's schema differs from the rows to append "
                f"(table: {target.metadata.schema_string}; rows: {metadata.schema_string})"
            )
        if target.metadata.partition_columns:
            raise InvalidArgument(f"{target.root}: appending to a partitioned table is not supported")
    else:
        actions += [new_table_protocol(parse_schema(metadata.schema_string)), metadata]
    if txn is not None:
        actions.append(txn)
    row_ids = _row_ids(storage, target, sum(f.rows for f in files))
    pending = _Append(
        actions,
        files,
        {
            "numFiles": str(len(files)),
            "numOutputRows": str(sum(f.rows for f in files)),
            "numOutputBytes": str(sum(int(f.add["size"]) for f in files)),
            **(operation_metrics or {}),
        },
        txn_conflicts(txn.app_id if txn is not None else None),
        row_ids,
    )
    return commit_pending(
        storage,
        target.root,
        read_version=target.version if target.version is not None else -1,
        pending=pending,
        operation="WRITE",
        operation_parameters={"mode": "Append" if target.exists else "ErrorIfExists", **operation_parameters},
        is_blind_append=txn is None,
        in_commit_timestamps=target.in_commit_timestamps,
        rebased_domains=frozenset() if row_ids is None else frozenset({row_tracking.DOMAIN}),
        tags={} if row_ids is None else {row_tracking.PRESERVED_TAG: "true"},
    )
