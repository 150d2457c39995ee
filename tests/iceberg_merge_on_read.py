"""Merge-on-read deletes for tests: position and equality delete files committed to a table as
Spark and Flink writers commit them (a ``delete`` snapshot adding delete files). Neither PyIceberg
nor lakeops writes delete files, so the writers below produce them ("Position Delete Files",
"Equality Delete Files"), and PyIceberg (positions) or lakeops' scan (equality) reads them back."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakeops.errors import InvalidArgument
from lakeops.iceberg.commit import commit_change
from lakeops.iceberg.data_writer import WrittenFile, write_parquet
from lakeops.iceberg.deletes import POSITION_DELETE_SCHEMA, equality_projection
from lakeops.iceberg.manifest import DataFile, FileContent
from lakeops.iceberg.properties import METRICS_MODE_COLUMN_CONF_PREFIX
from lakeops.iceberg.snapshot_update import ReplaceFiles
from lakeops.iceberg.table import IcebergTable, TableRef, load_table
from lakeops.iceberg.types import IcebergType, StructType
from lakeops.storage import Storage, StorageOptions


def load(ref: TableRef, options: StorageOptions | None = None) -> IcebergTable:
    return load_table(ref, options or StorageOptions())


def commit_deletes(table: IcebergTable, files: Iterable[tuple[int, DataFile]]) -> IcebergTable:
    """Commit delete files in one ``delete`` snapshot; returns the table after it."""
    change = ReplaceFiles(start=table, removed=[], added=list(files), operation="delete")
    return commit_change(table, change).table


def add_position_deletes(
    table: IcebergTable,
    deletes: Sequence[tuple[str, int]],
    *,
    spec_id: int = 0,
    partition: dict[str, Any] | None = None,
) -> IcebergTable:
    """Delete rows by (data file path, row position) with one position delete file."""
    location = f"{table.metadata.location.rstrip('/')}/data/pos-deletes-{len(table.metadata.snapshots)}.parquet"
    written = write_position_deletes(table.storage, location, deletes)
    return commit_deletes(table, [(spec_id, written.data_file(partition or {}, content=FileContent.POSITION_DELETES))])


def add_equality_deletes(
    table: IcebergTable,
    rows: pa.Table,
    equality_ids: Sequence[int],
    *,
    spec_id: int = 0,
    partition: dict[str, Any] | None = None,
) -> IcebergTable:
    """Delete every row whose ``equality_ids`` columns equal one of ``rows`` (one equality delete file)."""
    location = f"{table.metadata.location.rstrip('/')}/data/eq-deletes-{len(table.metadata.snapshots)}.parquet"
    written = write_equality_deletes(table.storage, location, rows, list(equality_ids), table.metadata.current_schema())
    file = written.data_file(partition or {}, content=FileContent.EQUALITY_DELETES, equality_ids=list(equality_ids))
    return commit_deletes(table, [(spec_id, file)])


def write_position_deletes(
    storage: Storage,
    location: str,
    deletes: Iterable[tuple[str, int]],
    *,
    properties: Mapping[str, str] | None = None,
) -> WrittenFile:
    """A position delete file of ``(data file path, position)`` pairs, sorted by path then position
    (the spec's order), with full bounds on both columns."""
    pairs = list(deletes)
    table = pa.table(
        {"file_path": pa.array([p for p, _ in pairs], pa.string()), "pos": pa.array([n for _, n in pairs], pa.int64())}
    )
    if pc.sum(pc.less(table.column("pos"), 0)).as_py():
        raise InvalidArgument(f"cannot write {location}: positions must be >= 0")
    table = table.sort_by([("file_path", "ascending"), ("pos", "ascending")])
    props = {
        **(properties or {}),
        f"{METRICS_MODE_COLUMN_CONF_PREFIX}file_path": "full",
        f"{METRICS_MODE_COLUMN_CONF_PREFIX}pos": "full",
    }
    return write_parquet(storage, location, table, POSITION_DELETE_SCHEMA, properties=props)


def write_equality_deletes(
    storage: Storage,
    location: str,
    rows: pa.Table,
    equality_ids: list[int],
    schema: StructType,
    *,
    properties: Mapping[str, str] | None = None,
) -> WrittenFile:
    """An equality delete file: the equality columns of ``rows`` (laid out by ``schema``'s names) under
    their table field ids; the caller records ``equality_ids`` in the manifest."""
    if not equality_ids:
        raise InvalidArgument(f"cannot write {location}: an equality delete file needs equality ids")
    pruned = equality_projection(schema, equality_ids)
    return write_parquet(storage, location, _select(rows, pruned, location), pruned, properties=properties)


def _select(rows: pa.Table, pruned: StructType, location: str) -> pa.Table:
    """The pruned columns of ``rows``; structs keep only the pruned children."""

    def pick(values: pa.Array, type_: IcebergType, name: str) -> pa.Array:
        if not isinstance(type_, StructType) or not pa.types.is_struct(values.type):
            return values
        children = []
        for field in type_.fields:
            if values.type.get_field_index(field.name) < 0:
                raise InvalidArgument(f"cannot write {location}: the rows lack {name}.{field.name}")
            child = values.field(values.type.get_field_index(field.name))
            children.append(pick(child, field.type, f"{name}.{field.name}"))
        return pa.StructArray.from_arrays(children, names=[f.name for f in type_.fields], mask=values.is_null())

    columns = []
    for field in pruned.fields:
        if field.name not in rows.column_names:
            raise InvalidArgument(f"cannot write {location}: the rows lack column {field.name}")
        columns.append(pick(rows.column(field.name).combine_chunks(), field.type, field.name))
    return pa.table(columns, names=[f.name for f in pruned.fields])
