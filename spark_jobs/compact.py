"""Compaction as a Spark job: ``spark-submit spark_jobs/compact.py TABLE [options]`` (same options as
``lakeops compact``). The plan and the commit run on the driver; each bin is rewritten by one task."""

from __future__ import annotations

import argparse
import sys
import time

from rich.console import Console

from lakeops.ops import compaction
from lakeops.ops.compaction import CompactionOptions, CompactionReport
from lakeops.storage import StorageOptions
from lakeops.units import format_size
from spark_jobs.operations import SparkSettings, options_from_args, spark_from_args
from spark_jobs.runner import TaskFailed

HELP = "bin-pack small files into larger ones (Delta OPTIMIZE), purging deletion vectors"
USES_SPARK = True


class Options(CompactionOptions):
    """The planner's options plus the job's own: ``dry_run`` plans and reports, changing nothing."""

    dry_run: bool = False


def configure(parser: argparse.ArgumentParser) -> None:
    from spark_jobs.cli import size_arg

    defaults = Options()
    parser.add_argument("--target-file-size", type=size_arg, help="e.g. 128MB (default: table property, else 128MB)")
    parser.add_argument(
        "--min-input-files",
        type=int,
        default=defaults.min_input_files,
        help=f"smallest bin worth rewriting (default {defaults.min_input_files})",
    )
    parser.add_argument("--where", help="partition predicate, e.g. \"day >= '2024-01-01' AND region = 'eu'\"")
    parser.add_argument(
        "--dv-purge-ratio",
        type=float,
        default=defaults.dv_purge_ratio,
        help="rewrite files whose deletion vector hides more than this share of rows "
        f"(default {defaults.dv_purge_ratio})",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> CompactionReport:
    """``lakeops compact``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=spark_from_args(args), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> CompactionReport:
    """Plan, rewrite on Spark, commit."""
    console = progress
    started = time.monotonic()
    console.print(f"planning compaction of {table} ...")
    plan = compaction.plan(table, options, storage_options)
    console.print(
        f"version {plan.read_version}: {plan.input_files} of {plan.live_files} files "
        f"({format_size(plan.input_bytes)}) in {len(plan.groups)} bins to rewrite"
    )
    if options.dry_run or not plan.groups:
        return (
            compaction.dry_run_report(plan, started)
            if options.dry_run
            else compaction.commit(plan, [], storage_options, started)
        )
    try:
        results = spark.run_units(
            plan.groups,
            compaction.task_for(plan),
            compaction.RewriteResult,
            label=f"rewriting {len(plan.groups)} bins",
            description=f"lakeops compact {plan.table_root} @ v{plan.read_version}",
            progress=console,
        )
    except TaskFailed as failure:
        # Nothing was committed: the bins that did finish leave no files behind either.
        finished = [r for r in failure.completed.values() if isinstance(r, compaction.RewriteResult)]
        compaction.discard(plan, finished, storage_options)
        raise
    console.print("committing ...")
    report = compaction.commit(plan, results, storage_options, started)
    console.print(f"committed version {report.committed_version}")
    return report


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="compact"))
