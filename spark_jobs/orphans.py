"""VACUUM as a Spark job: ``spark-submit spark_jobs/orphans.py TABLE [options]`` (same options as
``lakeops orphans``). Listing and planning run on the driver; each batch of ~1000 paths is deleted
by one Spark task."""

from __future__ import annotations

import argparse
import sys
import time

from rich.console import Console

from lakeops.delta.retention import parse_retention
from lakeops.ops import orphans
from lakeops.ops.orphans import OrphansReport, VacuumOptions
from lakeops.storage import StorageOptions
from lakeops.units import format_size
from spark_jobs.expire import show_paths
from spark_jobs.runner import run_units
from spark_jobs.session import build_session

HELP = "delete expired tombstoned and untracked data files (Delta VACUUM)"
USES_SPARK = True


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--older-than",
        metavar="DURATION",
        help="retention, e.g. 7d (default: delta.deletedFileRetentionDuration, else 7 days); "
        "nothing newer than this is deleted",
    )
    parser.add_argument(
        "--force-short-retention",
        action="store_true",
        help="allow a retention shorter than the table's delta.deletedFileRetentionDuration "
        "(only when nothing reads or writes the table from before that horizon)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> OrphansReport:
    """Plan on the driver, re-check, delete on Spark; ``args`` are the parsed ``orphans`` options."""
    console = progress
    started = time.monotonic()
    retention = parse_retention(args.older_than) if args.older_than is not None else None
    options = VacuumOptions(retention=retention, force_short_retention=args.force_short_retention)
    console.print(f"listing {args.table} ...")
    plan = orphans.plan(args.table, options, storage_options)
    candidates = plan.candidates
    console.print(
        f"version {plan.read_version}: {plan.files_scanned} files scanned in {plan.directories_scanned} "
        f"directories; {len(candidates)} files ({format_size(sum(c.size for c in candidates))}) to delete"
    )
    if args.dry_run:
        report = orphans.dry_run_report(plan, started)
        show_paths(console, report.paths)
        return report
    plan = orphans.recheck(plan)
    if not plan.batches:
        return orphans.finish(plan, [], started)
    spark = build_session(master=args.master, conf=dict(args.conf))
    console.print(f"deleting in {len(plan.batches)} batches on Spark ({spark.conf.get('spark.master', 'connect')}) ...")
    # A failed batch raises TaskFailed; batches already done stay deleted and a rerun finishes the rest.
    results = run_units(
        spark,
        plan.batches,
        orphans.task_for(plan),
        orphans.BatchResult,
        description=f"lakeops orphans {plan.table_root} @ v{plan.read_version}",
        progress=lambda done, total: console.print(f"  {done}/{total} Spark tasks done"),
    )
    return orphans.finish(plan, results, started)


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="orphans"))
