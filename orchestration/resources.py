"""Dagster resources: where maintenance runs (Spark) and how storage is reached (S3 settings).

Both are ``ConfigurableResource``s, so the launchpad and the run config can override them per run
(e.g. a bigger cluster for a backfill). Credentials are resource fields filled from environment
variables through ``dagster.EnvVar`` (the registry names the variables, never the values); Dagster
then shows only the variable's name. The keys sign the S3 requests of this process only
(:func:`lakeops.storage.s3.using_keys`): the process environment is left alone, so concurrent steps
cannot race on it and no child process inherits the keys. Spark executors use their own identity
(the workers' environment, an instance or pod role); local Spark workers inherit the environment the
Dagster run started with, not these fields (deploy/README.md, "Credentials").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from lakeops.executors import Executor
from lakeops.registry import ExecutorChoice
from lakeops.storage import StorageOptions
from orchestration.runs import lent_keys, run_executor

__all__ = ["SparkResource", "StorageResource"]


class SparkResource(dg.ConfigurableResource):
    """Where a run's units execute: the Spark master (default: ``$LAKEOPS_SPARK_MASTER``, else
    ``local[*]``), extra Spark conf, and ``executor``: ``auto`` (a plan small enough runs in threads
    on the run's own process, a larger one on Spark: :meth:`SparkSettings.runs_on_driver`), ``spark``
    (every plan on Spark) or ``driver`` (every plan in threads, never a Spark session)."""

    master: str | None = None
    conf: dict[str, str] = {}
    executor: ExecutorChoice = "auto"

    def run_executor(self) -> Executor:
        """The executor the operations' units run on (:func:`orchestration.runs.run_executor`)."""
        return run_executor(self.master, dict(self.conf), self.executor)


class StorageResource(dg.ConfigurableResource):
    """S3 endpoint and region (non-secret), and optional keys (set them with ``dagster.EnvVar``)."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None

    def options(self) -> StorageOptions:
        return StorageOptions(endpoint_url=self.endpoint_url, region=self.region)

    @contextmanager
    def credentials(self) -> Iterator[None]:
        """The configured keys sign this process's S3 requests to the endpoint while the block runs
        (unset: the process's own AWS credential chain applies unchanged). Every call of lakeops from Dagster
        runs in this block, so it is also where errors leave masked
        (:func:`lakeops.redaction.masked_errors`): Dagster records a failure with its whole cause
        chain, and a driver's or an S3 client's error may quote a catalog URI or an endpoint."""
        with lent_keys(self.access_key_id, self.secret_access_key, self.endpoint_url):
            yield
