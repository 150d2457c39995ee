"""Change data capture as a Spark job: ``spark-submit spark_jobs/cdc.py TABLE --from V [--to W] --output OUT``
(same options as ``lakeops cdc``). The plan and the commit run on the driver; each batch of change
files (Delta) or of changed data files of one snapshot (Iceberg) is read, and written as one output
file, by one task."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rich.console import Console

from lakeops.ops.options import CdcOptions
from lakeops.storage import StorageOptions
from spark_jobs.operations import options_from_args, spark_from_args
from spark_jobs.spark_settings import SparkSettings

if TYPE_CHECKING:
    from lakeops.ops.cdc import CdcReport
    from lakeops.ops.icechunk.cdc import IcechunkCdcReport

HELP = (
    "extract the change rows of versions V..W into a Delta table (Delta change data feed; Iceberg "
    "changelog of the snapshots after V, or from the table's creation with V=0; Icechunk snapshot diffs)"
)
USES_SPARK = True


class Options(CdcOptions):
    """The planner's options (with ``--catalog-uri``/``--catalog-name`` for Iceberg catalog tables)
    plus ``dry_run`` (plan and report, write nothing). ``from_version`` and ``to_version`` are table
    versions for Delta; snapshot ids, branches or tags for Iceberg and Icechunk."""

    dry_run: bool = False


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from",
        dest="from_version",
        required=True,
        metavar="V",
        help="Delta: the first version to extract (0: from the table's creation); Iceberg: the snapshot (id, "
        "branch or tag) the changes follow, or 0 (no snapshot id is 0) for every change since the table's creation; "
        "Icechunk: the snapshot the changes follow",
    )
    parser.add_argument(
        "--to",
        dest="to_version",
        metavar="W",
        help="the last version / snapshot, branch or tag to extract (default: the latest version / the "
        "current snapshot / main)",
    )
    from spark_jobs.cli import location_arg

    parser.add_argument(
        "--output",
        required=True,
        type=location_arg,
        metavar="OUT",
        help="Delta table the change rows are appended to (created if absent): a location, or the name of a "
        "registry table",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> CdcReport | IcechunkCdcReport:
    """``lakeops cdc``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=spark_from_args(args), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> CdcReport | IcechunkCdcReport:
    """:func:`lakeops.api.cdc`, its units extracted on Spark (or the driver, as ``spark`` decides)."""
    from lakeops import api

    return api.cdc(
        table, options, dry_run=options.dry_run, storage_options=storage_options, executor=spark, progress=progress
    )


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="cdc"))
