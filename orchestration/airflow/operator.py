"""``LakeopsOperator``: one maintenance operation of one registered table, run on the Airflow worker.

An operator, not a ``@task`` function, because that is what Airflow users compose and configure: a class
they can import into their own DAGs (``LakeopsOperator(task_id=..., table="events", operation="compaction")``),
subclass, and give any ``BaseOperator`` argument (pool, retries, queue, SLA callbacks), and whose name
says in the UI's graph what each task is. Its ``execute`` is the same run a Dagster asset makes
(:mod:`orchestration.operations`: options from the registry policy, the typed :mod:`lakeops.api` call, the
verification against the table re-read): the table opened once, the units on the executor the
registry's ``spark`` sets (threads of the worker for a plan within the driver's limits; ``local[N]`` or
Spark Connect ``sc://…`` beyond them, or always with ``executor: spark``), the progress and the report in
the task's log as ``lakeops`` prints it, the report as JSON in the task's XCom (``return_value``).

A failed verification fails the task (:class:`CheckFailed`, never retried); errors follow
:mod:`orchestration.airflow.retries`. The registry is read again on the worker, from the file the DAG
was built from: what runs is what the file says now.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator, Context

from lakeops.errors import InvalidArgument, LakeopsError
from lakeops.ops.target import CatalogOptions
from lakeops.ops.verify import Verification
from lakeops.redaction import mask_text
from lakeops.registry import Registry, StorageConfig, TableEntry, load_registry
from lakeops.storage import StorageOptions
from lakeops.storage.s3_leases import lease_scope
from orchestration.airflow.retries import RETRY_ARGS, transient_only
from orchestration.operations import SPECS, RunScope, change_feed_unique
from orchestration.runs import lent_keys, open_entry, pending_until, progress_console, run_executor
from spark_jobs.cli import print_report

__all__ = ["CheckFailed", "LakeopsOperator"]


class CheckFailed(LakeopsError):
    """The table re-read after a maintenance run does not pass the operation's check (the message says
    which table, which check and what it found): the task fails, and is not retried."""


def storage_options(config: StorageConfig) -> StorageOptions:
    return StorageOptions(endpoint_url=config.endpoint_url, region=config.region)


@contextmanager
def storage_keys(config: StorageConfig) -> Iterator[None]:
    """The S3 keys from the environment variables the registry names (on the worker), lent for the block;
    a named variable that is unset is an error naming it (never its value)."""
    key_env, secret_env = config.access_key_id_env, config.secret_access_key_env
    if key_env is None or secret_env is None:
        with lent_keys(None, None, config.endpoint_url):
            yield
        return
    missing = [f"${name}" for name in (key_env, secret_env) if not os.environ.get(name)]
    if missing:
        raise InvalidArgument(f"registry storage: {' and '.join(missing)} not set on this worker (S3 keys)")
    with lent_keys(os.environ[key_env], os.environ[secret_env], config.endpoint_url):
        yield


class LakeopsOperator(BaseOperator):
    """``lakeops <operation>`` of the registry table ``table`` (``registry``: the file, default
    ``$LAKEOPS_REGISTRY``, read on the worker). Returns the operation's report as JSON (its XCom)."""

    template_fields = ("table", "registry")
    ui_color = "#d6e9f8"

    def __init__(self, *, table: str, operation: str, registry: str | None = None, **kwargs: Any) -> None:
        if operation not in SPECS:
            raise InvalidArgument(f"LakeopsOperator {table}: operation {operation!r} is not one of {sorted(SPECS)}")
        kwargs.setdefault("retry_policy", transient_only())
        for name, value in RETRY_ARGS.items():
            kwargs.setdefault(name, value)
        super().__init__(**kwargs)
        self.table = table
        self.operation = operation
        self.registry = registry

    def execute(self, context: Context) -> dict[str, Any]:
        registry = load_registry(Path(self.registry) if self.registry else None)
        entry = registry.table(self.table)
        with lease_scope(), storage_keys(registry.storage):
            return self._run(context, registry, entry)

    def _run(self, context: Context, registry: Registry, entry: TableEntry) -> dict[str, Any]:
        spec = SPECS[self.operation]
        options = storage_options(registry.storage)
        table = open_entry(entry, options)
        scope = RunScope()
        if self.operation == "cdc":
            until = context["data_interval_end"]
            assert until is not None  # a CDC DAG's runs have data intervals (its timetable)
            pending = pending_until(entry, table, until, options)
            if pending is None:
                self.log.info("no commits of %s before %s left to extract", entry.name, until.isoformat())
                self._check(entry, spec.check, change_feed_unique(entry, options))
                return {"operation": "cdc", "table": entry.address, "until": until.isoformat(), "rows_written": 0}
            scope = RunScope(pending=pending)
        typed = spec.options(entry, table, scope)
        given = typed.model_dump(exclude_defaults=True, exclude=set(CatalogOptions.model_fields), mode="json")
        self.log.info("%s", mask_text(f"lakeops {spec.command} {entry.address} {given}"))
        console = progress_console(self.log.info)
        spark = registry.spark
        executor = run_executor(spark.master, spark.conf, spark.executor)
        report = spec.run(table, typed, executor=executor, progress=console)
        print_report(report, as_json=False, console=console)
        self._check(entry, spec.check, spec.verify(entry, table, report))
        data: dict[str, Any] = json.loads(report.to_json())  # secrets masked, as --json prints it
        return data

    def _check(self, entry: TableEntry, name: str, verification: Verification) -> None:
        self.log.info("check %s: %s", name, mask_text(verification.summary))
        if not verification.passed:
            raise CheckFailed(f"{entry.name}: check {name} failed after {self.operation}: {verification.summary}")
