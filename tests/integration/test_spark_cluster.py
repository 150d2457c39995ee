"""``lakeops compact``, ``checkpoint`` and ``cdc`` on a Spark standalone cluster give what local mode gives.

The cluster (``spark_cluster``: a master and two workers from the installed pyspark) runs executors in
their own JVMs and Python workers, started by the workers, not by the driver: the project's code reaches
them only as the zip ``spark_jobs.session`` ships (this checkout is an editable install), and table data
only through the paths and URIs in the plan units. Tables live on local disk, which the workers share
with the driver here because they run on the same machine (deploy/README.md says so); one case runs
on S3 (moto) as production would.

Each table is built twice by the same writes: one copy is maintained in ``local[2]``, the other on the
cluster, and the reports, the tables' rows and files, and the change rows must agree.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg_tables import PyIcebergTable, rows_of, small_file_table

from lakeops.storage import open_storage
from lakeops.storage.s3 import S3Keys, clear_client_cache, using_keys
from spark_jobs.session import build_session, stop_session

#: Report fields that differ between two copies of a table by nature, not by what was done: names, ids,
#: times, and byte counts (writers embed times, so equal data need not mean equal sizes).
_VOLATILE = {"duration_s", "table", "output", "committed_version", "commit_attempts"}
_VOLATILE_SUFFIXES = ("snapshot_id", "timestamp_ms")


def _comparable(value: Any) -> Any:
    """``value`` (a report, or part of one) without its :data:`_VOLATILE` fields, at any depth."""
    if isinstance(value, dict):
        return {
            key: _comparable(item)
            for key, item in value.items()
            if key not in _VOLATILE and not key.endswith(_VOLATILE_SUFFIXES) and "bytes" not in key
        }
    if isinstance(value, list):
        return [_comparable(item) for item in value]
    return value


def _delta_table(location: Path) -> None:
    """Small appends with a delete among them, change data feed on: CDC sees inserts and deletes, and
    compaction finds the files of the appends after the delete."""
    for i in range(12):
        if i == 4:
            DeltaTable(str(location)).delete("id % 7 = 0")
        rows = pa.table({"id": pa.array(range(i * 5, i * 5 + 5), pa.int64()), "part": [f"p{i % 2}"] * 5})
        write_deltalake(
            str(location), rows, mode="append", configuration={"delta.enableChangeDataFeed": "true"} if i == 0 else None
        )


def _delta_rows(location: Path) -> pa.Table:
    return DeltaTable(str(location)).to_pyarrow_table().sort_by("id")


def _changes(output: Path, drop: tuple[str, ...]) -> list[dict[str, Any]]:
    """The change rows of a CDC output table, without the columns that name one copy's commits."""
    table = DeltaTable(str(output)).to_pyarrow_table()
    return rows_of(table.drop_columns([c for c in drop if c in table.column_names]))


@dataclass
class Maintained:
    """One copy of each table after cdc, compact and checkpoint on one master, and the reports."""

    delta: Path
    iceberg: PyIcebergTable
    root: Path
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)


def _maintain(run: Callable[..., dict[str, Any]], root: Path, master: str, conf: tuple[str, ...]) -> Maintained:
    root.mkdir()
    delta = root / "delta"
    _delta_table(delta)
    iceberg = small_file_table(root / "iceberg", appends=8, rows=10)
    iceberg.table.delete("id < 5")
    first_snapshot = str(iceberg.reload().history()[0].snapshot_id)
    catalog = ("--catalog-uri", iceberg.catalog_uri)
    spark = ("--master", master, *conf)
    done = Maintained(delta=delta, iceberg=iceberg, root=root)
    done.reports["delta cdc"] = run("cdc", str(delta), "--from", "0", "--output", str(root / "delta_changes"), *spark)
    done.reports["delta compact"] = run("compact", str(delta), *spark)
    done.reports["delta checkpoint"] = run("checkpoint", str(delta), *spark)
    done.reports["iceberg cdc"] = run(
        "cdc", iceberg.identifier, *catalog, "--from", first_snapshot, "--output", str(root / "iceberg_changes"), *spark
    )
    done.reports["iceberg compact"] = run("compact", iceberg.identifier, *catalog, *spark)
    done.reports["iceberg checkpoint"] = run("checkpoint", iceberg.identifier, *catalog, *spark)
    return done


#: What a user passes for this cluster: a driver the workers reach on loopback, small executors.
_CLUSTER_CONF = (
    "--conf",
    "spark.driver.host=127.0.0.1",
    "--conf",
    "spark.driver.bindAddress=127.0.0.1",
    "--conf",
    "spark.executor.memory=512m",
)


@pytest.fixture(scope="module")
def runs(
    spark_cluster: Any, tmp_path_factory: pytest.TempPathFactory, run_lakeops: Callable[..., dict[str, Any]]
) -> Iterator[tuple[Maintained, Maintained]]:
    """The same maintenance in ``local[2]`` and on the cluster (one Spark session each, in turn)."""
    stop_session()  # one SparkContext per process: whatever ran before must not decide the master
    root = tmp_path_factory.mktemp("cluster-vs-local")
    local = _maintain(run_lakeops, root / "local", "local[2]", ())
    stop_session()
    cluster = _maintain(run_lakeops, root / "cluster", spark_cluster.master_url, _CLUSTER_CONF)
    try:
        yield local, cluster
    finally:
        stop_session()


@pytest.mark.parametrize(
    "run", ["delta cdc", "delta compact", "delta checkpoint", "iceberg cdc", "iceberg compact", "iceberg checkpoint"]
)
def test_reports_match_local_mode(runs: tuple[Maintained, Maintained], run: str) -> None:
    local, cluster = runs
    assert _comparable(cluster.reports[run]) == _comparable(local.reports[run])


