"""Health verdicts (lakeops.ops.health): inspect numbers of each format held against thresholds give
signals with a severity and the maintenance that fixes them; the worst decides the table's status."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakeops.health_signals import SIGNALS, Limit, Severity, applicable_signals, format_value
from lakeops.ops.health import HEALTHY, CdcLag, table_signals, verdict
from lakeops.ops.icechunk.inspect import IcechunkInspectReport
from lakeops.ops.inspect import InspectReport, inspect_table
from lakeops.ops.report import readable
from lakeops.units import format_seconds

DAY = 86400.0
LIMITS = {
    "small_files": Limit(warn=10, error=100),
    "small_file_ratio": Limit(warn=0.5, error=0.9),
    "checkpoint_lag": Limit(warn=10, error=100),
    "manifests": Limit(warn=100, error=1000),
    "snapshots": Limit(warn=1000, error=10000),
    "oldest_snapshot_age": Limit(warn=60 * DAY, error=180 * DAY),
    "reclaimable_bytes": Limit(warn=10 * 1024**3, error=100 * 1024**3),
    "cdc_lag_versions": Limit(warn=100, error=1000),
    "cdc_lag_time": Limit(warn=3600, error=6 * 3600),
    "last_expiry": Limit(warn=2 * DAY, error=7 * DAY),
    "last_compaction": Limit(),
}


def delta(**numbers: int | float | None) -> InspectReport:
    """A Delta table of 200 files, 20 versions, checkpointed two commits ago, one day of history."""
    base: dict[str, int | float | None] = {
        "live_files": 200,
        "small_files": 0,
        "version": 19,
        "oldest_log_version": 0,
        "commits_since_checkpoint": 2,
        "oldest_commit_age_s": DAY,
        "reclaimable_tombstone_bytes": 0,
    }
    return InspectReport(format="delta", table="/lake/events", **(base | numbers))


def by_name(signals: list) -> dict:
    return {s.name: s for s in signals}


def test_small_files_warn_then_error_and_the_table_needs_compaction_until_compacted() -> None:
    warned = verdict(table_signals(delta(small_files=40), LIMITS))
    assert (warned.status, warned.severity) == ("needs compaction", Severity.WARN)
    assert warned.worst is not None and warned.worst.name == "small_files"
    assert warned.worst.describe() == "small_files 40 (warn 10 / error 100): run compaction"

    signals = by_name(table_signals(delta(small_files=190), LIMITS))
    assert signals["small_files"].severity is Severity.ERROR
    assert signals["small_file_ratio"].severity is Severity.ERROR  # 95 % of the live files
    assert signals["small_file_ratio"].value_text() == "95.0 %"
    assert verdict(list(signals.values())).status == "needs compaction"

    compacted = verdict(table_signals(delta(small_files=0, live_files=6), LIMITS))
    assert (compacted.status, compacted.severity, compacted.worst) == (HEALTHY, Severity.OK, None)


def test_the_small_file_ratio_alarms_only_from_ten_live_files() -> None:
    """A young table is all small files: 9 of 9 small passes (saying why), 10 of 10 small warns (issue 36:
    a table of 83 % small files passed, as the ratio had no default threshold)."""
    young = by_name(table_signals(delta(small_files=9, live_files=9), LIMITS))["small_file_ratio"]
    assert (young.severity, young.describe()) == (
        Severity.OK,
        "small_file_ratio 100.0 % (warn 50.0 % / error 90.0 %): under 10 live files",
    )
    grown = by_name(table_signals(delta(small_files=10, live_files=10), LIMITS))["small_file_ratio"]
    assert grown.severity is Severity.ERROR


def test_the_most_severe_signal_wins_then_the_one_furthest_past_its_threshold() -> None:
    # checkpoint lag at 5x its warning, small files at 2x theirs: both WARN, the checkpoint is worse.
    both = verdict(table_signals(delta(small_files=20, commits_since_checkpoint=50), LIMITS))
    assert (both.status, both.severity) == ("checkpoint lag", Severity.WARN)
    # An ERROR anywhere beats any WARN.
    reclaim = delta(small_files=20, commits_since_checkpoint=50, reclaimable_tombstone_bytes=200 * 1024**3)
    worst = verdict(table_signals(reclaim, LIMITS))
    assert (worst.status, worst.severity) == ("needs orphan removal", Severity.ERROR)
    assert worst.worst is not None and worst.worst.value_text() == "200.0 GiB"
    assert worst.worst.threshold_text() == "warn 10.0 GiB / error 100.0 GiB"


def test_delta_versions_and_their_age_say_when_expiry_is_due() -> None:
    signals = by_name(table_signals(delta(version=2500, oldest_log_version=0, oldest_commit_age_s=90 * DAY), LIMITS))
    assert signals["snapshots"].value == 2501 and signals["snapshots"].severity is Severity.WARN
    assert signals["oldest_snapshot_age"].value_text() == "90.0 d"
    assert verdict(list(signals.values())).status == "needs expiry"
    # Manifests are Iceberg's: a Delta table's signal does not apply and never alarms.
    assert (signals["manifests"].applies, signals["manifests"].note) == (False, "not applicable to delta")


def test_a_delta_table_dates_its_oldest_commit_by_its_log_file(tmp_path: Path) -> None:
    for i in range(3):
        write_deltalake(str(tmp_path), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    ten_days_ago = time.time() - 10 * DAY
    os.utime(tmp_path / "_delta_log" / f"{0:020d}.json", (ten_days_ago, ten_days_ago))
    report = inspect_table(str(tmp_path))
    assert isinstance(report, InspectReport)
    age = by_name(table_signals(report, LIMITS))["oldest_snapshot_age"]
    assert age.value_text() == "10.0 d" and age.severity is Severity.OK


def test_iceberg_manifest_rewrites_and_snapshots() -> None:
    report = InspectReport(
        format="iceberg",
        table="shop.orders",
        live_files=10,
        small_files=0,
        snapshots=12,
        oldest_snapshot_age_s=3 * DAY,
        manifests=1500,
        snapshots_since_manifest_rewrite=11,
    )
    signals = by_name(table_signals(report, LIMITS))
    assert signals["checkpoint_lag"].value == 11 and signals["checkpoint_lag"].severity is Severity.WARN
    assert signals["manifests"].severity is Severity.ERROR
    assert signals["reclaimable_bytes"].applies is False  # Iceberg's inspect does not measure it
    assert verdict(list(signals.values())).status == "checkpoint lag"


def test_icechunk_chunk_objects_are_its_small_files_and_it_has_no_checkpoints() -> None:
    report = IcechunkInspectReport(
        format="icechunk",
        table="/lake/arrays",
        chunk_objects=400,
        packable_chunk_objects=400,
        snapshots=41,
        oldest_snapshot_age_s=40 * DAY,
        reclaimable_bytes=11,
    )
    signals = by_name(table_signals(report, LIMITS))
    assert signals["small_files"].value == 400 and signals["small_files"].severity is Severity.ERROR
    assert signals["small_file_ratio"].value == 1.0
    assert signals["checkpoint_lag"].applies is False
    assert signals["reclaimable_bytes"].value == 11 and signals["reclaimable_bytes"].severity is Severity.OK


def test_cdc_lag_in_versions_and_in_time() -> None:
    current = verdict(table_signals(delta(), LIMITS, cdc_lag=CdcLag(versions=0, seconds=0)))
    assert current.status == HEALTHY
    behind = by_name(table_signals(delta(), LIMITS, cdc_lag=CdcLag(versions=3, seconds=7 * 3600)))
    assert behind["cdc_lag_versions"].severity is Severity.OK
    assert behind["cdc_lag_time"].severity is Severity.ERROR and behind["cdc_lag_time"].value_text() == "7.0 h"
    assert verdict(list(behind.values())).status == "CDC lag"
    # No CDC on the table: its CDC signals are not measured and raise nothing.
    unmeasured = by_name(table_signals(delta(), LIMITS))
    assert unmeasured["cdc_lag_time"].value is None and unmeasured["cdc_lag_time"].severity is Severity.OK


def test_last_successful_maintenance() -> None:
    signals = by_name(table_signals(delta(), LIMITS, last_maintenance={"expiry": 3 * DAY, "compaction": 40 * DAY}))
    assert signals["last_expiry"].severity is Severity.WARN
    assert signals["last_expiry"].action() == "check that expiry runs (its schedule or sensor is on, its runs succeed)"
    assert signals["last_compaction"].severity is Severity.OK  # no threshold: shown, never alarms
    assert signals["last_compaction"].threshold_text() == "no threshold"
    never = by_name(table_signals(delta(), LIMITS, last_maintenance={}))
    assert (never["last_expiry"].value, never["last_expiry"].value_text()) == (None, "never ran")
    assert verdict(list(never.values())).status == HEALTHY


@pytest.mark.parametrize(
    ("limit", "value", "severity"),
    [
        (Limit(warn=10, error=100), 9, Severity.OK),
        (Limit(warn=10, error=100), 10, Severity.WARN),
        (Limit(warn=10, error=100), 100, Severity.ERROR),
        (Limit(warn=None, error=100), 99, Severity.OK),
        (Limit(warn=10, error=None), 10**9, Severity.WARN),
        (Limit(), 10**9, Severity.OK),
    ],
)
def test_limits(limit: Limit, value: float, severity: Severity) -> None:
    assert limit.severity(value) is severity


def test_signals_by_format() -> None:
    assert applicable_signals("auto", cdc=True) == list(SIGNALS)
    assert "manifests" not in applicable_signals("delta", cdc=True)
    assert not {"checkpoint_lag", "last_checkpoint", "cdc_lag_time"} & set(applicable_signals("icechunk", cdc=False))
    assert not {n for n in applicable_signals("iceberg", cdc=False) if SIGNALS[n].operation == "cdc"}


def test_numbers_with_units() -> None:
    assert [format_value(unit, v) for unit, v in [("count", 1234), ("ratio", 0.125), ("bytes", 134217728)]] == [
        "1,234",
        "12.5 %",
        "128.0 MiB",
    ]
    assert [format_seconds(s) for s in (0.2345057300000235, 59, 150, 7200, 90 * DAY)] == [
        "0.23 s",
        "59.00 s",
        "2.5 min",
        "2.0 h",
        "90.0 d",
    ]
    assert readable("target_file_size", 134217728) == readable("live_bytes_before", 134217728) == "128.0 MiB"
    assert readable("duration_s", 0.2345057300000235) == "0.23 s"
    assert readable("files_removed", 3) is None
