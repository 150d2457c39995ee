"""Checkpoint as a Spark job: ``spark-submit spark_jobs/checkpoint.py TABLE [options]`` (same options as
``lakeops checkpoint``). Delta: the plan and ``_last_checkpoint`` are written on the driver; a
checkpoint of one part is written there too (no Spark session is started), each part of a larger one
by one task. Iceberg (rewrite manifests): the driver plans, one task writes each new manifest, the
driver commits the ``replace`` snapshot."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rich.console import Console

from lakeops.ops.options import CheckpointOptions
from lakeops.storage import StorageOptions
from spark_jobs.operations import options_from_args, spark_from_args
from spark_jobs.spark_settings import SparkSettings

if TYPE_CHECKING:
    from lakeops.ops.checkpoint import CheckpointReport

HELP = (
    "write a Delta checkpoint (single or multi-part) and _last_checkpoint; "
    "merge an Iceberg table's small manifests (rewrite_manifests)"
)
USES_SPARK = True


class Options(CheckpointOptions):
    """The planner's options plus ``dry_run`` (plan and report, write nothing)."""

    dry_run: bool = False


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    from spark_jobs.cli import size_arg

    parser.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    delta = parser.add_argument_group("Delta")
    delta.add_argument("--version", type=int, help="checkpoint this version (default: the latest)")
    delta.add_argument(
        "--part-size",
        type=_positive_int,
        default=Options().part_size,
        help="most actions per part file; more actions make a multi-part checkpoint (default 1000000)",
    )
    delta.add_argument("--force", action="store_true", help="rewrite a checkpoint that already exists")
    iceberg = parser.add_argument_group("Iceberg")
    iceberg.add_argument(
        "--target-manifest-size",
        type=size_arg,
        help="size of the merged manifests, e.g. 8MB (default: commit.manifest.target-size-bytes, else 8MB)",
    )
    iceberg.add_argument("--rewrite-all", action="store_true", help="rewrite manifests at or above the target size too")


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> CheckpointReport:
    """``lakeops checkpoint``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=spark_from_args(args), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> CheckpointReport:
    """:func:`lakeops.api.checkpoint`, its units on Spark (or the driver, as ``spark`` decides)."""
    from lakeops import api

    return api.checkpoint(
        table, options, dry_run=options.dry_run, storage_options=storage_options, executor=spark, progress=progress
    )


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="checkpoint"))
