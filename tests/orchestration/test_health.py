"""Health at a glance (issue 20, item 2), on real local Delta tables written by delta-rs: the table
observation runs non-blocking health checks with the registry's thresholds (WARN or ERROR, the
value, the threshold and what to run), the overview renders every table's status and worst signal,
the CDC output's freshness policy comes from its lag thresholds, and the health schedules run by
default. Compaction here is delta-rs OPTIMIZE (another writer's); Dagster's own maintenance runs
are in tests/spark/test_orchestration_health.py."""

import asyncio
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pyarrow as pa
from dagster._core.definitions.freshness import FreshnessState
from dagster._core.definitions.freshness_evaluator import TimeWindowFreshnessPolicyEvaluator
from dagster._core.test_utils import BasicLoadingContext, freeze_time
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from lakeops.registry import Registry, parse_registry
from orchestration.assets import operation_key, run_request, table_key
from orchestration.health import OVERVIEW_KEY, last_success_times
from orchestration.registry_definitions import build_definitions
from orchestration.resources import SparkResource, StorageResource

#: Observations read tables without Spark; the maintenance assets beside them declare it.
RESOURCES = {"spark": SparkResource(), "storage": StorageResource()}
HOUR = 3600


def _append(path: Path, commits: int, *, partitions: int = 1) -> None:
    for i in range(commits):
        rows = pa.table({"id": pa.array([i], pa.int64()), "part": pa.array([f"p{i % partitions}"])})
        write_deltalake(str(path), rows, mode="append", partition_by=["part"])


def _registry(root: Path, health: str = "", cdc: bool = False) -> Registry:
    feed = f"\n    cdc: {{enabled: true, output: {root / 'changes'}, start_date: 2026-01-01}}" if cdc else ""
    return parse_registry(
        f"""
tables:
  - name: events
    location: {root / "events"}
    format: delta
    compaction: {{small_file_trigger: 5}}
    checkpoint: {{interval: 100}}{feed}
    health: {{small_files: {{error: 20}}{health}}}
  - name: gone
    location: {root / "missing"}
    format: delta
"""
    )


def _observe(registry: Registry, instance: dg.DagsterInstance, name: str = "events") -> dg.ExecuteInProcessResult:
    return dg.materialize(
        list(build_definitions(registry).assets or []),
        selection=[table_key(registry.table(name))],
        resources=RESOURCES,
        instance=instance,
        raise_on_error=False,
    )


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {c.check_name: c for c in result.get_asset_check_evaluations()}


def _observation(result: dg.ExecuteInProcessResult) -> dg.AssetObservation:
    (observation,) = [
        e.event_specific_data.asset_observation  # type: ignore[union-attr]
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    ]
    return observation


def _overview(registry: Registry, instance: dg.DagsterInstance) -> dict[str, dg.MetadataValue]:
    result = dg.materialize(
        list(build_definitions(registry).assets or []), selection=[OVERVIEW_KEY], resources=RESOURCES, instance=instance
    )
    (materialization,) = result.asset_materializations_for_node("lakeops__overview")
    return dict(materialization.metadata)


