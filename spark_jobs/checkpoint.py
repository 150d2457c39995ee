"""Checkpoint as a Spark job: ``spark-submit spark_jobs/checkpoint.py TABLE [options]`` (same options as
``lakeops checkpoint``). Delta: the plan and ``_last_checkpoint`` are written on the driver; a
checkpoint of one part is written there too (no Spark session is started), each part of a larger one
by one task. Iceberg (rewrite manifests): the driver plans, one task writes each new manifest, the
driver commits the ``replace`` snapshot."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from pydantic import BaseModel
from rich.console import Console

from lakeops.ops import checkpoint
from lakeops.ops.checkpoint import CheckpointOptions, CheckpointReport, Plan, RewriteManifestsPlan
from lakeops.storage import StorageOptions
from lakeops.units import format_size
from spark_jobs.operations import SparkSettings, options_from_args, spark_from_args
from spark_jobs.runner import TaskFailed

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
    """Plan, write the units (driver or Spark), then ``_last_checkpoint`` (Delta) or the commit (Iceberg)."""
    console = progress
    started = time.monotonic()
    console.print(f"planning checkpoint of {table} ...")
    plan = checkpoint.plan(table, options, storage_options)
    if plan is None:
        return checkpoint.not_applicable_report(table, started, dry_run=options.dry_run)
    console.print(_describe(plan))
    nothing = not plan.replaced if isinstance(plan, RewriteManifestsPlan) else not plan.parts
    if options.dry_run or nothing:
        return checkpoint.unwritten_report(plan, started, dry_run=options.dry_run)
    written: Sequence[BaseModel]
    # A Delta plan whose parts would run in driver threads is written from the snapshot it holds:
    # each part task would replay the whole log again (one table's state per thread, at once).
    delta_on_driver = not isinstance(plan, RewriteManifestsPlan) and spark.runs_on_driver(len(plan.parts), None)
    if not checkpoint.needs_spark(plan) or delta_on_driver:
        written = checkpoint.write_on_driver(plan) if not isinstance(plan, RewriteManifestsPlan) else []
    else:
        units: Sequence[BaseModel] = checkpoint.units(plan)
        try:
            written = spark.run_units(
                units,
                checkpoint.task_for(plan),
                checkpoint.result_type(plan),
                label=f"writing {len(units)} " + ("manifests" if isinstance(plan, RewriteManifestsPlan) else "parts"),
                description=f"lakeops checkpoint {table}",
                progress=console,
            )
        except TaskFailed as failure:
            checkpoint.discard(plan, list(failure.completed.values()), storage_options)  # type: ignore[arg-type]
            console.print("a task failed; the table was not changed")
            raise
    report = checkpoint.finalize(plan, written, storage_options, started)  # type: ignore[arg-type]
    if isinstance(plan, RewriteManifestsPlan):
        console.print(f"committed snapshot {report.snapshot_id} ({report.manifests_after} manifests)")
    else:
        console.print(f"wrote checkpoint of version {report.version} ({report.parts} part(s))")
    return report


def _describe(plan: Plan) -> str:
    if isinstance(plan, RewriteManifestsPlan):
        return (
            f"snapshot {plan.snapshot_id}: {len(plan.replaced)} of {plan.manifests_before} manifests "
            f"({format_size(plan.replaced_bytes)}, {plan.entries} entries) into {len(plan.outputs)}"
        )
    return (
        f"version {plan.version}: {plan.actions} actions ({plan.add_files} files, {plan.remove_tombstones} "
        f"tombstones, {plan.expired_tombstones} expired) in {len(plan.parts)} part(s)"
    )


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="checkpoint"))
