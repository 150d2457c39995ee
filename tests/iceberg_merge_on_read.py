"""Merge-on-read deletes for tests: position and equality delete files committed to a table as
Spark and Flink writers commit them (a ``delete`` snapshot adding delete files). PyIceberg never
writes delete files, so lakeops' own writers produce them, and PyIceberg (positions) or our scan
(equality) reads them back."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from lakeops.iceberg.commit import commit_change
from lakeops.iceberg.deletes import write_equality_deletes, write_position_deletes
from lakeops.iceberg.manifest import DataFile, FileContent
from lakeops.iceberg.snapshot_update import ReplaceFiles
from lakeops.iceberg.table import IcebergTable, TableRef, load_table
from lakeops.storage import StorageOptions


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
