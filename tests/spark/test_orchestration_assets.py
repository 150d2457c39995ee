"""The generated Dagster assets on real local tables of all three formats: every maintenance asset
materializes through Dagster (Spark local), its blocking check passes, the report lands as numeric
metadata, and peers still read the tables; the health observation records inspect numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from icechunk_repos import build_history, contents
from pyiceberg_tables import PyIcebergTable, rows_of, small_file_table
from run_events import own_checks, own_materializations

from lakeops.registry import parse_registry
from lakeops.storage import LocalStorage
from orchestration.assets import MAINTENANCE, operation_key, table_key
from orchestration.registry_definitions import build_definitions
from orchestration.resources import SparkResource, StorageResource

RESOURCES = {"spark": SparkResource(master="local[2]"), "storage": StorageResource()}


def delta_table(path: Path, appends: int = 8) -> Path:
    for i in range(appends):
        rows = pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "v": pa.array([f"r{i}"] * 10)})
        write_deltalake(str(path), rows, mode="append")
    return path


class Warehouse:
    def __init__(self, tmp_path: Path) -> None:
        self.delta = delta_table(tmp_path / "events")
        self.iceberg: PyIcebergTable = small_file_table(tmp_path / "iceberg", appends=8, rows=10)
        self.icechunk = tmp_path / "arrays"
        build_history(LocalStorage(), str(self.icechunk), commits=8)
        self.registry = parse_registry(
            f"""
tables:
  - name: events
    location: {self.delta}
    compaction: {{min_input_files: 2, small_file_trigger: 4}}
    checkpoint: {{interval: 3}}
  - name: orders
    catalog: {{uri: "{self.iceberg.catalog_uri}"}}
    identifier: {self.iceberg.identifier}
    compaction: {{min_input_files: 2, small_file_trigger: 4}}
    checkpoint: {{interval: 3}}
  - name: arrays
    location: {self.icechunk}
    compaction: {{min_input_files: 2, small_file_trigger: 4}}
"""
        )
        self.defs = build_definitions(self.registry)

    def assets(self) -> list[Any]:
        return list(self.defs.assets or [])


@pytest.fixture
def warehouse(tmp_path: Path, spark: Any) -> Warehouse:
    return Warehouse(tmp_path)


def _materialize(warehouse: Warehouse, key: dg.AssetKey) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        warehouse.assets(), selection=[key], resources=RESOURCES, instance=dg.DagsterInstance.ephemeral()
    )


@pytest.mark.parametrize("table", ["events", "orders", "arrays"])
def test_every_maintenance_asset_materializes_and_its_check_passes(warehouse: Warehouse, table: str) -> None:
    entry = warehouse.registry.table(table)
    rows_before = _rows(warehouse, table)
    for operation in [op for op in MAINTENANCE if op != "cdc"]:
        result = _materialize(warehouse, operation_key(entry, operation))
        assert result.success, operation
        (materialization,) = own_materializations(result, f"{table}__{operation}")
        metadata = materialization.metadata
        assert isinstance(metadata["duration_s"], dg.FloatMetadataValue), operation
        assert f"**{MAINTENANCE[operation]}**" in str(metadata["summary"].value)
        (check,) = own_checks(result)
        assert check.passed, (operation, check.description)
        assert _rows(warehouse, table) == rows_before, operation
        if operation == "compaction":
            written = metadata["files_added"].value if "files_added" in metadata else None
            assert written is None or written >= 1


def _rows(warehouse: Warehouse, table: str) -> Any:
    if table == "events":
        return sorted(DeltaTable(str(warehouse.delta)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    if table == "orders":
        return rows_of(warehouse.iceberg.reload().scan().to_arrow())
    return contents(LocalStorage(), str(warehouse.icechunk))


def test_compaction_shrinks_the_delta_table_and_records_it(warehouse: Warehouse) -> None:
    entry = warehouse.registry.table("events")
    result = _materialize(warehouse, operation_key(entry, "compaction"))
    (materialization,) = own_materializations(result, "events__compaction")
    metadata = materialization.metadata
    assert metadata["files_removed"].value == 8 and metadata["files_added"].value == 1
    assert metadata["dagster/row_count"].value == 80
    assert len(DeltaTable(str(warehouse.delta)).file_uris()) == 1


def test_health_observation_records_inspect_numbers(warehouse: Warehouse) -> None:
    for table, small in (("events", 8), ("orders", 8)):
        entry = warehouse.registry.table(table)
        result = dg.materialize(
            warehouse.assets(),
            selection=[table_key(entry)],
            resources=RESOURCES,
            instance=dg.DagsterInstance.ephemeral(),
        )
        assert result.success
        (observation,) = [
            e.event_specific_data.asset_observation  # type: ignore[union-attr]
            for e in result.all_events
            if e.event_type_value == "ASSET_OBSERVATION"
        ]
        assert observation.metadata["small_files"].value == small
        assert observation.metadata["live_files"].value == 8
