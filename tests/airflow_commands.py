"""Real Airflow for the tests of tests/airflow (imported by its conftest, before anything imports airflow):
an ``AIRFLOW_HOME`` of its own per test process (each xdist
worker's) with a SQLite metadata database made by ``airflow db migrate``, the DAG folder
``orchestration/airflow/dags``, no example DAGs. Set at import, before anything imports airflow (it
reads its configuration once, on import). Commands run as an operator runs them (``airflow ...`` in a
subprocess, with the registry in ``$LAKEOPS_REGISTRY``); no server is started.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DAGS_FOLDER = ROOT / "orchestration" / "airflow" / "dags"
HOME = Path(tempfile.mkdtemp(prefix="lakeops-airflow-home-"))
atexit.register(shutil.rmtree, HOME, ignore_errors=True)
AIRFLOW_ENV = {
    "AIRFLOW_HOME": str(HOME),
    "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
}
os.environ.update(AIRFLOW_ENV)


def airflow(registry: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``airflow <args>`` with ``registry`` as ``$LAKEOPS_REGISTRY``."""
    env = os.environ | AIRFLOW_ENV | {"LAKEOPS_REGISTRY": str(registry)}
    command = [sys.executable, "-m", "airflow", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def json_output(done: subprocess.CompletedProcess[str], returncode: int = 0) -> Any:
    """The JSON document a command printed with ``-o json``: its last line (Airflow's log lines and warnings
    go to stdout too, before it); ``returncode``: the command's exit status (``list-import-errors`` exits 1
    when there are some)."""
    assert done.returncode == returncode, done.stdout[-3000:] + done.stderr[-3000:]
    *_, last = done.stdout.strip().splitlines()
    return json.loads(last)


def xcom(dag_id: str, task_id: str) -> Any:
    """The latest ``return_value`` XCom of ``dag_id``'s task ``task_id``, read from the metadata database."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = (
        select(XComModel.value)
        .where(XComModel.dag_id == dag_id, XComModel.task_id == task_id, XComModel.key == "return_value")
        .order_by(XComModel.timestamp.desc())
        .limit(1)
    )
    with create_session() as session:
        value = session.scalar(query)
    return json.loads(value) if isinstance(value, str) else value
