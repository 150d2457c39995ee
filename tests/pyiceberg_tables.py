"""Tables written by PyIceberg, the peer whose output lakeops reads and whose reader checks ours.

Every table lives in a SQLite ``SqlCatalog`` (PyIceberg's own tables) under a test's tmp dir. The
builders write real data through PyIceberg's public API only: appends, row deletes and overwrites
(PyIceberg writes copy-on-write), branches and tags.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER as UNSORTED_ORDER
from pyiceberg.table.sorting import SortOrder
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.types import (
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
)

NAMESPACE = "db"

#: The schema every builder uses: ids 1..6, all optional (PyIceberg appends optional Arrow columns).
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "ts", TimestampType(), required=False),
    NestedField(3, "category", StringType(), required=False),
    NestedField(4, "amount", DecimalType(10, 2), required=False),
    NestedField(5, "score", DoubleType(), required=False),
    NestedField(6, "day", DateType(), required=False),
)

ARROW_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("ts", pa.timestamp("us")),
        ("category", pa.string()),
        ("amount", pa.decimal128(10, 2)),
        ("score", pa.float64()),
        ("day", pa.date32()),
    ]
)

#: Partitionings the acceptance tests cover, by name.
SPECS: dict[str, PartitionSpec] = {
    "unpartitioned": PartitionSpec(),
    "identity": PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "category")),
    "day": PartitionSpec(PartitionField(2, 1000, DayTransform(), "ts_day")),
    "bucket": PartitionSpec(PartitionField(1, 1000, BucketTransform(4), "id_bucket")),
}


@dataclass
class PyIcebergTable:
    """A PyIceberg table; ``catalog_uri`` is lakeops' name for its catalog (a SQLAlchemy URL, or a Glue
    endpoint)."""

    catalog: Catalog
    catalog_uri: str
    identifier: str
    table: Table

    @property
    def location(self) -> str:
        """The table location as a local path."""
        return self.table.location().removeprefix("file://")

    def reload(self) -> Table:
        self.table = self.catalog.load_table(self.identifier)
        return self.table

    def rows(self, snapshot_id: int | None = None) -> list[dict[str, Any]]:
        """Every row PyIceberg reads, sorted, as dicts; NaN reads as the string ``"NaN"`` so rows
        compare equal (``nan != nan``)."""
        return rows_of(self.reload().scan(snapshot_id=snapshot_id).to_arrow())


def rows_of(table: pa.Table) -> list[dict[str, Any]]:
    """A table's rows sorted, NaN as ``"NaN"``: equal data compares equal."""
    return sorted((_comparable(row) for row in table.to_pylist()), key=_row_key)


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}


def _row_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple((value is None, str(value)) for value in row.values())


def catalog(
    tmp_path: Path, name: str = "default", *, s3: tuple[str, str] | None = None, warehouse_dir: str = "warehouse"
) -> tuple[SqlCatalog, str]:
    """A SQLite ``SqlCatalog`` with its warehouse ``warehouse_dir`` under ``tmp_path`` (or, with ``s3``
    = (bucket URI, endpoint URL), in that bucket), and its SQLAlchemy URI. PyIceberg spells the
    warehouse into every path literally, so a ``warehouse_dir`` with ``%`` gives literal ``%`` paths."""
    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = tmp_path / warehouse_dir
    warehouse.mkdir(parents=True, exist_ok=True)
    if s3 is not None:
        bucket, endpoint = s3
        cat = SqlCatalog(name, uri=uri, warehouse=f"{bucket}/{warehouse_dir}", **{"s3.endpoint": endpoint})
    else:
        cat = SqlCatalog(name, uri=uri, warehouse=f"file://{warehouse}")
    cat.create_namespace_if_not_exists(NAMESPACE)
    return cat, uri


