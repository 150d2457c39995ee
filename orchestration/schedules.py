"""Schedules per table: nightly expiry and orphan removal, the periodic health observation, and the
registry's cron overrides for compaction, checkpoint and CDC (next to the sensors that already run
them when needed). Cron strings are UTC.

Jobs are per table and per purpose, so a table's runs carry its name (``<table>_nightly``) and the
per-table concurrency pool keeps them from overlapping other maintenance of the same table.
"""

from datetime import UTC
from typing import Any

import dagster as dg

from orchestration.assets import operation_key, table_key
from orchestration.registry import Registry, TableEntry

__all__ = ["maintenance_jobs_and_schedules"]


def _schedule(name: str, cron: str, job: dg.JobDefinition | Any, description: str) -> dg.ScheduleDefinition:
    return dg.ScheduleDefinition(
        name=name, cron_schedule=cron, job=job, execution_timezone="UTC", description=description
    )


def _cdc_schedule(entry: TableEntry, cron: str) -> dg.ScheduleDefinition:
    """CDC on a cron: the partition of the tick's day (it extracts everything pending up to that day's end)."""
    job = dg.define_asset_job(f"{entry.name}_cdc", selection=[operation_key(entry, "cdc")])

    @dg.schedule(name=f"{entry.name}_cdc_schedule", cron_schedule=cron, job=job, execution_timezone="UTC")
    def tick(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        day = context.scheduled_execution_time.astimezone(UTC).strftime("%Y-%m-%d")
        return dg.RunRequest(
            run_key=f"{entry.name}:cdc:{day}:{context.scheduled_execution_time.isoformat()}", partition_key=day
        )

    return tick


def _table_schedules(entry: TableEntry) -> list[dg.ScheduleDefinition]:
    cron = entry.schedules
    nightly = dg.define_asset_job(
        f"{entry.name}_nightly", selection=[operation_key(entry, "expiry"), operation_key(entry, "orphans")]
    )
    health = dg.define_asset_job(f"{entry.name}_health", selection=[table_key(entry)])
    schedules = [
        _schedule(
            f"{entry.name}_nightly_schedule", cron.nightly, nightly, f"Expiry and orphan removal of {entry.name}."
        ),
        _schedule(f"{entry.name}_health_schedule", cron.health, health, f"Health observation of {entry.name}."),
    ]
    for operation, override in (("compaction", cron.compaction), ("checkpoint", cron.checkpoint)):
        if override is not None:
            job = dg.define_asset_job(f"{entry.name}_{operation}", selection=[operation_key(entry, operation)])
            schedules.append(
                _schedule(f"{entry.name}_{operation}_schedule", override, job, f"{operation} of {entry.name}.")
            )
    if cron.cdc is not None and entry.cdc.enabled:
        schedules.append(_cdc_schedule(entry, cron.cdc))
    return schedules


def maintenance_jobs_and_schedules(registry: Registry) -> list[dg.ScheduleDefinition]:
    return [schedule for entry in registry.tables for schedule in _table_schedules(entry)]