def test_the_reports_show_real_work(runs: tuple[Maintained, Maintained]) -> None:
    _, cluster = runs
    reports = cluster.reports
    assert reports["delta compact"]["files_removed"] > reports["delta compact"]["files_added"] > 0
    assert reports["iceberg compact"]["files_removed"] > reports["iceberg compact"]["files_added"] > 0
    assert reports["delta checkpoint"]["status"] == "written" and reports["delta checkpoint"]["add_files"] > 0
    assert reports["iceberg checkpoint"]["manifests_before"] > reports["iceberg checkpoint"]["manifests_after"]
    assert reports["delta cdc"]["rows_written"] > 0 and reports["iceberg cdc"]["rows_written"] > 0


def test_tables_read_back_the_same(runs: tuple[Maintained, Maintained]) -> None:
    local, cluster = runs
    assert _delta_rows(cluster.delta).equals(_delta_rows(local.delta))
    assert len(DeltaTable(str(cluster.delta)).file_uris()) == len(DeltaTable(str(local.delta)).file_uris())
    assert cluster.iceberg.rows() == local.iceberg.rows()
    assert len(cluster.iceberg.reload().inspect.files()) == len(local.iceberg.reload().inspect.files())
    assert len(cluster.iceberg.table.inspect.manifests()) == len(local.iceberg.table.inspect.manifests())


def test_change_rows_match_local_mode(runs: tuple[Maintained, Maintained]) -> None:
    local, cluster = runs
    delta_drop = ("_commit_timestamp",)
    assert _changes(cluster.root / "delta_changes", delta_drop) == _changes(local.root / "delta_changes", delta_drop)
    iceberg_drop = ("_commit_timestamp", "_commit_snapshot_id", "_snapshot_id")
    cluster_rows = _changes(cluster.root / "iceberg_changes", iceberg_drop)
    assert cluster_rows == _changes(local.root / "iceberg_changes", iceberg_drop)
    assert {row["_change_type"] for row in cluster_rows} >= {"insert", "delete"}


def test_executors_import_the_shipped_project(spark_cluster: Any, runs: tuple[Maintained, Maintained]) -> None:
    """The cluster session ran with the project shipped as a zip: the executors import lakeops from it,
    namespace packages (folders without ``__init__.py``) included."""
    spark = build_session(master=spark_cluster.master_url)  # the cluster session the runs left active

    def where_lakeops_comes_from(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import lakeops.iceberg.maintenance.changelog as module  # lakeops/iceberg/maintenance has no __init__.py

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"file": [module.__file__]})

    files = {
        row.file
        for row in spark.range(2, numPartitions=2).mapInArrow(where_lakeops_comes_from, "file string").collect()
    }
    assert files and all("lakeops-project-" in f and ".zip" in f for f in files), files


def test_compaction_on_s3_on_the_cluster(
    spark_cluster: Any,
    runs: Any,
    s3_bucket: Any,
    run_lakeops: Callable[..., dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Tasks on the workers do their own S3 IO: the endpoint travels in the plan units (``--endpoint-url``),
    the credentials come from the workers' environment, as in deploy/compose.yaml. The driver's keys are
    lent to its own clients only (as the Dagster resource lends them), so the executors' preflight and
    their units can only have used the workers' own. The secret key then appears nowhere: not in the
    application's event log (whose environment event is what the UI's and the History Server's
    environment page shows), the report, the log records or any object of the table (audit records)."""
    endpoint = s3_bucket.options.endpoint_url
    location = f"{s3_bucket.uri}/warehouse/events"
    keys = S3Keys(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
    delta_rs = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": keys.access_key_id,
        "AWS_SECRET_ACCESS_KEY": keys.secret_access_key,
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }
    for i in range(8):
        write_deltalake(
            location,
            pa.table({"id": pa.array(range(i * 3, i * 3 + 3), pa.int64())}),
            mode="append",
            storage_options=delta_rs,
        )
    before = DeltaTable(location, storage_options=delta_rs).to_pyarrow_table().sort_by("id")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    clear_client_cache()

    events = tmp_path / "events"
    events.mkdir()
    event_log = ("--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events.as_uri()}")
    event_log += ("--conf", "spark.eventLog.compress=false")  # a compressed log would hide the secret
    stop_session()  # a new application, so the event log settings apply
    with using_keys(keys, endpoint_url=endpoint), caplog.at_level(logging.DEBUG, logger="lakeops"):
        report = run_lakeops(
            "compact",
            location,
            "--endpoint-url",
            endpoint,
            "--master",
            spark_cluster.master_url,
            *_CLUSTER_CONF,
            *event_log,
        )
    stop_session()  # flushes and closes the event log
    clear_client_cache()

    secret = keys.secret_access_key.encode()
    logs = [path for path in events.rglob("*") if path.is_file()]
    assert logs and any(b"SparkListenerTaskEnd" in path.read_bytes() for path in logs)
    assert not [path.name for path in logs if secret in path.read_bytes()]
    assert secret.decode() not in json.dumps(report) and secret.decode() not in caplog.text
    with using_keys(keys, endpoint_url=endpoint):
        storage = open_storage(location, s3_bucket.options)
        holding = [info.path for info in storage.list(location) if secret in storage.read(info.path)]
    clear_client_cache()
    assert holding == []

    table = DeltaTable(location, storage_options=delta_rs)
    assert table.to_pyarrow_table().sort_by("id").equals(before)
    assert len(table.file_uris()) == report["files_added"] == 1 and report["files_removed"] == 8
