"""Benefit-ranked maintenance in Dagster (:mod:`lakeops.planning`), when the registry has a
``maintenance_budget``.

- The sensor ``lakeops_planner`` (every minute; stopped until an operator starts it, as it launches
  runs): once per budget window — the window opens at each tick of ``maintenance_budget.window``
  (UTC) and lasts ``length`` — it plans every table, requests the chosen runs in their rank order
  (each table's pool queues them one at a time) and records the plan on ``lakeops/maintenance_plan``;
  once the window is over, it records the review: each chosen action's predicted and actual
  seconds and benefit points, from the tables' audit records (a table's CDC runs are recorded under
  its change table: :func:`lakeops.planning.estate.audit_records`), and the mean prediction error as a
  number that plots over time. The same audit records are what the next plan's cost model learns
  from, so each window's errors feed the next window's estimates.
- The asset ``lakeops/maintenance_plan`` is external: only the sensor records its materializations
  (the plan, then the review), so the UI holds every plan and review in its history.

The sensor's cursor keeps the window it planned, the chosen actions with their predictions and
how many windows each deferred action has waited (the planner's aging).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import dagster as dg
from dagster._utils.schedules import reverse_cron_string_iterator
from pydantic import BaseModel

from lakeops.planning.estate import audit_records, plan_tables
from lakeops.planning.models import Decision, MaintenancePlan
from lakeops.planning.planner import next_deferrals
from lakeops.planning.review import review
from lakeops.registry import MaintenanceBudget, Registry, TableEntry
from orchestration.assets import MAX_REWRITE_BYTES_TAG, operation_key, partitions_name, run_request
from orchestration.operations import maintained
from orchestration.resources import StorageResource

__all__ = ["PLAN_KEY", "PlannerCursor", "plan_asset", "planner_sensor"]

PLAN_KEY = dg.AssetKey(["lakeops", "maintenance_plan"])
#: Seconds between the planner sensor's evaluations (outside a window's start and end it only reads its cursor).
PLANNER_INTERVAL_S = 60


class PlannerCursor(BaseModel):
    """The window planned (its opening tick), when, what was chosen and the waits of deferred actions."""

    window: str | None = None
    planned_at: str | None = None
    chosen: list[Decision] = []
    deferred: dict[str, int] = {}
    reviewed: bool = True


def plan_asset() -> dg.AssetSpec:
    return dg.AssetSpec(
        key=PLAN_KEY,
        group_name="lakeops",
        description="The maintenance plan of each budget window (chosen and deferred actions, and why), and after "
        "the window each action's predicted against actual cost and benefit; recorded by the lakeops_planner sensor.",
    )


def _window_start(budget: MaintenanceBudget, now: datetime) -> datetime:
    return next(reverse_cron_string_iterator(now.timestamp(), budget.window, "UTC")).astimezone(UTC)


def _pool_limits(instance: dg.DagsterInstance, tables: list[TableEntry]) -> dict[str, int]:
    """Each table pool's limit in the instance (its default when unset; unlimited: one per table run)."""
    default = instance.get_concurrency_config().pool_config.default_pool_limit
    known = {limit.name: limit.limit for limit in instance.event_log_storage.get_pool_limits()}
    fallback = default if default is not None else 1_000_000
    return {t.pool: known.get(t.pool, fallback) for t in tables}


def _request(entry: TableEntry, decision: Decision, window: str, now: datetime) -> dg.RunRequest:
    action = decision.action
    partition = now.strftime("%Y-%m-%d") if action.operation == "cdc" else action.partition
    tags = {
        "lakeops/planned_rank": str(decision.rank),
        "lakeops/predicted_core_minutes": f"{decision.cost.core_minutes:.3f}",
    }
    if action.max_bytes is not None:  # a piece of a compaction too large for the window
        tags[MAX_REWRITE_BYTES_TAG] = str(action.max_bytes)
    return run_request(
        entry, [action.operation], run_key=f"plan:{window}:{action.key}", partition_key=partition, tags=tags
    )


def _new_partitions(
    instance: dg.DagsterInstance, chosen: list[tuple[TableEntry, Decision]]
) -> list[dg.AddDynamicPartitionsRequest]:
    """The table partitions of chosen compactions that the table's dynamic partitions lack yet (the
    small-file sensor registers them too, but the planner may get there first)."""
    wanted: dict[str, set[str]] = {}
    for entry, d in chosen:
        if d.action.operation == "compaction" and d.action.partition is not None:
            wanted.setdefault(partitions_name(entry), set()).add(d.action.partition)
    adds = []
    for name, keys in sorted(wanted.items()):
        new = sorted(keys - set(instance.get_dynamic_partitions(name)))
        if new:
            adds.append(dg.AddDynamicPartitionsRequest(partitions_def_name=name, partition_keys=new))
    return adds


