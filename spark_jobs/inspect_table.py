"""``lakeops inspect``: a table's health numbers; reads metadata on the driver only (no Spark)."""

from __future__ import annotations

import argparse

from rich.console import Console

from lakeops.ops.inspect import InspectReport, inspect_table
from lakeops.storage import StorageOptions

HELP = "show a table's version, files, small files, checkpoint lag and features"
USES_SPARK = False


def configure(parser: argparse.ArgumentParser) -> None:
    from spark_jobs.cli import timestamp_arg

    travel = parser.add_mutually_exclusive_group()
    travel.add_argument("--version", type=int, help="inspect this version instead of the latest")
    travel.add_argument(
        "--timestamp",
        type=timestamp_arg,
        help="inspect the version current at this time (ISO 8601; UTC unless it names a zone)",
    )


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> InspectReport:
    return inspect_table(args.table, storage_options, version=args.version, timestamp=args.timestamp)
