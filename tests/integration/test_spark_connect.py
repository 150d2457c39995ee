"""Every lakeops run through a long-lived Spark Connect server on the standalone cluster (issue 23, part 1).

The server (``SparkConnectServer`` from the installed pyspark, ``spark-submit`` against ``spark_cluster``'s
master, gRPC on 127.0.0.1) is one Spark application whose executors stay registered: a Dagster run or a
``lakeops`` command given ``--master sc://…`` pays no JVM or executor start-up. The runs below send every
plan to Spark (``LAKEOPS_DRIVER_MAX_BYTES=0``, ``LAKEOPS_DRIVER_MAX_UNITS=0``); the server's event log
says where the tasks ran and that executors registered once for all of them; delta-rs and PyIceberg read
the tables afterwards.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark
import pytest
from deltalake import DeltaTable, write_deltalake
from integration.conftest import free_port, wait_for
from pyiceberg_tables import rows_of, small_file_table

from spark_jobs.session import stop_session


@dataclass(frozen=True)
class ConnectServer:
    url: str
    #: The server application's event log directory (its one log is ``….inprogress`` while it runs).
    events: Path


def _cores_granted(web_ui: str) -> int:
    """Cores the master has granted to running applications (the server's executors, once registered)."""
    with urllib.request.urlopen(f"{web_ui}/json/", timeout=5) as response:
        return sum(int(app.get("cores", 0)) for app in json.load(response).get("activeapps", []))


def _executors_added(events: Path) -> int:
    """Executors the server's driver has registered, by its event log (Spark flushes the log on each)."""
    logs = list(events.iterdir())
    if not logs:
        return 0
    return sum('"SparkListenerExecutorAdded"' in line for line in logs[0].read_text().splitlines())


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def connect_server(spark_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    root = tmp_path_factory.mktemp("spark-connect")
    events = root / "events"
    events.mkdir()
    port = free_port()
    spark_home = Path(pyspark.__file__).parent
    command = [
        str(spark_home / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master",
        spark_cluster.master_url,
        *("--conf", "spark.connect.grpc.binding.address=127.0.0.1"),
        *("--conf", f"spark.connect.grpc.binding.port={port}"),
        *("--conf", "spark.driver.host=127.0.0.1"),
        *("--conf", "spark.driver.bindAddress=127.0.0.1"),
        *("--conf", "spark.executor.memory=512m"),
        *("--conf", "spark.ui.enabled=false"),
        *("--conf", "spark.eventLog.enabled=true"),
        *("--conf", f"spark.eventLog.dir={events.as_uri()}"),
        *("--conf", "spark.eventLog.rolling.enabled=false"),  # one plain JSON-lines file to read
        *("--conf", "spark.eventLog.compress=false"),
        *("--conf", f"spark.pyspark.python={sys.executable}"),
    ]
    env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    log = (root / "server.log").open("wb")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _listening(port), "the Spark Connect server", 120)
        # Both workers' executors up before the first run (on a loaded machine they may come late).
        wait_for(lambda: _cores_granted(spark_cluster.web_ui) == 2, "the server's two executors", 120)
        # Granted cores are not yet registered executors: wait until the driver has both, or every task
        # lands on the one that registered first.
        wait_for(lambda: _executors_added(events) == 2, "the driver registering both executors", 120)
        stop_session()  # one session per process: the runs below must connect to the server
        yield ConnectServer(url=f"sc://127.0.0.1:{port}", events=events)
    finally:
        stop_session()
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.fixture
def on_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every plan to Spark, however small."""
    monkeypatch.setenv("LAKEOPS_DRIVER_MAX_BYTES", "0")
    monkeypatch.setenv("LAKEOPS_DRIVER_MAX_UNITS", "0")


def _delta(location: Path) -> None:
    for i in range(10):
        rows = pa.table({"id": pa.array(range(i * 5, i * 5 + 5), pa.int64())})
        write_deltalake(
            str(location), rows, mode="append", configuration={"delta.enableChangeDataFeed": "true"} if i == 0 else None
        )


@pytest.mark.usefixtures("on_spark")
def test_every_operation_runs_through_the_connect_server(
    connect_server: ConnectServer, tmp_path: Path, run_lakeops: Callable[..., dict[str, Any]]
) -> None:
    spark = ("--master", connect_server.url)
    delta = tmp_path / "delta"
    _delta(delta)
    rows = DeltaTable(str(delta)).to_pyarrow_table().sort_by("id")

    changes = run_lakeops("cdc", str(delta), "--from", "0", "--output", str(tmp_path / "changes"), *spark)
    compacted = run_lakeops("compact", str(delta), "--min-input-files", "2", *spark)
    checkpointed = run_lakeops("checkpoint", str(delta), *spark)

    assert changes["rows_written"] == 50 and DeltaTable(str(tmp_path / "changes")).to_pyarrow_table().num_rows == 50
    assert (compacted["files_removed"], compacted["files_added"]) == (10, 1)
    assert checkpointed["status"] == "written"
    assert DeltaTable(str(delta)).to_pyarrow_table().sort_by("id").equals(rows)

    iceberg = small_file_table(tmp_path / "iceberg", appends=6, rows=10)
    before = rows_of(iceberg.reload().scan().to_arrow())
    catalog = ("--catalog-uri", iceberg.catalog_uri)
    rewritten = run_lakeops("compact", iceberg.identifier, *catalog, *spark)
    listed = run_lakeops(
        "orphans", iceberg.identifier, *catalog, "--listing-threshold", "0", "--dry-run", *spark
    )  # the table's directories listed by Spark tasks
    assert rewritten["files_removed"] == 6 and rewritten["files_added"] == 1
    assert listed["deleted_files"] == 0
    assert rows_of(iceberg.reload().scan().to_arrow()) == before


def test_one_application_on_both_executors_registered_once(connect_server: ConnectServer) -> None:
    """Runs after the operations above: they all ran in the server's one application, on the executors
    that registered when the server started and never again. (Which of the two gets each small task is
    the scheduler's draw; that both exist before the first run is the fixture's wait.)"""
    (log,) = list(connect_server.events.iterdir())
    events = [json.loads(line) for line in log.read_text().splitlines()]
    kinds = [event["Event"] for event in events]
    assert kinds.count("SparkListenerApplicationStart") == 1
    executors = {e["Executor ID"] for e in events if e["Event"] == "SparkListenerExecutorAdded"}
    assert len(executors) == 2
    ran_on = {e["Task Info"]["Executor ID"] for e in events if e["Event"] == "SparkListenerTaskEnd"}
    assert ran_on and ran_on <= executors
    assert kinds.count("SparkListenerExecutorAdded") == 2  # once, at the server's start: not per run
    assert kinds.count("SparkListenerJobStart") >= 5  # cdc, compactions, checkpoint, listing sent work here


def test_a_classic_session_follows_in_the_same_process(connect_server: ConnectServer) -> None:
    """pyspark marks a process that made a Connect session as a Connect client; stopping the session
    (spark_jobs.session.stop_session) must clear that, or the next local session fails for want of a URL."""
    from spark_jobs.session import build_session

    remote = build_session(master=connect_server.url)
    assert "SPARK_CONNECT_MODE_ENABLED" in os.environ
    stop_session(remote)
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ
    local = build_session(master="local[1]")
    try:
        assert local.range(3).count() == 3 and local.sparkContext.master == "local[1]"
    finally:
        stop_session(local)
