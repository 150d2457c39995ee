"""``workspace.yaml`` points Dagster at ``orchestration.definitions:defs``: it must load."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_workspace_loads_the_definitions() -> None:
    workspace = yaml.safe_load((ROOT / "workspace.yaml").read_text())
    target = workspace["load_from"][0]["python_module"]
    module = __import__(target["module_name"], fromlist=[target["attribute"]])
    defs = getattr(module, target["attribute"])
    assert isinstance(defs, dg.Definitions)
    dg.Definitions.validate_loadable(defs)
