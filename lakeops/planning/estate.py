"""The registry's tables as the planner sees them: each observed through :mod:`lakeops.api` dry runs
(what each operation would do now, under the table's policies, floors and consumer watermark),
its run history read from its audit records.

Only the registry keys the planner needs are read here, leniently (the orchestration layer
validates the whole file): the top-level ``maintenance_budget``, and per table ``compaction``
(``target_file_size``, ``min_input_files``, ``partitioned``), ``expiry`` and ``orphans``
(``older_than``, ``retain_last``: the retention floors) and ``cdc`` (``enabled``, ``output``,
``start_date``: the consumer whose watermark holds versions back).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from lakeops import api
from lakeops.audit import AuditRecord, read_records
from lakeops.errors import InvalidArgument, LakeopsError
from lakeops.ops.options import (
    CatalogOptions,
    CdcOptions,
    CheckpointOptions,
    CompactionOptions,
    ExpiryOptions,
    OrphansOptions,
)
from lakeops.ops.report import Report
from lakeops.ops.target import Target, resolve_target, table_root
from lakeops.planning.cost import CostModel, RunSample, samples_from_records
from lakeops.planning.models import CompactionWork, MaintenanceBudget, MaintenancePlan, TableObservation, metric_sum
from lakeops.planning.planner import plan
from lakeops.registry import RegisteredTable, registry_document
from lakeops.storage import StorageOptions
from lakeops.units import epoch_ms, parse_size

__all__ = ["PlannedTable", "audit_records", "load_estate", "observe", "plan_registry", "plan_tables", "run_history"]

#: Bytes a Delta checkpoint reads and writes per action it holds (a JSON action is about this long).
ACTION_BYTES = 512


class _Lenient(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class _Compaction(_Lenient):
    target_file_size: int | str | None = None
    min_input_files: int = 5
    partitioned: bool = False


class _Retention(_Lenient):
    older_than: str | None = None
    retain_last: int | None = None


class _Cdc(_Lenient):
    enabled: bool = False
    output: str | None = None
    start_date: date | None = None


class PlannedTable(RegisteredTable):
    """A registry entry: its address and the policies that bound what maintenance may do."""

    compaction: _Compaction = _Compaction()
    expiry: _Retention = _Retention()
    orphans: _Retention = _Retention()
    cdc: _Cdc = _Cdc()

    @property
    def catalog_options(self) -> CatalogOptions:
        if self.catalog is None:
            return CatalogOptions()
        return CatalogOptions(catalog_uri=self.catalog.uri, catalog_name=self.catalog.name)

    @property
    def address(self) -> str:
        return self.location or str(self.identifier)

    @property
    def pool(self) -> str:
        """The Dagster concurrency pool of the table's runs (one per table)."""
        return f"lakeops_{self.name}"


def load_estate(path: Path) -> tuple[MaintenanceBudget | None, list[PlannedTable]]:
    """The registry's ``maintenance_budget`` (None: absent) and its tables."""
    document = registry_document(path)
    try:
        raw_budget = document.get("maintenance_budget")
        budget = MaintenanceBudget.model_validate(raw_budget) if raw_budget is not None else None
        tables = [PlannedTable.model_validate(raw) for raw in document.get("tables") or []]
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in exc.errors())
        raise InvalidArgument(f"registry {path}: {problems}") from None
    return budget, tables


def _compaction(entry: PlannedTable, target: Target, so: StorageOptions) -> list[CompactionWork]:
    policy = entry.compaction
    size = parse_size(policy.target_file_size) if policy.target_file_size is not None else None
    base = entry.catalog_options.model_dump() | {"target_file_size": size, "min_input_files": policy.min_input_files}
    wheres: list[tuple[str | None, str | None]] = [(None, None)]
    if policy.partitioned:
        from lakeops.ops import partitions  # Iceberg's code with it: only for a partitioned policy

        health = partitions.partition_health(target, so)
        wheres = [
            (p.key, partitions.partition_where(target, p.key, storage_options=so))
            for p in health
            if p.small_files >= max(2, policy.min_input_files)  # the table's own policy, not the default
        ]
    work = []
    for key, where in wheres:
        report = api.compact(entry.address, CompactionOptions(**base, where=where), dry_run=True, storage_options=so)
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


def _expiry(entry: PlannedTable, so: StorageOptions, floor: int | None) -> dict[str, int]:
    options = entry.catalog_options.model_dump() | {
        "older_than": entry.expiry.older_than,
        "retain_last": entry.expiry.retain_last,
    }
    free = api.expire(entry.address, ExpiryOptions(**options), dry_run=True, storage_options=so)
    versions = _number(free, *_VERSIONS)
    held = 0
    if floor is not None and versions:
        kept = api.expire(
            entry.address, ExpiryOptions(**options, keep_from_version=floor), dry_run=True, storage_options=so
        )
        held = versions - _number(kept, *_VERSIONS)
    return {
        "expirable_versions": versions,
        "expirable_files": _number(free, *_FILES),
        "expirable_bytes": _number(free, "deleted_bytes"),
        "expirable_versions_held": max(held, 0),
    }


