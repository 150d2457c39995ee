"""Each table's concurrency pool, and its limit registered in the instance so the UI shows it.

Every maintenance asset of a table is in the pool ``lakeops_<table>``; the instance's
``concurrency.pools`` (``dagster_home/dagster.yaml``, ``deploy/dagster.yaml``) gives pools run
granularity and a default limit of one, so a second run on a table waits in the queue.

Dagster keeps a pool's limit as a row of the instance's storage, which it writes lazily: the
run-queue daemon writes the default limit when a queued run first needs the pool, and runs that do
not pass through the queue (``materialize()``, as ``make demo`` runs) never write it. Until then
the UI's Concurrency page says "No pool limits have been configured", though the default applies.
:func:`register_pools` writes each table's row as the daemon would (the instance's default,
marked as such, so a changed ``default_limit`` still applies), and the ``lakeops_pools`` sensor
runs it, so every registered table's pool is listed with its limit before the table's first run.
"""

import dagster as dg

from lakeops.registry import Registry

__all__ = ["POOLS_INTERVAL_S", "pools_sensor", "register_pools"]

#: Seconds between the pools sensor's evaluations (one storage query; only new tables change it).
POOLS_INTERVAL_S = 300


def register_pools(instance: dg.DagsterInstance, registry: Registry) -> list[str]:
    """Write the default limit of every table pool the instance lists without it, or with an
    earlier default; returns the pools written. A limit an operator set is left alone, and an
    instance without a default limit gets none (its pools are unlimited)."""
    default = instance.get_concurrency_config().pool_config.default_pool_limit
    if default is None:
        return []
    storage = instance.event_log_storage
    known = {limit.name: limit for limit in storage.get_pool_limits()}
    written = []
    for pool in sorted({entry.pool for entry in registry.tables}):
        limit = known.get(pool)
        if limit is None or (limit.from_default and limit.limit != default):
            storage.initialize_concurrency_limit_to_default(pool)
            written.append(pool)
    return written


def pools_sensor(registry: Registry) -> list[dg.SensorDefinition]:
    """``lakeops_pools`` (running by default: it launches nothing), or none without tables."""
    if not registry.tables:
        return []

    @dg.sensor(
        name="lakeops_pools",
        description="Registers each table's concurrency pool with the instance's default limit, so the "
        "Concurrency page lists it before the table's first run.",
        minimum_interval_seconds=POOLS_INTERVAL_S,
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def evaluate(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        written = register_pools(context.instance, registry)
        if written:
            context.log.info(f"registered pools {', '.join(written)}")
            return dg.SkipReason(f"registered {len(written)} pool(s) with the default limit: {', '.join(written)}")
        if context.instance.get_concurrency_config().pool_config.default_pool_limit is None:
            return dg.SkipReason("the instance sets no concurrency.pools.default_limit: table pools are unlimited")
        return dg.SkipReason("every table's pool has its limit")

    return [evaluate]
