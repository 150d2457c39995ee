"""The storage resource lends its keys to this process's S3 clients without touching ``os.environ``:
an S3 (moto) table is compacted through Dagster with the keys only in the resource, the environment
is the same during and after the run, and without the resource's keys the same run cannot reach S3."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from run_events import own_materializations

from lakeops.ops import compaction
from lakeops.registry import parse_registry
from lakeops.storage.s3 import clear_client_cache
from orchestration.assets import operation_key
from orchestration.registry_definitions import build_definitions
from orchestration.resources import SparkResource, StorageResource
from spark_jobs.spark_settings import SparkSettings

pytestmark = pytest.mark.s3

KEY_ID, SECRET = "AKIARESOURCEONLY0001", "resource-only-secret-do-not-print"


@pytest.fixture
def table_without_env_keys(s3_bucket: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A Delta table of six one-row appends on moto (written by delta-rs with explicit keys), then no AWS
    keys in the environment or in cached clients: only a lender of keys reaches the bucket."""
    location = f"{s3_bucket.uri}/events"
    delta_rs = {
        "AWS_ENDPOINT_URL": s3_bucket.options.endpoint_url,
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }
    for version in range(6):
        write_deltalake(location, pa.table({"id": [version]}), mode="append", storage_options=delta_rs)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    clear_client_cache()
    yield location
    clear_client_cache()


def _compact(location: str, storage: StorageResource) -> dg.ExecuteInProcessResult:
    registry = parse_registry(f"tables:\n  - name: events\n    location: {location}\n")
    return dg.materialize(
        list(build_definitions(registry).assets or []),
        selection=[operation_key(registry.table("events"), "compaction")],
        resources={"spark": SparkResource(), "storage": storage},
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )


def test_keys_only_in_the_resource_maintain_an_s3_table_and_leave_the_environment_alone(
    table_without_env_keys: str, s3_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = table_without_env_keys
    before = dict(os.environ)
    during: list[dict[str, str]] = []
    real_run = compaction.execute

    def watched(*args: Any, **kwargs: Any) -> Any:
        during.append(dict(os.environ))
        return real_run(*args, **kwargs)

    monkeypatch.setattr(compaction, "execute", watched)
    storage = StorageResource(endpoint_url=s3_server.endpoint_url, access_key_id=KEY_ID, secret_access_key=SECRET)

    result = _compact(location, storage)

    assert result.success, [e.message for e in result.all_events if e.is_failure]
    assert during == [before]
    assert dict(os.environ) == before
    (materialization,) = own_materializations(result, "events__compaction")
    assert materialization.metadata["files_removed"].value == 6
    peer = DeltaTable(
        location,
        storage_options={
            "AWS_ENDPOINT_URL": s3_server.endpoint_url,
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_ALLOW_HTTP": "true",
        },
    )
    assert len(peer.file_uris()) == 1
    assert sorted(peer.to_pyarrow_table().column("id").to_pylist()) == list(range(6))


def test_without_the_resource_keys_the_run_cannot_reach_s3(table_without_env_keys: str, s3_server: Any) -> None:
    result = _compact(table_without_env_keys, StorageResource(endpoint_url=s3_server.endpoint_url))

    assert not result.success
    failure = result.failure_data_for_node("events__compaction")
    assert failure is not None and failure.error is not None
    assert "cannot list 's3://" in failure.error.to_string()
    assert "/events/_delta_log/': Unable to locate credentials" in failure.error.to_string()


def test_the_registry_sets_where_dagster_runs_units() -> None:
    registry = parse_registry("spark: {master: 'local[2]', executor: driver}\ntables: []\n")
    spark = build_definitions(registry).resources["spark"]
    assert isinstance(spark, SparkResource)
    assert (spark.master, spark.executor) == ("local[2]", "driver")
    assert type(spark.run_executor()).__name__ == "ThreadExecutor"
    on_spark = SparkResource(executor="spark").run_executor()
    assert isinstance(on_spark, SparkSettings) and on_spark.driver_max_bytes == 0  # every plan on Spark