def _orphans(entry: PlannedTable, fmt: str, so: StorageOptions, floor: int | None) -> dict[str, int]:
    options = entry.catalog_options.model_dump() | {"older_than": entry.orphans.older_than}
    free = api.orphans(entry.address, OrphansOptions(**options), dry_run=True, storage_options=so)
    reclaimable = _number(free, "deleted_bytes")
    held = 0
    if floor is not None and reclaimable and fmt == "delta":  # Iceberg keeps what retained snapshots reach
        kept = api.orphans(
            entry.address, OrphansOptions(**options, keep_from_version=floor), dry_run=True, storage_options=so
        )
        held = reclaimable - _number(kept, "deleted_bytes")
    return {
        "listed_files": _number(free, "files_scanned", "objects_scanned"),
        "reclaimable_files": _number(free, "deleted_files"),
        "reclaimable_bytes": reclaimable,
        "reclaimable_bytes_held": max(held, 0),
    }


def _checkpoint(entry: PlannedTable, fmt: str, lag: int | None, so: StorageOptions) -> dict[str, int]:
    if fmt not in ("delta", "iceberg"):
        return {}
    report = api.checkpoint(
        entry.address, CheckpointOptions(**entry.catalog_options.model_dump()), dry_run=True, storage_options=so
    )
    if fmt == "iceberg":
        replaced = _number(report, "manifests_replaced")
        return {"checkpoint_lag": replaced, "checkpoint_bytes": _number(report, "replaced_bytes")}
    return {"checkpoint_lag": lag or 0, "checkpoint_bytes": _number(report, "actions") * ACTION_BYTES}


def _cdc(
    entry: PlannedTable, target: Target, fmt: str, so: StorageOptions, now_ms: int
) -> tuple[int | None, dict[str, int]]:
    """The consumer's floor (``keep_from_version``) and what it has not extracted yet."""
    output = entry.cdc.output
    if not entry.cdc.enabled or output is None or fmt not in ("delta", "iceberg"):
        return None, {}
    from lakeops.ops import consumers  # Iceberg's code with it: only for a table with a consumer

    start = entry.cdc.start_date or date(1970, 1, 1)
    since_ms = epoch_ms(datetime(start.year, start.month, start.day, tzinfo=UTC))
    floor = consumers.consumer_floor(target, output, since_ms=since_ms, storage_options=so)
    pending = consumers.pending_changes(target, output, since_ms=since_ms, until_ms=now_ms, storage_options=so)
    if pending is None:
        return floor, {}
    options = CdcOptions(
        **entry.catalog_options.model_dump(),
        from_version=pending.from_option,
        to_version=pending.to_option,
        output=output,
    )
    report = api.cdc(entry.address, options, dry_run=True, storage_options=so)
    return floor, {"cdc_lag_versions": pending.last - pending.first + 1, "cdc_bytes": _number(report, "source_bytes")}


def observe(
    entry: PlannedTable, storage_options: StorageOptions | None = None, *, pool_limit: int = 1
) -> TableObservation:
    """What each operation would do on ``entry`` now (dry runs only; nothing is written)."""
    so = storage_options or StorageOptions()
    target = resolve_target(entry.address, entry.catalog_options, so)
    report = api.inspect(entry.address, entry.catalog_options, storage_options=so)
    fmt = report.format
    floor, cdc = _cdc(entry, target, fmt, so, int(time.time() * 1000))
    return TableObservation(
        table=entry.name,
        format=fmt,
        pool=entry.pool,
        pool_limit=pool_limit,
        compaction=_compaction(entry, target, so),
        **_checkpoint(entry, fmt, report.table_state().checkpoint_lag, so),
        **_expiry(entry, so, floor),
        **_orphans(entry, fmt, so, floor),
        **cdc,
    )


def audit_records(entry: PlannedTable, storage_options: StorageOptions | None = None) -> list[AuditRecord]:
    """Every audit record of the table (:func:`lakeops.audit.read_records`)."""
    so = storage_options or StorageOptions()
    return read_records(table_root(resolve_target(entry.address, entry.catalog_options, so), so), so)


def run_history(entry: PlannedTable, storage_options: StorageOptions | None = None) -> list[RunSample]:
    """The table's audited runs of the planned operations, oldest first."""
    return samples_from_records(entry.name, audit_records(entry, storage_options))


def plan_tables(
    tables: Iterable[PlannedTable],
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
            observations.append(observe(entry, storage_options, pool_limit=(pool_limits or {}).get(entry.pool, 1)))
            history += run_history(entry, storage_options)
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
    budget, tables = load_estate(path)
    if budget is None and core_minutes is None:
        raise InvalidArgument(f"registry {path}: no maintenance_budget, and no budget given")
    if budget is None:
        budget = MaintenanceBudget(core_minutes=core_minutes or 1)
    elif core_minutes is not None:
        budget = budget.model_copy(update={"core_minutes": core_minutes})
    return plan_tables(tables, budget, storage_options=storage_options, name=str(path), on_table=on_table)
