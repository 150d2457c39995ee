"""What every orchestrator does around a maintenance run, with neither Dagster nor Airflow: open a registry
entry's table once, find a CDC run's pending commits, lend the storage keys, pick the executor, and send the
operation's progress and report to the orchestrator's log line by line.

The Dagster resources (:mod:`orchestration.resources`, :mod:`orchestration.maintenance`,
:mod:`orchestration.assets`) and the Airflow operator (:mod:`orchestration.airflow.operator`) both call these,
so the two cannot drift on how a run reaches its table.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TextIO, cast

from lakeops.executors import Executor, ThreadExecutor
from lakeops.ops import consumers
from lakeops.ops.table import Table, open_table
from lakeops.ops.target import CatalogOptions
from lakeops.redaction import masked_errors
from lakeops.registry import ExecutorChoice, TableEntry
from lakeops.storage import StorageOptions
from spark_jobs.console import MaskedConsole
from spark_jobs.spark_settings import SparkSettings

__all__ = ["LogLines", "lent_keys", "open_entry", "pending_until", "progress_console", "run_executor"]


class LogLines(io.TextIOBase):
    """A text stream that sends each complete line to ``emit`` (a logger's ``info``): Spark task
    progress and the report, in the run's or task's log."""

    def __init__(self, emit: Callable[[str], object]) -> None:
        self._emit = emit
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            if line.strip():
                self._emit(line.rstrip())
        return len(text)


def progress_console(emit: Callable[[str], object]) -> MaskedConsole:
    """A console (secrets masked) whose lines go to ``emit``, for an operation's ``progress`` and its report."""
    return MaskedConsole(file=cast(TextIO, LogLines(emit)), width=160, highlight=False, markup=False)


def open_entry(entry: TableEntry, storage_options: StorageOptions) -> Table:
    """A handle on the table ``entry`` names (:func:`lakeops.ops.table.open_table`): detected and read
    once for everything one run, tick or observation does with it."""
    catalog = CatalogOptions.model_validate(entry.catalog_options())
    return open_table(entry.address, catalog, storage_options=storage_options)


def pending_until(
    entry: TableEntry, table: Table, until: datetime, storage_options: StorageOptions
) -> consumers.PendingRange | None:
    """The commits of ``entry``'s table before ``until`` that its CDC output does not hold yet (None:
    none). A CDC run extracts exactly these, so a re-run of a day already extracted writes nothing."""
    assert entry.cdc.output is not None  # the registry requires it when CDC is enabled
    return consumers.pending_changes(
        table,
        entry.cdc.output,
        since_ms=entry.cdc.since_ms,
        until_ms=int(until.timestamp() * 1000),
        storage_options=storage_options,
    )


def run_executor(master: str | None, conf: dict[str, str], executor: ExecutorChoice) -> Executor:
    """Where a run's units execute: ``driver``, threads of this process; ``spark``, every plan on Spark at
    ``master``; ``auto``, a plan within the driver's limits in threads, a larger one on Spark
    (:meth:`SparkSettings.runs_on_driver`). ``master`` may be ``local[N]`` or ``sc://host:port``."""
    if executor == "driver":
        return ThreadExecutor()
    limits = {"driver_max_bytes": 0, "driver_max_units": 0} if executor == "spark" else {}
    return SparkSettings(master=master, conf=dict(conf), **limits)


@contextmanager
def lent_keys(access_key_id: str | None, secret_access_key: str | None, endpoint_url: str | None) -> Iterator[None]:
    """The keys (when both are given) sign this process's S3 requests to ``endpoint_url`` while the block
    runs, else the process's own AWS credential chain applies; errors leave the block masked
    (:func:`lakeops.redaction.masked_errors`), since an orchestrator records a failure with its whole
    cause chain and a driver's error may quote a catalog URI or an endpoint."""
    with masked_errors():
        if access_key_id is None or secret_access_key is None:
            yield
            return
        from lakeops.storage.s3 import S3Keys, using_keys  # boto3: only when there are keys to lend

        with using_keys(S3Keys(access_key_id, secret_access_key), endpoint_url=endpoint_url):
            yield
