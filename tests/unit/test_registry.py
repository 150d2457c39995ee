"""The registry file: valid policies load; every bad key or value fails naming the table and the key,
schedules' cron expressions included (read without Dagster; ``tests/orchestration/test_crons.py`` holds
them to Dagster's parser)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from registry_samples import SAMPLE

from lakeops.ops.target import CatalogOptions
from lakeops.registry import RegistryError, cron_problem, load_registry, lookup, parse_registry


def test_a_full_registry_loads_with_its_policies() -> None:
    registry = parse_registry(SAMPLE)
    events, orders = registry.tables
    assert events.compaction.target_file_size == 64 * 1024 * 1024
    assert (events.compaction.small_file_trigger, events.compaction.partitioned) == (20, True)
    assert (events.expiry.older_than, events.expiry.retain_last, events.orphans.older_than) == ("30d", 5, "7d")
    assert events.cdc.output == "s3://lake/events_changes" and events.cdc.key == ["event_id"]
    assert (events.schedules.nightly, events.schedules.health) == ("30 2 * * *", "*/30 * * * *")
    assert orders.address == "shop.orders"
    assert orders.catalog_options() == {
        "catalog_type": "sql",
        "catalog_uri": "sqlite:///catalog.db",
        "catalog_name": "default",
    }
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
        (
            "tables:\n  - name: events\n    location: /t\n    health: {small_file: {warn: 3}}\n",
            "table 'events': unknown key health.small_file",
        ),
        (
            "tables:\n  - name: events\n    location: /t\n    health: {small_files: {warn: 10, limit: 3}}\n",
            "table 'events': unknown key health.small_files.limit",
        ),
        (
            "tables:\n  - name: events\n    location: /t\n    health: {small_files: {error: 5}}\n",
            "table 'events': health.small_files: warn (10) is above error (5)",
        ),
        (
            "tables:\n  - name: events\n    location: /t\n    health: {small_file_ratio: {warn: 50}}\n",
            "table 'events': health.small_file_ratio.warn: Input should be less than or equal to 1",
        ),
        (
            "tables:\n  - name: events\n    location: /t\n    health: {cdc_lag_time: {warn: 30s}}\n",
            "table 'events': health.cdc_lag_time.warn: '30s' is shorter than a minute",
        ),
        (
            "tables:\n  - name: events\n    location: /t\n    health: {reclaimable_bytes: {warn: lots}}\n",
            "table 'events': health.reclaimable_bytes.warn: bad size 'lots'",
        ),
        (
            "tables:\n  - {name: orders, identifier: shop.orders, catalog: {name: shop}}\n",
            "table 'orders': catalog: a SQL catalog needs a uri",
        ),
        (
            "tables:\n  - {name: orders, identifier: shop.orders, catalog: {uri: 'sqlite://', region: eu-west-1}}\n",
            "table 'orders': catalog: region: only for a Glue catalog (type: glue)",
        ),
        (
            "tables:\n  - {name: orders, identifier: shop.orders, catalog: {type: glue, uri: 'http://glue'}}\n",
            "table 'orders': catalog: uri: a Glue catalog takes endpoint_url",
        ),
        (
            "tables:\n  - {name: orders, identifier: shop.orders, catalog: {type: hive}}\n",
            "table 'orders': catalog.type: Input should be 'sql', 'glue' or 'rest'",
        ),
        (
            "tables:\n  - name: orders\n    catalog: {uri: 'sqlite:///c.db', token_env: TOKEN}\n    identifier: a.b\n",
            "table 'orders': catalog: token_env: only a catalog of type rest takes them",
        ),
        (
            "tables:\n  - name: orders\n    catalog: {type: glue2, uri: 'x'}\n    identifier: a.b\n",
            "table 'orders': catalog.type: Input should be 'sql', 'glue' or 'rest'",
        ),
    ],
)
def test_a_broken_registry_names_the_table_and_the_key(text: str, message: str) -> None:
    with pytest.raises(RegistryError) as error:
        parse_registry(text, "lakeops.yaml")
    assert str(error.value).startswith("lakeops.yaml: ") and message in str(error.value)


def test_a_glue_catalog_entry_reaches_the_operations_as_a_glue_table() -> None:
    text = (
        "tables:\n  - name: orders\n    identifier: shop.orders\n"
        "    catalog: {type: glue, region: eu-west-1, endpoint_url: 'http://127.0.0.1:5000',"
        " catalog_id: '123456789012'}\n"
    )
    (orders,) = parse_registry(text).tables
    options = orders.catalog_options()
    assert options == {
        "catalog_type": "glue",
        "catalog_uri": "http://127.0.0.1:5000",
        "catalog_region": "eu-west-1",
        "catalog_id": "123456789012",
    }
    ref = CatalogOptions.model_validate(options).table_ref(orders.address)
    assert (ref.catalog_type, ref.identifier, ref.catalog_region, ref.catalog_id) == (
        "glue",
        "shop.orders",
        "eu-west-1",
        "123456789012",
    )


def test_a_rest_catalog_reaches_the_operations_with_the_names_of_its_secrets() -> None:
    text = (
        "tables:\n  - name: orders\n    identifier: shop.orders\n    catalog:\n      type: rest\n"
        "      uri: https://polaris.example.com/api/catalog\n      warehouse: lake\n"
        "      credential_env: POLARIS_CREDENTIAL\n      vended_credentials: false\n"
    )
    (orders,) = parse_registry(text).tables
    assert orders.catalog_options() == {
        "catalog_type": "rest",
        "catalog_uri": "https://polaris.example.com/api/catalog",
        "catalog_name": "default",
        "catalog_warehouse": "lake",
        "catalog_credential_env": "POLARIS_CREDENTIAL",
        "catalog_vended_credentials": False,
    }


def test_health_thresholds_default_to_the_policies_and_the_registry_overrides_them() -> None:
    events, orders = parse_registry(SAMPLE).tables
    limits = events.health_limits()
    assert (limits["small_files"].warn, limits["small_files"].error) == (20, 200)  # small_file_trigger 20
    assert (limits["checkpoint_lag"].warn, limits["checkpoint_lag"].error) == (25, 250)  # interval 25
    assert (limits["oldest_snapshot_age"].warn, limits["oldest_snapshot_age"].error) == (60 * 86400, 120 * 86400)
    assert (limits["small_file_ratio"].warn, limits["small_file_ratio"].error) == (0.75, None)  # no trigger
    assert limits["cdc_lag_time"].warn == 3600 and "cdc_lag_time" not in orders.health_limits()
    text = SAMPLE.replace(
        "format: iceberg",
        "format: iceberg\n    health: {small_files: {warn: null}, manifests: {error: 500}, last_expiry: {warn: 12h}}",
    )
    limits = parse_registry(text).table("orders").health_limits()
    assert (limits["small_files"].warn, limits["small_files"].error) == (None, 100)
    assert (limits["manifests"].warn, limits["manifests"].error) == (100, 500)
    assert (limits["last_expiry"].warn, limits["last_expiry"].error) == (12 * 3600, 7 * 86400)


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


@pytest.mark.parametrize(
    ("cron", "problem"),
    [
        ("61 25 * * *", "minute '61' is outside 0-59"),
        ("0 24 * * *", "hour '24' is outside 0-23"),
        ("0 0 0 * *", "day of month '0' is outside 1-31"),
        ("0 0 * 13 *", "month '13' is outside 1-12"),
        ("0 0 * * 8", "day of week '8' is outside 0-7"),
        ("*/0 * * * *", "minute '*/0' has no step of 1 or more"),
        ("0 22-2 * * *", "hour '22-2' is a range that wraps around"),
        ("0 0 L * *", "day of month 'L' is not a number, a range or '*'"),
        ("0 0 * * 1#2", "day of week '1#2' is not a number, a range or '*'"),
        ("0 0 ? * *", "day of month '?' is not a number, a range or '*'"),
        ("0 0 30 2 *", "no month it names has day 30: it would never run"),
        ("0 0 31 4,6,9,11 *", "no month it names has day 31: it would never run"),
        ("0 3 * * * 2026", "it has 6 of the five fields (minute hour day-of-month month day-of-week)"),
        ("@DAILY", "it has 1 of the five fields (minute hour day-of-month month day-of-week)"),
        ("", "it has 0 of the five fields (minute hour day-of-month month day-of-week)"),
    ],
)
def test_cron_expressions_a_schedule_cannot_run_are_refused_saying_why(cron: str, problem: str) -> None:
    assert cron_problem(cron) == problem
    with pytest.raises(
        RegistryError, match=re.escape(f"schedules.health: {cron!r} is not a cron expression: {problem}")
    ):
        parse_registry(f"tables:\n  - name: t\n    location: /t\n    schedules: {{health: {cron!r}}}\n")


@pytest.mark.parametrize(
    "cron",
    ["0 3 * * *", "*/30 * * * *", "0-59/15 1,13 * * MON-FRI", "5/15 * * * *", "0 0 29 2 *", "0 0 31 4,5 *",
     "0 0 31 4 1", "*/90 * * * *", "0 0 * JAN-MAR sun,SAT", "0 0 * * 7", "@hourly", "@daily", "@midnight",
     "@weekly", "@monthly", "@yearly", "@annually", " 0  3 * * * "],
)  # fmt: skip
def test_cron_expressions_a_schedule_runs(cron: str) -> None:
    assert cron_problem(cron) is None
    assert parse_registry(f"maintenance_budget: {{window: {cron!r}, core_minutes: 1}}\n").maintenance_budget


def test_names_tags_and_environment_variables_hold_no_newline() -> None:
    """``re.match`` with ``$`` let a trailing newline through, which Dagster then refused by itself."""
    for text, key in [
        ('tables:\n  - {name: "t\\n", location: /t}\n', "name: 't\\n' must be letters"),
        ('tables:\n  - {name: t, location: /t, tags: {tier: "gold\\n"}}\n', "tags.tier: keys and values"),
        (
            'storage: {access_key_id_env: "K\\n", secret_access_key_env: S}\n',
            "storage.access_key_id_env: 'K\\n' is not",
        ),
    ]:
        with pytest.raises(RegistryError, match=re.escape(key)):
            parse_registry(text, "lakeops.yaml")


def test_a_registry_that_is_not_utf8_or_cannot_be_read_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both were a traceback (``UnicodeDecodeError``, ``PermissionError``), for plan-maintenance and for a
    table name looked up in the registry alike."""
    registry = tmp_path / "lakeops.yaml"
    registry.write_bytes(b"tables:\n  - {name: ev\xff, location: /t}\n")
    monkeypatch.setenv("LAKEOPS_REGISTRY", str(registry))
    for read in (load_registry, lambda: lookup("events")):
        with pytest.raises(RegistryError, match=re.escape(f"registry {registry}: not UTF-8 text (byte 21: ")):
            read()

    def refused(self: Path, *args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", refused)
    for read in (load_registry, lambda: lookup("events")):
        with pytest.raises(RegistryError, match=re.escape(f"registry {registry}: cannot read it (Permission denied)")):
            read()


def test_the_spark_executor_is_one_of_its_choices() -> None:
    assert parse_registry("spark: {executor: spark}\ntables: []\n").spark.executor == "spark"
    with pytest.raises(RegistryError, match=r"spark\.executor"):
        parse_registry("spark: {executor: gpu}\ntables: []\n")
