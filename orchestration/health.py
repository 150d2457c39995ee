"""Table health in Dagster: the verdicts of :mod:`lakeops.ops.health` as non-blocking asset checks on
each ``<table>/table`` observation, as metadata that plots, as the CDC output's freshness policy, and
as the overview asset ``lakeops/overview``.

Checks: one per health signal that applies to the table (its registry format; ``auto``: every
format's, passing as "not applicable" where the table's format has no such number), named after
the signal (``small_files``, ``checkpoint_lag``, ``cdc_lag_time``, ``last_expiry``, ...). Each runs
with the observation, so the asset graph shows which tables need attention; a failing one carries
the severity its threshold gives (WARN or ERROR) and says what to run. They never block: health
says what maintenance to run, it does not stop it.

Freshness: the CDC asset has a time-window freshness policy (Dagster's freshness daemon evaluates
it) whose windows are the table's ``cdc_lag_time`` thresholds: its output must have been confirmed
current that recently. The CDC sensor confirms a quiet table's output now and then, so a table
without new commits stays fresh.

Overview: ``lakeops/overview`` renders the latest observation of every table as one Markdown table,
worst first (status, worst signal with its value and threshold, last maintenance), and plots how
many tables are healthy, warn or error. Every observation of a table rebuilds it
(:mod:`orchestration.observation`), so it is never older than the newest observation; each row gives the
UTC time of its observation and of the table's last maintenance, never an age that freezes.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import dagster as dg

from lakeops.health_signals import MAINTENANCE_OPERATIONS, SIGNALS, Severity
from lakeops.ops.health import ERROR_READING, Signal, Verdict
from lakeops.planning.registry_health import observe_registry
from lakeops.redaction import mask_text
from lakeops.registry import Registry, TableEntry
from lakeops.units import format_utc
from orchestration.maintenance import number_metadata
from orchestration.resources import StorageResource

__all__ = [
    "OVERVIEW_KEY",
    "Observation",
    "cdc_freshness",
    "check_results",
    "check_specs",
    "health_metadata",
    "last_success_times",
    "overview_asset",
    "overview_metadata",
    "unreadable",
]

OVERVIEW_KEY = dg.AssetKey(["lakeops", "overview"])

#: Materializations looked at, newest first, for the last one of a successful run.
_RECENT = 25

_DAGSTER_SEVERITY = {Severity.WARN: dg.AssetCheckSeverity.WARN, Severity.ERROR: dg.AssetCheckSeverity.ERROR}


def check_specs(entry: TableEntry, key: dg.AssetKey) -> list[dg.AssetCheckSpec]:
    """The table's health checks: one per applicable signal, with its thresholds in the description."""
    specs = []
    for name, limit in entry.health_limits().items():
        spec = SIGNALS[name]
        levels = Signal(name=name, value=None, limit=limit).threshold_text()
        specs.append(
            dg.AssetCheckSpec(
                name,
                asset=key,
                blocking=False,
                description=f"{spec.what.capitalize()} ({levels}); fix: {spec.operation}.",
            )
        )
    return specs


def _value_metadata(key: str, signal: Signal) -> dict[str, dg.MetadataValue]:
    """The signal's value as a number that plots under ``key`` (ratios as percentages, seconds
    rounded) and its readable twin."""
    if signal.value is None:
        return {}
    unit = signal.spec.unit
    if unit == "ratio":
        return {f"{key}_pct": dg.MetadataValue.float(round(100 * signal.value, 1))}
    if unit == "seconds":
        return number_metadata(f"{key}_s", round(signal.value, 2))
    if unit == "bytes":
        return number_metadata(f"{key}_bytes", int(signal.value))
    return {key: dg.MetadataValue.int(int(signal.value))}


def check_results(key: dg.AssetKey, signals: Sequence[Signal]) -> list[dg.AssetCheckResult]:
    """One result per signal: passed when OK (or not applicable), else failed with its severity,
    the value, the thresholds and what to run."""
    results = []
    for signal in signals:
        metadata: dict[str, dg.MetadataValue] = {"threshold": dg.MetadataValue.text(signal.threshold_text())}
        metadata |= _value_metadata("value", signal)
        if signal.value is not None and signal.spec.unit != "count":
            metadata["value_readable"] = dg.MetadataValue.text(signal.value_text())
        if signal.severity is not Severity.OK:
            metadata["action"] = dg.MetadataValue.text(signal.action())
        results.append(
            dg.AssetCheckResult(
                asset_key=key,
                check_name=signal.name,
                passed=signal.severity is Severity.OK,
                severity=_DAGSTER_SEVERITY.get(signal.severity, dg.AssetCheckSeverity.WARN),
                description=signal.describe(),
                metadata=metadata,
            )
        )
    return results


def _signals_markdown(signals: Sequence[Signal]) -> str:
    lines = ["| signal | value | threshold | severity | action |", "|---|---|---|---|---|"]
    for s in signals:
        if s.applies:
            lines.append(f"| {s.name} | {s.value_text()} | {s.threshold_text()} | {s.severity.value} | {s.action()} |")
    return "\n".join(lines)


