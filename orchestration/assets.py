"""The assets generated for each registered table, grouped by table.

``<table>/table`` is the table itself, an observable source asset: observing it records the table's
``inspect`` numbers (small files, commits since the last checkpoint, snapshots, reclaimable bytes),
so its page plots the table's health over time, and runs its non-blocking health checks, one per
signal with the registry's thresholds (:mod:`orchestration.health`). Each maintenance operation is
an asset downstream of it — ``<table>/compaction``, ``checkpoint``, ``expiry``, ``orphans`` and
(when CDC is enabled) ``cdc`` — whose materialization runs the operation and records its report.
Each carries a blocking check computed from the report it just produced (:mod:`lakeops.ops.verify`);
a failed check fails the step, so nothing downstream runs on a table in doubt.

Versions: the table's data version is the last commit that changed its data
(:mod:`lakeops.ops.data_version`), so its maintenance shows as out of date ("Unsynced") when new
data landed, not after the maintenance's own commits. A maintenance asset's code version is the
registry policy it applies: a changed policy shows, and runs under one policy on the same data get
one data version (a run that found nothing to do changes nothing downstream).

Safety across runs: every maintenance asset of a table is in the concurrency pool
``lakeops_<table>``; the shipped ``dagster.yaml`` limits each pool to one *run* (pool granularity
``run``), so two maintenance runs never act on one table at once. Expiry and orphan removal keep
what the table's CDC consumer has not extracted yet (:func:`lakeops.ops.consumers.consumer_floor`).

Partitions: the CDC asset is partitioned by commit day (UTC) and backfilled as one run per range of
days; a run extracts every commit up to the end of its last day that the output does not hold yet
(:func:`lakeops.ops.consumers.pending_changes`), so re-runs and overlapping ranges write nothing
twice and a later day never leaves an earlier one out; a run records every earlier day it covered
that no run recorded yet, so the asset's days show as filled. A compaction with ``partitioned: true``
has one dynamic partition per table partition, kept current by the small-file sensor.
"""

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime

import dagster as dg

from lakeops.ops import consumers, partitions
from lakeops.ops.data_version import data_version
from lakeops.ops.health import signals_now, verdict
from lakeops.ops.table import Table
from lakeops.ops.verify import Verification
from lakeops.registry import Registry, TableEntry
from lakeops.storage.s3_leases import lease_scope
from orchestration import health, runs
from orchestration.maintenance import inspect, open_entry, report_metadata, run_maintenance
from orchestration.observation import record_after_run, record_overview
from orchestration.operations import SPECS, OperationSpec, RunScope, change_feed_unique, maintained
from orchestration.resources import SparkResource, StorageResource

__all__ = [
    "CHECKS",
    "MAINTENANCE",
    "MAX_REWRITE_BYTES_TAG",
    "check_key",
    "compaction_partitions",
    "health_check_keys",
    "maintenance_assets",
    "operation_key",
    "partitions_name",
    "pending_changes",
    "run_request",
    "table_asset",
    "table_key",
]

#: Asset name -> the ``lakeops`` command it runs.
MAINTENANCE: dict[str, str] = {name: spec.command for name, spec in SPECS.items()}

#: Run tag of a planned compaction piece: the run's ``max_rewrite_bytes`` (:mod:`lakeops.planning.split`).
MAX_REWRITE_BYTES_TAG = "lakeops/max_rewrite_bytes"

#: Asset name -> (check name, what it asserts).
CHECKS: dict[str, tuple[str, str]] = {name: (spec.check, spec.check_description) for name, spec in SPECS.items()}


def table_key(entry: TableEntry) -> dg.AssetKey:
    return dg.AssetKey([entry.name, "table"])


def operation_key(entry: TableEntry, operation: str) -> dg.AssetKey:
    return dg.AssetKey([entry.name, operation])


def check_key(entry: TableEntry, operation: str) -> dg.AssetCheckKey:
    """The blocking check of ``entry``'s ``operation`` asset."""
    return dg.AssetCheckKey(operation_key(entry, operation), CHECKS[operation][0])


