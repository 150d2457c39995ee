"""Airflow's own mechanisms as lakeops uses them (issue 37, item 3): one pool per table in the metadata
database, created by ``python -m orchestration.airflow.pools`` (and importable with ``airflow pools import``),
an operator's own limit left alone; and the retry policy every task carries, evaluated as the worker does:
a transient storage error is retried, a ``CommitStateUnknown`` (and every other error) fails at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from airflow.sdk import RetryAction
from airflow_commands import AIRFLOW_ENV, ROOT, airflow, json_output

from lakeops.errors import AlreadyExists, CommitConflict, CommitPending, CommitStateUnknown, NotFound, StorageError
from lakeops.registry import parse_registry
from orchestration.airflow.operator import CheckFailed
from orchestration.airflow.registry_dags import build_dags

REGISTRY = """
tables:
  - {name: events, location: /lake/events}
  - {name: orders, location: /lake/orders}
"""


def pools(registry: Path) -> dict[str, int]:
    listed = json_output(airflow(registry, "pools", "list", "-o", "json"))
    return {pool["pool"]: int(pool["slots"]) for pool in listed if pool["pool"].startswith("lakeops_")}


def test_every_table_gets_its_pool_of_one_slot(airflow_db: Path, tmp_path: Path) -> None:
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(REGISTRY)
    env = os.environ | AIRFLOW_ENV | {"LAKEOPS_REGISTRY": str(registry)}
    command = [sys.executable, "-m", "orchestration.airflow.pools"]
    exported = tmp_path / "pools.json"
    done = subprocess.run([*command, "--export", str(exported)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    file = json.loads(exported.read_text())
    assert {name: pool["slots"] for name, pool in file.items()} == {"lakeops_events": 1, "lakeops_orders": 1}
    # The export as `airflow pools import` reads it, here with an operator's own limit for one table.
    exported.write_text(json.dumps({"lakeops_orders": file["lakeops_orders"] | {"slots": 4}}))
    assert airflow(registry, "pools", "import", str(exported)).returncode == 0

    created = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert created.returncode == 0, created.stderr[-3000:]
    assert created.stdout.strip().endswith("created 1 pool(s): lakeops_events")
    assert pools(registry) == {"lakeops_events": 1, "lakeops_orders": 4}  # the operator's limit kept


@pytest.mark.parametrize(
    ("error", "action"),
    [
        (StorageError("s3://lake/events/_delta_log/: connection reset"), RetryAction.RETRY),
        (CommitStateUnknown("events: the commit's outcome is unknown"), RetryAction.FAIL),
        (CommitPending("events: the commit may still land"), RetryAction.FAIL),
        (NotFound("s3://lake/events/part-0.parquet"), RetryAction.FAIL),
        (AlreadyExists("s3://lake/events/_delta_log/00000000000000000005.json"), RetryAction.FAIL),
        (CommitConflict("events: a concurrent commit removed the files"), RetryAction.FAIL),
        (CheckFailed("events: check rows_kept failed after compaction"), RetryAction.FAIL),
        (ValueError("a bug"), RetryAction.FAIL),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else value.value,
)
def test_only_transient_storage_errors_are_retried(error: Exception, action: RetryAction) -> None:
    (task,) = build_dags(parse_registry(REGISTRY), Path("lakeops.yaml"))["lakeops__events__compaction"].tasks
    assert task.retries == 3 and task.retry_exponential_backoff == 2.0
    decision = task.retry_policy.evaluate(error, try_number=1, max_tries=4)
    assert decision.action == action, decision.reason