def _row(overview: dict[str, dg.MetadataValue], table: str) -> list[str]:
    text = str(overview["tables"].value)
    (line,) = [line for line in text.splitlines() if line.startswith(f"| {table} |")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_small_files_warn_then_error_and_the_overview_says_needs_compaction_until_compacted(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    instance = dg.DagsterInstance.ephemeral()
    _append(tmp_path / "events", 12, partitions=2)

    warned = _observe(registry, instance)
    assert warned.success
    checks = _checks(warned)
    small = checks["small_files"]
    # The registry's error threshold (20) and the default warning (small_file_trigger 5).
    assert (small.passed, small.severity) == (False, dg.AssetCheckSeverity.WARN)
    assert small.description == "small_files 12 (warn 5 / error 20): run compaction"
    assert small.metadata["value"].value == 12 and small.metadata["threshold"].value == "warn 5 / error 20"
    assert small.metadata["action"].value == "run compaction"
    assert checks["checkpoint_lag"].passed and checks["snapshots"].passed
    assert not any(c.passed is False and c.severity == dg.AssetCheckSeverity.ERROR for c in checks.values())
    metadata = _observation(warned).metadata
    assert (metadata["health_status"].value, metadata["health_worst"].value) == ("needs compaction", "small_files")
    assert metadata["health_small_files"].value == 12 and metadata["health_small_file_ratio_pct"].value == 100.0
    # No fragment_ratio_trigger: the default 75 % from 10 live files on; all 12 are small.
    ratio = checks["small_file_ratio"]
    assert (ratio.passed, ratio.severity, ratio.description) == (
        False,
        dg.AssetCheckSeverity.WARN,
        "small_file_ratio 100.0 % (warn 75.0 %): run compaction",
    )
    assert "small_files | 12 | warn 5 / error 20 | warn | run compaction" in str(metadata["health_signals"].value)

    _append(tmp_path / "events", 10, partitions=2)
    errored = _checks(_observe(registry, instance))["small_files"]
    assert (errored.passed, errored.severity) == (False, dg.AssetCheckSeverity.ERROR)
    row = _row(_overview(registry, instance), "events")
    assert row[:4] == ["events", "delta", "**needs compaction** (ERROR)", "small_files 22 (warn 5 / error 20)"]

    DeltaTable(str(tmp_path / "events")).optimize.compact()
    healthy = _observe(registry, instance)
    assert all(c.passed for c in _checks(healthy).values())
    assert _observation(healthy).metadata["health_status"].value == "healthy"
    assert _row(_overview(registry, instance), "events")[2] == "healthy"


def test_an_unreadable_table_is_recorded_as_error_reading_and_its_run_fails(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    instance = dg.DagsterInstance.ephemeral()
    result = _observe(registry, instance, "gone")
    assert not result.success
    checks = _checks(result)
    assert checks and all(not c.passed and c.severity == dg.AssetCheckSeverity.ERROR for c in checks.values())
    assert "cannot read the table: NotATable" in str(checks["small_files"].description)
    assert _observation(result).metadata["health_status"].value == "error reading"
    overview = _overview(registry, instance)
    gone = _row(overview, "gone")
    assert gone[2] == "**error reading** (ERROR)" and "NotATable" in gone[3]
    assert _row(overview, "events")[2] == "not observed yet"
    assert (overview["error"].value, overview["not_observed"].value) == (1, 1)
    # The worst table comes first.
    assert str(overview["tables"].value).splitlines()[2].startswith("| gone |")


def test_thresholds_come_from_the_registry(tmp_path: Path) -> None:
    _append(tmp_path / "events", 12)
    strict = _registry(tmp_path, ", checkpoint_lag: {warn: 3, error: 10}, snapshots: {warn: null, error: 12}")
    checks = _checks(_observe(strict, dg.DagsterInstance.ephemeral()))
    assert (checks["checkpoint_lag"].passed, checks["checkpoint_lag"].severity) == (False, dg.AssetCheckSeverity.ERROR)
    assert checks["snapshots"].description == "snapshots 12 (error 12): run expiry"
    specs = {
        s.name: s
        for s in build_definitions(strict)
        .get_repository_def()
        .assets_defs_by_key[dg.AssetKey(["events", "table"])]
        .check_specs
    }
    assert (
        specs["checkpoint_lag"].description is not None and "(warn 3 / error 10)" in specs["checkpoint_lag"].description
    )
    assert not any(spec.blocking for spec in specs.values())  # health says what to run, it stops nothing
    # Signals of other formats are not checks of a Delta table.
    assert "manifests" not in specs and "cdc_lag_time" not in specs


def test_cdc_lag_in_versions_and_time(tmp_path: Path) -> None:
    registry = _registry(tmp_path, ", cdc_lag_versions: {warn: 3, error: 50}", cdc=True)
    _append(tmp_path / "events", 4)
    first = tmp_path / "events" / "_delta_log" / f"{0:020d}.json"
    two_hours_ago = (datetime.now(UTC) - timedelta(hours=2)).timestamp()
    os.utime(first, (two_hours_ago, two_hours_ago))

    result = _observe(registry, dg.DagsterInstance.ephemeral())
    checks = _checks(result)
    assert (checks["cdc_lag_versions"].passed, checks["cdc_lag_versions"].severity) == (
        False,
        dg.AssetCheckSeverity.WARN,
    )
    lag = checks["cdc_lag_time"]
    assert (lag.passed, lag.severity) == (False, dg.AssetCheckSeverity.WARN)  # default: warn 1 h, error 6 h
    assert lag.metadata["value_readable"].value == "2.0 h" and 2 * HOUR <= lag.metadata["value_s"].value < 2.1 * HOUR
    assert lag.description is not None and lag.description.endswith(": run cdc")
    assert _observation(result).metadata["health_status"].value == "CDC lag"
    assert checks["last_cdc"].passed and checks["last_cdc"].description == "last_cdc never ran (no threshold)"


def _freshness(registry: Registry, instance: dg.DagsterInstance, at: datetime) -> FreshnessState:
    """The CDC asset's freshness at ``at``, as Dagster's freshness daemon evaluates it."""
    node = (
        build_definitions(registry).get_repository_def().asset_graph.get(operation_key(registry.table("events"), "cdc"))
    )
    with freeze_time(at):
        return asyncio.run(TimeWindowFreshnessPolicyEvaluator().evaluate_freshness(BasicLoadingContext(instance), node))


def test_the_cdc_output_fails_its_freshness_when_it_lags(tmp_path: Path) -> None:
    registry = _registry(tmp_path, ", cdc_lag_time: {warn: 30min, error: 2h}", cdc=True)
    cdc = operation_key(registry.table("events"), "cdc")
    policy = build_definitions(registry).get_repository_def().asset_graph.get(cdc).freshness_policy
    assert policy == dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=2), warn_window=timedelta(minutes=30))
    default = _registry(tmp_path, cdc=True)
    assert build_definitions(default).get_repository_def().asset_graph.get(cdc).freshness_policy == (
        dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=6), warn_window=timedelta(hours=1))
    )

    instance = dg.DagsterInstance.ephemeral()
    now = datetime.now(UTC)
    assert _freshness(registry, instance, now) == FreshnessState.UNKNOWN  # never extracted
    instance.report_runless_asset_event(dg.AssetMaterialization(cdc, partition=now.strftime("%Y-%m-%d")))
    assert _freshness(registry, instance, now + timedelta(minutes=10)) == FreshnessState.PASS
    assert _freshness(registry, instance, now + timedelta(hours=1)) == FreshnessState.WARN
    assert _freshness(registry, instance, now + timedelta(hours=3)) == FreshnessState.FAIL


