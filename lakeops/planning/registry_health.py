"""The health of every table in a registry, observed now: the on-call view without an orchestrator.

Each table is inspected afresh (in parallel, one handle each), its CDC lag measured when CDC is on and
its last run of each operation read from its audit records; :func:`lakeops.ops.health.table_signals`
and :func:`~lakeops.ops.health.verdict` then give the same status, worst signal, value and threshold
as the Dagster checks and overview. A table that cannot be read is reported "error reading", never
skipped. ``lakeops health`` prints it, and with ``--html`` adds each table's runs over time.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from lakeops import api
from lakeops.audit import AuditRecord
from lakeops.errors import LakeopsError
from lakeops.health_signals import MAINTENANCE_OPERATIONS, Severity
from lakeops.ops import consumers
from lakeops.ops.health import ERROR_READING, Signal, signals_now, verdict
from lakeops.ops.report import Report
from lakeops.planning.cost import samples_from_records
from lakeops.planning.estate import audit_records, open_entry
from lakeops.planning.models import OPERATIONS
from lakeops.registry import Registry, TableEntry, load_registry
from lakeops.storage import StorageOptions
from lakeops.storage.s3_leases import lease_scope
from lakeops.units import format_utc

__all__ = ["RegistryHealth", "RunPoint", "TableHealth", "last_runs", "observe_registry", "registry_health"]

#: Tables observed at once: each is mostly waiting on storage.
THREADS = 8


class SignalReading(BaseModel):
    """One signal as the report shows it."""

    model_config = ConfigDict(frozen=True)

    name: str
    severity: str
    value: str
    threshold: str
    action: str = ""


class RunPoint(BaseModel):
    """One audited run, as the history plots it."""

    model_config = ConfigDict(frozen=True)

    finished_at: str
    operation: str
    status: str
    duration_s: float
    #: Bytes the run read to rewrite (compaction's inputs) and bytes it deleted (expiry, orphans).
    bytes_rewritten: int = 0
    bytes_deleted: int = 0
    #: Compaction: live files before and after, and the small files it found.
    files_before: int | None = None
    files_after: int | None = None
    small_files: int | None = None
    #: Delta checkpoint: the commits it caught up on (its version minus the previous checkpoint's).
    checkpoint_lag: int | None = None

    @classmethod
    def of(cls, operation: str, record: AuditRecord) -> RunPoint:
        metrics = record.metrics

        def number(name: str) -> int | None:
            value = metrics.get(name)
            return int(value) if value is not None else None

        lag = None
        if operation == "checkpoint" and number("previous_checkpoint_version") is not None:
            lag = (number("version") or 0) - (number("previous_checkpoint_version") or 0)
        return cls(
            finished_at=record.finished_at,
            operation=operation,
            status=record.status,
            duration_s=record.duration_s,
            bytes_rewritten=number("bytes_removed") or 0 if operation == "compaction" else 0,
            bytes_deleted=number("deleted_bytes") or 0,
            files_before=number("live_files_before") if operation == "compaction" else None,
            files_after=number("live_files_after") if operation == "compaction" else None,
            small_files=number("candidate_files") if operation == "compaction" else None,
            checkpoint_lag=lag,
        )


class TableHealth(BaseModel):
    """One table's verdict, observed at ``observed_at`` (ISO 8601, UTC)."""

    model_config = ConfigDict(frozen=True)

    table: str
    format: str
    status: str
    severity: str
    worst: str | None = None
    value: str | None = None
    threshold: str | None = None
    action: str | None = None
    observed_at: str
    #: Operation -> when its last successful run finished (ISO 8601; None: never, by the audit records).
    last_runs: dict[str, str | None] = {}
    #: Every signal that applies to the table's format (none when it could not be read).
    signals: list[SignalReading] = []
    #: Why the table could not be read.
    error: str | None = None
    #: Its audited maintenance runs, oldest first (asked for with ``history``).
    runs: list[RunPoint] = []
    #: The numbers observed now that the history ends with.
    small_files: int | None = None
    live_files: int | None = None
    checkpoint_lag: int | None = None
    reclaimable_bytes: int | None = None

    def worst_text(self) -> str:
        """Why the table is not healthy, in one line: its worst signal with value, threshold and what to
        run, or why it could not be read; empty when healthy."""
        if self.error:
            return self.error
        return f"{self.worst} {self.value} ({self.threshold}): {self.action}" if self.worst else ""


