"""Checkpoint as a Spark job: ``spark-submit spark_jobs/checkpoint.py TABLE [options]`` (same options as
``lakeops checkpoint``). The plan and ``_last_checkpoint`` are written on the driver; a checkpoint of
one part is written there too (no Spark session is started), each part of a larger one by one task."""

from __future__ import annotations

import argparse
import sys
import time

from rich.console import Console

from lakeops.ops import checkpoint
from lakeops.ops.checkpoint import CheckpointOptions, CheckpointReport, PartWritten
from lakeops.storage import StorageOptions
from spark_jobs.operations import SparkSettings, options_from_args, spark_from_args
from spark_jobs.runner import TaskFailed

HELP = "write a Delta checkpoint (single or multi-part) and _last_checkpoint"
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
    parser.add_argument("--version", type=int, help="checkpoint this version (default: the latest)")
    parser.add_argument(
        "--part-size",
        type=_positive_int,
        default=Options().part_size,
        help="most actions per part file; more actions make a multi-part checkpoint (default 1000000)",
    )
    parser.add_argument("--force", action="store_true", help="rewrite a checkpoint that already exists")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> CheckpointReport:
    """``lakeops checkpoint``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=spark_from_args(args), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> CheckpointReport:
    """Plan, write the parts (driver or Spark), then ``_last_checkpoint``."""
    console = progress
    started = time.monotonic()
    console.print(f"planning checkpoint of {table} ...")
    plan = checkpoint.plan(table, options, storage_options)
    if plan is None:
        return checkpoint.not_applicable_report(table, started, dry_run=options.dry_run)
    console.print(
        f"version {plan.version}: {plan.actions} actions ({plan.add_files} files, {plan.remove_tombstones} "
        f"tombstones, {plan.expired_tombstones} expired) in {len(plan.parts)} part(s)"
    )
    if options.dry_run or not plan.parts:
        return checkpoint.unwritten_report(plan, started, dry_run=options.dry_run)
    if len(plan.parts) == 1:
        written = checkpoint.write_on_driver(plan)
    else:
        try:
            written = spark.run_units(
                plan.parts,
                checkpoint.task_for(plan),
                PartWritten,
                label=f"writing {len(plan.parts)} parts",
                description=f"lakeops checkpoint {plan.table_root} @ v{plan.version}",
                progress=console,
            )
        except TaskFailed:
            # The parts already written stay: an incomplete set is invisible to readers, and a rerun
            # rewrites the same names with the same content. Deleting them could instead break an
            # identical set a concurrent run has just completed.
            console.print("a part failed; _last_checkpoint was not changed")
            raise
    report = checkpoint.finalize(plan, written, storage_options, started)
    console.print(f"wrote checkpoint of version {report.version} ({report.parts} part(s))")
    return report


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="checkpoint"))
