"""VACUUM as a Spark job: ``spark-submit spark_jobs/orphans.py TABLE [options]`` (same options as
``lakeops orphans``). Listing and planning run on the driver; each batch of ~1000 paths is deleted
by one Spark task."""

from __future__ import annotations

import argparse
import sys
import time

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from lakeops.delta.retention import parse_retention
from lakeops.ops import consumers, orphans
from lakeops.ops.icechunk import IcechunkGcReport
from lakeops.ops.orphans import OrphansReport, VacuumOptions
from lakeops.ops.target import CatalogOptions, resolve_target
from lakeops.storage import StorageOptions
from lakeops.units import format_size
from spark_jobs import icechunk
from spark_jobs.expire import show_paths
from spark_jobs.operations import SparkSettings, options_from_args, refuse_options, spark_from_args

HELP = "delete expired tombstoned and untracked data files (Delta VACUUM)"
USES_SPARK = True


class Options(BaseModel):
    """``older_than`` as given on the command line (``7d``; None: the table property).
    ``keep_from_version`` V lengthens the retention until every file a reader of versions V.. needs
    is kept (:func:`lakeops.ops.consumers.vacuum_retention`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    older_than: str | None = None
    force_short_retention: bool = False
    keep_from_version: int | None = Field(default=None, ge=0)
    dry_run: bool = False


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
    parser.add_argument(
        "--keep-from-version",
        type=int,
        metavar="V",
        help="keep every file needed to read versions V and later and their changes (e.g. for a change-feed "
        "consumer that has extracted through V)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")


def run(
    args: argparse.Namespace, storage_options: StorageOptions, progress: Console
) -> OrphansReport | IcechunkGcReport:
    """``lakeops orphans``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=spark_from_args(args), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> OrphansReport | IcechunkGcReport:
    """Plan on the driver, re-check, delete on Spark."""
    target = resolve_target(table, CatalogOptions(), storage_options)
    if target.format == "icechunk":
        assert target.location is not None
        refuse_options(target.location, options, "keep_from_version")
        return icechunk.orphans(
            target.location,
            older_than=options.older_than,
            force_short_retention=options.force_short_retention,
            dry_run=options.dry_run,
            storage_options=storage_options,
            spark=spark,
            progress=progress,
        )
    console = progress
    started = time.monotonic()
    now_ms = int(time.time() * 1000)
    retention = parse_retention(options.older_than) if options.older_than is not None else None
    if options.keep_from_version is not None:
        retention = consumers.vacuum_retention(
            table, options.keep_from_version, retention, storage_options, now_ms=now_ms
        )
    vacuum_options = VacuumOptions(retention=retention, force_short_retention=options.force_short_retention)
    console.print(f"listing {table} ...")
    plan = orphans.plan(table, vacuum_options, storage_options, now_ms=now_ms)
    candidates = plan.candidates
    console.print(
        f"version {plan.read_version}: {plan.files_scanned} files scanned in {plan.directories_scanned} "
        f"directories; {len(candidates)} files ({format_size(sum(c.size for c in candidates))}) to delete"
    )
    if options.dry_run:
        report = orphans.dry_run_report(plan, started)
        show_paths(console, report.paths)
        return report
    plan = orphans.recheck(plan)
    if not plan.batches:
        return orphans.finish(plan, [], started)
    # A failed batch raises TaskFailed; batches already done stay deleted and a rerun finishes the rest.
    results = spark.run_units(
        plan.batches,
        orphans.task_for(plan),
        orphans.BatchResult,
        label=f"deleting in {len(plan.batches)} batches",
        description=f"lakeops orphans {plan.table_root} @ v{plan.read_version}",
        progress=console,
    )
    return orphans.finish(plan, results, started)


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="orphans"))