class RegistryHealth(Report):
    """Every registered table's health, worst first."""

    operation: str = "health"
    format: str = "registry"
    tables: list[TableHealth] = []
    healthy: int = 0
    warn: int = 0
    error: int = 0
    observed_at: str = ""

    def summary_lines(self) -> list[tuple[str, str]]:
        return [
            ("tables", str(len(self.tables))),
            ("healthy", str(self.healthy)),
            ("warn", str(self.warn)),
            ("error", str(self.error)),
            ("observed", _shown(self.observed_at)),
        ]

    def columns(self) -> tuple[list[str], list[list[str]]]:
        """One row per table, worst first: its verdict, worst signal, what to run, its last runs."""
        header = ["table", "format", "status", "worst signal", "value", "threshold", "action", "last runs", "observed"]
        rows = []
        for t in self.tables:
            status = t.status if t.severity == Severity.OK.value else f"{t.status} ({t.severity.upper()})"
            worst = t.error or t.worst or ""
            runs = ", ".join(f"{op} {_shown(at)}" for op, at in t.last_runs.items())
            rows.append(
                [t.table, t.format, status, worst, t.value or "", t.threshold or "", t.action or "", runs]
                + [_shown(t.observed_at)]
            )
        return header, rows


def _shown(at: str | None) -> str:
    return "never" if at is None else format_utc(datetime.fromisoformat(at).timestamp())


def last_runs(records: list[AuditRecord]) -> dict[str, float | None]:
    """Operation -> when its last successful, not dry, run finished (epoch seconds; None: never)."""
    found: dict[str, float | None] = dict.fromkeys(MAINTENANCE_OPERATIONS)
    for sample in samples_from_records("", records):  # oldest first: the last one of each stays
        found[sample.operation] = datetime.fromisoformat(sample.finished_at).timestamp()
    return found


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def _reading(signal: Signal) -> SignalReading:
    return SignalReading(
        name=signal.name,
        severity=signal.severity.value,
        value=signal.value_text(),
        threshold=signal.threshold_text(),
        action=signal.action(),
    )


def _runs(records: list[AuditRecord]) -> list[RunPoint]:
    return [
        RunPoint.of(OPERATIONS[r.command], r) for r in records if r.command in OPERATIONS and not r.plan.get("dry_run")
    ]


def observe_table(
    entry: TableEntry, storage_options: StorageOptions | None = None, *, history: bool = False
) -> TableHealth:
    """``entry``'s table now: detected and read once, its signals against the registry's limits;
    with ``history``, its audited runs too."""
    now = time.time()
    try:
        with lease_scope():  # a REST catalog's keys for the table serve this observation only
            table = open_entry(entry, storage_options)
            report = api.inspect(table)
            pending = None
            if entry.cdc.enabled and entry.cdc.output is not None:
                pending = consumers.pending_changes(
                    table,
                    entry.cdc.output,
                    since_ms=entry.cdc.since_ms,
                    until_ms=int(now * 1000),
                    storage_options=table.storage_options,
                )
            records = audit_records(entry, table=table)
            ran = {op: at for op, at in last_runs(records).items() if op != "cdc" or entry.cdc.enabled}
    except LakeopsError as exc:
        return TableHealth(
            table=entry.name,
            format=entry.format,
            status=ERROR_READING,
            severity=Severity.ERROR.value,
            observed_at=_iso(now),
            error=f"{type(exc).__name__}: {exc}",
        )
    state = report.table_state()
    signals = signals_now(report, entry.health_limits(), now=now, cdc=entry.cdc.enabled, pending=pending, last_runs=ran)
    result = verdict(signals)
    worst = result.worst
    return TableHealth(
        table=entry.name,
        format=report.format,
        status=result.status,
        severity=result.severity.value,
        worst=worst.name if worst else None,
        value=worst.value_text() if worst else None,
        threshold=worst.threshold_text() if worst else None,
        action=worst.action() if worst else None,
        observed_at=_iso(now),
        last_runs={op: None if at is None else _iso(at) for op, at in ran.items()},
        signals=[_reading(s) for s in signals if s.applies],
        runs=_runs(records) if history else [],
        small_files=state.small_files,
        live_files=state.live_files,
        checkpoint_lag=state.checkpoint_lag,
        reclaimable_bytes=state.reclaimable_bytes,
    )


def registry_health(
    path: Path, storage_options: StorageOptions | None = None, *, threads: int = THREADS, history: bool = False
) -> RegistryHealth:
    """Every table of the registry at ``path`` observed now (:func:`observe_registry`)."""
    return observe_registry(load_registry(path), str(path), storage_options, threads=threads, history=history)


def observe_registry(
    registry: Registry,
    label: str,
    storage_options: StorageOptions | None = None,
    *,
    threads: int = THREADS,
    history: bool = False,
) -> RegistryHealth:
    """Every table of ``registry`` (named ``label`` in the report) observed now, ``threads`` at a time,
    worst first (with ``history``, each with its audited runs)."""
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(registry.tables) or 1))) as pool:
        tables = list(pool.map(lambda e: observe_table(e, storage_options, history=history), registry.tables))
    tables.sort(key=lambda t: (-Severity(t.severity).rank, t.table))  # worst first
    counts = {level.value: sum(1 for t in tables if t.severity == level.value) for level in Severity}
    return RegistryHealth(
        table=label,
        tables=tables,
        healthy=counts[Severity.OK.value],
        warn=counts[Severity.WARN.value],
        error=counts[Severity.ERROR.value],
        observed_at=_iso(time.time()),
        duration_s=time.monotonic() - started,
    )
