"""Each maintenance operation as the orchestrators run it: one :class:`OperationSpec` per operation, the same
for a Dagster asset (:mod:`orchestration.assets`) and an Airflow task (:mod:`orchestration.airflow.operator`).

A spec names the asset, the ``lakeops`` command it is (descriptions and log lines), its blocking
check, the :mod:`lakeops.api` function that runs it, how its typed options follow from the table's
registry policy and from what the run was asked to cover (a :class:`RunScope`: a partition, a
planned piece, a CDC range), how its report is verified against the table re-read
(:mod:`lakeops.ops.verify`), and which policy is its code version. The assets
and the Airflow DAGs hold no operation's particulars: adding an operation is adding a spec.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lakeops import api
from lakeops.ops import consumers, verify
from lakeops.ops.consumers import PendingRange
from lakeops.ops.options import (
    CatalogOptions,
    CdcOptions,
    CheckpointOptions,
    CompactionOptions,
    ExpiryOptions,
    OrphansOptions,
)
from lakeops.ops.report import Report
from lakeops.ops.table import Table
from lakeops.ops.verify import Verification
from lakeops.registry import TableEntry
from lakeops.storage import StorageOptions

__all__ = ["SPECS", "OperationSpec", "RunScope", "change_feed_unique", "maintained"]


@dataclass(frozen=True)
class RunScope:
    """What one run covers beyond its table's policy: a partitioned compaction's ``where``, a planned
    piece's ``max_rewrite_bytes`` (:mod:`lakeops.planning.split`), a CDC run's ``pending`` range."""

    where: str | None = None
    max_rewrite_bytes: int | None = None
    pending: PendingRange | None = None


@dataclass(frozen=True)
class OperationSpec:
    """One maintenance operation: asset ``name``, ``command`` (as ``lakeops`` names it), its blocking
    ``check``, the API function it ``run``\\ s, and how its options, verification and code version follow
    from the registry entry."""

    name: str
    command: str
    check: str
    check_description: str
    run: Callable[..., Report]
    options: Callable[[TableEntry, Table, RunScope], CatalogOptions]
    verify: Callable[[TableEntry, Table, Report], Verification]
    policy: Callable[[TableEntry], dict[str, Any]]
    applies: Callable[[TableEntry], bool] = lambda entry: True

    def code_version(self, entry: TableEntry) -> str:
        """The registry policy a run applies, as its code version (the sensors' triggers are not part
        of it: they decide when a run happens, not what it does)."""
        policy = self.policy(entry)
        return ", ".join(f"{k}={v}" for k, v in sorted(policy.items()) if v not in (None, [])) or "defaults"


def _retention_floor(entry: TableEntry, table: Table) -> dict[str, Any]:
    """``keep_from_version`` for a table whose CDC consumer still needs versions (consumer-aware retention)."""
    if not entry.cdc.enabled:
        return {}
    assert entry.cdc.output is not None
    floor = consumers.consumer_floor(
        table, entry.cdc.output, since_ms=entry.cdc.since_ms, storage_options=table.storage_options
    )
    return {"keep_from_version": floor}


def _retention_policy(entry: TableEntry, policy: dict[str, Any]) -> dict[str, Any]:
    return policy | {"keep_unextracted_of": entry.cdc.output}  # consumer-aware retention (None: CDC off)


def _kept_rows(entry: TableEntry, table: Table, report: Report) -> Verification:
    return verify.compaction_kept_rows(table.target, report, table.storage_options)


def _matches_log(entry: TableEntry, table: Table, report: Report) -> Verification:
    return verify.checkpoint_matches_log(table.target, report, table.storage_options)


def _files_exist(entry: TableEntry, table: Table, report: Report) -> Verification:
    return verify.retained_files_exist(table.target, table.storage_options)


SPECS: dict[str, OperationSpec] = {
    spec.name: spec
    for spec in (
        OperationSpec(
            name="compaction",
            command="compact",
            check="rows_kept",
            check_description="the rewritten files hold the same live rows and read back",
            run=api.compact,
            options=lambda entry, table, scope: CompactionOptions(
                **entry.compaction.run_options(), where=scope.where, max_rewrite_bytes=scope.max_rewrite_bytes
            ),
            verify=_kept_rows,
            policy=lambda entry: entry.compaction.run_options() | {"partitioned": entry.compaction.partitioned},
        ),
        OperationSpec(
            name="checkpoint",
            command="checkpoint",
            check="matches_log",
            check_description="the checkpoint (manifests) reconstruct the same state as the log",
            run=api.checkpoint,
            options=lambda entry, table, scope: CheckpointOptions(),
            verify=_matches_log,
            policy=lambda entry: {},
        ),
        OperationSpec(
            name="expiry",
            command="expire",
            check="retained_files_exist",
            check_description="every file a retained version references exists",
            run=api.expire,
            options=lambda entry, table, scope: ExpiryOptions(
                older_than=entry.expiry.older_than,
                retain_last=entry.expiry.retain_last,
                **_retention_floor(entry, table),
            ),
            verify=_files_exist,
            policy=lambda entry: _retention_policy(entry, entry.expiry.model_dump()),
        ),
        OperationSpec(
            name="orphans",
            command="orphans",
            check="retained_files_exist",
            check_description="every file a retained version references exists",
            run=api.orphans,
            # Iceberg orphan removal never deletes what a retained snapshot reaches: no floor needed.
            options=lambda entry, table, scope: OrphansOptions(
                older_than=entry.orphans.older_than,
                **(_retention_floor(entry, table) if table.target.format == "delta" else {}),
            ),
            verify=_files_exist,
            policy=lambda entry: _retention_policy(entry, entry.orphans.model_dump()),
        ),
        OperationSpec(
            name="cdc",
            command="cdc",
            check="no_duplicate_changes",
            check_description="no (commit, change type, row) appears twice in the output",
            run=api.cdc,
            options=lambda entry, table, scope: _cdc_options(entry, scope),
            verify=lambda entry, table, report: change_feed_unique(entry, table.storage_options),
            policy=lambda entry: entry.cdc.model_dump(include={"output", "start_date", "key"}),
            applies=lambda entry: entry.cdc.enabled,
        ),
    )
}


def maintained(entry: TableEntry) -> list[str]:
    """The maintenance operations that apply to ``entry`` (CDC only when enabled)."""
    return [name for name, spec in SPECS.items() if spec.applies(entry)]


def _cdc_options(entry: TableEntry, scope: RunScope) -> CdcOptions:
    assert entry.cdc.output is not None and scope.pending is not None  # a CDC run has a range to extract
    return CdcOptions(
        output=entry.cdc.output, from_version=scope.pending.from_option, to_version=scope.pending.to_option
    )


def change_feed_unique(entry: TableEntry, storage_options: StorageOptions) -> Verification:
    """The CDC output holds no change twice (also checked when a run had nothing to extract)."""
    assert entry.cdc.output is not None
    return verify.change_feed_unique(entry.cdc.output, entry.cdc.key or None, storage_options)
