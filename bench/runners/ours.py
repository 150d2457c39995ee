"""lakeops through :func:`spark_jobs.operations.run_operation`, as the CLI and Dagster run it with no
master configured: a small plan runs in threads on the driver, a larger one on a new ``local[*]``
session started inside the timed call (start-up included)."""

from __future__ import annotations

import importlib
from typing import Any

from bench.settings import TARGET_FILE_SIZE
from lakeops.delta.snapshot import load_snapshot
from lakeops.storage import open_storage
from spark_jobs.commands import COMMANDS
from spark_jobs.operations import run_operation
from spark_jobs.spark_settings import SparkSettings

DEFAULT = SparkSettings()

#: The code each benchmarked operation runs, which the command line imports only when a command meets its
#: format (``tests/cli/test_startup_imports.py``). Imported here, with the runners, so ours' imports stay
#: outside the timed call as the peers' (deltalake, PyIceberg) do: the figures compare the work.
FORMAT_CODE = (
    "lakeops.changefeed.cdf_export",
    "lakeops.delta.maintenance.compaction",
    "lakeops.delta.maintenance.orphans",
    "lakeops.iceberg.maintenance.compaction",
    "lakeops.iceberg.maintenance.expiry",
    "lakeops.iceberg.sql_catalog",
    "lakeops.iceberg.table",
    "lakeops.ops.icechunk.orphans",
)
for _module in (*COMMANDS.values(), *FORMAT_CODE):
    importlib.import_module(_module)


def _run(name: str, params: dict[str, Any], options: dict[str, object]) -> dict[str, Any]:
    if "catalog_uri" in params:
        options = {"catalog_uri": params["catalog_uri"], **options}
    report = run_operation(name, params["target"], options, spark=DEFAULT)
    return report.metrics()


def compact(params: dict[str, Any]) -> dict[str, Any]:
    return _run("compact", params, {"target_file_size": TARGET_FILE_SIZE})


def checkpoint(params: dict[str, Any]) -> dict[str, Any]:
    return _run("checkpoint", params, {})


def snapshot(params: dict[str, Any]) -> dict[str, Any]:
    """Reconstruct the latest snapshot from its checkpoint (library only: planning runs on the driver)."""
    root = params["target"]
    loaded = load_snapshot(open_storage(root), root)
    return {"files": len(loaded.files), "version": loaded.version}


def vacuum(params: dict[str, Any]) -> dict[str, Any]:
    return _run("orphans", params, {})


def cdc(params: dict[str, Any]) -> dict[str, Any]:
    return _run("cdc", params, {"from_version": 1, "output": params["scratch"] + "/changes"})


def expire(params: dict[str, Any]) -> dict[str, Any]:
    """Every snapshot but the current one (PyIceberg's ``older_than(now)`` keeps only ref heads)."""
    return _run("expire", params, {"older_than": "0s", "retain_last": 1, "force": True})


def gc(params: dict[str, Any]) -> dict[str, Any]:
    return _run("orphans", params, {})


RUNNERS = {
    "compact": compact,
    "checkpoint": checkpoint,
    "snapshot": snapshot,
    "vacuum": vacuum,
    "cdc": cdc,
    "expire": expire,
    "gc": gc,
}
