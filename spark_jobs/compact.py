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
from spark_jobs.runner import TaskFailed, run_units
from spark_jobs.session import build_session

HELP = "bin-pack small files into larger ones (Delta OPTIMIZE), purging deletion vectors"
USES_SPARK = True


def configure(parser: argparse.ArgumentParser) -> None:
    from spark_jobs.cli import size_arg

    parser.add_argument("--target-file-size", type=size_arg, help="e.g. 128MB (default: table property, else 128MB)")
    parser.add_argument("--min-input-files", type=int, default=5, help="smallest bin worth rewriting (default 5)")
    parser.add_argument("--where", help="partition predicate, e.g. \"day >= '2024-01-01' AND region = 'eu'\"")
    parser.add_argument(
        "--dv-purge-ratio",
        type=float,
        default=0.05,
        help="rewrite files whose deletion vector hides more than this share of rows (default 0.05)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> CompactionReport:
    """Plan, rewrite on Spark, commit; ``args`` are the parsed ``compact`` options."""
    console = progress
    started = time.monotonic()
    options = CompactionOptions(
        target_file_size=args.target_file_size,
        min_input_files=args.min_input_files,
        where=args.where,
        dv_purge_ratio=args.dv_purge_ratio,
    )
    console.print(f"planning compaction of {args.table} ...")
    plan = compaction.plan(args.table, options, storage_options)
    console.print(
        f"version {plan.read_version}: {plan.input_files} of {plan.live_files} files "
        f"({format_size(plan.input_bytes)}) in {len(plan.groups)} bins to rewrite"
    )
    if args.dry_run or not plan.groups:
        return (
            compaction.dry_run_report(plan, started)
            if args.dry_run
            else compaction.commit(plan, [], storage_options, started)
        )
    spark = build_session(master=args.master, conf=dict(args.conf))
    console.print(f"rewriting {len(plan.groups)} bins on Spark ({spark.conf.get('spark.master', 'connect')}) ...")
    try:
        results = run_units(
            spark,
            plan.groups,
            compaction.task_for(plan),
            compaction.RewriteResult,
            description=f"lakeops compact {plan.table_root} @ v{plan.read_version}",
            progress=lambda done, total: console.print(f"  {done}/{total} Spark tasks done"),
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
