"""A table's health verdict: its ``inspect`` report, its CDC lag and the age of its last maintenance,
held against warn/error thresholds, as format-neutral signals with a severity and the maintenance
that fixes each; and the table's status, from its worst signal.

An orchestrator renders these (Dagster: one asset check per signal, an overview of every table);
the rules of what each format's numbers mean stay here, the signals themselves and their limits in
:mod:`lakeops.health_signals`. A signal that does not apply to a format
(manifests of a Delta table, checkpoints of an Icechunk repository) or that the report lacks is
``applies=False`` and never raises an alarm.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from lakeops.health_signals import SIGNALS, Limit, Severity, SignalSpec, format_value
from lakeops.ops.report import InspectionReport, TableState

if TYPE_CHECKING:
    from lakeops.ops.consumers import PendingRange

__all__ = [
    "ERROR_READING",
    "HEALTHY",
    "CdcLag",
    "Signal",
    "Verdict",
    "cdc_lag",
    "signals_now",
    "table_signals",
    "verdict",
]

HEALTHY = "healthy"
#: The status of a table whose state could not be read (the signals are unknown).
ERROR_READING = "error reading"


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
        if self.severity is not Severity.OK:
            return f"{text}: {self.action()}"
        return f"{text}: {self.note}" if self.note and self.value is not None else text


@dataclass(frozen=True)
class CdcLag:
    """What the CDC output does not hold yet: commits (versions, sequence numbers) and how old the
    oldest of them is; both 0 when it is current."""

    versions: int
    seconds: float


def cdc_lag(pending: PendingRange | None, now_ms: int) -> CdcLag:
    """The CDC output's lag behind its table (``pending``: the commits it lacks, None when current)."""
    if pending is None:
        return CdcLag(versions=0, seconds=0.0)
    return CdcLag(versions=pending.last - pending.first + 1, seconds=max(now_ms - pending.first_committed_ms, 0) / 1000)


def signals_now(
    report: InspectionReport,
    limits: Mapping[str, Limit],
    *,
    now: float,
    cdc: bool,
    pending: PendingRange | None = None,
    last_runs: Mapping[str, float | None] | None = None,
) -> list[Signal]:
    """:func:`table_signals` at ``now`` (epoch seconds), for a table with CDC on or not: ``pending``,
    the commits its CDC output lacks (None: it is current), and ``last_runs``, operation -> when its
    last successful run ended (None: never), become the lag and the ages the signals measure."""
    ages = {op: None if at is None else max(now - at, 0.0) for op, at in (last_runs or {}).items()}
    lag = cdc_lag(pending, int(now * 1000)) if cdc else None
    return table_signals(report, limits, cdc_lag=lag, last_maintenance=ages)


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
        if severity is not Severity.OK and state.live_files < spec.min_live_files:
            severity, note = Severity.OK, f"under {spec.min_live_files} live files"
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
