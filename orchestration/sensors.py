"""Sensors that request maintenance when a table needs it, one sensor per kind over every table.

- ``lakeops_small_files``: compaction when a table's mergeable small files reach its
  ``small_file_trigger`` (or their share of live files reaches ``fragment_ratio_trigger``); for a
  partitioned compaction, per table partition, registering new partitions as it finds them.
- ``lakeops_checkpoints``: a checkpoint (Delta) or manifest rewrite (Iceberg) once
  ``checkpoint.interval`` commits landed since the last one.
- ``lakeops_cdc``: change extraction when commits the CDC output does not hold exist; it requests
  today's partition, which extracts everything pending. On a table without new commits it requests
  that partition once the last extraction is half the CDC freshness window old (the table's
  ``cdc_lag_time`` warning): the run finds nothing to extract and records the output as current,
  so a quiet table's output does not fail its freshness policy.

Each opens every table once per tick (:func:`orchestration.maintenance.open_entry`): one format
detection and one read of its state serve the whole decision. Each keeps, in its cursor, the table
state (version or snapshot) it last requested a run for, so an
unchanged table is not requested twice; run keys carry the table and the same state, so Dagster
drops a duplicate request even if the cursor is lost. A table that cannot be read is logged and
skipped — one broken table never stops the sensor for the others, nor crashes the daemon.

A sensor targets the asset selection of its tables, not a job: one job cannot hold assets of
different partitions (each table's CDC days start on its own date, each partitioned compaction has
its own dynamic partitions), while Dagster's implicit asset job, where selection runs go, can. Each
request selects one table's asset *and* its blocking check (an asset with checks cannot be launched
without them: the UI's "Apply requests" sends exactly the request's selection) and is tagged
``lakeops/table``.
"""

import json
from collections.abc import Callable
from datetime import UTC, datetime

import dagster as dg

from lakeops.ops import partitions
from lakeops.redaction import mask_text
from lakeops.registry import Registry, TableEntry
from lakeops.storage.s3_leases import lease_scope
from orchestration.assets import operation_key, partitions_name, pending_changes, run_request
from orchestration.maintenance import inspect, open_entry
from orchestration.resources import StorageResource

__all__ = ["INTERVAL_S", "maintenance_sensors"]

#: Seconds between evaluations of each sensor (each inspects every table it covers).
INTERVAL_S = 60

#: What a sensor decides for one table: the run requests, dynamic partitions to add, the new state.
Decision = tuple[list[dg.RunRequest], list[dg.AddDynamicPartitionsRequest], str | None]


def _request(
    entry: TableEntry, operation: str, state: list[str], tags: dict[str, str], partition_key: str | None = None
) -> dg.RunRequest:
    """A run of ``entry``'s ``operation``, keyed by the table, the operation and ``state`` (the
    partition and table state it is for)."""
    run_key = ":".join([entry.name, operation, *state])
    return run_request(entry, [operation], run_key=run_key, partition_key=partition_key, tags=tags)


def _small_files(entry: TableEntry, storage: StorageResource, context: dg.SensorEvaluationContext) -> Decision:
    table = open_entry(entry, storage)  # the inspection and the partitions read the table once
    report = inspect(entry, storage, table)
    state = report.state_version
    policy = entry.compaction
    if policy.partitioned:
        with storage.credentials():
            health = partitions.partition_health(table)
        name = partitions_name(entry)
        known = set(context.instance.get_dynamic_partitions(name))
        new = [p.key for p in health if p.key not in known]
        adds = [dg.AddDynamicPartitionsRequest(partitions_def_name=name, partition_keys=new)] if new else []
        requests = [
            _request(entry, "compaction", [p.key, state], {"lakeops/small_files": str(p.small_files)}, p.key)
            for p in health
            # The table's own min_input_files decides what compaction merges, not the default.
            if p.small_files >= max(policy.small_file_trigger, policy.min_input_files)
        ]
        return requests, adds, state
    observed = report.table_state()  # small files: Icechunk's packable chunk objects
    small, ratio = observed.small_files, observed.small_file_ratio
    due = small >= policy.small_file_trigger or (
        policy.fragment_ratio_trigger is not None and small > 1 and ratio >= policy.fragment_ratio_trigger
    )
    tags = {"lakeops/small_files": str(small)}
    return ([_request(entry, "compaction", [state], tags)] if due else []), [], state


