"""Row-level deletes: reading and applying Iceberg delete files ("Delete Formats": "Position
Delete Files", "Equality Delete Files"; "Delete File Stats"; "Reserved Field IDs").

A deletion vector (v3, "Deletion Vectors") is read from its Puffin blob
(:mod:`lakeops.iceberg.puffin`) into the same shape as a position delete file. A position delete
file lists ``(file_path, pos)`` pairs under the reserved ids 2147483546 and 2147483545, sorted by
path then position; a row is deleted when its data file and 0-based position are listed. An equality
delete file holds rows of a subset of the table's columns (the table's field ids); a data row is
deleted when, for some delete row, all of the file's ``equality_ids`` columns are equal,
where null equals null (``col IS NULL``). Why the details below:

* equality columns are matched by field id, never by name: a delete column that was later dropped or
  renamed must still apply, so the caller reads it from the data file by id and passes the schema
  (projection) that names where each id sits, possibly inside structs;
* matching is vectorised (hash lookups over each column's distinct delete values, combined into one
  row key), never a Python loop over rows.

lakeops never writes delete files (compaction applies them and drops those it made obsolete); the
tests' writers are in ``tests/iceberg_merge_on_read.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakeops.errors import InvalidArgument, ProtocolError
from lakeops.iceberg.arrow_schema import to_arrow_schema
from lakeops.iceberg.data_reader import ParquetDataFile
from lakeops.iceberg.manifest import DeletionVectorRef
from lakeops.iceberg.puffin import read_deletion_vector
from lakeops.iceberg.types import (
    DecimalType,
    FixedType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    PrimitiveType,
    Schema,
    StructType,
)
from lakeops.storage import Storage

__all__ = [
    "FILE_PATH_ID",
    "POSITION_DELETE_SCHEMA",
    "POS_ID",
    "apply_equality_deletes",
    "apply_position_deletes",
    "equality_projection",
    "read_equality_deletes",
    "read_position_deletes",
]

FILE_PATH_ID = 2147483546
POS_ID = 2147483545

POSITION_DELETE_SCHEMA = StructType(
    fields=(
        NestedField(id=FILE_PATH_ID, name="file_path", required=True, type=PrimitiveType(name="string")),
        NestedField(id=POS_ID, name="pos", required=True, type=PrimitiveType(name="long")),
    )
)

Rows = TypeVar("Rows", pa.Table, pa.RecordBatch)


# --- position deletes ------------------------------------------------------------------------------


def read_position_deletes(
    storage: Storage, path: str, *, deletion_vector: DeletionVectorRef | None = None
) -> dict[str, pa.Array]:
    """Deleted positions by data file path, each an ascending int64 array, from one delete file:
    the Parquet position delete file at ``path``, or the ``deletion_vector`` blob in it (v3)."""
    if deletion_vector is not None:
        return read_deletion_vector(storage, deletion_vector)
    file = ParquetDataFile(storage, path)
    missing = {FILE_PATH_ID, POS_ID} - file.field_ids
    if missing:
        raise ProtocolError(f"{path}: a position delete file needs field ids {sorted(missing)} (file_path, pos)")
    table = pa.Table.from_batches(
        file.iter_batches(POSITION_DELETE_SCHEMA), schema=to_arrow_schema(POSITION_DELETE_SCHEMA)
    )
    if table.num_rows == 0:
        return {}
    table = table.sort_by([("file_path", "ascending"), ("pos", "ascending")]).combine_chunks()
    paths = table.column("file_path").chunk(0)
    positions = table.column("pos").chunk(0)
    if paths.null_count or positions.null_count:
        raise ProtocolError(f"{path}: position delete rows must have a file_path and a pos (nulls found)")
    changes = pc.not_equal(paths.slice(1), paths.slice(0, len(paths) - 1)).to_numpy(zero_copy_only=False)
    starts = [0, *(np.flatnonzero(changes) + 1).tolist(), len(paths)]
    return {
        paths[start].as_py(): positions.slice(start, end - start)
        for start, end in zip(starts, starts[1:], strict=False)
    }


def apply_position_deletes(rows: Rows, start_pos: int, positions: pa.Array) -> Rows:
    """``rows`` without those whose file position (``start_pos`` + row index) is in ``positions``
    (ascending, as :func:`read_position_deletes` returns them)."""
    sorted_positions = np.asarray(positions.to_numpy(zero_copy_only=False), dtype=np.int64)
    count = rows.num_rows
    low, high = np.searchsorted(sorted_positions, [start_pos, start_pos + count], side="left")
    if low == high:
        return rows
    keep = np.ones(count, dtype=bool)
    keep[sorted_positions[low:high] - start_pos] = False
    return rows.filter(pa.array(keep))


# --- equality deletes ------------------------------------------------------------------------------


def _prune(type_: IcebergType, ids: frozenset[int]) -> IcebergType | None:
    """``type_`` keeping only what leads to ``ids`` (a selected field keeps its whole type)."""
    if not isinstance(type_, StructType):
        return None
    kept = []
    for field in type_.fields:
        if field.id in ids:
            kept.append(field)
        elif (child := _prune(field.type, ids)) is not None:
            kept.append(field.model_copy(update={"type": child}))
    return StructType(fields=tuple(kept)) if kept else None


def _equality_paths(schema: StructType, equality_ids: Sequence[int], where: str) -> list[tuple[str, ...]]:
    """The name path of each equality id; each must be a primitive outside lists and maps, not float."""
    table_schema = Schema(fields=schema.fields)
    index = table_schema.fields_by_id()
    collections = {path for path, _, type_, _ in table_schema.walk() if isinstance(type_, ListType | MapType)}
    paths = []
    for fid in equality_ids:
        if fid not in index:
            raise InvalidArgument(f"{where}: equality field id {fid} is not in the schema")
        path, type_, _ = index[fid]
        name = ".".join(path)
        inside = any(path[:depth] in collections for depth in range(1, len(path)))
        if inside or not isinstance(type_, PrimitiveType | DecimalType | FixedType):
            raise InvalidArgument(
                f"{where}: equality field {name} (id {fid}) is not a primitive outside lists and maps"
            )
        if isinstance(type_, PrimitiveType) and type_.name in ("float", "double"):
            raise InvalidArgument(f"{where}: float and double columns cannot be equality columns ({name}, id {fid})")
        paths.append(path)
    return paths


def equality_projection(schema: StructType, equality_ids: Sequence[int]) -> StructType:
    """The part of ``schema`` that holds the equality columns (their structs, nothing else)."""
    _equality_paths(schema, equality_ids, "equality deletes")
    pruned = _prune(schema, frozenset(equality_ids))
    assert isinstance(pruned, StructType)
    return pruned


def read_equality_deletes(storage: Storage, path: str, equality_ids: list[int], projection: StructType) -> pa.Table:
    """The delete rows of an equality delete file, in ``to_arrow_schema(equality_projection(projection,
    equality_ids))``: the equality columns where ``projection`` puts them. Every equality id must be
    in the file (the spec requires it)."""
    file = ParquetDataFile(storage, path)
    missing = sorted(set(equality_ids) - file.field_ids)
    if missing:
        raise ProtocolError(f"{path}: equality delete file lacks its equality column(s) with field id(s) {missing}")
    pruned = equality_projection(projection, equality_ids)
    return pa.Table.from_batches(file.iter_batches(pruned), schema=to_arrow_schema(pruned))


def _key_column(rows: pa.Table | pa.RecordBatch, path: tuple[str, ...]) -> pa.Array:
    """The values at ``path``; a value under a null struct is null."""
    column = rows.column(path[0])
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    for name in path[1:]:
        values = pc.struct_field(values, name)
    return values.storage if isinstance(values, pa.ExtensionArray) else values


def _deleted_mask(rows: pa.Table, deletes: pa.Table, paths: list[tuple[str, ...]]) -> pa.Array:
    """True for each row whose values at ``paths`` equal those of some delete row (null = null).

    Column by column, values are replaced by their index among the delete file's distinct values; the
    indices of successive columns are combined into one key, re-indexed among the delete rows' keys
    after each step so it never overflows. A row is deleted when its final key is a delete row's key.
    """
    row_key: pa.Array | None = None
    delete_key: pa.Array | None = None
    for path in paths:
        data_values = _key_column(rows, path)
        delete_values = _key_column(deletes, path).cast(data_values.type)
        distinct = pc.unique(delete_values)
        row_code = pc.index_in(data_values, value_set=distinct, skip_nulls=False).cast(pa.int64())
        delete_code = pc.index_in(delete_values, value_set=distinct, skip_nulls=False).cast(pa.int64())
        if row_key is None or delete_key is None:
            row_key, delete_key = row_code, delete_code
            continue
        width = len(distinct)
        combined = pc.add(pc.multiply(delete_key, width), delete_code)
        keys = pc.unique(combined)
        delete_key = pc.index_in(combined, value_set=keys).cast(pa.int64())
        row_key = pc.index_in(pc.add(pc.multiply(row_key, width), row_code), value_set=keys).cast(pa.int64())
    assert row_key is not None
    return pc.is_valid(row_key)


def apply_equality_deletes(table: pa.Table, deletes: list[tuple[list[int], pa.Table]], schema: StructType) -> pa.Table:
    """``table`` (rows in ``to_arrow_schema(schema)``) without the rows any delete file deletes; each
    delete file is ``(equality_ids, rows)`` with its rows laid out as :func:`read_equality_deletes`
    returns them for the same ``schema``."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    for equality_ids, rows in deletes:
        if table.num_rows == 0:
            break
        if rows.num_rows == 0:
            continue
        paths = _equality_paths(schema, equality_ids, "equality deletes")
        table = table.filter(pc.invert(_deleted_mask(table, rows, paths)))
    return table
