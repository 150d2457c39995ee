"""``lakeops__health``: the registry's health in Airflow, as ``lakeops health`` gives it in a terminal.

One task observes every registered table now (:func:`lakeops.planning.registry_health.observe_registry`,
several at once, reads only), logs the verdict table as ``lakeops health`` prints it and returns it as
its XCom. The task fails when a table's worst signal is at ERROR (or it cannot be read), naming each such
table with its signal, value, threshold and what to run; tables at WARN are logged as warnings and do not
fail it (Airflow has no warning state). It takes no table's pool: it changes nothing. The schedule is the
tables' health crons (``schedules.health``), each tick one run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator, Context

from lakeops.errors import LakeopsError
from lakeops.planning.registry_health import TableHealth, observe_registry
from lakeops.redaction import mask_text
from lakeops.registry import load_registry
from orchestration.airflow.operator import storage_keys, storage_options
from orchestration.runs import progress_console
from spark_jobs.cli import print_report

__all__ = ["RegistryHealthOperator", "Unhealthy"]


class Unhealthy(LakeopsError):
    """Tables whose worst health signal is at ERROR (or that could not be read)."""


def _line(table: TableHealth) -> str:
    return f"{table.table}: {table.status}: {table.worst_text()}"


class RegistryHealthOperator(BaseOperator):
    """Every registered table's health now (``registry``: the file, default ``$LAKEOPS_REGISTRY``, read on
    the worker); fails on any table at ERROR."""

    template_fields = ("registry",)
    ui_color = "#e8f5e9"

    def __init__(self, *, registry: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.registry = registry

    def execute(self, context: Context) -> dict[str, Any]:
        path = Path(self.registry) if self.registry else None
        registry = load_registry(path)
        with storage_keys(registry.storage):
            health = observe_registry(registry, str(path or "the registry"), storage_options(registry.storage))
        print_report(health, as_json=False, console=progress_console(self.log.info))
        for table in health.tables:
            if table.severity == "warn":
                self.log.warning("%s", mask_text(_line(table)))
        failing = [table for table in health.tables if table.severity == "error"]
        if failing:
            raise Unhealthy(
                f"{len(failing)} of {len(health.tables)} tables at ERROR: "
                + "; ".join(mask_text(_line(table)) for table in failing)
            )
        data: dict[str, Any] = json.loads(health.to_json())
        return data
