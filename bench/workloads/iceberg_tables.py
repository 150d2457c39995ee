"""Iceberg tables written by PyIceberg in a SQLite ``SqlCatalog`` under the workload directory.

Small files: one PyIceberg append whose ``write.target-file-size-bytes`` is one batch's size, so
PyIceberg itself splits it into many files per day partition. Many snapshots: many small appends, one
snapshot each, as a frequent ingester leaves them. PyIceberg creates the table and makes the first
append; lakeops' own snapshot producer makes the rest (a fast append each), because PyIceberg
deep-copies the whole table metadata on every update: 250 ms per append at 120 snapshots, hours for
the 2,000 of the issue. PyIceberg reads and expires the result like any table of its own.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from bench.settings import ICEBERG_PARQUET
from bench.workloads.model import Workload, tree_bytes
from bench.workloads.rows import event_rows
from lakeops.iceberg.commit import commit_change
from lakeops.iceberg.data_writer import write_parquet
from lakeops.iceberg.properties import (
    METADATA_DELETE_AFTER_COMMIT_ENABLED,
    METADATA_PREVIOUS_VERSIONS_MAX,
    WRITE_TARGET_FILE_SIZE_BYTES,
)
from lakeops.iceberg.snapshot_update import ReplaceFiles
from lakeops.iceberg.table import IcebergTable, TableRef, load_table
from lakeops.storage import StorageOptions

NAMESPACE = "bench"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "ts", LongType(), required=False),
    NestedField(3, "amount", DoubleType(), required=False),
    NestedField(4, "user", StringType(), required=False),
    NestedField(5, "day", StringType(), required=False),
)
BY_DAY = PartitionSpec(PartitionField(5, 1000, IdentityTransform(), "day"))


def _catalog(root: Path) -> tuple[SqlCatalog, str]:
    root.mkdir(parents=True)
    uri = f"sqlite:///{root / 'catalog.db'}"
    catalog = SqlCatalog("default", uri=uri, warehouse=f"file://{root / 'warehouse'}")
    catalog.create_namespace(NAMESPACE)
    return catalog, uri


def _workload(root: Path, uri: str, identifier: str, size: int, unit: str) -> Workload:
    return Workload(
        root=root,
        target=identifier,
        size=size,
        unit=unit,
        bytes=tree_bytes(root),
        params={"catalog_uri": uri, "identifier": identifier, "parquet": ICEBERG_PARQUET},
    )


def small_files(root: Path, *, files: int, rows_per_file: int, days: int) -> Workload:
    """About ``files`` data files of ``rows_per_file`` rows over ``days`` day partitions."""
    catalog, uri = _catalog(root)
    identifier = f"{NAMESPACE}.events"
    per_day = max(1, files // days)
    sample = event_rows(0, rows_per_file, day=0, seed=0)
    # PyIceberg bins record batches up to the target size: one batch of rows_per_file rows per file.
    target = max(1, sample.nbytes - 1)
    table = catalog.create_table(
        identifier, SCHEMA, partition_spec=BY_DAY, properties={WRITE_TARGET_FILE_SIZE_BYTES: str(target)}
    )
    parts = [
        event_rows((d * per_day + k) * rows_per_file, rows_per_file, day=d, seed=d * per_day + k)
        for d in range(days)
        for k in range(per_day)
    ]
    table.append(pa.concat_tables(parts))
    written = len(table.inspect.files())
    return _workload(root, uri, identifier, written, "files")


def many_snapshots(root: Path, *, snapshots: int) -> Workload:
    """``snapshots`` appends of ten rows each (a snapshot each); old metadata files are dropped as
    PyIceberg commits, keeping the last ten, as a table tuned for frequent commits does."""
    catalog, uri = _catalog(root)
    identifier = f"{NAMESPACE}.ingest"
    properties = {METADATA_DELETE_AFTER_COMMIT_ENABLED: "true", METADATA_PREVIOUS_VERSIONS_MAX: "10"}
    table = catalog.create_table(identifier, SCHEMA, properties=properties)
    table.append(event_rows(0, 10, day=0, seed=0))
    ref = TableRef(catalog_uri=uri, identifier=identifier)
    for k in range(1, snapshots):
        _fast_append(load_table(ref, StorageOptions()), event_rows(k * 10, 10, day=k % 7, seed=k))
    return _workload(root, uri, identifier, snapshots, "snapshots")


def _fast_append(table: IcebergTable, rows: pa.Table) -> None:
    """One snapshot adding one data file of ``rows`` (the table is unpartitioned)."""
    metadata = table.metadata
    location = f"{metadata.location.rstrip('/')}/data/{uuid.uuid4()}.parquet"
    written = write_parquet(table.storage, location, rows, metadata.current_schema())
    added = [(metadata.default_spec_id, written.data_file({}))]
    commit_change(table, ReplaceFiles(start=table, removed=[], added=added, operation="append"))
