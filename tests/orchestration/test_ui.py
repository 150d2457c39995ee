"""``dagster dev`` started on a registry serves the UI: its GraphQL API lists every generated asset,
schedule and sensor (what the UI's asset graph, schedules and sensors pages show)."""

from __future__ import annotations

import re
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from deltalake import write_deltalake
from registry_samples import SAMPLE

from lakeops.registry import parse_registry
from orchestration import ui
from orchestration.registry_definitions import build_definitions
from orchestration.ui import PROJECT, dagster_dev, served

pytestmark = pytest.mark.long  # minutes of work: CI runs it as its own stage (make test-long)


def test_dagster_dev_serves_the_generated_definitions(tmp_path: Path) -> None:
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(SAMPLE)
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    defs = build_definitions(parse_registry(SAMPLE))
    expected_assets = {"/".join(a.key.path) for a in defs.resolve_all_asset_specs()}

    with dagster_dev(registry, home) as url:
        ui = served(url)

    assert ui.assets == expected_assets and "events/compaction" in ui.assets and "orders/table" in ui.assets
    assert ui.schedules == {s.name for s in defs.schedules or []} and "events_nightly_schedule" in ui.schedules
    assert ui.sensors == {"lakeops_small_files", "lakeops_checkpoints", "lakeops_cdc", "lakeops_pools"}


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    return home


def test_a_code_location_that_fails_to_load_fails_the_ui_checks_and_the_screenshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The UI serves (with an error page) when the location fails to load: the check under every UI
    test and the screenshot (:func:`orchestration.ui.served`) must say so, at once, with Dagster's
    message, instead of reporting an empty asset graph."""
    demo = tmp_path / "demo"
    demo.mkdir()
    (demo / "lakeops.yaml").write_text("tables:\n  - {name: t, location: /data/t, expiry: {keep: 3}}\n")
    _home(demo)
    monkeypatch.setattr(ui, "DEMO", demo)
    started = time.monotonic()
    assert ui.main(["screenshot", str(tmp_path / "docs")]) == 1
    assert time.monotonic() - started < 120  # not the start-up timeout
    error = capsys.readouterr().err
    assert re.search(
        r"code location orchestration.definitions:defs failed to load:(.|\n)*table 't': unknown key expiry.keep", error
    )
    assert not list((tmp_path / "docs").iterdir())


def test_the_screenshot_refuses_a_group_the_location_does_not_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = tmp_path / "demo"
    demo.mkdir()
    (demo / "lakeops.yaml").write_text("tables:\n  - {name: orders, location: /data/orders}\n")
    _home(demo)
    monkeypatch.setattr(ui, "DEMO", demo)
    assert ui.main(["screenshot", str(tmp_path / "docs"), "events"]) == 1
    assert "group 'events' has no assets" in capsys.readouterr().err
    assert not list((tmp_path / "docs").iterdir())


DRY_RUN = """
mutation($sensor: SensorSelector!) {
  sensorDryRun(selectorData: $sensor, cursor: null) {
    ... on DryRunInstigationTick {
      evaluationResult {
        error { message }
        runRequests {
          runKey jobName tags { key value } runConfigYaml assetSelection { path }
          assetChecks { name assetKey { path } }
        }
        dynamicPartitionsRequests { partitionsDefName partitionKeys }
      }
    }
    ... on PythonError { message }
  }
}
"""
ADD_PARTITION = """
mutation($repository: RepositorySelector!, $name: String!, $key: String!) {
  addDynamicPartition(repositorySelector: $repository, partitionsDefName: $name, partitionKey: $key) { __typename }
}
"""
LAUNCH = """
mutation($runs: [ExecutionParams!]!) {
  launchMultipleRuns(executionParamsList: $runs) {
    ... on LaunchMultipleRunsResult {
      launchMultipleRunsResult {
        __typename
        ... on LaunchRunSuccess { run { tags { key value } } }
        ... on InvalidSubsetError { message }
        ... on PythonError { message }
      }
    }
  }
}
"""


def test_sensor_requests_launch_as_the_ui_applies_them(tmp_path: Path) -> None:
    """The sensors' dry run in the UI, then "Apply requests" exactly as the UI sends it (dynamic
    partitions added first; each request's job, selection, checks and tags): every run launches and
    names its table. It once failed with InvalidSubsetError. The instance queues runs without
    starting any, so nothing else happens."""
    for name, partition_by in (("busy", None), ("parted", ["day"])):
        for i in range(6):
            rows = pa.table({"id": pa.array([i], pa.int64()), "day": pa.array([f"d{i % 2}"])})
            write_deltalake(str(tmp_path / name), rows, mode="append", partition_by=partition_by)
    today = datetime.now(UTC).date()
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(
        f"""
