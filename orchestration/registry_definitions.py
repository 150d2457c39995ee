"""The Dagster definitions of one table registry, built for both ways in: ``workspace.yaml``'s
:mod:`orchestration.definitions` and the ``LakeopsRegistry`` component (:mod:`orchestration.component`).
Nothing is loaded at import, so the component's module is listed by ``dg`` without reading a registry.

Per registered table (:mod:`lakeops.registry`): the table as an observable asset with its
health checks and one maintenance asset per operation, each with its blocking check
(:mod:`orchestration.assets`); its schedules (:mod:`orchestration.schedules`); and, over all
tables, the health overview (:mod:`orchestration.health`), the small-file, checkpoint and CDC
sensors (:mod:`orchestration.sensors`), with a ``maintenance_budget`` the planner sensor and its plan
asset (:mod:`orchestration.planning`), and the sensor that shows each table's concurrency pool in the
UI (:mod:`orchestration.pools`). Resources: Spark (master and conf from the registry's
``spark``; local by default) and storage (S3 endpoint and region, keys from the environment
variables the registry names, through ``dagster.EnvVar``).
"""

from __future__ import annotations

import warnings

import dagster as dg

from lakeops.registry import Registry
from orchestration.assets import maintenance_assets, table_asset
from orchestration.health import overview_asset
from orchestration.planning import plan_asset, planner_sensor
from orchestration.pools import pools_sensor
from orchestration.resources import SparkResource, StorageResource
from orchestration.schedules import maintenance_schedules
from orchestration.sensors import maintenance_sensors

__all__ = ["build_definitions"]

#: The Dagster beta APIs lakeops builds on by choice: the table's observation with its health checks
#: (``multi_observable_source_asset``) and CDC backfills in one run (``backfill_policy``). Dagster warns
#: at each use, in every process that loads the definitions (25 lines in the demo's log); the release is
#: pinned by the lock and tests cover both, so those warnings are not shown. Any other beta warning is.
_CHOSEN_BETAS = r"(Function `multi_observable_source_asset`|Parameter `backfill_policy` of function `asset`) is"


def _storage(registry: Registry) -> StorageResource:
    config = registry.storage
    keys = {}
    if config.access_key_id_env is not None and config.secret_access_key_env is not None:
        keys = {
            "access_key_id": dg.EnvVar(config.access_key_id_env),
            "secret_access_key": dg.EnvVar(config.secret_access_key_env),
        }
    return StorageResource(endpoint_url=config.endpoint_url, region=config.region, **keys)


def build_definitions(registry: Registry) -> dg.Definitions:
    assets: list[dg.AssetsDefinition | dg.AssetSpec] = [overview_asset(registry)] if registry.tables else []
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_CHOSEN_BETAS, category=dg.BetaWarning)
        for entry in registry.tables:
            assets += [table_asset(entry, registry), *maintenance_assets(entry, registry)]
    planner = planner_sensor(registry)
    if planner:
        assets.append(plan_asset())
    maintenance = dg.Definitions(
        assets=assets,
        sensors=[*maintenance_sensors(registry), *pools_sensor(registry), *planner],
        resources={
            "spark": SparkResource(
                master=registry.spark.master, conf=registry.spark.conf, executor=registry.spark.executor
            ),
            "storage": _storage(registry),
        },
    )
    return dg.Definitions.merge(maintenance, maintenance_schedules(registry))

