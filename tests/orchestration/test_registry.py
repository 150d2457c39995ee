"""The registry file: valid policies load; every bad key or value fails naming the table and the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from registry_samples import SAMPLE

from orchestration.registry import RegistryError, load_registry, parse_registry


def test_a_full_registry_loads_with_its_policies() -> None:
    registry = parse_registry(SAMPLE)
    events, orders = registry.tables
    assert events.compaction.target_file_size == 64 * 1024 * 1024
    assert (events.compaction.small_file_trigger, events.compaction.partitioned) == (20, True)
    assert (events.expiry.older_than, events.expiry.retain_last, events.orphans.older_than) == ("30d", 5, "7d")
    assert events.cdc.output == "s3://lake/events_changes" and events.cdc.key == ["event_id"]
    assert (events.schedules.nightly, events.schedules.health) == ("30 2 * * *", "*/30 * * * *")
    assert orders.address == "shop.orders"
    assert orders.catalog_options() == {"catalog_uri": "sqlite:///catalog.db", "catalog_name": "default"}
    assert registry.storage.access_key_id_env == "LAKE_KEY" and registry.spark.master == "local[2]"
    assert registry.audit_location is None
    assert parse_registry(SAMPLE + "audit_location: s3://lake/_audit\n").audit_location == "s3://lake/_audit"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "tables:\n  - name: events\n    location: /t\n    compaction: {target_size: 1GB}\n",
            "table 'events': unknown key compaction.target_size",
        ),
        ("tables:\n  - name: events\n", "table 'events': location: missing"),
        (
            "tables:\n  - name: events\n    location: /t\n    schedules: {nightly: 'at three'}\n",
            "table 'events': schedules.nightly: 'at three' is not a cron expression",
        ),
        (
            "tables:\n  - name: events\n    location: /t\n    expiry: {older_than: forever}\n",
            "table 'events': expiry.older_than:",
        ),
        (
            "tables:\n  - name: events\n    location: /t\n    cdc: {enabled: true, start_date: 2026-11-01}\n",
            "table 'events': cdc: output: required when cdc is enabled",
        ),
        (
            "storage: {access_key_id_env: AKIA123, secret_access_key_env: 'abc/def+ghi'}\n",
            "storage.secret_access_key_env: 'abc/def+ghi' is not an environment variable name",
        ),
        ("tables:\n  - {name: a, location: /x}\n  - {name: a, location: /y}\n", "tables: a registered more than once"),
        ("tables:\n  - {name: 2fast, location: /x}\n", "name: '2fast' must be letters"),
    ],
)
def test_a_broken_registry_names_the_table_and_the_key(text: str, message: str) -> None:
    with pytest.raises(RegistryError) as error:
        parse_registry(text, "lakeops.yaml")
    assert str(error.value).startswith("lakeops.yaml: ") and message in str(error.value)


def test_the_default_file_may_be_absent_a_named_one_may_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LAKEOPS_REGISTRY", raising=False)
    assert load_registry().tables == []
    monkeypatch.setenv("LAKEOPS_REGISTRY", str(tmp_path / "missing.yaml"))
    with pytest.raises(RegistryError, match="missing.yaml: file not found"):
        load_registry()
    (tmp_path / "lakeops.yaml").write_text("tables:\n  - {name: t, location: /t}\n")
    monkeypatch.delenv("LAKEOPS_REGISTRY")
    assert [t.name for t in load_registry().tables] == ["t"]