def test_the_cdc_sensor_confirms_a_quiet_output_before_its_freshness_warns(tmp_path: Path) -> None:
    registry = _registry(tmp_path, ", cdc_lag_time: {warn: 1h, error: 6h}", cdc=True)
    _append(tmp_path / "events", 2)
    sensor = next(s for s in build_definitions(registry).sensors or [] if s.name == "lakeops_cdc")
    cdc = operation_key(registry.table("events"), "cdc")
    # The output holds every version of the source: its watermark names the last one.
    source_id = DeltaTable(str(tmp_path / "events")).metadata().id
    write_deltalake(
        str(tmp_path / "changes"),
        pa.table({"id": pa.array([1], pa.int64())}),
        commit_properties=CommitProperties(app_transactions=[Transaction(app_id=source_id, version=1)]),
    )
    today = datetime.now(UTC).strftime("%Y-%m-%d")

    def requests(extracted_minutes_ago: int) -> list[dg.RunRequest]:
        instance = dg.DagsterInstance.ephemeral()
        with freeze_time(datetime.now(UTC) - timedelta(minutes=extracted_minutes_ago)):
            instance.report_runless_asset_event(dg.AssetMaterialization(cdc, partition=today))
        return list(sensor(dg.build_sensor_context(resources=RESOURCES, instance=instance)).run_requests or [])

    assert requests(20) == []  # within half the warning window: nothing to do
    (request,) = requests(40)
    assert request.asset_selection == [cdc] and request.partition_key == today
    assert request.run_key is not None and request.run_key.startswith("events:cdc:confirm:")


