"""PostgreSQL as production uses it: Dagster's storage (``deploy/dagster.yaml``) and the Iceberg SQL catalog.

The server is real (``postgres`` fixture). Dagster loads the production instance file unchanged, with
its connection from the ``DAGSTER_PG_*`` variables, and executes a maintenance asset generated from a
registry entry on it; the run, its materialization and its check land in PostgreSQL. The Iceberg
catalog is shared with PyIceberg through a URI without a password (libpq reads ``PGPASSWORD``, as in
the compose stack): lakeops compacts a table PyIceberg created, and PyIceberg reads what lakeops
committed.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from lakeops_cli import run_json
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg_tables import NAMESPACE, SCHEMA, batch, rows_of

from lakeops.registry import Registry, parse_registry
from orchestration.pools import register_pools
from spark_jobs.session import stop_session

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


@pytest.fixture(scope="module", autouse=True)
def _own_spark_session() -> Iterator[None]:
    """These tests run Spark locally; leave no session behind for tests on another master."""
    yield
    stop_session()


@pytest.fixture(scope="module")
def instance(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dg.DagsterInstance]:
    """``deploy/dagster.yaml`` as shipped, connected to the test server through its environment variables."""
    home = tmp_path_factory.mktemp("dagster_home")
    shutil.copy(DEPLOY / "dagster.yaml", home / "dagster.yaml")
    env = pytest.MonkeyPatch()
    for name, value in {
        "DAGSTER_PG_HOST": postgres.host,
        "DAGSTER_PG_PORT": str(postgres.port),
        "DAGSTER_PG_USER": postgres.user,
        "DAGSTER_PG_PASSWORD": postgres.password,
        "DAGSTER_PG_DB": "dagster",
    }.items():
        env.setenv(name, value)
    loaded = dg.DagsterInstance.from_config(str(home))
    try:
        yield loaded
    finally:
        loaded.dispose()
        env.undo()


def test_the_production_instance_stores_everything_in_postgres(instance: dg.DagsterInstance) -> None:
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage

    assert isinstance(instance.run_storage, PostgresRunStorage)
    assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
    assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
    assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    pools = instance.get_concurrency_config().pool_config
    assert (pools.pool_granularity.value if pools.pool_granularity else None, pools.default_pool_limit) == ("run", 1)
    # The schema is really there: a pool limit written now is read back from the server.
    instance.event_log_storage.set_concurrency_slots("lakeops_probe", 1)
    assert instance.event_log_storage.get_concurrency_info("lakeops_probe").slot_count == 1
    # A table's pool as the lakeops_pools sensor registers it: the default limit, marked as the default
    # (a column Dagster added later: the production schema has it).
    register_pools(instance, parse_registry("tables:\n  - {name: pooled, location: /data/pooled}\n", "test"))
    limits = {p.name: (p.limit, p.from_default) for p in instance.event_log_storage.get_pool_limits()}
    assert limits["lakeops_pooled"] == (1, True) and limits["lakeops_probe"] == (1, False)


def test_a_generated_maintenance_asset_runs_end_to_end_on_the_postgres_instance(
    instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    from run_events import own_checks

    from lakeops.registry import parse_registry
    from orchestration.assets import maintenance_assets, operation_key, table_asset, table_key
    from orchestration.resources import SparkResource, StorageResource

    location = tmp_path / "events"
    for i in range(12):
        write_deltalake(str(location), pa.table({"id": pa.array(range(i * 5, i * 5 + 5), pa.int64())}), mode="append")
    before = DeltaTable(str(location)).to_pyarrow_table().sort_by("id")
    registry = parse_registry(
        f"tables:\n  - name: events\n    location: {location}\n    compaction: {{min_input_files: 2}}\n", "test"
    )
    entry = registry.table("events")
    key = operation_key(entry, "compaction")

    result = dg.materialize(
        [table_asset(entry, Registry(tables=[entry])), *maintenance_assets(entry, Registry(tables=[entry]))],
        selection=[key],
        instance=instance,
        resources={"spark": SparkResource(master="local[2]"), "storage": StorageResource()},
    )

    assert result.success
    table = DeltaTable(str(location))
    assert len(table.file_uris()) == 1 and table.to_pyarrow_table().sort_by("id").equals(before)
    # What the run recorded is in PostgreSQL: read it back through the instance's storage.
    record = instance.get_run_record_by_id(result.run_id)
    assert record is not None and record.dagster_run.status == dg.DagsterRunStatus.SUCCESS
    event = instance.get_latest_materialization_event(key)
    assert event is not None and event.run_id == result.run_id
    assert event.asset_materialization is not None
    assert event.asset_materialization.metadata["files_removed"].value == 12
    (check,) = own_checks(result)
    assert check.passed
    # The table's health as the run left it, recorded in PostgreSQL by the same run.
    (observed,) = instance.fetch_observations(table_key(entry), limit=1).records
    assert observed.run_id == result.run_id and observed.asset_observation is not None
    assert observed.asset_observation.metadata["small_files"].value == 0


def test_the_iceberg_sql_catalog_on_postgres_is_shared_with_pyiceberg(
    postgres: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    uri = postgres.sqlalchemy_url("iceberg_catalog", with_password=False)
    catalog = SqlCatalog("lakehouse", uri=uri, warehouse=f"file://{tmp_path / 'warehouse'}")
    catalog.create_namespace_if_not_exists(NAMESPACE)
    identifier = f"{NAMESPACE}.orders"
    table = catalog.create_table(identifier, SCHEMA)
    for i in range(6):
        table.append(batch(i * 10, 10))
    expected = rows_of(catalog.load_table(identifier).scan().to_arrow())
    files_before = len(catalog.load_table(identifier).inspect.files())
    assert files_before == 6

    report = run_json(
        capsys, "compact", identifier, "--catalog-uri", uri, "--catalog-name", "lakehouse", "--master", "local[2]"
    )

    reloaded = SqlCatalog("lakehouse", uri=uri).load_table(identifier)  # a fresh client: state is in PostgreSQL
    assert reloaded.current_snapshot() is not None
    assert reloaded.current_snapshot().summary.operation.value == "replace"  # type: ignore[union-attr]
    assert rows_of(reloaded.scan().to_arrow()) == expected
    assert len(reloaded.inspect.files()) == report["files_added"] == 1
    assert report["files_removed"] == files_before and report["rows_written"] == len(expected)
