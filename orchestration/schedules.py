"""Schedules per table: nightly expiry and orphan removal, the periodic health observation, and the
registry's cron overrides for compaction, checkpoint and CDC (next to the sensors that already run
them when needed); and ``lakeops_overview_schedule``, which renders the health overview on every
health cron. Cron strings are UTC.

The health observations and the overview run by default (they only read tables, and their plots
fill only if they run from the start); the others start stopped, to be turned on per table.

Each table has its own schedules, but the jobs behind them are shared by purpose (``lakeops_nightly``,
``lakeops_health``, ``lakeops_compaction``, ``lakeops_checkpoint``): Dagster resolves every job
against every asset of the code location, so a job per table made loading quadratic in the tables
(500 tables: a minute). A tick requests only its table's assets and their checks from the shared
job, tagged ``lakeops/table``; the per-table concurrency pool keeps it from overlapping other
maintenance of the same table. CDC on a cron is the exception: each table's days are partitions of
its own, which one job cannot mix, so that table gets its own job ``<table>_cdc``.
"""

from datetime import UTC

import dagster as dg

from lakeops.registry import Registry, TableEntry
from orchestration.assets import operation_key, run_request
from orchestration.health import OVERVIEW_KEY

__all__ = ["maintenance_schedules"]

#: Schedule kind -> the operations (asset names) of a table a tick runs, and what for.
_KINDS: dict[str, tuple[list[str], str]] = {
    "nightly": (["expiry", "orphans"], "Expiry and orphan removal"),
    "health": (["table"], "Health observation"),
    "compaction": (["compaction"], "Compaction"),
    "checkpoint": (["checkpoint"], "Checkpoint"),
    "cdc": (["cdc"], "CDC"),
}


def _cron(entry: TableEntry, kind: str) -> str | None:
    """The table's cron for ``kind``: nightly and health always, the others when overridden."""
    if kind == "cdc" and not entry.cdc.enabled:
        return None
    cron: str | None = getattr(entry.schedules, kind)
    return cron


def _job_name(entry: TableEntry, kind: str) -> str:
    return f"{entry.name}_cdc" if kind == "cdc" else f"lakeops_{kind}"


def _schedule(entry: TableEntry, kind: str, cron: str) -> dg.ScheduleDefinition:
    """``kind`` of ``entry`` on ``cron``: a run of the table's assets only. CDC runs the partition of
    the tick's day (it extracts everything pending up to that day's end), none before ``start_date``."""
    operations, what = _KINDS[kind]

    @dg.schedule(
        name=f"{entry.name}_{kind}_schedule",
        cron_schedule=cron,
        job_name=_job_name(entry, kind),
        execution_timezone="UTC",
        description=f"{what} of {entry.name}.",
        default_status=dg.DefaultScheduleStatus.RUNNING if kind == "health" else dg.DefaultScheduleStatus.STOPPED,
    )
    def tick(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        if kind != "cdc":
            return run_request(entry, operations)
        day = context.scheduled_execution_time.astimezone(UTC).date()
        if entry.cdc.start_date is not None and day < entry.cdc.start_date:  # no partition for that day
            return dg.SkipReason(f"{entry.name}: CDC starts on {entry.cdc.start_date}")
        run_key = f"{entry.name}:cdc:{day}:{context.scheduled_execution_time.isoformat()}"
        return run_request(entry, operations, run_key=run_key, partition_key=day.isoformat())

    return tick


def _overview_schedule(registry: Registry) -> dg.ScheduleDefinition:
    """The overview on every distinct health cron of the tables, from the ``lakeops_health`` job."""
    crons = sorted({entry.schedules.health for entry in registry.tables})

    @dg.schedule(
        name="lakeops_overview_schedule",
        cron_schedule=crons[0] if len(crons) == 1 else crons,
        job_name="lakeops_health",
        execution_timezone="UTC",
        description="The health overview of every table (lakeops/overview).",
        default_status=dg.DefaultScheduleStatus.RUNNING,
    )
    def tick(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        return dg.RunRequest(asset_selection=[OVERVIEW_KEY])

    return tick


def maintenance_schedules(registry: Registry) -> dg.Definitions:
    """Every table's schedules and the overview's, and the jobs they run (a job only when some
    schedule uses it)."""
    scheduled = [(entry, kind, cron) for entry in registry.tables for kind in _KINDS if (cron := _cron(entry, kind))]
    selections: dict[str, list[dg.AssetKey]] = {"lakeops_health": [OVERVIEW_KEY]} if registry.tables else {}
    for entry, kind, _ in scheduled:
        selections.setdefault(_job_name(entry, kind), []).extend(operation_key(entry, op) for op in _KINDS[kind][0])
    schedules = [_schedule(entry, kind, cron) for entry, kind, cron in scheduled]
    return dg.Definitions(
        jobs=[dg.define_asset_job(name, selection=keys) for name, keys in selections.items()],
        schedules=[*schedules, _overview_schedule(registry)] if registry.tables else schedules,
    )
