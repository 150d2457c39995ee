"""tests/airflow: real Airflow in an ``AIRFLOW_HOME`` of this test process (:mod:`airflow_commands`, imported
first: Airflow reads its configuration once, on import)."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow_commands import HOME, airflow


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """The metadata database, migrated once per test process, with the DAG folder's bundle registered
    (``airflow dags reserialize`` of an empty registry: ``--local`` listings read the bundles from it)."""
    empty = HOME / "empty.yaml"
    empty.write_text("tables: []\n")
    for command in (("db", "migrate"), ("dags", "reserialize")):
        done = airflow(empty, *command)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return HOME
