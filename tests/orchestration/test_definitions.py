"""The definitions Dagster loads: generated from the registry, and loadable through ``workspace.yaml``."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import dagster as dg
import pytest
import yaml
from registry_samples import REFUSED, SAMPLE

from lakeops.registry import RegistryError, parse_registry
from orchestration.registry_definitions import build_definitions
from spark_jobs.cli import main as lakeops

ROOT = Path(__file__).resolve().parents[2]


def test_a_sample_registry_generates_assets_checks_schedules_and_sensors() -> None:
    defs = build_definitions(parse_registry(SAMPLE))
    dg.Definitions.validate_loadable(defs)
    graph = defs.get_repository_def().asset_graph
    assert {k.to_user_string() for k in graph.get_all_asset_keys()} == {
        *(f"events/{op}" for op in ("table", "compaction", "checkpoint", "expiry", "orphans", "cdc")),
        *(f"orders/{op}" for op in ("table", "compaction", "checkpoint", "expiry", "orphans")),
        "lakeops/overview",
    }
    maintenance = {"small_files", "small_file_ratio", "snapshots", "oldest_snapshot_age", "checkpoint_lag"}
    maintenance |= {"manifests", *(f"last_{op}" for op in ("compaction", "checkpoint", "expiry", "orphans"))}
    assert {(c.asset_key.to_user_string(), c.name) for c in graph.asset_check_keys} == {
        *((f"{t}/compaction", "rows_kept") for t in ("events", "orders")),
        *((f"{t}/checkpoint", "matches_log") for t in ("events", "orders")),
        *((f"{t}/{op}", "retained_files_exist") for t in ("events", "orders") for op in ("expiry", "orphans")),
        ("events/cdc", "no_duplicate_changes"),
        # Health: events' format is found when read (every format's signals), orders is Iceberg.
        *(("events/table", name) for name in maintenance | {"reclaimable_bytes", "cdc_lag_versions", "cdc_lag_time"}),
        ("events/table", "last_cdc"),
        *(("orders/table", name) for name in maintenance),
    }
    repo = defs.get_repository_def()
    compaction = repo.assets_defs_by_key[dg.AssetKey(["events", "compaction"])]
    assert [(spec.name, spec.blocking) for spec in compaction.check_specs] == [("rows_kept", True)]
    assert compaction.op.pool == "lakeops_events"  # one maintenance run per table at a time
    schedules = {s.name: s.cron_schedule for s in repo.schedule_defs}
    assert schedules == {
        "events_nightly_schedule": "30 2 * * *",
        "events_health_schedule": "*/30 * * * *",
        "orders_nightly_schedule": "0 3 * * *",
        "orders_health_schedule": "*/30 * * * *",
        "lakeops_overview_schedule": "*/30 * * * *",
    }
    assert {s.name for s in repo.sensor_defs} == {
        "lakeops_small_files",
        "lakeops_checkpoints",
        "lakeops_cdc",
        "lakeops_pools",
    }
    events_compaction = graph.get(dg.AssetKey(["events", "compaction"]))
    assert isinstance(events_compaction.partitions_def, dg.DynamicPartitionsDefinition)
    cdc = graph.get(dg.AssetKey(["events", "cdc"]))
    assert isinstance(cdc.partitions_def, dg.DailyPartitionsDefinition)
    assert cdc.partitions_def.start.date().isoformat() == "2026-11-01"
    assert graph.get(dg.AssetKey(["orders", "expiry"])).partitions_def is None
    assert cdc.backfill_policy == dg.BackfillPolicy.single_run()  # a backfilled range is one extraction


def test_cron_overrides_add_schedules() -> None:
    text = SAMPLE.replace('schedules: {nightly: "30 2 * * *"}', 'schedules: {nightly: "30 2 * * *", cdc: "15 * * * *"}')
    text = text.replace("format: iceberg", 'format: iceberg\n    schedules: {checkpoint: "0 */6 * * *"}')
    repo = build_definitions(parse_registry(text)).get_repository_def()
    schedules = {s.name: s.cron_schedule for s in repo.schedule_defs}
    assert schedules["events_cdc_schedule"] == "15 * * * *"
    assert schedules["orders_checkpoint_schedule"] == "0 */6 * * *"


def test_workspace_loads_the_definitions_of_the_registry_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = yaml.safe_load((ROOT / "workspace.yaml").read_text())
    target = workspace["load_from"][0]["python_module"]
    registry = tmp_path / "tables.yaml"
    registry.write_text("tables:\n  - {name: t, location: /data/t}\n")
    monkeypatch.setenv("LAKEOPS_REGISTRY", str(registry))
    module = importlib.reload(importlib.import_module(target["module_name"]))
    defs = getattr(module, target["attribute"])
    dg.Definitions.validate_loadable(defs)
    assert dg.AssetKey(["t", "compaction"]) in defs.get_repository_def().asset_graph.get_all_asset_keys()
    registry.write_text("tables:\n  - {name: t, location: /data/t, expiry: {keep: 3}}\n")
    with pytest.raises(RegistryError, match=r"tables.yaml: table 't': unknown key expiry.keep"):
        importlib.reload(module)


def test_the_shipped_instance_runs_one_maintenance_run_per_table_at_a_time(tmp_path: Path) -> None:
    # The shipped dagster.yaml in a home of its own: opening an instance creates its SQLite storage,
    # which belongs in no checkout (runtime databases are not tracked).
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    instance = dg.DagsterInstance.from_config(str(home))
    pools = instance.get_concurrency_config().pool_config
    assert pools.pool_granularity is not None and pools.pool_granularity.value == "run"
    assert pools.default_pool_limit == 1
    assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    repo = build_definitions(parse_registry(SAMPLE)).get_repository_def()
    pools_by_table = {
        key.path[0]: {a.op.pool}
        for key, a in repo.assets_defs_by_key.items()
        if key.path[1] not in ("table", "overview")
    }
    assert pools_by_table == {"events": {"lakeops_events"}, "orders": {"lakeops_orders"}}


@pytest.mark.parametrize(("text", "named"), list(REFUSED.values()), ids=list(REFUSED))
def test_the_code_location_and_plan_maintenance_refuse_a_registry_with_one_message(
    text: str, named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One validation (:func:`lakeops.registry.load_registry`) for both readers of the whole file."""
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(text)
    monkeypatch.setenv("LAKEOPS_REGISTRY", str(registry))
    with pytest.raises(RegistryError) as refused:
        importlib.reload(importlib.import_module("orchestration.definitions"))
    assert str(refused.value).startswith(f"{registry}: ") and named in str(refused.value)

    assert lakeops(["plan-maintenance", "--registry", str(registry), "--budget", "1"]) == 2
    assert f"RegistryError: {refused.value}" in " ".join(capsys.readouterr().err.split())


def test_the_chosen_beta_apis_do_not_warn_and_others_still_do() -> None:
    """Loading the definitions warned at every table asset and CDC asset, in every process (25 lines in the
    demo's log); lakeops' own two beta uses are silent now, a beta API used elsewhere still warns."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        defs = build_definitions(parse_registry(SAMPLE))
        assert not [w for w in caught if issubclass(w.category, dg.BetaWarning)], [str(w.message) for w in caught]

        @dg.asset(backfill_policy=dg.BackfillPolicy.single_run())  # the same API, outside lakeops' definitions
        def elsewhere() -> None: ...

    assert [str(w.message).split(" is ")[0] for w in caught if issubclass(w.category, dg.BetaWarning)] == [
        "Parameter `backfill_policy` of function `asset`"
    ]
    graph = defs.get_repository_def().asset_graph
    assert any(key.path[-1] == "cdc" for key in graph.get_all_asset_keys())  # the SAMPLE has a CDC asset
