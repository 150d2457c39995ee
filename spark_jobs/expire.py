"""Expiry: ``lakeops expire TABLE`` / ``spark-submit spark_jobs/expire.py TABLE`` (same options).

Delta (log expiry): no Spark job, the deletions are a handful of log files, done on the driver in one
batched request. Iceberg (snapshot expiry): the driver commits the new metadata, then the files only
expired snapshots reached are deleted, one Spark task per batch — on the driver when they fit in one
batch, so small expiries start no cluster. Icechunk: :mod:`lakeops.ops.icechunk.expiry`. The steps are
:mod:`lakeops.ops.expiry`'s; this module parses options and prints.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pydantic import BaseModel
from rich.console import Console

from lakeops.delta.maintenance.options import DeltaLogExpiryOptions
from lakeops.iceberg.maintenance.options import IcebergSnapshotExpiryOptions
from lakeops.icechunk.maintenance.options import IcechunkExpiryOptions
from lakeops.ops.options import ExpiryOptions
from lakeops.retention_options import ExpiryAge, ExpiryFloor, ExpiryForce, RetainLast
from lakeops.storage import StorageOptions
from spark_jobs.operations import Deletions, options_from_args, spark_from_args
from spark_jobs.option_arguments import CommandOptions
from spark_jobs.spark_settings import SparkSettings

if TYPE_CHECKING:
    from lakeops.ops.expiry import ExpiryReport, SnapshotExpiryReport
    from lakeops.ops.icechunk.expiry import IcechunkExpiryReport

HELP = (
    "expire Iceberg snapshots (and the files only they reach) by the table's retention policy; "
    "delete Delta log files older than delta.logRetentionDuration; expire Icechunk snapshots"
)
USES_SPARK = True


class Options(ExpiryOptions, Deletions):
    """The planner's options plus the job's own: ``dry_run`` lists what would be deleted, deleting
    nothing; ``quarantine`` moves the files into a trash run instead of deleting them."""


#: The models declaring expiry's options, in the help's order: the shared ones at the top, each
#: format's own in a group of its name.
SECTIONS: dict[type[BaseModel], str | None] = {
    ExpiryAge: None,
    ExpiryForce: None,
    ExpiryFloor: None,
    RetainLast: None,
    Deletions: None,
    IcebergSnapshotExpiryOptions: "Iceberg",
}
#: Each format's own options model.
FORMATS: dict[str, type[BaseModel]] = {
    "Delta": DeltaLogExpiryOptions,
    "Iceberg": IcebergSnapshotExpiryOptions,
    "Icechunk": IcechunkExpiryOptions,
}


#: The command's options, declared once: its parser and docs/options.md are made from them.
OPTIONS = CommandOptions(Options, SECTIONS, FORMATS)
configure = OPTIONS.configure


def run(
    args: argparse.Namespace, storage_options: StorageOptions, progress: Console
) -> ExpiryReport | IcechunkExpiryReport | SnapshotExpiryReport:
    """``lakeops expire``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=spark_from_args(args), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> ExpiryReport | IcechunkExpiryReport | SnapshotExpiryReport:
    """:func:`lakeops.api.expire`, deleting on Spark when there are many batches."""
    from lakeops import api

    return api.expire(
        table,
        options,
        dry_run=options.dry_run,
        quarantine=options.quarantine,
        storage_options=storage_options,
        executor=spark,
        progress=progress,
    )


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="expire"))