tables:
  - name: busy
    location: {tmp_path / "busy"}
    compaction: {{small_file_trigger: 4}}
    checkpoint: {{interval: 5}}
    cdc: {{enabled: true, output: {tmp_path / "busy_changes"}, start_date: {today - timedelta(days=40)}}}
  - name: parted
    location: {tmp_path / "parted"}
    compaction: {{small_file_trigger: 2, min_input_files: 2, partitioned: true}}
    cdc: {{enabled: true, output: {tmp_path / "parted_changes"}, start_date: {today}}}
"""
    )
    home = tmp_path / "dagster_home"
    home.mkdir()
    shipped = yaml.safe_load((PROJECT / "dagster_home" / "dagster.yaml").read_text())
    shipped["concurrency"]["runs"]["max_concurrent_runs"] = 0  # launched runs wait in the queue
    (home / "dagster.yaml").write_text(yaml.safe_dump(shipped))

    launched: dict[str, set[str]] = {}
    with dagster_dev(registry, home) as url:
        repository = {"repositoryLocationName": ui.LOCATION, "repositoryName": "__repository__"}
        for sensor in ("lakeops_small_files", "lakeops_checkpoints", "lakeops_cdc"):
            selector = {**repository, "sensorName": sensor}
            result = ui.graphql(url, DRY_RUN, {"sensor": selector})["sensorDryRun"]["evaluationResult"]
            assert result["error"] is None
            for request in result["dynamicPartitionsRequests"] or []:
                for key in request["partitionKeys"]:
                    variables = {"repository": repository, "name": request["partitionsDefName"], "key": key}
                    added = ui.graphql(url, ADD_PARTITION, variables)["addDynamicPartition"]
                    assert added["__typename"] == "AddDynamicPartitionSuccess"
            runs = [
                {
                    "runConfigData": request["runConfigYaml"],
                    "selector": {
                        **repository,
                        "jobName": request["jobName"],
                        "assetSelection": [{"path": a["path"]} for a in request["assetSelection"] or []],
                        "assetCheckSelection": [
                            {"assetKey": {"path": c["assetKey"]["path"]}, "name": c["name"]}
                            for c in request["assetChecks"] or []
                        ],
                    },
                    "mode": "default",
                    "executionMetadata": {"tags": request["tags"]},
                }
                for request in result["runRequests"]
            ]
            outcome = ui.graphql(url, LAUNCH, {"runs": runs})["launchMultipleRuns"]["launchMultipleRunsResult"]
            assert [r["__typename"] for r in outcome] == ["LaunchRunSuccess"] * len(runs), outcome
            for run in outcome:
                tags = {t["key"]: t["value"] for t in run["run"]["tags"]}
                launched.setdefault(sensor, set()).add(f"{tags['lakeops/table']} {tags.get('dagster/partition', '-')}")
    assert launched == {
        "lakeops_small_files": {"busy -", "parted day=d0", "parted day=d1"},
        "lakeops_checkpoints": {"busy -"},
        "lakeops_cdc": {f"busy {today}", f"parted {today}"},
    }