def _review_event(registry: Registry, cursor: PlannerCursor, storage: StorageResource) -> dg.AssetMaterialization:
    tables = {t.name: t for t in registry.tables}
    with storage.credentials():
        records = {
            name: audit_records(tables[name], storage.options())
            for name in {d.action.table for d in cursor.chosen}
            if name in tables
        }
    result = review(cursor.chosen, cursor.planned_at or "", records)
    metadata: dict[str, dg.MetadataValue] = {
        "kind": dg.MetadataValue.text("review"),
        "window": dg.MetadataValue.text(cursor.window or ""),
        "predicted_s": dg.MetadataValue.float(round(result.predicted_s, 2)),
        "actual_s": dg.MetadataValue.float(round(result.actual_s, 2)),
        "predicted_points": dg.MetadataValue.float(round(result.predicted_points, 2)),
        "actual_points": dg.MetadataValue.float(round(result.actual_points, 2)),
        "summary": dg.MetadataValue.md(result.markdown()),
    }
    if result.prediction_error is not None:
        metadata["prediction_error"] = dg.MetadataValue.float(round(result.prediction_error, 4))
    return dg.AssetMaterialization(asset_key=PLAN_KEY, metadata=metadata)


def _plan_event(plan: MaintenancePlan, window: str) -> dg.AssetMaterialization:
    return dg.AssetMaterialization(
        asset_key=PLAN_KEY,
        metadata={
            "kind": dg.MetadataValue.text("plan"),
            "window": dg.MetadataValue.text(window),
            "budget_core_minutes": dg.MetadataValue.float(plan.budget_core_minutes),
            "predicted_core_minutes": dg.MetadataValue.float(round(plan.predicted_core_minutes, 3)),
            "predicted_points": dg.MetadataValue.float(round(plan.predicted_points, 2)),
            "chosen": dg.MetadataValue.int(plan.chosen),
            "deferred": dg.MetadataValue.int(plan.deferred),
            "summary": dg.MetadataValue.md(plan.markdown()),
        },
    )


def evaluate_planner(
    registry: Registry,
    budget: MaintenanceBudget,
    context: dg.SensorEvaluationContext,
    storage: StorageResource,
    now: datetime,
) -> dg.SensorResult:
    """One evaluation at ``now``: the review of a finished window not reviewed yet, and the plan of
    the window open now if it has none."""
    cursor = PlannerCursor.model_validate_json(context.cursor) if context.cursor else PlannerCursor()
    events: list[dg.AssetMaterialization] = []
    requests: list[dg.RunRequest] = []
    adds: list[dg.AddDynamicPartitionsRequest] = []
    start = _window_start(budget, now)
    end = start + timedelta(minutes=budget.length_minutes)
    window = start.isoformat()
    over = cursor.window is not None and (cursor.window != window or now >= end)
    if not cursor.reviewed and over:
        events.append(_review_event(registry, cursor, storage))
        cursor = cursor.model_copy(update={"reviewed": True})
    if cursor.window != window and now < end:
        with storage.credentials():
            plan = plan_tables(
                registry.tables,
                budget,
                storage_options=storage.options(),
                deferred=cursor.deferred,
                pool_limits=_pool_limits(context.instance, registry.tables),
                name="registry",
            )
        for name, error in plan.unreadable.items():
            context.log.warning(f"{name}: not planned, cannot read it: {error}")
        entries = {t.name: t for t in registry.tables}
        chosen = [d for d in plan.decisions if d.chosen]
        requests = [_request(entries[d.action.table], d, window, now) for d in chosen]
        adds = _new_partitions(context.instance, [(entries[d.action.table], d) for d in chosen])
        events.append(_plan_event(plan, window))
        cursor = PlannerCursor(
            window=window,
            planned_at=now.isoformat(),
            chosen=chosen,
            deferred=next_deferrals(plan),
            reviewed=False,
        )
    return dg.SensorResult(
        run_requests=requests, asset_events=events, dynamic_partitions_requests=adds, cursor=cursor.model_dump_json()
    )


def planner_sensor(registry: Registry) -> list[dg.SensorDefinition]:
    """``lakeops_planner`` over every table, or none without a ``maintenance_budget``."""
    budget = registry.maintenance_budget
    if budget is None or not registry.tables:
        return []
    keys = [operation_key(t, op) for t in registry.tables for op in maintained(t)]

    @dg.sensor(
        name="lakeops_planner",
        description=f"Each budget window ({budget.window}, {budget.length}): the most maintenance benefit within "
        f"{budget.core_minutes:g} core-minutes, then its review.",
        minimum_interval_seconds=PLANNER_INTERVAL_S,
        asset_selection=keys,
    )
    def evaluate(context: dg.SensorEvaluationContext, storage: StorageResource) -> dg.SensorResult:
        return evaluate_planner(registry, budget, context, storage, datetime.now(UTC))

    return [evaluate]