def health_metadata(fmt: str, verdict: Verdict, signals: Sequence[Signal]) -> dict[str, dg.MetadataValue]:
    """The observation's health: the verdict as text (what the overview reads), every signal's value
    as ``health_<signal>`` numbers that plot the same way for every format, and a Markdown table."""
    worst = verdict.worst
    metadata: dict[str, dg.MetadataValue] = {
        "format": dg.MetadataValue.text(fmt),
        "health_status": dg.MetadataValue.text(verdict.status),
        "health_severity": dg.MetadataValue.text(verdict.severity.value),
        "health_worst": dg.MetadataValue.text(worst.name if worst else ""),
        "health_worst_value": dg.MetadataValue.text(worst.value_text() if worst else ""),
        "health_worst_threshold": dg.MetadataValue.text(worst.threshold_text() if worst else ""),
    }
    for signal in signals:
        if signal.applies:
            metadata |= _value_metadata(f"health_{signal.name}", signal)
    metadata["health_signals"] = dg.MetadataValue.md(_signals_markdown(signals))
    return metadata


def unreadable(
    key: dg.AssetKey, entry: TableEntry, error: Exception
) -> tuple[dict[str, dg.MetadataValue], list[dg.AssetCheckResult]]:
    """What an observation records for a table it could not read: the status ``error reading`` with
    the error, and every check failed with severity ERROR (their values are unknown)."""
    message = mask_text(f"{type(error).__name__}: {error}")
    metadata: dict[str, dg.MetadataValue] = {
        "format": dg.MetadataValue.text(entry.format),
        "health_status": dg.MetadataValue.text(ERROR_READING),
        "health_severity": dg.MetadataValue.text(Severity.ERROR.value),
        "health_worst": dg.MetadataValue.text(""),
        "health_worst_value": dg.MetadataValue.text(message),
        "health_worst_threshold": dg.MetadataValue.text(""),
    }
    results = [
        dg.AssetCheckResult(
            asset_key=key,
            check_name=name,
            passed=False,
            severity=dg.AssetCheckSeverity.ERROR,
            description=f"cannot read the table: {message}",
        )
        for name in entry.health_limits()
    ]
    return metadata, results


def last_success_times(instance: dg.DagsterInstance, keys: Mapping[str, dg.AssetKey]) -> dict[str, float | None]:
    """Operation -> when its asset was last materialized by a successful run (None: none among the
    latest few, or never). A run whose blocking check failed did not succeed."""
    times: dict[str, float | None] = {}
    runs: dict[str, bool] = {}
    for operation, key in keys.items():
        times[operation] = None
        for record in instance.fetch_materializations(key, limit=_RECENT).records:
            if record.run_id not in runs:
                run = instance.get_run_by_id(record.run_id)
                runs[record.run_id] = run is not None and run.status == dg.DagsterRunStatus.SUCCESS
            if runs[record.run_id]:
                times[operation] = record.timestamp
                break
    return times


def cdc_freshness(entry: TableEntry) -> dg.FreshnessPolicy | None:
    """The CDC output's freshness: it fails when the asset was not materialized (the output not
    confirmed current) within the table's ``cdc_lag_time`` error threshold, warns past the warn one."""
    limit = entry.health_limits().get("cdc_lag_time")
    if limit is None or limit.error is None:
        return None
    fail = timedelta(seconds=limit.error)
    warn = timedelta(seconds=limit.warn) if limit.warn is not None and limit.warn < limit.error else None
    return dg.FreshnessPolicy.time_window(fail_window=fail, warn_window=warn)


@dataclass(frozen=True)
class Observation:
    """What one look at a table found: ``error`` set when the table could not be read (the metadata and
    checks then say "error reading")."""

    entry: TableEntry
    key: dg.AssetKey
    timestamp: float
    metadata: dict[str, dg.MetadataValue]
    checks: list[dg.AssetCheckResult]
    version: str | None = None
    #: Operation -> when its asset was last materialized by a successful run (None: never).
    last_runs: dict[str, float | None] = field(default_factory=dict)
    error: Exception | None = None

    def summary(self) -> str:
        status = self.metadata.get("health_status")
        worst = self.metadata.get("health_worst")
        text = f"{self.entry.name}: {status.value if status else 'unknown'}"
        return text + (f" (worst: {worst.value})" if worst and worst.value else "")


# --- the overview ----------------------------------------------------------------------------------


def _text(metadata: Mapping[str, dg.MetadataValue], key: str) -> str:
    value = metadata.get(key)
    return str(value.value) if value is not None else ""


def _last_maintenance(times: Mapping[str, float | None]) -> str:
    ran = {op: at for op, at in times.items() if at is not None}
    if not ran:
        return "none yet"
    operation = max(ran, key=lambda op: ran[op])
    return f"{operation}, {format_utc(ran[operation])}"


def _worst(metadata: Mapping[str, dg.MetadataValue]) -> str:
    """The worst signal with its value and thresholds in one cell (``small_files 22 (warn 5 / error 20)``):
    six columns fit the UI's metadata panel at 1600 px, where eight cut the last ones off."""
    name, value, threshold = (
        _text(metadata, key) for key in ("health_worst", "health_worst_value", "health_worst_threshold")
    )
    cell = " ".join(part for part in (name, value) if part)
    return f"{cell} ({threshold})" if threshold else cell


