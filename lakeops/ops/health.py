"""A table's health verdict: its ``inspect`` report, its CDC lag and the age of its last maintenance,
held against warn/error thresholds, as format-neutral signals with a severity and the maintenance
that fixes each; and the table's status, from its worst signal.

An orchestrator renders these (Dagster: one asset check per signal, an overview of every table);
the rules of what each format's numbers mean stay here. A signal that does not apply to a format
(manifests of a Delta table, checkpoints of an Icechunk repository) or that the report lacks is
``applies=False`` and never raises an alarm.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict

from lakeops.ops.report import InspectionReport, TableState
from lakeops.units import format_seconds, format_size

__all__ = [
    "ERROR_READING",
    "HEALTHY",
    "MAINTENANCE_OPERATIONS",
    "SIGNALS",
    "STATUS",
    "CdcLag",
    "Limit",
    "Severity",
    "Signal",
    "SignalSpec",
    "Verdict",
    "applicable_signals",
    "format_value",
    "table_signals",
    "verdict",
]

HEALTHY = "healthy"
#: The status of a table whose state could not be read (the signals are unknown).
ERROR_READING = "error reading"

#: The maintenance operations whose last successful run is a signal (``last_<operation>``).
MAINTENANCE_OPERATIONS = ("compaction", "checkpoint", "expiry", "orphans", "cdc")

Unit = Literal["count", "ratio", "seconds", "bytes"]


class Severity(StrEnum):
    OK = "ok"
    WARN = "warn"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return {"ok": 0, "warn": 1, "error": 2}[self.value]


class Limit(BaseModel):
    """Warn at or above ``warn``, error at or above ``error`` (None: that level is off), in the
    signal's unit: a count, a ratio (0.5: half), seconds or bytes."""

    model_config = ConfigDict(frozen=True)

    warn: float | None = None
    error: float | None = None

    def severity(self, value: float) -> Severity:
        if self.error is not None and value >= self.error:
            return Severity.ERROR
        if self.warn is not None and value >= self.warn:
            return Severity.WARN
        return Severity.OK

    def threshold(self, severity: Severity) -> float | None:
        """The threshold ``severity`` was reached at (OK: the warn one, the next to reach)."""
        if severity is Severity.ERROR:
            return self.error
        return self.warn if self.warn is not None else self.error


#: The status a table gets when a signal of an operation alarms: what it needs.
STATUS: dict[str, str] = {
    "compaction": "needs compaction",
    "checkpoint": "checkpoint lag",
    "expiry": "needs expiry",
    "orphans": "needs orphan removal",
    "cdc": "CDC lag",
}


@dataclass(frozen=True)
class SignalSpec:
    """What a signal measures, its unit, the operation that fixes it and the formats it applies to."""

    what: str
    unit: Unit
    operation: str
    formats: frozenset[str]

    @property
    def status(self) -> str:
        return STATUS[self.operation]


_ALL = frozenset({"delta", "iceberg", "icechunk"})
_TABLES = frozenset({"delta", "iceberg"})

#: Every signal by name, in the order they are shown.
SIGNALS: dict[str, SignalSpec] = {
    "small_files": SignalSpec(
        "small files compaction would merge (Icechunk: chunk objects it would pack)", "count", "compaction", _ALL
    ),
    "small_file_ratio": SignalSpec("share of live files that are such small files", "ratio", "compaction", _ALL),
    "checkpoint_lag": SignalSpec(
        "commits since the last checkpoint (Iceberg: snapshots since the last manifest rewrite)",
        "count",
        "checkpoint",
        _TABLES,
    ),
    "manifests": SignalSpec("manifests a scan plans from", "count", "checkpoint", frozenset({"iceberg"})),
    "snapshots": SignalSpec(
        "versions kept (Delta: log versions; Iceberg and Icechunk: snapshots)", "count", "expiry", _ALL
    ),
    "oldest_snapshot_age": SignalSpec("age of the oldest version time travel reaches", "seconds", "expiry", _ALL),
    "reclaimable_bytes": SignalSpec(
        "bytes orphan removal would delete now (Delta: tombstones past retention; Icechunk: unreachable objects)",
        "bytes",
        "orphans",
        frozenset({"delta", "icechunk"}),
    ),
    "cdc_lag_versions": SignalSpec("commits the CDC output does not hold yet", "count", "cdc", _TABLES),
    "cdc_lag_time": SignalSpec("age of the oldest commit the CDC output does not hold yet", "seconds", "cdc", _TABLES),
    **{
        f"last_{op}": SignalSpec(
            f"time since the last successful {op}", "seconds", op, _TABLES if op in ("checkpoint", "cdc") else _ALL
        )
        for op in MAINTENANCE_OPERATIONS
    },
}


def applicable_signals(fmt: str, *, cdc: bool) -> list[str]:
    """The signals of a table in format ``fmt`` (``auto``: any format's), CDC ones only with ``cdc``."""
    return [
        name
        for name, spec in SIGNALS.items()
        if (fmt == "auto" or fmt in spec.formats) and (cdc or spec.operation != "cdc")
    ]


