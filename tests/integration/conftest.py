"""Real components on 127.0.0.1 for the integration tests, started once per session and stopped after.

- :func:`postgres`: a PostgreSQL server from Debian's ``postgresql`` package (installed with apt-get
  when ``initdb`` is nowhere to be found), in a fresh data directory, on a free port, with password
  authentication, and the two databases production uses (``dagster``, ``iceberg_catalog``).
- :func:`spark_cluster`: a Spark standalone master and two workers started with ``spark-class`` from
  the installed pyspark (its package directory is ``SPARK_HOME``), one core and 1 GB each.

Everything listens on 127.0.0.1 only. PostgreSQL refuses to run as root, so as root its commands run as
the ``postgres`` user the package creates.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark
import pytest

from spark_jobs.cli import main as lakeops

_PG_USER = "lakeops"
_PG_PASSWORD = "lakeops-integration"  # a throw-away server on loopback, deleted after the session
_PG_DATABASES = ("dagster", "iceberg_catalog")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(condition: object, what: str, timeout: float) -> None:
    """Poll ``condition()`` (a callable) until it is true; fail naming ``what`` after ``timeout`` s."""
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if condition():
                return
        time.sleep(0.5)
    pytest.fail(f"{what} not ready after {timeout:.0f} s")


@dataclass(frozen=True)
class Postgres:
    host: str
    port: int
    user: str
    password: str

    def sqlalchemy_url(self, database: str, *, with_password: bool = True) -> str:
        secret = f":{self.password}" if with_password else ""
        return f"postgresql+psycopg2://{self.user}{secret}@{self.host}:{self.port}/{database}"


def _postgres_bin() -> Path:
    """The directory of ``initdb``/``pg_ctl``: on PATH, in Debian's layout, or after installing it."""
    for _ in range(2):
        on_path = shutil.which("initdb")
        if on_path:
            return Path(on_path).resolve().parent
        debian = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if debian:
            return debian[-1].parent
        if os.geteuid() != 0:
            pytest.fail("PostgreSQL is not installed and installing it needs root: apt-get install -y postgresql")
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "postgresql"],
            check=True,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    pytest.fail("apt-get installed postgresql but initdb is still not found")


def _as_postgres(argv: list[str]) -> list[str]:
    """``argv`` run as the ``postgres`` user when we are root (the server refuses root)."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    bindir = _postgres_bin()
    # Not under pytest's tmp dir: that is private to root, and the server runs as `postgres`.
    root = Path(tempfile.mkdtemp(prefix="lakeops-pg-"))
    data, pwfile = root / "data", root / "pwfile"
    pwfile.write_text(_PG_PASSWORD + "\n")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(pwfile, "postgres")
    port = free_port()
    subprocess.run(
        _as_postgres(
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                _PG_USER,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ]
        ),
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    pg_ctl = [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log")]
    subprocess.run(_as_postgres([*pg_ctl, "-o", options, "-w", "-t", "60", "start"]), check=True, capture_output=True)
    server = Postgres(host="127.0.0.1", port=port, user=_PG_USER, password=_PG_PASSWORD)
    try:
        import psycopg2

        conn = psycopg2.connect(host=server.host, port=port, user=_PG_USER, password=_PG_PASSWORD, dbname="postgres")
        conn.autocommit = True
        with conn.cursor() as cursor:
            for database in _PG_DATABASES:
                cursor.execute(f"CREATE DATABASE {database}")
        conn.close()
        yield server
    finally:
        subprocess.run(_as_postgres([*pg_ctl, "-m", "fast", "-w", "stop"]), check=False, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class SparkCluster:
    master_url: str
    web_ui: str

    def alive_workers(self) -> int:
        with urllib.request.urlopen(f"{self.web_ui}/json/", timeout=5) as response:
            state = json.load(response)
        return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


def _spark_env(log_dir: Path) -> dict[str, str]:
    """Environment of the master and workers: small daemons that start fast, logs in ``log_dir``."""
    return {
        **os.environ,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(log_dir),
        "SPARK_DAEMON_MEMORY": "512m",
        "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    }


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory, s3_server: object) -> Iterator[SparkCluster]:
    """A standalone master and two workers (one core, 1 GB each); stopped after the session.

    Depends on ``s3_server`` so the workers, and through them the executors, inherit its endpoint's
    credentials: on a real cluster, too, workers get their S3 settings from their own environment.
    """
    root = tmp_path_factory.mktemp("spark-cluster")
    env = _spark_env(root)
    spark_class = str(Path(env["SPARK_HOME"]) / "bin" / "spark-class")
    port, ui_port = free_port(), free_port()
    cluster = SparkCluster(master_url=f"spark://127.0.0.1:{port}", web_ui=f"http://127.0.0.1:{ui_port}")
    commands = [
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui_port),
        ],
    ]
    for n in (1, 2):
        work = root / f"worker-{n}"
        work.mkdir()
        commands.append(
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                cluster.master_url,
                "--host",
                "127.0.0.1",
                "--port",
                str(free_port()),
                "--webui-port",
                str(free_port()),
                "--cores",
                "1",
                "--memory",
                "1g",
                "--work-dir",
                str(work),
            ]
        )
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for i, command in enumerate(commands):
            log = (root / f"daemon-{i}.log").open("wb")
            processes.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT))
            if i == 0:
                wait_for(lambda: cluster.alive_workers() >= 0, "Spark master web UI", 90)
        wait_for(lambda: cluster.alive_workers() == 2, "two registered Spark workers", 120)
        yield cluster
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _run_lakeops(*argv: str) -> dict[str, Any]:
    """``lakeops ARGV --json`` in-process, as a user runs it; asserts success and returns the report."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = lakeops([*argv, "--json"])
    assert code == 0, f"lakeops {' '.join(argv)} exited {code}"
    report: dict[str, Any] = json.loads(out.getvalue())
    return report


@pytest.fixture(scope="session")
def run_lakeops() -> Callable[..., dict[str, Any]]:
    """:func:`_run_lakeops`; usable from module-scoped fixtures, unlike ``capsys``."""
    return _run_lakeops
