"""The ``LakeopsRegistry`` Dagster Component (issue 36, item 6): a ``dg`` project adds lakeops with one
``defs.yaml`` and gets exactly the definitions ``workspace.yaml`` loads; ``dg`` lists the component and
checks the example project (``examples/dagster-project``) as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster.components.testing import create_defs_folder_sandbox
from registry_samples import SAMPLE

from lakeops.registry import RegistryError, parse_registry
from orchestration.component import LakeopsRegistry
from orchestration.registry_definitions import build_definitions

pytestmark = pytest.mark.orchestration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dagster-project"
DG = Path(sys.executable).parent / "dg"

#: The sample registry (Delta on S3, Iceberg in a catalog) with an Icechunk repository: all three formats.
REGISTRY = SAMPLE + "  - {name: arrays, location: s3://lake/arrays, format: icechunk}\n"


def _keys(defs: dg.Definitions) -> tuple[set[str], set[tuple[str, str]], set[str], set[str]]:
    """Asset keys, check keys, schedule and sensor names: what two ways of loading must agree on."""
    repo = defs.get_repository_def()
    graph = repo.asset_graph
    return (
        {key.to_user_string() for key in graph.get_all_asset_keys()},
        {(check.asset_key.to_user_string(), check.name) for check in graph.asset_check_keys},
        {schedule.name for schedule in repo.schedule_defs},
        {sensor.name for sensor in repo.sensor_defs},
    )


def _component_defs(attributes: dict[str, object]) -> tuple[LakeopsRegistry, dg.Definitions]:
    with create_defs_folder_sandbox() as sandbox:
        folder = sandbox.defs_folder_path / "lakeops"
        folder.mkdir()
        (folder / "lakeops.yaml").write_text(REGISTRY)
        body = {"type": "orchestration.component.LakeopsRegistry", "attributes": attributes}
        (folder / "defs.yaml").write_text(yaml.safe_dump(body))
        with sandbox.load_component_and_build_defs(defs_path=folder) as (component, defs):
            assert isinstance(component, LakeopsRegistry)
            return component, defs


def test_a_relative_registry_path_is_read_from_the_defs_folder_and_builds_what_the_workspace_loads() -> None:
    component, defs = _component_defs({"registry": "lakeops.yaml"})
    assert component.registry == "lakeops.yaml"
    expected = _keys(build_definitions(parse_registry(REGISTRY)))
    assert _keys(defs) == expected
    assets = expected[0]
    assert {"events/compaction", "orders/checkpoint", "arrays/table", "events/cdc", "lakeops/overview"} <= assets


def test_tables_narrows_the_code_location_to_the_tables_named() -> None:
    _, defs = _component_defs({"registry": "lakeops.yaml", "tables": ["arrays"]})
    assets, _, schedules, _ = _keys(defs)
    assert {key.split("/")[0] for key in assets} == {"arrays", "lakeops"}
    assert schedules == {"arrays_nightly_schedule", "arrays_health_schedule", "lakeops_overview_schedule"}


def test_a_table_the_registry_does_not_have_is_refused_by_name() -> None:
    with pytest.raises(Exception) as refused:
        _component_defs({"registry": "lakeops.yaml", "tables": ["arrays", "evnets"]})
    cause = refused.value
    while cause is not None and not isinstance(cause, RegistryError):
        cause = cause.__cause__
    assert isinstance(cause, RegistryError)
    assert "tables ['evnets'] are not in the registry (it has ['events', 'orders', 'arrays'])" in str(cause)


def _dg(project: Path, registry: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEOPS_", "DAGSTER_"))}
    env |= {"LAKEOPS_REGISTRY": str(registry), "PATH": f"{DG.parent}{os.pathsep}{env.get('PATH', '')}"}
    return subprocess.run([str(DG), *args], cwd=project, env=env, capture_output=True, text=True, timeout=300)


def test_dg_lists_the_component_and_checks_and_lists_the_example_project(tmp_path: Path) -> None:
    """The example project as a user copies it: ``dg check defs`` passes, ``dg list defs`` shows the same
    assets, checks, schedules and sensors as ``workspace.yaml``'s location; a registry error fails the
    check with the table and key named."""
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project)
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(REGISTRY)

    listed = _dg(project, registry, "list", "components", "--json")
    assert listed.returncode == 0, listed.stderr
    types = {entry["key"] for entry in json.loads(listed.stdout)["items"]}
    assert "orchestration.component.LakeopsRegistry" in types

    checked = _dg(project, registry, "check", "defs")
    assert checked.returncode == 0, checked.stderr + checked.stdout
    assert "All definitions loaded successfully." in checked.stdout + checked.stderr

    shown = _dg(project, registry, "list", "defs", "--json")
    assert shown.returncode == 0, shown.stderr
    listing = json.loads(shown.stdout)
    assets, checks, schedules, sensors = _keys(build_definitions(parse_registry(REGISTRY)))
    assert {asset["asset_key"] for asset in listing["assets"]} == assets
    assert {(check["asset_key"], check["name"]) for check in listing["asset_checks"]} == checks
    assert {schedule["name"] for schedule in listing["schedules"]} == schedules
    assert {sensor["name"] for sensor in listing["sensors"]} == sensors
    assert {asset["source"] for asset in listing["assets"]} == {"lakeops_example/defs/lakeops/defs.yaml:4"}

    registry.write_text(REGISTRY.replace("retain_last: 5", "retain_last: five"))
    refused = _dg(project, registry, "check", "defs")
    assert refused.returncode != 0
    assert "table 'events': expiry.retain_last" in refused.stdout + refused.stderr
