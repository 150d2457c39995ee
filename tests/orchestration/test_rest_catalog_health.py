"""Dagster on a table of an Iceberg REST catalog (issue 25, item 4): the registry's catalog (its type,
URI and the name of the variable holding its credential) reaches the table observation, whose health
checks read the table through the catalog like any other (the REST server of
``tests/rest_catalog_server.py``, checked against the specification's OpenAPI document)."""

from pathlib import Path

import dagster as dg
import pytest
from rest_catalog_server import appended_table, serve

from lakeops.registry import parse_registry
from orchestration.assets import table_key
from orchestration.registry_definitions import build_definitions
from orchestration.resources import SparkResource, StorageResource

SECRET = "sentinel-orchestration-secret"


def test_a_rest_catalogued_table_is_observed_with_its_health(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORDERS_CATALOG_CREDENTIAL", f"dagster:{SECRET}")
    for server in serve(tmp_path, client_id="dagster", client_secret=SECRET, token="sentinel-orchestration-token"):
        appended_table(server, "shop.orders", 7)
        registry = parse_registry(
            f"""
tables:
  - name: orders
    identifier: shop.orders
    format: iceberg
    catalog: {{type: rest, uri: "{server.url}", credential_env: ORDERS_CATALOG_CREDENTIAL}}
    compaction: {{small_file_trigger: 5}}
"""
        )
        result = dg.materialize(
            list(build_definitions(registry).assets or []),
            selection=[table_key(registry.table("orders"))],
            resources={"spark": SparkResource(), "storage": StorageResource()},
            instance=dg.DagsterInstance.ephemeral(),
        )

        checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
        small = checks["small_files"]
        assert (small.passed, small.severity, small.metadata["value"].value) == (False, dg.AssetCheckSeverity.WARN, 7)
        (observation,) = [
            e.event_specific_data.asset_observation  # type: ignore[union-attr]
            for e in result.all_events
            if e.event_type_value == "ASSET_OBSERVATION"
        ]
        assert observation.metadata["health_status"].value == "needs compaction"
        assert any(path.endswith("/tables/orders") for _, path, _ in server.answers)