def format_value(unit: Unit, value: float) -> str:
    """``value`` with its unit, for people."""
    if unit == "bytes":
        return format_size(int(value))
    if unit == "seconds":
        return format_seconds(value)
    if unit == "ratio":
        return f"{100 * value:.1f} %"
    return f"{value:,.0f}"


class Signal(BaseModel):
    """One measured value against its limit. ``value`` None: not measured (``note`` says why)."""

    model_config = ConfigDict(frozen=True)

    name: str
    value: float | None
    limit: Limit
    severity: Severity = Severity.OK
    applies: bool = True
    note: str = ""

    @property
    def spec(self) -> SignalSpec:
        return SIGNALS[self.name]

    def value_text(self) -> str:
        return self.note if self.value is None else format_value(self.spec.unit, self.value)

    def threshold_text(self) -> str:
        """``warn 10 / error 100``, the levels that are on."""
        levels = [(n, v) for n, v in (("warn", self.limit.warn), ("error", self.limit.error)) if v is not None]
        return " / ".join(f"{n} {format_value(self.spec.unit, v)}" for n, v in levels) or "no threshold"

    def action(self) -> str:
        """What to do about it, when it is not OK."""
        if self.severity is Severity.OK:
            return ""
        if self.name.startswith("last_"):
            return f"check that {self.spec.operation} runs (its schedule or sensor is on, its runs succeed)"
        return f"run {self.spec.operation}"

    def describe(self) -> str:
        """One line for a check's description and the overview."""
        if not self.applies:
            return f"{self.name}: {self.note}"
        text = f"{self.name} {self.value_text()} ({self.threshold_text()})"
        return f"{text}: {self.action()}" if self.severity is not Severity.OK else text


@dataclass(frozen=True)
class CdcLag:
    """What the CDC output does not hold yet: commits (versions, sequence numbers) and how old the
    oldest of them is; both 0 when it is current."""

    versions: int
    seconds: float


def _report_values(state: TableState) -> dict[str, float | None]:
    """The numbers each signal reads from a table's state (None: the format has none)."""
    return {
        "small_files": state.small_files,
        "small_file_ratio": state.small_file_ratio,
        "checkpoint_lag": state.checkpoint_lag,
        "manifests": state.manifests,
        "snapshots": state.snapshots,
        "oldest_snapshot_age": state.oldest_snapshot_age_s,
        "reclaimable_bytes": state.reclaimable_bytes,
    }


def table_signals(
    report: InspectionReport,
    limits: Mapping[str, Limit],
    *,
    cdc_lag: CdcLag | None = None,
    last_maintenance: Mapping[str, float | None] | None = None,
) -> list[Signal]:
    """Every signal of ``limits`` (one per name; :func:`applicable_signals` of the table) measured
    on ``report``; ``cdc_lag`` for a table with CDC, ``last_maintenance`` operation -> seconds since
    its last successful run (None: never)."""
    state = report.table_state()
    fmt = state.format
    values = _report_values(state)
    if cdc_lag is not None:
        values |= {"cdc_lag_versions": cdc_lag.versions, "cdc_lag_time": cdc_lag.seconds}
    ages = last_maintenance or {}
    signals = []
    for name, limit in limits.items():
        spec = SIGNALS[name]
        if fmt not in spec.formats:
            signals.append(Signal(name=name, value=None, limit=limit, applies=False, note=f"not applicable to {fmt}"))
            continue
        if name.startswith("last_"):
            value = ages.get(spec.operation)
            note = "never ran" if value is None else ""
        else:
            value = values.get(name)
            note = "not measured" if value is None else ""
        severity = limit.severity(value) if value is not None else Severity.OK
        signals.append(Signal(name=name, value=value, limit=limit, severity=severity, note=note))
    return signals


class Verdict(BaseModel):
    """A table's status (:data:`HEALTHY`, its worst signal's status, or :data:`ERROR_READING`)."""

    model_config = ConfigDict(frozen=True)

    status: str
    severity: Severity
    worst: Signal | None = None


def _overshoot(signal: Signal) -> float:
    """How far past the threshold it reached a signal is (ties between equally severe signals)."""
    threshold = signal.limit.threshold(signal.severity)
    if signal.value is None or not threshold:
        return 0.0
    return signal.value / threshold


def verdict(signals: list[Signal]) -> Verdict:
    """The worst signal decides: the most severe, then the furthest past its threshold; none above
    OK is :data:`HEALTHY`."""
    alarms = [s for s in signals if s.applies and s.severity is not Severity.OK]
    if not alarms:
        return Verdict(status=HEALTHY, severity=Severity.OK)
    worst = max(alarms, key=lambda s: (s.severity.rank, _overshoot(s)))
    return Verdict(status=worst.spec.status, severity=worst.severity, worst=worst)
