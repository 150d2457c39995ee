"""The table state orchestration reads from typed report fields, on an Icechunk repository, whose
versions are snapshot ids: a state read from a report's numeric version fields (None for Icechunk)
was the text "None" whatever the repository did, so Dagster never saw it change. The observation's
data version, its state_version metadata and the sensors' run keys and cursors are the snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
from icechunk_repos import build_history

from lakeops.icechunk.repository import Repository
from lakeops.icechunk.writer import ChangeSet, commit
from lakeops.registry import Registry, parse_registry
from lakeops.storage import open_storage
from orchestration.assets import table_key
from orchestration.registry_definitions import build_definitions
from orchestration.resources import SparkResource, StorageResource

RESOURCES = {"spark": SparkResource(), "storage": StorageResource()}


def _registry(root: Path) -> Registry:
    return parse_registry(
        f"""
tables:
  - name: arrays
    location: {root}
    format: icechunk
    compaction: {{small_file_trigger: 2}}
    checkpoint: {{interval: 1}}
"""
    )


def _observation(registry: Registry, instance: dg.DagsterInstance) -> dg.AssetObservation:
    result = dg.materialize(
        list(build_definitions(registry).assets or []),
        selection=[table_key(registry.table("arrays"))],
        resources=RESOURCES,
        instance=instance,
    )
    (observation,) = [
        e.event_specific_data.asset_observation  # type: ignore[union-attr]
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    ]
    return observation


def _sensor_result(registry: Registry, name: str, cursor: str | None = None) -> dg.SensorResult:
    (sensor,) = [s for s in build_definitions(registry).sensors or [] if s.name == name]
    context = dg.build_sensor_context(
        cursor=cursor, resources={"storage": StorageResource()}, instance=dg.DagsterInstance.ephemeral()
    )
    result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def test_an_icechunk_observation_records_its_snapshot_and_sees_it_move(tmp_path: Path) -> None:
    root = tmp_path / "arrays"
    storage = open_storage(str(root))
    build_history(storage, str(root), commits=4)
    tip = Repository(storage, str(root)).resolve("main")
    registry, instance = _registry(root), dg.DagsterInstance.ephemeral()

    first = _observation(registry, instance)
    assert first.tags["dagster/data_version"] == tip != "None"
    assert first.metadata["state_version"].value == tip

    written = commit(storage, str(root), ChangeSet().set_chunk("/data/line", (0,), b"new"), message="more")
    moved = _observation(registry, instance)
    assert moved.tags["dagster/data_version"] == written.snapshot_id != tip
    assert moved.metadata["state_version"].value == written.snapshot_id


def test_sensors_key_an_icechunk_repository_by_its_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "arrays"
    storage = open_storage(str(root))
    build_history(storage, str(root), commits=4)
    tip = Repository(storage, str(root)).resolve("main")
    registry = _registry(root)

    small = _sensor_result(registry, "lakeops_small_files")
    assert [r.run_key for r in small.run_requests or []] == [f"arrays:compaction:{tip}"]
    assert json.loads(small.cursor or "") == {"arrays": tip}
    assert _sensor_result(registry, "lakeops_small_files", small.cursor).run_requests == []
    # No checkpoints in Icechunk: never due, whatever the interval.
    assert _sensor_result(registry, "lakeops_checkpoints").run_requests == []
