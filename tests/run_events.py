"""What a maintenance run recorded for its own asset, apart from what it records for the table: each run
also records the table's observation, the table's health checks and the rebuilt overview
(:mod:`orchestration.observation`)."""

from __future__ import annotations

import dagster as dg

from orchestration.health import OVERVIEW_KEY


def own_materializations(result: dg.ExecuteInProcessResult, node: str) -> list[dg.AssetMaterialization]:
    """The materializations of ``node``'s asset (not the overview the run rebuilt)."""
    return [m for m in result.asset_materializations_for_node(node) if m.asset_key != OVERVIEW_KEY]


def own_checks(result: dg.ExecuteInProcessResult) -> list[dg.AssetCheckEvaluation]:
    """The evaluations of the run's maintenance checks (not the table's health checks it re-evaluated)."""
    return [c for c in result.get_asset_check_evaluations() if c.asset_key.path[-1] != "table"]
