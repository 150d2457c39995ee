"""What the UI says about tables after maintenance is true (issue 20, item 3): right after every
maintenance asset ran once (the demo's order: observe, CDC first, then the rest, observe), no asset of
any format is out of date ("Unsynced") although compaction, manifest rewrites and chunk packing
committed new table versions; new data makes exactly that table's maintenance out of date; and the
Icechunk observation carries the repository's snapshot, not the text "None". A run that found
nothing to do keeps its data version; a changed registry policy shows as a new code version."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
from dagster._utils.test.data_versions import get_stale_status_resolver
from deltalake import write_deltalake
from icechunk_repos import build_history
from pyiceberg_tables import small_file_table

from lakeops.icechunk.repository import Repository
from lakeops.registry import TableEntry, parse_registry
from lakeops.storage import LocalStorage
from orchestration.assets import MAINTENANCE, operation_key, table_key
from orchestration.registry_definitions import build_definitions
from orchestration.resources import SparkResource, StorageResource

RESOURCES = {"spark": SparkResource(master="local[2]"), "storage": StorageResource()}


def _append(path: Path, first: int, count: int = 1) -> None:
    for i in range(first, first + count):
        write_deltalake(str(path), pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64())}), mode="append")


def test_no_asset_is_out_of_date_after_maintenance_and_new_data_makes_its_table_s_so(
    tmp_path: Path, spark: Any
) -> None:
    _append(tmp_path / "events", 0, 8)
    iceberg = small_file_table(tmp_path / "iceberg", appends=8, rows=10)
    arrays = tmp_path / "arrays"
    build_history(LocalStorage(), str(arrays), commits=8)
    today = datetime.now(UTC).date()
    text = f"""
tables:
  - name: events
    location: {tmp_path / "events"}
    compaction: {{min_input_files: 2}}
    cdc: {{enabled: true, output: {tmp_path / "events_changes"}, start_date: {today - timedelta(days=3)}, key: [id]}}
  - name: orders
    catalog: {{uri: "{iceberg.catalog_uri}"}}
    identifier: {iceberg.identifier}
    compaction: {{min_input_files: 2}}
  - name: arrays
    location: {arrays}
    compaction: {{min_input_files: 2}}
"""
    registry = parse_registry(text)
    assets = list(build_definitions(registry).assets or [])

    def run(key: dg.AssetKey, partition: str | None = None) -> dg.ExecuteInProcessResult:
        result = dg.materialize(
            assets, selection=[key], partition_key=partition, resources=RESOURCES, instance=instance
        )
        assert result.success, key
        return result

    def observe() -> None:
        for entry in registry.tables:
            run(table_key(entry))

    def out_of_date() -> dict[str, list[str]]:
        """Asset (CDC: today's partition) -> why it is out of date, as the UI's "Unsynced" says."""
        resolver = get_stale_status_resolver(instance, assets)
        stale = {}
        for key in sorted(resolver.asset_graph.get_all_asset_keys()):
            partition = today.isoformat() if key.path[1] == "cdc" else None
            causes = resolver.get_stale_root_causes(key, partition)
            if causes:
                stale[key.to_user_string()] = [f"{c.key.asset_key.to_user_string()} {c.reason}" for c in causes]
        return stale

    def data_version_of(key: dg.AssetKey) -> str:
        event = instance.get_latest_materialization_event(key)
        assert event is not None and event.asset_materialization is not None
        return event.asset_materialization.tags["dagster/data_version"]

    def operations(entry: TableEntry) -> list[str]:
        return ["cdc", *[op for op in MAINTENANCE if op != "cdc"]] if entry.cdc.enabled else list(MAINTENANCE)[:-1]

    with dg.instance_for_test() as instance:
        observe()
        for entry in registry.tables:
            for operation in operations(entry):
                run(operation_key(entry, operation), today.isoformat() if operation == "cdc" else None)
        observe()
        assert out_of_date() == {}

        (observation,) = instance.fetch_observations(dg.AssetKey(["arrays", "table"]), limit=1).records
        repo = Repository(LocalStorage(), str(arrays))
        tip = repo.read_snapshot(repo.resolve("main"))
        assert tip.properties.get("lakeops.operation") == "compact"  # the packing moved the tip...
        assert observation.asset_observation is not None
        assert observation.asset_observation.tags["dagster/data_version"] == tip.parent_id  # ...not the data

        orphans = operation_key(registry.table("orders"), "orphans")
        before = data_version_of(orphans)
        run(orphans)  # nothing left to remove
        assert data_version_of(orphans) == before

        changed = parse_registry(text.replace("{min_input_files: 2}", "{min_input_files: 3}", 1))  # events
        resolver = get_stale_status_resolver(instance, list(build_definitions(changed).assets or []))
        causes = resolver.get_stale_root_causes(operation_key(registry.table("events"), "compaction"))
        assert [c.reason for c in causes] == ["has a new code version"]

        _append(tmp_path / "events", 8)
        observe()
        stale = out_of_date()
        assert set(stale) == {f"events/{op}" for op in MAINTENANCE}
        assert all(causes == ["events/table has a new data version"] for causes in stale.values())

        run(operation_key(registry.table("events"), "compaction"))
        observe()
        assert "events/compaction" not in out_of_date()
