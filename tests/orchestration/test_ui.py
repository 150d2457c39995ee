"""``dagster dev`` started on a registry serves the UI: its GraphQL API lists every generated asset,
schedule and sensor (what the UI's asset graph, schedules and sensors pages show)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from registry_samples import SAMPLE

from orchestration import ui
from orchestration.definitions import build_definitions
from orchestration.registry import parse_registry
from orchestration.ui import PROJECT, UiNotServing, dagster_dev, served


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


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    return home


def test_a_code_location_that_fails_to_load_fails_the_ui_checks_and_the_screenshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The UI serves (with an error page) when the location fails to load: the checks must say so,
    at once, with Dagster's message, instead of reporting an empty asset graph."""
    demo = tmp_path / "demo"
    demo.mkdir()
    (demo / "lakeops.yaml").write_text("tables:\n  - {name: t, location: /data/t, expiry: {keep: 3}}\n")
    started = time.monotonic()
    with (
        pytest.raises(UiNotServing, match=r"failed to load:(.|\n)*table 't': unknown key expiry.keep"),
        dagster_dev(demo / "lakeops.yaml", _home(demo)),
    ):
        pass
    assert time.monotonic() - started < 120  # not the start-up timeout

    monkeypatch.setattr(ui, "DEMO", demo)
    assert ui.main(["screenshot", str(tmp_path / "graph.png")]) == 1
    assert "unknown key expiry.keep" in capsys.readouterr().err
    assert not (tmp_path / "graph.png").exists()


def test_the_screenshot_refuses_a_group_the_location_does_not_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = tmp_path / "demo"
    demo.mkdir()
    (demo / "lakeops.yaml").write_text("tables:\n  - {name: orders, location: /data/orders}\n")
    _home(demo)
    monkeypatch.setattr(ui, "DEMO", demo)
    assert ui.main(["screenshot", str(tmp_path / "graph.png"), "events"]) == 1
    assert "group 'events' has no assets" in capsys.readouterr().err
    assert not (tmp_path / "graph.png").exists()