_RANK = {Severity.ERROR.value: 0, Severity.WARN.value: 1, Severity.OK.value: 2, "": 3}


def _latest(instance: dg.DagsterInstance, entry: TableEntry) -> Observation | None:
    """``entry``'s newest recorded observation, by whichever run recorded it."""
    key = dg.AssetKey([entry.name, "table"])
    record = next(iter(instance.fetch_observations(key, limit=1).records), None)
    if record is None or record.asset_observation is None:
        return None
    operations = [op for op in MAINTENANCE_OPERATIONS if op != "cdc" or entry.cdc.enabled]
    last_runs = last_success_times(instance, {op: dg.AssetKey([entry.name, op]) for op in operations})
    return Observation(entry, key, record.timestamp, dict(record.asset_observation.metadata), [], last_runs=last_runs)


def _report_link(registry: Registry) -> dict[str, dg.MetadataValue]:
    """Where the registry's HTML health report is, and when it was last written (``health_report``)."""
    if registry.health_report is None:
        return {}
    path = Path(registry.health_report)
    if not path.is_file():
        return {"health_report": dg.MetadataValue.text(f"{path}: not written yet (the overview's own runs write it)")}
    return {
        "health_report": dg.MetadataValue.path(str(path)),
        "health_report_written": dg.MetadataValue.timestamp(path.stat().st_mtime),
    }


def overview_metadata(
    instance: dg.DagsterInstance, registry: Registry, fresh: Mapping[str, Observation] = {}
) -> dict[str, dg.MetadataValue]:
    """Every table's newest observation (``fresh``'s where given: observations the calling run is
    recording), worst first, each with the time it was made; and the link to the health report."""
    rows: list[tuple[str, ...]] = []
    for entry in registry.tables:
        observation = fresh.get(entry.name) or _latest(instance, entry)
        if observation is None:
            operations = [op for op in MAINTENANCE_OPERATIONS if op != "cdc" or entry.cdc.enabled]
            times = last_success_times(instance, {op: dg.AssetKey([entry.name, op]) for op in operations})
            rows.append(("", entry.name, entry.format, "not observed yet", "", _last_maintenance(times), ""))
            continue
        metadata = observation.metadata
        rows.append(
            (
                _text(metadata, "health_severity"),
                entry.name,
                _text(metadata, "format") or entry.format,
                _text(metadata, "health_status"),
                _worst(metadata),
                _last_maintenance(observation.last_runs),
                format_utc(observation.timestamp),
            )
        )
    rows.sort(key=lambda row: (_RANK.get(row[0], 3), row[1]))
    lines = [
        "| table | format | status | worst signal | last maintenance | observed |",
        "|---|---|---|---|---|---|",
    ]
    for severity, *cells in rows:
        status = cells[2] if severity in ("", Severity.OK.value) else f"**{cells[2]}** ({severity.upper()})"
        lines.append("| " + " | ".join([cells[0], cells[1], status, *cells[3:]]).replace("\n", " ") + " |")
    counts = {level: sum(1 for row in rows if row[0] == level.value) for level in Severity}
    return {
        "tables": dg.MetadataValue.md("\n".join(lines)),
        "healthy": dg.MetadataValue.int(counts[Severity.OK]),
        "warn": dg.MetadataValue.int(counts[Severity.WARN]),
        "error": dg.MetadataValue.int(counts[Severity.ERROR]),
        "not_observed": dg.MetadataValue.int(sum(1 for row in rows if not row[0])),
        **_report_link(registry),
    }


def write_health_report(registry: Registry, storage: StorageResource) -> Path:
    """The registry's HTML health report (``lakeops health --html``: every table observed now, with its
    audited runs as plots) written to its ``health_report`` path."""
    from spark_jobs.health_html import write_report  # needs the extra 'report', named when it is missing

    assert registry.health_report is not None
    path = Path(registry.health_report)
    with storage.credentials():
        health = observe_registry(registry, "lakeops/overview", storage.options(), history=True)
    write_report(health, path, named="health_report")
    return path


def overview_asset(registry: Registry) -> dg.AssetsDefinition:
    """``lakeops/overview``: every registered table's health at a glance; with the registry's
    ``health_report``, each of its own runs (its schedule, the UI) rewrites the HTML report it links to —
    not the rebuilds after each table's run, which would observe every table each time."""

    @dg.asset(
        key=OVERVIEW_KEY,
        group_name="lakeops",
        description="Every registered table's health status and worst signal, from its latest observation"
        + (f"; the HTML health report with plots: {registry.health_report}." if registry.health_report else "."),
    )
    def overview(context: dg.AssetExecutionContext, storage: StorageResource) -> dg.MaterializeResult:
        if registry.health_report is not None:
            context.log.info(f"wrote the health report {write_health_report(registry, storage)}")
        return dg.MaterializeResult(metadata=overview_metadata(context.instance, registry))

    return overview
