"""Each table's concurrency pool is listed with its limit (the UI's Concurrency page reads these
rows) before any run: Dagster writes a pool's row only when a queued run first needs it, so the
demo's instance, whose runs skip the queue, said "No pool limits have been configured"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml
from registry_samples import SAMPLE

from lakeops.registry import parse_registry
from orchestration.pools import pools_sensor, register_pools
from orchestration.ui import PROJECT

REGISTRY = parse_registry(SAMPLE)


def _instance(home: Path, default_limit: int | None = 1) -> dg.DagsterInstance:
    """An instance with the shipped ``dagster.yaml``, or with another default pool limit."""
    home.mkdir()
    shipped = yaml.safe_load((PROJECT / "dagster_home" / "dagster.yaml").read_text())
    if default_limit != 1:
        shipped["concurrency"]["pools"].pop("default_limit")
        if default_limit is not None:
            shipped["concurrency"]["pools"]["default_limit"] = default_limit
    (home / "dagster.yaml").write_text(yaml.safe_dump(shipped))
    return dg.DagsterInstance.from_config(str(home))


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    with _instance(tmp_path / "home") as instance:
        yield instance


def _limits(instance: dg.DagsterInstance) -> dict[str, tuple[int, bool]]:
    return {p.name: (p.limit, p.from_default) for p in instance.event_log_storage.get_pool_limits()}


def test_a_run_outside_the_queue_leaves_its_pool_unlisted(instance: dg.DagsterInstance) -> None:
    """Why the demo's UI listed no pools (Dagster's behaviour, which the sensor exists for)."""

    @dg.asset(pool="lakeops_events")
    def maintained() -> None:
        return None

    assert dg.materialize([maintained], instance=instance).success
    assert instance.event_log_storage.get_concurrency_keys() == set()


def test_every_table_pool_gets_the_default_limit_once(instance: dg.DagsterInstance) -> None:
    assert register_pools(instance, REGISTRY) == ["lakeops_events", "lakeops_orders"]
    assert instance.event_log_storage.get_concurrency_keys() == {"lakeops_events", "lakeops_orders"}
    assert _limits(instance) == {"lakeops_events": (1, True), "lakeops_orders": (1, True)}
    assert instance.event_log_storage.get_concurrency_info("lakeops_events").slot_count == 1
    assert register_pools(instance, REGISTRY) == []


def test_an_operators_limit_is_kept_and_a_new_default_applies(tmp_path: Path) -> None:
    with _instance(tmp_path / "home") as instance:
        register_pools(instance, REGISTRY)
        instance.event_log_storage.set_concurrency_slots("lakeops_orders", 3)  # dagster instance concurrency set
    config = tmp_path / "home" / "dagster.yaml"
    changed = yaml.safe_load(config.read_text())
    changed["concurrency"]["pools"]["default_limit"] = 2
    config.write_text(yaml.safe_dump(changed))
    with dg.DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        assert register_pools(instance, REGISTRY) == ["lakeops_events"]
        assert _limits(instance) == {"lakeops_events": (2, True), "lakeops_orders": (3, False)}


def test_an_instance_without_a_default_limit_gets_none(tmp_path: Path) -> None:
    with _instance(tmp_path / "home", default_limit=None) as instance:
        assert register_pools(instance, REGISTRY) == []
        assert instance.event_log_storage.get_concurrency_keys() == set()
        (sensor,) = pools_sensor(REGISTRY)
        reason = sensor(dg.build_sensor_context(instance=instance))
        assert isinstance(reason, dg.SkipReason) and "no concurrency.pools.default_limit" in str(reason.skip_message)


def test_the_pools_sensor_registers_the_registry_s_pools(instance: dg.DagsterInstance) -> None:
    (sensor,) = pools_sensor(REGISTRY)
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    first = sensor(dg.build_sensor_context(instance=instance))
    assert isinstance(first, dg.SkipReason) and "lakeops_events, lakeops_orders" in str(first.skip_message)
    assert set(_limits(instance)) == {"lakeops_events", "lakeops_orders"}
    again = sensor(dg.build_sensor_context(instance=instance))
    assert isinstance(again, dg.SkipReason) and again.skip_message == "every table's pool has its limit"
    assert pools_sensor(parse_registry("tables: []\n")) == []
