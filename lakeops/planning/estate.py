"""The registry's tables as the planner sees them: each observed through :mod:`lakeops.api` dry runs
(what each operation would do now, under the table's policies, floors and consumer watermark),
its run history read from its audit records (its cdc runs' from its change table's). Each table is
opened once per pass (:func:`lakeops.ops.table.open_table`) and every dry run of the pass takes that
handle, so the table is detected once and its state read once.

The registry is validated whole, by the schema the Dagster definitions load it with
(:func:`lakeops.registry.load_registry`): a file Dagster refuses is refused here too, before any table
is read. The planner uses the top-level ``maintenance_budget``, and per table ``compaction``
(``target_file_size``, ``min_input_files``, ``partitioned``), ``expiry`` and ``orphans``
(``older_than``, ``retain_last``: the retention floors) and ``cdc`` (``enabled``, ``output``,
``start_date``: the consumer whose watermark holds versions back).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from lakeops import api
from lakeops.audit import AuditRecord, read_records
from lakeops.errors import LakeopsError, UsageError
from lakeops.ops.options import (
    CatalogOptions,
    CdcOptions,
    CheckpointOptions,
    CompactionOptions,
    ExpiryOptions,
    OrphansOptions,
)
from lakeops.ops.report import Report
from lakeops.ops.table import Table, open_table
from lakeops.ops.target import resolve_output
from lakeops.planning.cost import CostModel, RunSample, samples_from_records
from lakeops.planning.models import CompactionWork, MaintenancePlan, TableObservation, metric_sum
from lakeops.planning.planner import plan
from lakeops.registry import MaintenanceBudget, TableEntry, load_registry
from lakeops.storage import StorageOptions
from lakeops.storage.s3_leases import lease_scope

__all__ = ["audit_records", "observe", "open_entry", "plan_registry", "plan_tables", "run_history"]

#: Bytes a Delta checkpoint reads and writes per action it holds (a JSON action is about this long).
ACTION_BYTES = 512


def _catalog(entry: TableEntry) -> CatalogOptions:
    return CatalogOptions.model_validate(entry.catalog_options())


def _compaction(entry: TableEntry, table: Table) -> list[CompactionWork]:
    policy = entry.compaction
    base = _catalog(entry).model_dump() | policy.run_options()
    wheres: list[tuple[str | None, str | None]] = [(None, None)]
    if policy.partitioned:
        from lakeops.ops import partitions  # Iceberg's code with it: only for a partitioned policy

        health = partitions.partition_health(table)
        wheres = [
            (p.key, partitions.partition_where(table, p.key))
            for p in health
            if p.small_files >= max(2, policy.min_input_files)  # the table's own policy, not the default
        ]
    work = []
    for key, where in wheres:
        report = api.compact(table, CompactionOptions(**base, where=where), dry_run=True)
        if report.files_removed:
            # A dry run writes nothing: the files it would write are its groups, each a file per target size.
            target_size = report.target_file_size or 1
            added = max(report.groups, -(-report.bytes_removed // target_size))
            work.append(
                CompactionWork(
                    partition=key,
                    files_removed=report.files_removed,
                    bytes_removed=report.bytes_removed,
                    files_added=added,
                )
            )
    return work


def _number(report: Report, *names: str) -> int:
    return metric_sum(report.metrics(), *names)


_VERSIONS = ("deleted_commits", "snapshots_expired")
_FILES = ("deleted_files", "deleted_branch_files")


def _expiry(entry: TableEntry, table: Table, floor: int | None) -> dict[str, int]:
    options = _catalog(entry).model_dump() | {
        "older_than": entry.expiry.older_than,
        "retain_last": entry.expiry.retain_last,
    }
    free = api.expire(table, ExpiryOptions(**options), dry_run=True)
    versions = _number(free, *_VERSIONS)
    held = 0
    if floor is not None and versions:
        kept = api.expire(table, ExpiryOptions(**options, keep_from_version=floor), dry_run=True)
        held = versions - _number(kept, *_VERSIONS)
    return {
        "expirable_versions": versions,
        "expirable_files": _number(free, *_FILES),
        "expirable_bytes": _number(free, "deleted_bytes"),
        "expirable_versions_held": max(held, 0),
    }


def _orphans(entry: TableEntry, table: Table, fmt: str, floor: int | None) -> dict[str, int]:
    options = _catalog(entry).model_dump() | {"older_than": entry.orphans.older_than}
    free = api.orphans(table, OrphansOptions(**options), dry_run=True)
    reclaimable = _number(free, "deleted_bytes")
    held = 0
    if floor is not None and reclaimable and fmt == "delta":  # Iceberg keeps what retained snapshots reach
        kept = api.orphans(table, OrphansOptions(**options, keep_from_version=floor), dry_run=True)
        held = reclaimable - _number(kept, "deleted_bytes")
    return {
        "listed_files": _number(free, "files_scanned", "objects_scanned"),
        "reclaimable_files": _number(free, "deleted_files"),
        "reclaimable_bytes": reclaimable,
        "reclaimable_bytes_held": max(held, 0),
    }


def _checkpoint(entry: TableEntry, table: Table, fmt: str, lag: int | None) -> dict[str, int]:
    if fmt not in ("delta", "iceberg"):
        return {}
    report = api.checkpoint(table, CheckpointOptions(**_catalog(entry).model_dump()), dry_run=True)
    if fmt == "iceberg":
        replaced = _number(report, "manifests_replaced")
        return {"checkpoint_lag": replaced, "checkpoint_bytes": _number(report, "replaced_bytes")}
    return {"checkpoint_lag": lag or 0, "checkpoint_bytes": _number(report, "actions") * ACTION_BYTES}


def _cdc(entry: TableEntry, table: Table, fmt: str, now_ms: int) -> tuple[int | None, dict[str, int]]:
    """The consumer's floor (``keep_from_version``) and what it has not extracted yet."""
    output = entry.cdc.output
    if not entry.cdc.enabled or output is None or fmt not in ("delta", "iceberg"):
        return None, {}
    from lakeops.ops import consumers  # Iceberg's code with it: only for a table with a consumer

    since_ms = entry.cdc.since_ms
    so = table.storage_options
    floor = consumers.consumer_floor(table, output, since_ms=since_ms, storage_options=so)
    pending = consumers.pending_changes(table, output, since_ms=since_ms, until_ms=now_ms, storage_options=so)
    if pending is None:
        return floor, {}
    options = CdcOptions(
        **_catalog(entry).model_dump(),
        from_version=pending.from_option,
        to_version=pending.to_option,
        output=output,
    )
    report = api.cdc(table, options, dry_run=True)
    return floor, {"cdc_lag_versions": pending.last - pending.first + 1, "cdc_bytes": _number(report, "source_bytes")}