def test_last_maintenance_counts_successful_runs_only(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    entry = registry.table("events")
    instance = dg.DagsterInstance.ephemeral()
    key = operation_key(entry, "expiry")
    assert last_success_times(instance, {"expiry": key}) == {"expiry": None}

    @dg.asset(key=key)
    def expiry(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        if context.run.tags.get("fail"):
            context.log_event(dg.AssetMaterialization(key))
            raise RuntimeError("check failed after the commit")
        return dg.MaterializeResult()

    with freeze_time(datetime.now(UTC) - timedelta(days=3)):
        assert dg.materialize([expiry], instance=instance).success
    assert not dg.materialize([expiry], instance=instance, tags={"fail": "1"}, raise_on_error=False).success
    (at,) = last_success_times(instance, {"expiry": key}).values()
    assert at is not None and 3 * 86400 <= datetime.now(UTC).timestamp() - at < 3 * 86400 + 600
    _append(tmp_path / "events", 1)
    checks = _checks(_observe(registry, instance))
    assert (checks["last_expiry"].passed, checks["last_expiry"].severity) == (False, dg.AssetCheckSeverity.WARN)
    assert checks["last_expiry"].metadata["value_readable"].value.startswith("3.0 d")


def test_health_runs_by_default_and_each_request_carries_the_checks(tmp_path: Path) -> None:
    registry = _registry(tmp_path, cdc=True)
    repo = build_definitions(registry).get_repository_def()
    running = {s.name for s in repo.schedule_defs if s.default_status == dg.DefaultScheduleStatus.RUNNING}
    assert running == {"events_health_schedule", "gone_health_schedule", "lakeops_overview_schedule"}
    request = run_request(registry.table("events"), ["table"])
    assert {k.name for k in request.asset_check_keys or []} == set(registry.table("events").health_limits())
    job = repo.get_job("lakeops_health")
    job.get_subset(
        asset_selection=set(request.asset_selection or []), asset_check_selection=set(request.asset_check_keys or [])
    )


def test_the_overview_writes_and_links_the_html_health_report_the_registry_names(tmp_path: Path) -> None:
    """``health_report``: the overview's own run writes the HTML report (every table observed, with its
    plots) and links it; an observation's rebuild of the overview keeps the link without rewriting."""
    page = tmp_path / "report" / "health.html"
    page.parent.mkdir()
    _append(tmp_path / "events", 3)
    registry = _registry(tmp_path).model_copy(update={"health_report": str(page)})
    instance = dg.DagsterInstance.ephemeral()

    overview = _overview(registry, instance)
    assert overview["health_report"] == dg.MetadataValue.path(str(page))
    assert abs(overview["health_report_written"].value - page.stat().st_mtime) < 1
    text = page.read_text()
    assert '<section id="events">' in text and "<svg" in text and "error reading" in text  # 'gone' is missing

    written = page.stat().st_mtime_ns
    assert _observe(registry, instance).success
    (rebuilt,) = instance.fetch_materializations(OVERVIEW_KEY, limit=1).records
    assert rebuilt.asset_materialization is not None
    assert rebuilt.asset_materialization.metadata["health_report"] == dg.MetadataValue.path(str(page))
    assert page.stat().st_mtime_ns == written  # only the overview's own runs observe every table


def test_a_health_report_that_cannot_be_written_fails_the_overview_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    registry = _registry(tmp_path).model_copy(update={"health_report": str(tmp_path / "file" / "health.html")})
    result = dg.materialize(
        list(build_definitions(registry).assets or []),
        selection=[OVERVIEW_KEY],
        resources=RESOURCES,
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    message = str(failure.step_failure_data.error)  # type: ignore[union-attr]
    assert f"InvalidArgument: health_report {tmp_path / 'file' / 'health.html'}: cannot write the report" in message
    assert list(tmp_path.glob("file*")) == [tmp_path / "file"]


def test_a_relative_health_report_path_is_refused_by_the_registry() -> None:
    import pytest

    from lakeops.registry import RegistryError

    with pytest.raises(RegistryError, match=r"health_report: 'health.html' must be an absolute path"):
        parse_registry("health_report: health.html\ntables: []\n")
