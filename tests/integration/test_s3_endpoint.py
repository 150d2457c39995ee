"""The operations the S3 tests elsewhere do not run on ``s3://`` yet, configured as a deployment is.

``tests/spark`` and ``tests/unit`` already run compaction (Delta, Iceberg, Icechunk), Delta
checkpoints and CDC, Delta vacuum, Iceberg expiry and orphans, Icechunk expiry and gc against the moto
endpoint, each with ``--endpoint-url``. Here are the rest: Delta log expiry, the Iceberg checkpoint
(rewrite manifests), the Iceberg changelog and Icechunk diffs. As in deploy/compose.yaml, the endpoint
comes from the environment only: ``AWS_ENDPOINT_URL`` for the driver, ``spark.executorEnv`` for the
Spark tasks, no ``--endpoint-url``. delta-rs and PyIceberg then read the results through the same
endpoint.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from icechunk_repos import build_history
from pyiceberg_tables import replay_changes, small_file_table

from lakeops.storage import open_storage
from lakeops.storage.s3 import clear_client_cache
from spark_jobs.session import stop_session

pytestmark = pytest.mark.s3


@pytest.fixture(scope="module")
def endpoint(s3_server: Any) -> Iterator[str]:
    """``AWS_ENDPOINT_URL`` set for the module, and a Spark session started after it (none is reused)."""
    stop_session()
    env = pytest.MonkeyPatch()
    env.setenv("AWS_ENDPOINT_URL", s3_server.endpoint_url)
    clear_client_cache()
    try:
        yield str(s3_server.endpoint_url)
    finally:
        stop_session()
        env.undo()
        clear_client_cache()


#: What the Spark tasks need to reach the endpoint, passed as executor environment.
_EXECUTOR_ENV = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")


@pytest.fixture
def run(endpoint: str, run_lakeops: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """``lakeops ARGV`` on ``local[2]``; the tasks get the S3 settings as ``spark.executorEnv``, as
    executors of a cluster get them from their configuration (a local JVM would otherwise give its
    Python workers the environment it started with, which may predate the moto server's)."""
    spark = ["--master", "local[2]"]
    for name in _EXECUTOR_ENV:
        spark += ["--conf", f"spark.executorEnv.{name}={os.environ[name]}"]
    return lambda *argv: run_lakeops(*argv, *spark)


def _delta_rs(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        "AWS_REGION": "us-east-1",
    }


def test_delta_log_expiry_on_s3(endpoint: str, s3_bucket: Any, run: Callable[..., dict[str, Any]]) -> None:
    location = f"{s3_bucket.uri}/warehouse/events"
    options = _delta_rs(endpoint)
    for version in range(6):
        write_deltalake(location, pa.table({"id": [version]}), mode="append", storage_options=options)
    assert run("checkpoint", location)["version"] == 5
    time.sleep(2)  # S3 keeps whole seconds: every log object is now older than the 1 s retention

    report = run("expire", location, "--older-than", "1s", "--force")

    storage = open_storage(location, s3_bucket.options)
    log = {entry.path.rsplit("/", 1)[-1] for entry in storage.list(f"{location}/_delta_log/")}
    assert report["deleted_commits"] == 5 and not {f"{v:020d}.json" for v in range(5)} & log
    assert f"{5:020d}.checkpoint.parquet" in log and f"{5:020d}.json" in log
    write_deltalake(location, pa.table({"id": [6]}), mode="append", storage_options=options)
    table = DeltaTable(location, storage_options=options)
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == list(range(7))


def test_iceberg_checkpoint_on_s3(
    endpoint: str, s3_bucket: Any, tmp_path: Path, run: Callable[..., dict[str, Any]]
) -> None:
    table = small_file_table(tmp_path, appends=6, rows=10, s3=(s3_bucket.uri, endpoint))
    rows = table.rows()
    assert len(table.table.inspect.manifests()) == 6

    report = run("checkpoint", table.identifier, "--catalog-uri", table.catalog_uri)

    assert (report["manifests_before"], report["manifests_after"]) == (6, 1)
    assert len(table.reload().inspect.manifests()) == 1 and table.rows() == rows


def test_iceberg_changelog_on_s3(
    endpoint: str, s3_bucket: Any, tmp_path: Path, run: Callable[..., dict[str, Any]]
) -> None:
    table = small_file_table(tmp_path, appends=4, rows=10, s3=(s3_bucket.uri, endpoint))
    table.table.delete("id < 3")
    first = str(table.reload().history()[0].snapshot_id)
    output = f"{s3_bucket.uri}/warehouse/events_changes"
    catalog = ("--catalog-uri", table.catalog_uri)

    report = run("cdc", table.identifier, *catalog, "--from", first, "--output", output)

    changes = DeltaTable(output, storage_options=_delta_rs(endpoint)).to_pyarrow_table().to_pylist()
    assert report["rows_written"] == len(changes) > 30  # three appends after the first, and the delete
    assert {row["_change_type"] for row in changes} == {"insert", "delete"}
    # The first snapshot's rows with the changes applied are the table's rows now.
    assert replay_changes(table.rows(int(first)), changes) == replay_changes(table.rows())
    again = run("cdc", table.identifier, *catalog, "--from", first, "--output", output)
    assert again["already_extracted"] is True


def test_icechunk_diffs_on_s3(endpoint: str, s3_bucket: Any, run: Callable[..., dict[str, Any]]) -> None:
    root = f"{s3_bucket.uri}/repos/grid"
    build_history(open_storage(root, s3_bucket.options), root)
    output = f"{s3_bucket.uri}/warehouse/grid_changes"

    report = run("cdc", root, "--from", "middle", "--to", "main", "--output", output)

    rows = DeltaTable(output, storage_options=_delta_rs(endpoint)).to_pyarrow_table()
    assert report["rows_written"] == rows.num_rows > 0
    assert set(rows.column("path").to_pylist()) <= {"/data/line", "/data/grid"}