def open_entry(entry: TableEntry, storage_options: StorageOptions | None = None) -> Table:
    """A handle on ``entry``'s table (its address and catalog), for one planner pass."""
    return open_table(entry.address, _catalog(entry), storage_options=storage_options)


def observe(
    entry: TableEntry,
    storage_options: StorageOptions | None = None,
    *,
    pool_limit: int = 1,
    table: Table | None = None,
) -> TableObservation:
    """What each operation would do on ``entry`` now (dry runs only; nothing is written), every dry
    run on one handle (``table``, else one opened here): the table is detected and read once."""
    table = table or open_entry(entry, storage_options)
    report = api.inspect(table)
    fmt = report.format
    floor, cdc = _cdc(entry, table, fmt, int(time.time() * 1000))
    return TableObservation(
        table=entry.name,
        format=fmt,
        pool=entry.pool,
        pool_limit=pool_limit,
        compaction=_compaction(entry, table),
        **_checkpoint(entry, table, fmt, report.table_state().checkpoint_lag),
        **_expiry(entry, table, floor),
        **_orphans(entry, table, fmt, floor),
        **cdc,
    )


def audit_records(
    entry: TableEntry, storage_options: StorageOptions | None = None, *, table: Table | None = None
) -> list[AuditRecord]:
    """The audit records of the table's runs (:func:`lakeops.audit.read_records`), oldest first: its
    own, found at the root of ``table`` (else of a handle opened here), and its cdc runs, which are
    recorded under its ``cdc.output`` naming it as their source. A record under the table naming a
    source is that source's run (this table is its change table)."""
    handle = table or open_entry(entry, storage_options)
    root, so = handle.root, handle.storage_options
    records = [r for r in read_records(root, so) if r.source is None]
    if entry.cdc.output is not None:
        records += [
            r
            for r in read_records(resolve_output(entry.cdc.output), so)
            if r.command == "cdc" and (r.source_root == root or r.source == entry.address)
        ]
    return sorted(records, key=lambda r: r.finished_at)


def run_history(
    entry: TableEntry, storage_options: StorageOptions | None = None, *, table: Table | None = None
) -> list[RunSample]:
    """The table's audited runs of the planned operations, oldest first."""
    return samples_from_records(entry.name, audit_records(entry, storage_options, table=table))


def plan_tables(
    tables: Iterable[TableEntry],
    budget: MaintenanceBudget,
    *,
    storage_options: StorageOptions | None = None,
    deferred: Mapping[str, int] | None = None,
    pool_limits: Mapping[str, int] | None = None,
    name: str = "registry",
    on_table: Callable[[str], Any] | None = None,
) -> MaintenancePlan:
    """The ranked plan over ``tables``: each observed and its history read; a table that cannot be
    read is listed as unreadable and planned for no more."""
    observations: list[TableObservation] = []
    history: list[RunSample] = []
    unreadable: dict[str, str] = {}
    for entry in tables:
        if on_table is not None:
            on_table(entry.name)
        try:
            with lease_scope():  # a REST catalog's keys for the table serve its whole pass, then end
                table = open_entry(entry, storage_options)
                limit = (pool_limits or {}).get(entry.pool, 1)
                observations.append(observe(entry, pool_limit=limit, table=table))
                history += run_history(entry, table=table)
        except LakeopsError as exc:
            unreadable[entry.name] = f"{type(exc).__name__}: {exc}"
    costs = CostModel(budget, history)
    return plan(observations, budget, costs, deferred=deferred, table=name, unreadable=unreadable)


def plan_registry(
    path: Path,
    *,
    core_minutes: float | None = None,
    storage_options: StorageOptions | None = None,
    on_table: Callable[[str], Any] | None = None,
) -> MaintenancePlan:
    """:func:`plan_tables` over the registry at ``path`` within its ``maintenance_budget``
    (``core_minutes`` overrides its core-minutes)."""
    registry = load_registry(path)
    budget, tables = registry.maintenance_budget, registry.tables
    if budget is None and core_minutes is None:
        raise UsageError(
            f"registry {path}: no maintenance_budget, and no budget given (add maintenance_budget: "
            "{core_minutes: N} to the registry, or pass --budget)"
        )
    if budget is None:
        budget = MaintenanceBudget(core_minutes=core_minutes or 1)
    elif core_minutes is not None:
        budget = budget.model_copy(update={"core_minutes": core_minutes})
    return plan_tables(tables, budget, storage_options=storage_options, name=str(path), on_table=on_table)
