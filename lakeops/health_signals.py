"""The health signals a table is held against, and the warn/error limits each is given: what the
registry's ``health`` thresholds name (:mod:`lakeops.registry`) and what :mod:`lakeops.ops.health`
measures from a table's reports. A signal's spec says what it measures, its unit, the maintenance that
fixes it and the formats it applies to.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict

from lakeops.units import format_seconds, format_size

__all__ = [
    "MAINTENANCE_OPERATIONS",
    "SIGNALS",
    "STATUS",
    "Limit",
    "Severity",
    "SignalSpec",
    "Unit",
    "applicable_signals",
    "format_value",
]

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
    """What a signal measures, its unit, the operation that fixes it and the formats it applies to;
    ``min_live_files``: it alarms only on a table of at least that many live files."""

    what: str
    unit: Unit
    operation: str
    formats: frozenset[str]
    min_live_files: int = 0

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
    # A table of a few files is all small files, and compacting it gains little: the ratio alarms from
    # 10 live files on.
    "small_file_ratio": SignalSpec(
        "share of live files that are such small files", "ratio", "compaction", _ALL, min_live_files=10
    ),
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
