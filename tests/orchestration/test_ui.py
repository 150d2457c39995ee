"""``dagster dev`` started on a registry serves the UI: its GraphQL API lists every generated asset,
schedule and sensor (what the UI's asset graph, schedules and sensors pages show)."""

from __future__ import annotations

import shutil
from pathlib import Path

from registry_samples import SAMPLE

from orchestration.definitions import build_definitions
from orchestration.registry import parse_registry
from orchestration.ui import PROJECT, dagster_dev, served


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
    assert ui.sensors == {"lakeops_small_files", "lakeops_checkpoints", "lakeops_cdc"}