def batch(start: int, count: int, *, days: int = 3, categories: tuple[str, ...] = ("a", "b", "c")) -> pa.Table:
    """``count`` deterministic rows with ids from ``start``, spread over ``days`` days and the categories."""
    ids = list(range(start, start + count))
    base = dt.datetime(2024, 1, 1)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array([base + dt.timedelta(days=i % days, minutes=i) for i in ids], pa.timestamp("us")),
            "category": pa.array([categories[i % len(categories)] if i % 11 else None for i in ids], pa.string()),
            "amount": pa.array([None if i % 7 == 0 else f"{i}.{i % 100:02d}" for i in ids]).cast(pa.decimal128(10, 2)),
            "score": pa.array([float("nan") if i % 13 == 0 else i / 3 for i in ids], pa.float64()),
            "day": pa.array([(base + dt.timedelta(days=i % days)).date() for i in ids], pa.date32()),
        },
        schema=ARROW_SCHEMA,
    )


def create_table(
    tmp_path: Path,
    spec: str = "unpartitioned",
    *,
    name: str = "events",
    properties: dict[str, str] | None = None,
    sort_order: SortOrder | None = None,
    s3: tuple[str, str] | None = None,
    warehouse_dir: str = "warehouse",
) -> PyIcebergTable:
    """An empty PyIceberg table with :data:`SCHEMA`, the named partitioning and ``sort_order``."""
    cat, uri = catalog(tmp_path, s3=s3, warehouse_dir=warehouse_dir)
    identifier = f"{NAMESPACE}.{name}"
    table = cat.create_table(
        identifier,
        SCHEMA,
        partition_spec=SPECS[spec],
        sort_order=sort_order or UNSORTED_ORDER,
        properties=properties or {},
    )
    return PyIcebergTable(cat, uri, identifier, table)


def small_file_table(
    tmp_path: Path,
    spec: str = "unpartitioned",
    *,
    appends: int = 8,
    rows: int = 20,
    properties: dict[str, str] | None = None,
    sort_order: SortOrder | None = None,
    s3: tuple[str, str] | None = None,
) -> PyIcebergTable:
    """A table grown by ``appends`` small appends of ``rows`` rows each (one small file per partition each)."""
    table = create_table(tmp_path, spec, properties=properties, sort_order=sort_order, s3=s3)
    for i in range(appends):
        table.table.append(batch(i * rows, rows))
        table.reload()
    return table


#: Merge every append into one manifest (PyIceberg's merge append), so appends rewrite earlier
#: entries as EXISTING, as Java's default merge append does.
MERGE_APPENDS = {"commit.manifest-merge.enabled": "true", "commit.manifest.min-count-to-merge": "2"}


def entry_history_table(tmp_path: Path, spec: str = "unpartitioned", *, format_version: int = 2) -> PyIcebergTable:
    """A table whose manifests hold every entry status: three merged appends (ADDED, then EXISTING),
    a copy-on-write row delete (DELETED plus rewritten files), a delete of whole files, one more append."""
    table = small_file_table(
        tmp_path, spec, appends=3, rows=12, properties={"format-version": str(format_version), **MERGE_APPENDS}
    )
    table.table.delete("id < 5")
    table.reload().delete("category == 'a'")
    table.reload().append(batch(100, 6))
    table.reload()
    return table


def replay_changes(rows: list[dict[str, Any]], changes: list[dict[str, Any]] | None = None) -> Counter[tuple[Any, ...]]:
    """The multiset of ``rows`` (:data:`SCHEMA`'s columns; NaN equal to NaN, timestamps naive UTC)
    after a changelog's rows are applied in commit order: ``insert`` adds, ``delete`` removes (a
    delete of a row that is not there fails)."""

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        values = (row[name] for name in ARROW_SCHEMA.names)
        return tuple(
            "NaN"
            if isinstance(v, float) and math.isnan(v)
            else v.astimezone(dt.UTC).replace(tzinfo=None)
            if isinstance(v, dt.datetime) and v.tzinfo is not None
            else v
            for v in values
        )

    result = Counter(key(r) for r in rows)
    for change in sorted(changes or [], key=lambda r: (r["_commit_sequence_number"], r["_change_type"] == "insert")):
        if change["_change_type"] == "insert":
            result[key(change)] += 1
        else:
            assert result[key(change)] > 0, f"deleted a row that was not live: {change}"
            result[key(change)] -= 1
    return +result
