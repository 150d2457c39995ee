"""Partition keys of Delta and Iceberg tables, their health, and ``partition_where`` round trips: the
predicate of a key makes compaction plan exactly that partition's files."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.transforms import HourTransform, MonthTransform, YearTransform
from pyiceberg_tables import NAMESPACE, SCHEMA, PyIcebergTable, batch, catalog, small_file_table

from lakeops.errors import InvalidArgument, UnsupportedFeature
from lakeops.ops import compaction
from lakeops.ops.compaction import CompactionOptions
from lakeops.ops.partitions import PartitionHealth, partition_health, partition_key, partition_where
from lakeops.ops.target import CatalogOptions, IcechunkTarget, Target, resolve_target
from lakeops.storage import StorageOptions

NO_OPTIONS = StorageOptions()
HUGE = 1 << 40  # every file is below this target size: a compaction candidate


def _delta(tmp_path: Path) -> str:
    location = str(tmp_path / "delta")
    rows = pa.table(
        {
            "id": pa.array(range(6), pa.int64()),
            "day": ["2026-11-01", "2026-11-01", "2026-11-02", "2026-11-02", "2026-11-02", "2026-11-02"],
            "region": ["eu", "eu", "us/west=1", None, "eu", "eu"],
        }
    )
    for i in range(6):
        write_deltalake(location, rows.slice(i, 1), mode="append", partition_by=["day", "region"])
    write_deltalake(location, rows.slice(4, 2), mode="append", partition_by=["day", "region"])
    return location


def _planned(table: str, where: str, catalog_uri: str | None = None) -> int:
    options = CompactionOptions(where=where, target_file_size=HUGE, min_input_files=1, catalog_uri=catalog_uri)
    return compaction.plan(table, options, NO_OPTIONS).candidate_files


def _iceberg_target(table: PyIcebergTable) -> Target:
    return resolve_target(table.identifier, CatalogOptions(catalog_uri=table.catalog_uri), NO_OPTIONS)


def test_delta_keys_health_and_round_trip(tmp_path: Path) -> None:
    location = _delta(tmp_path)
    target = resolve_target(location, CatalogOptions(), NO_OPTIONS)
    health = partition_health(target)
    assert [(h.key, h.files, h.small_files) for h in health] == [
        ("day=2026-11-01/region=eu", 2, 2),
        ("day=2026-11-02/region=__NULL__", 1, 1),
        ("day=2026-11-02/region=eu", 3, 3),
        ("day=2026-11-02/region=us%2Fwest%3D1", 1, 1),
    ]
    assert all(h.mergeable_small_files == 0 for h in health)  # fewer than compaction's 5 small files
    for h in health:
        where = partition_where(target, h.key)
        assert _planned(location, where) == h.files, where
    assert partition_where(target, "day=2026-11-02/region=__NULL__") == "`day` = '2026-11-02' AND `region` IS NULL"


def test_mergeable_small_files_follow_min_input_files(tmp_path: Path) -> None:
    location = str(tmp_path / "t")
    for i in range(5):
        write_deltalake(
            location, pa.table({"id": [i], "p": ["x" if i < 4 else "y"]}), mode="append", partition_by=["p"]
        )
    for i in range(5, 7):
        write_deltalake(location, pa.table({"id": [i], "p": ["x"]}), mode="append", partition_by=["p"])
    health = partition_health(resolve_target(location, CatalogOptions(), NO_OPTIONS))
    assert health == [
        PartitionHealth(key="p=x", files=6, bytes=health[0].bytes, small_files=6, mergeable_small_files=6),
        PartitionHealth(key="p=y", files=1, bytes=health[1].bytes, small_files=1, mergeable_small_files=0),
    ]


def test_unpartitioned_tables_have_no_partitions(tmp_path: Path) -> None:
    location = str(tmp_path / "flat")
    write_deltalake(location, pa.table({"id": [1]}))
    assert partition_health(resolve_target(location, CatalogOptions(), NO_OPTIONS)) == []
    table = small_file_table(tmp_path / "ice", "unpartitioned", appends=1, rows=3)
    assert partition_health(_iceberg_target(table)) == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("identity", ["category=__NULL__", "category=a", "category=b", "category=c"]),
        ("day", ["ts_day=2024-01-01", "ts_day=2024-01-02", "ts_day=2024-01-03"]),
        ("bucket", ["id_bucket=0", "id_bucket=1", "id_bucket=2", "id_bucket=3"]),
    ],
)
def test_iceberg_keys_round_trip(tmp_path: Path, spec: str, expected: list[str]) -> None:
    table = small_file_table(tmp_path, spec, appends=3, rows=40)
    target = _iceberg_target(table)
    health = partition_health(target)
    assert [h.key for h in health] == expected
    assert sum(h.files for h in health) == len(list(table.table.scan().plan_files()))
    for h in health:
        assert _planned(table.identifier, partition_where(target, h.key), table.catalog_uri) == h.files


@pytest.mark.parametrize(
    ("transform", "name", "expected"),
    [
        (MonthTransform(), "ts_month", ["ts_month=2024-01", "ts_month=2024-02"]),
        (YearTransform(), "ts_year", ["ts_year=2024"]),
        (HourTransform(), "ts_hour", ["ts_hour=2024-01-01-00", "ts_hour=2024-01-01-01", "ts_hour=2024-02-10-00"]),
    ],
)
def test_iceberg_time_transforms_read_as_dates(
    tmp_path: Path, transform: object, name: str, expected: list[str]
) -> None:
    cat, uri = catalog(tmp_path)
    identifier = f"{NAMESPACE}.{name}"
    created = cat.create_table(
        identifier, SCHEMA, partition_spec=PartitionSpec(PartitionField(2, 1000, transform, name))
    )
    created.append(batch(0, 30, days=1))  # 2024-01-01 00:00 .. 00:29
    created.append(batch(60, 5, days=1))  # 2024-01-01 01:00 .. 01:04
    rows = batch(0, 3, days=1)
    created.append(rows.set_column(1, "ts", pa.array([rows.column("ts")[0].as_py().replace(month=2, day=10)] * 3)))
    table = PyIcebergTable(cat, uri, identifier, created)
    target = _iceberg_target(table)
    health = partition_health(target)
    assert [h.key for h in health] == expected
    for h in health:
        assert _planned(identifier, partition_where(target, h.key), uri) == h.files


def test_bad_keys_are_refused(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "day", appends=1, rows=3)
    target = _iceberg_target(table)
    with pytest.raises(InvalidArgument, match="every partition field"):
        partition_where(target, "category=a")
    with pytest.raises(InvalidArgument, match="name=value"):
        partition_where(target, "ts_day")
    with pytest.raises(UnsupportedFeature, match="no partitions"):
        partition_where(IcechunkTarget(str(tmp_path)), "a=1")
    assert partition_key([("a/b", "x=y"), ("c", None)]) == "a%2Fb=x%3Dy/c=__NULL__"
