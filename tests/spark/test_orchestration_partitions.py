"""Partitioned compaction through Dagster on a day-partitioned Delta table: the small-file sensor
registers one dynamic partition per table partition and requests the ones over the trigger; a
materialization of one partition rewrites exactly that table partition, and its check passes."""

from __future__ import annotations

from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from run_events import own_checks

from lakeops.registry import parse_registry
from orchestration.assets import operation_key, partitions_name
from orchestration.registry_definitions import build_definitions
from orchestration.resources import SparkResource, StorageResource

DAYS = [date(2026, 11, 1), date(2026, 11, 2), date(2026, 11, 3)]


def _files_by_day(path: Path) -> Counter[str]:
    return Counter(uri.split("day=")[1].split("/")[0] for uri in DeltaTable(str(path)).file_uris())


def test_the_sensor_registers_partitions_and_one_partition_compacts_alone(tmp_path: Path, spark: Any) -> None:
    table = tmp_path / "events"
    for i in range(4):
        for day in DAYS[: 3 if i < 3 else 2]:  # 4 files on the first two days, 3 on the last
            rows = pa.table({"id": pa.array([i], pa.int64()), "day": pa.array([day], pa.date32())})
            write_deltalake(str(table), rows, mode="append", partition_by=["day"])
    registry = parse_registry(
        f"""
tables:
  - name: events
    location: {table}
    compaction: {{partitioned: true, min_input_files: 2, small_file_trigger: 4}}
"""
    )
    entry = registry.table("events")
    defs = build_definitions(registry)
    instance = dg.DagsterInstance.ephemeral()
    (sensor,) = [s for s in defs.sensors or [] if s.name == "lakeops_small_files"]
    result = sensor(dg.build_sensor_context(instance=instance, resources={"storage": StorageResource()}, cursor=None))
    assert isinstance(result, dg.SensorResult)
    (adds,) = result.dynamic_partitions_requests or []
    assert isinstance(adds, dg.AddDynamicPartitionsRequest)
    assert adds.partitions_def_name == partitions_name(entry)
    assert sorted(adds.partition_keys) == [f"day={d.isoformat()}" for d in DAYS]
    assert sorted(r.partition_key for r in result.run_requests or []) == ["day=2026-11-01", "day=2026-11-02"]

    instance.add_dynamic_partitions(adds.partitions_def_name, list(adds.partition_keys))
    rows_before = sorted(DeltaTable(str(table)).to_pyarrow_table().to_pylist(), key=str)
    run = dg.materialize(
        list(defs.assets or []),
        selection=[operation_key(entry, "compaction")],
        partition_key="day=2026-11-02",
        resources={"spark": SparkResource(master="local[2]"), "storage": StorageResource()},
        instance=instance,
    )
    assert run.success
    (check,) = own_checks(run)
    assert check.passed, check.description
    assert _files_by_day(table) == Counter({"2026-11-01": 4, "2026-11-02": 1, "2026-11-03": 3})
    assert sorted(DeltaTable(str(table)).to_pyarrow_table().to_pylist(), key=str) == rows_before
