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

from rich.console import Console

from lakeops.ops.options import ExpiryOptions
from lakeops.quarantine import TRASH_DIR
from lakeops.storage import StorageOptions
from spark_jobs.operations import options_from_args, spark_from_args
from spark_jobs.spark_settings import SparkSettings

if TYPE_CHECKING:
    from lakeops.ops.expiry import ExpiryReport, SnapshotExpiryReport
    from lakeops.ops.icechunk.expiry import IcechunkExpiryReport

HELP = (
    "expire Iceberg snapshots (and the files only they reach) by the table's retention policy; "
    "delete Delta log files older than delta.logRetentionDuration; expire Icechunk snapshots"
)
USES_SPARK = True


class Options(ExpiryOptions):
    """The planner's options plus the job's own: ``dry_run`` lists what would be deleted, deleting
    nothing; ``quarantine`` moves the files into a trash run instead of deleting them."""

    dry_run: bool = False
    quarantine: bool = False


def configure(parser: argparse.ArgumentParser) -> None:
    from spark_jobs.cli import retention_arg

    parser.add_argument(
        "--older-than",
        type=retention_arg,
        metavar="DURATION",
        help="retention, e.g. 30d (default: Delta delta.logRetentionDuration, else 30 days; Iceberg each "
        "branch's max-snapshot-age-ms, else history.expire.max-snapshot-age-ms, else 5 days); "
        "negative values: --older-than=-1d is refused",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="allow a retention shorter than the table's own (Delta delta.logRetentionDuration, Iceberg "
        "history.expire.* and each branch's settings), a Delta table with delta.enableExpiredLogCleanup=false, "
        "or an Iceberg --snapshot-id younger than the retention",
    )
    parser.add_argument(
        "--keep-from-version",
        type=int,
        metavar="V",
        help="keep version V readable and every commit from V on (e.g. what a change-feed consumer has not "
        "extracted yet); Iceberg: keep every snapshot whose sequence number is V or more (lakeops cdc's watermark)",
    )
    parser.add_argument(
        "--retain-last",
        type=int,
        metavar="N",
        help="keep the newest N versions readable (Delta); keep at least N snapshots of every branch (Iceberg)",
    )
    parser.add_argument(
        "--snapshot-id",
        type=int,
        action="append",
        metavar="ID",
        help="Iceberg: expire this snapshot too (repeatable; never a branch or tag head)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    add_quarantine_flag(parser)


def add_quarantine_flag(parser: argparse.ArgumentParser) -> None:
    """``--quarantine``, shared by every command that deletes files."""
    parser.add_argument(
        "--quarantine",
        action="store_true",
        help=f"move the files to {TRASH_DIR}/RUN_ID/ under the table root instead of deleting them; "
        "undo with lakeops restore TABLE RUN_ID, free the space with lakeops purge-trash",
    )


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