def health_check_keys(entry: TableEntry) -> list[dg.AssetCheckKey]:
    """The health checks of ``entry``'s observation, one per signal that applies to it."""
    return [dg.AssetCheckKey(table_key(entry), name) for name in entry.health_limits()]


def run_request(
    entry: TableEntry,
    operations: Sequence[str],
    *,
    run_key: str | None = None,
    partition_key: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> dg.RunRequest:
    """A run of ``entry``'s ``operations`` assets (``table``: the observation) with their checks
    (blocking; the observation's health checks), tagged ``lakeops/table``. Sensors and schedules
    request one table's assets from jobs and selections that hold many; an asset with checks cannot
    be launched without them, and the UI's "Apply requests" launches exactly the request's selection.
    Tagged ``lakeops/operation`` too, so the Runs page says (and filters by) what each run was for."""
    return dg.RunRequest(
        run_key=run_key,
        asset_selection=[operation_key(entry, op) for op in operations],
        asset_check_keys=[
            *(check_key(entry, op) for op in operations if op in CHECKS),
            *(health_check_keys(entry) if "table" in operations else []),
        ],
        partition_key=partition_key,
        tags={"lakeops/table": entry.name, "lakeops/operation": ",".join(operations), **(tags or {})},
    )


def partitions_name(entry: TableEntry) -> str:
    """The dynamic partitions (one per table partition) of a partitioned compaction."""
    return f"{entry.name}_partitions"


def compaction_partitions(entry: TableEntry) -> dg.DynamicPartitionsDefinition:
    return dg.DynamicPartitionsDefinition(name=partitions_name(entry))


def _cdc_partitions(entry: TableEntry) -> dg.DailyPartitionsDefinition:
    assert entry.cdc.start_date is not None  # the registry requires it when CDC is enabled
    # end_offset=1: today's partition exists, so the CDC sensor can extract today's commits.
    return dg.DailyPartitionsDefinition(start_date=entry.cdc.start_date.isoformat(), end_offset=1, timezone="UTC")


def table_asset(entry: TableEntry, registry: Registry) -> dg.AssetsDefinition:
    """``<table>/table``: observations record its health, and run its health checks; each one rebuilds
    the overview of ``registry``."""
    key = table_key(entry)

    @dg.multi_observable_source_asset(
        name=f"{entry.name}__table",
        specs=[
            dg.AssetSpec(
                key,
                group_name=entry.name,
                description=entry.description or f"The table at {entry.location or entry.identifier} ({entry.format}).",
                tags=entry.tags,
            )
        ],
        check_specs=health.check_specs(entry, key),
    )
    def observe(context: dg.AssetExecutionContext, storage: StorageResource) -> Iterator[dg.ObserveResult]:
        with lease_scope():  # one handle for the observation: the table detected and read once
            observation = observe_table(context.instance, entry, storage)
        context.log.info(observation.summary())
        yield dg.ObserveResult(
            asset_key=key,
            metadata=observation.metadata,
            data_version=dg.DataVersion(observation.version) if observation.version is not None else None,
            check_results=observation.checks,
        )
        record_overview(context, registry, observation)
        if observation.error is not None:  # recorded as the table's health ("error reading"); the run fails
            raise observation.error

    return observe


def observe_table(
    instance: dg.DagsterInstance,
    entry: TableEntry,
    storage: StorageResource,
    table: Table | None = None,
    *,
    just_ran: str | None = None,
) -> health.Observation:
    """Look at ``entry``'s table (``table``'s handle, else one opened here) now: its numbers, data
    version, health verdict and checks. ``just_ran``: the operation of the successful run recording
    this observation, counted as run now (its run has not ended, so the instance does not count it)."""
    key = table_key(entry)
    now = datetime.now(UTC)
    try:
        handle = table or open_entry(entry, storage)
        report = inspect(entry, storage, handle)
        with storage.credentials():
            version = data_version(handle)
        pending = pending_changes(entry, storage, now, handle) if entry.cdc.enabled else None
    except Exception as exc:
        metadata, results = health.unreadable(key, entry, exc)
        return health.Observation(entry, key, now.timestamp(), metadata, results, error=exc)
    last_runs = health.last_success_times(instance, {op: operation_key(entry, op) for op in maintained(entry)})
    if just_ran is not None:
        last_runs[just_ran] = now.timestamp()
    signals = signals_now(
        report, entry.health_limits(), now=now.timestamp(), cdc=entry.cdc.enabled, pending=pending, last_runs=last_runs
    )
    return health.Observation(
        entry,
        key,
        now.timestamp(),
        report_metadata(report) | health.health_metadata(report.format, verdict(signals), signals),
        health.check_results(key, signals),
        version=version,
        last_runs=last_runs,
    )


def pending_changes(
    entry: TableEntry, storage: StorageResource, until: datetime, table: Table | None = None
) -> consumers.PendingRange | None:
    """The commits of ``entry``'s table (``table``'s handle, else one opened here) before ``until``
    that its CDC output does not hold yet."""
    handle = table or open_entry(entry, storage)
    with storage.credentials():
        return runs.pending_until(entry, handle, until, storage.options())


def _maintenance_asset(entry: TableEntry, operation: str, registry: Registry) -> dg.AssetsDefinition:
    spec = SPECS[operation]
    key = operation_key(entry, operation)
    partitioned = operation == "compaction" and entry.compaction.partitioned
    partitions_def: dg.PartitionsDefinition | None = (
        compaction_partitions(entry) if partitioned else _cdc_partitions(entry) if operation == "cdc" else None
    )

    @dg.asset(
        key=key,
        group_name=entry.name,
        deps=[table_key(entry)],
        description=f"lakeops {spec.command} of {entry.address}.",
        owners=entry.owners,
        tags=entry.tags,
        kinds={"spark", entry.format} if entry.format != "auto" else {"spark"},
        pool=entry.pool,
        partitions_def=partitions_def,
        backfill_policy=dg.BackfillPolicy.single_run() if operation == "cdc" else None,
        freshness_policy=health.cdc_freshness(entry) if operation == "cdc" else None,
        code_version=spec.code_version(entry),
        check_specs=[dg.AssetCheckSpec(spec.check, asset=key, description=spec.check_description, blocking=True)],
    )
    def maintain(
        context: dg.AssetExecutionContext, spark: SparkResource, storage: StorageResource
    ) -> Iterator[dg.MaterializeResult]:
        with lease_scope():  # one handle for the run: the table detected once, a REST catalog's keys for it alone
            table = open_entry(entry, storage)
            succeeded = False
            try:
                if operation != "cdc":
                    outcome = _run(
                        context, entry, spec, table, _scope(context, entry, table, partitioned, storage), spark, storage
                    )
                else:
                    outcome = _extract(context, entry, spec, table, partitions_def, spark, storage)
                succeeded = all(check.passed for check in outcome.check_results or [])
                yield outcome
            finally:  # the table as the run left it, whatever the run's outcome: its health is current
                table.refresh()
                ran = operation if succeeded else None
                observation = observe_table(context.instance, entry, storage, table, just_ran=ran)
                record_after_run(context, observation, registry, operation=operation)

    return maintain


def _extract(
    context: dg.AssetExecutionContext,
    entry: TableEntry,
    spec: OperationSpec,
    table: Table,
    partitions_def: dg.PartitionsDefinition | None,
    spark: SparkResource,
    storage: StorageResource,
) -> dg.MaterializeResult:
    """A CDC run: the commits of its days that the output does not hold yet, or none left to extract."""
    assert isinstance(partitions_def, dg.DailyPartitionsDefinition)
    until = context.partition_time_window.end
    pending = pending_changes(entry, storage, until, table)
    if pending is None:
        context.log.info(f"no commits before {until.isoformat()} left to extract")
        outcome = _nothing_to_extract(context, entry, spec, storage)
    else:
        outcome = _run(context, entry, spec, table, RunScope(pending=pending), spark, storage)
    if all(check.passed for check in outcome.check_results or []):
        _record_covered_days(context, entry, partitions_def)
    return outcome


def _scope(
    context: dg.AssetExecutionContext, entry: TableEntry, table: Table, partitioned: bool, storage: StorageResource
) -> RunScope:
    """What this run covers: its partition of a partitioned compaction, and the planner's piece."""
    tag = context.run.tags.get(MAX_REWRITE_BYTES_TAG)
    where = None
    if partitioned:
        with storage.credentials():
            where = partitions.partition_where(table, context.partition_key, storage_options=storage.options())
    return RunScope(where=where, max_rewrite_bytes=int(tag) if tag is not None else None)


def _run(
    context: dg.AssetExecutionContext,
    entry: TableEntry,
    spec: OperationSpec,
    table: Table,
    scope: RunScope,
    spark: SparkResource,
    storage: StorageResource,
) -> dg.MaterializeResult:
    """The operation on ``table`` with the options its policy and ``scope`` give, its report as
    metadata and its check, computed from the table re-read."""
    with storage.credentials():
        options = spec.options(entry, table, scope)
    report = run_maintenance(context, entry, spec.command, spec.run, table, options, spark, storage)
    with storage.credentials():
        result = spec.verify(entry, table, report)
    return dg.MaterializeResult(metadata=report_metadata(report), check_results=[_check_result(spec.check, result)])


def _record_covered_days(
    context: dg.AssetExecutionContext, entry: TableEntry, days: dg.DailyPartitionsDefinition
) -> None:
    """Record as materialized every day up to this run's last one that nothing recorded yet: the
    output now holds every change committed before that day's end, so those days are complete. The
    run's own days Dagster records itself (one materialization per day of a range, as for any
    single-run backfill); a run for today after weeks without one extracted those weeks too, and
    their days must not show as missing."""
    last = context.partition_key_range.end
    recorded = context.instance.get_materialized_partitions(context.asset_key) | set(context.partition_keys)
    covered = [day for day in days.get_partition_keys() if day <= last and day not in recorded]
    if not covered:
        return
    first = context.partition_key_range.start
    run = last if first == last else f"{first}..{last}"
    summary = dg.MetadataValue.md(
        f"Extracted by the run for {run}: the output holds every change of `{entry.address}` committed "
        f"before the end of {last} (UTC)."
    )
    for day in covered:
        context.log_event(
            dg.AssetMaterialization(asset_key=context.asset_key, partition=day, metadata={"summary": summary})
        )
    context.log.info(f"recorded {len(covered)} earlier day(s) this run covered: {covered[0]}..{covered[-1]}")


def _check_result(name: str, verification: Verification) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name=name,
        passed=verification.passed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=verification.summary,
        metadata={k: v for k, v in verification.details.items()},
    )


def _nothing_to_extract(
    context: dg.AssetExecutionContext, entry: TableEntry, spec: OperationSpec, storage: StorageResource
) -> dg.MaterializeResult:
    """A CDC partition whose commits are all extracted already (or that has none): the output is
    unchanged, and still checked."""
    with storage.credentials():
        result = change_feed_unique(entry, storage.options())
    return dg.MaterializeResult(
        metadata={
            "rows_written": dg.MetadataValue.int(0),
            "summary": dg.MetadataValue.md(
                f"No commits of `{entry.address}` left to extract before "
                f"{context.partition_time_window.end:%Y-%m-%d %H:%M} UTC."
            ),
        },
        check_results=[_check_result(spec.check, result)],
    )


def maintenance_assets(entry: TableEntry, registry: Registry) -> list[dg.AssetsDefinition]:
    """One asset per maintenance operation that applies to ``entry`` (CDC only when enabled); each run
    rebuilds the overview of ``registry`` with the table's observation afterwards."""
    return [_maintenance_asset(entry, op, registry) for op in maintained(entry)]
