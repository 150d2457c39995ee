"""The table's health as observed: one observation, recorded by everything that looks at or changes
the table, so the health the UI shows is never older than the last run that touched the table.

An observation is the table's ``inspect`` numbers and health verdict as metadata, its data version and
one evaluation per health check (:mod:`orchestration.health`). The table asset records it when it is
observed (its schedule, the UI, ``dagster asset materialize``); every maintenance run records it again
after its commit, before the run ends, however the run was launched — so a compaction that removed the
small files is followed by an observation without them and a passing ``small_files`` check. Both then
rebuild the overview (``lakeops/overview``) with that observation, so it is never older than the
newest observation of any table.
"""

import dagster as dg

from lakeops.registry import Registry
from orchestration import health
from orchestration.health import Observation

__all__ = ["record_after_run", "record_overview"]

#: Dagster's tag for an observation's data version (what ``ObserveResult(data_version=...)`` sets).
_DATA_VERSION_TAG = "dagster/data_version"


def record_overview(context: dg.AssetExecutionContext, registry: Registry, observation: Observation) -> None:
    """The overview rebuilt with ``observation`` (the instance may not hold it yet: this run records it)."""
    metadata = health.overview_metadata(context.instance, registry, fresh={observation.entry.name: observation})
    context.log_event(dg.AssetMaterialization(asset_key=health.OVERVIEW_KEY, metadata=metadata))


def record_after_run(
    context: dg.AssetExecutionContext, observation: Observation, registry: Registry, *, operation: str
) -> None:
    """A maintenance run's last step: ``observation`` (the table as the run left it, its state re-read)
    recorded for the table asset with its checks' evaluations, and the overview rebuilt — in this run,
    so the table's page, its checks and the overview show the result as soon as the run ends."""
    tags = {_DATA_VERSION_TAG: observation.version} if observation.version is not None else None
    context.log_event(dg.AssetObservation(asset_key=observation.key, metadata=observation.metadata, tags=tags))
    for check in observation.checks:
        context.log_event(_evaluation(observation.key, check))
    record_overview(context, registry, observation)
    context.log.info(f"after {operation}: {observation.summary()}")


def _evaluation(key: dg.AssetKey, check: dg.AssetCheckResult) -> dg.AssetCheckEvaluation:
    """``check`` (computed as the table asset's own observation computes it) as an evaluation this run
    records for the table asset's check of that name."""
    assert check.check_name is not None
    return dg.AssetCheckEvaluation(
        asset_key=key,
        check_name=check.check_name,
        passed=check.passed,
        metadata=dict(check.metadata or {}),
        severity=check.severity,
        description=check.description,
    )
