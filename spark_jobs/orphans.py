"""Orphan-file removal as a Spark job: ``spark-submit spark_jobs/orphans.py TABLE [options]`` (same
options as ``lakeops orphans``). Delta (VACUUM) and Iceberg: the location is listed on the driver,
or one Spark task per second-level directory for large trees; the plan is made on the driver.
Batches of ~1000 paths are then deleted by threads on the driver, or one Spark task each when there
are many (:meth:`~spark_jobs.spark_settings.SparkSettings.delete`). The
steps are :mod:`lakeops.ops.orphans`'s; this module parses options and prints."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rich.console import Console

from lakeops.iceberg.maintenance.defaults import DEFAULT_OLDER_THAN, PrefixMismatchMode
from lakeops.ops.options import OrphansOptions
from lakeops.storage import StorageOptions
from spark_jobs.expire import add_quarantine_flag
from spark_jobs.operations import options_from_args, spark_from_args
from spark_jobs.spark_settings import SparkSettings

if TYPE_CHECKING:
    from lakeops.ops.icechunk.orphans import IcechunkGcReport
    from lakeops.ops.orphans import IcebergOrphansReport, OrphansReport

    Report = OrphansReport | IcebergOrphansReport | IcechunkGcReport

HELP = (
    "delete files no metadata references (Delta VACUUM: expired tombstoned and untracked data files; "
    "Iceberg: files under the table location no metadata file, snapshot or statistics entry reaches)"
)
USES_SPARK = True


class Options(OrphansOptions):
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
        help="retention, e.g. 7d (default: Delta delta.deletedFileRetentionDuration, else 7 days; Iceberg "
        f"{DEFAULT_OLDER_THAN.days} days); nothing newer than this is deleted",
    )
    parser.add_argument(
        "--force-short-retention",
        action="store_true",
        help="allow a retention shorter than the table's delta.deletedFileRetentionDuration (Iceberg: "
        f"than {DEFAULT_OLDER_THAN.days} days), only when nothing reads or writes the table from before that horizon",
    )
    parser.add_argument(
        "--keep-from-version",
        type=int,
        metavar="V",
        help="keep every file needed to read versions V and later and their changes (e.g. for a change-feed "
        "consumer that has extracted through V)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    add_quarantine_flag(parser)
    iceberg = parser.add_argument_group("Iceberg")
    iceberg.add_argument(
        "--prefix-mismatch-mode",
        choices=[m.value for m in PrefixMismatchMode],
        help="a listed file that the metadata names under another scheme or authority (bucket): stop with an "
        "error (default), ignore (keep it) or delete (treat it as unreferenced)",
    )
    parser.add_argument(
        "--listing-threshold",
        type=int,
        metavar="N",
        help="list the table on Spark, one task per second-level directory (e.g. data/<partition>, or a Delta "
        "table's <column>=<value>/<column>=<value>), when there are more than N of them (default 100)",
    )


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> Report:
    """``lakeops orphans``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=spark_from_args(args), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> Report:
    """:func:`lakeops.api.orphans`, listing large Iceberg trees and deleting many batches on Spark."""
    from lakeops import api

    return api.orphans(
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

    sys.exit(main(only="orphans"))