def _checkpoints(entry: TableEntry, storage: StorageResource, context: dg.SensorEvaluationContext) -> Decision:
    report = inspect(entry, storage)
    lag = report.table_state().checkpoint_lag
    state = report.state_version
    if lag is None or lag < entry.checkpoint.interval:  # Icechunk has no checkpoints: lag is None
        return [], [], state
    tags = {"lakeops/commits_since_checkpoint": str(lag)}
    return [_request(entry, "checkpoint", [state], tags)], [], state


def _cdc(entry: TableEntry, storage: StorageResource, context: dg.SensorEvaluationContext) -> Decision:
    now = datetime.now(UTC)
    if entry.cdc.start_date is not None and now.date() < entry.cdc.start_date:
        return [], [], None  # no day to request yet: one invalid partition would fail the whole tick
    pending = pending_changes(entry, storage, now)
    if pending is None:
        return _confirm_current(entry, context, now), [], None
    tags = {"lakeops/pending_versions": f"{pending.first}..{pending.last}"}
    return [_request(entry, "cdc", [str(pending.last)], tags, now.strftime("%Y-%m-%d"))], [], str(pending.last)


def _confirm_current(entry: TableEntry, context: dg.SensorEvaluationContext, now: datetime) -> list[dg.RunRequest]:
    """A run of today's CDC partition when the last extraction is older than half the freshness
    warning (or failure) window; none before the first (freshness is unknown until then)."""
    limit = entry.health_limits()["cdc_lag_time"]
    window = limit.warn if limit.warn is not None else limit.error
    last = context.instance.get_latest_materialization_event(operation_key(entry, "cdc"))
    if window is None or last is None or now.timestamp() - last.timestamp < window / 2:
        return []
    tags = {"lakeops/confirm": "no_pending_commits"}
    return [_request(entry, "cdc", ["confirm", str(int(last.timestamp))], tags, now.strftime("%Y-%m-%d"))]


def _sensor(
    name: str,
    description: str,
    operation: str,
    tables: list[TableEntry],
    decide: Callable[[TableEntry, StorageResource, dg.SensorEvaluationContext], Decision],
) -> dg.SensorDefinition:
    keys = [operation_key(t, operation) for t in tables]

    @dg.sensor(name=name, description=description, minimum_interval_seconds=INTERVAL_S, asset_selection=keys)
    def evaluate(context: dg.SensorEvaluationContext, storage: StorageResource) -> dg.SensorResult:
        cursor: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        requests: list[dg.RunRequest] = []
        adds: list[dg.AddDynamicPartitionsRequest] = []
        for entry in tables:
            try:
                with lease_scope():  # a REST catalog's keys for the table serve this decision only
                    table_requests, table_adds, state = decide(entry, storage, context)
            except Exception as exc:  # noqa: BLE001 - one unreadable table must not stop the others
                context.log.warning(
                    mask_text(f"{entry.name} ({entry.address}): skipped, cannot read it: {type(exc).__name__}: {exc}")
                )
                continue
            adds += table_adds
            if state is not None and cursor.get(entry.name) == state:
                continue  # requested for this very state already
            for request in table_requests:
                context.log.info(f"{entry.name}: requesting {request.run_key} {request.tags}")
            requests += table_requests
            if table_requests and state is not None:
                cursor[entry.name] = state
        return dg.SensorResult(run_requests=requests, dynamic_partitions_requests=adds, cursor=json.dumps(cursor))

    return evaluate


def maintenance_sensors(registry: Registry) -> list[dg.SensorDefinition]:
    """The three sensors, over the tables each applies to (none when no table qualifies)."""
    kinds = [
        ("lakeops_small_files", "Compaction when a table has enough small files to merge.", "compaction", _small_files),
        (
            "lakeops_checkpoints",
            "Checkpoint when enough commits landed since the last one.",
            "checkpoint",
            _checkpoints,
        ),
        ("lakeops_cdc", "Extract the changes the CDC output does not hold yet.", "cdc", _cdc),
    ]
    sensors = []
    for name, text, operation, decide in kinds:
        tables = [t for t in registry.tables if operation != "cdc" or t.cdc.enabled]
        if tables:
            sensors.append(_sensor(name, text, operation, tables, decide))
    return sensors
