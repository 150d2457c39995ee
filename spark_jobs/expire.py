"""Log expiry: ``lakeops expire TABLE`` / ``spark-submit spark_jobs/expire.py TABLE`` (same options).

No Spark job: the deletions are a handful of log files, done on the driver in one batched request.
"""

from __future__ import annotations

import argparse
import sys
import time

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from lakeops.ops import expiry
from lakeops.ops.expiry import ExpiryOptions, ExpiryReport, parse_retention
from lakeops.ops.icechunk import IcechunkExpiryReport
from lakeops.ops.target import CatalogOptions, resolve_target
from lakeops.storage import StorageOptions
from lakeops.units import format_size
from spark_jobs import icechunk
from spark_jobs.operations import SparkSettings, options_from_args, refuse_options

HELP = "delete Delta log files older than delta.logRetentionDuration, keeping the checkpoint they need"
USES_SPARK = False

#: Paths echoed to the console by a dry run; ``--json`` lists them all.
SHOWN_PATHS = 20


class Options(BaseModel):
    """``older_than`` as given on the command line (``30d``; None: the table property); the floors
    keep versions readable whatever their age (see ``ExpiryOptions``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    older_than: str | None = None
    force: bool = False
    keep_from_version: int | None = Field(default=None, ge=0)
    retain_last: int | None = Field(default=None, ge=1)
    dry_run: bool = False


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--older-than",
        metavar="DURATION",
        help="log retention, e.g. 30d (default: delta.logRetentionDuration, else 30 days); "
        "negative values: --older-than=-1d is refused",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="allow a retention shorter than the table's delta.logRetentionDuration, or a table with "
        "delta.enableExpiredLogCleanup=false",
    )
    parser.add_argument(
        "--keep-from-version",
        type=int,
        metavar="V",
        help="keep version V readable and every commit from V on (e.g. what a change-feed consumer has not "
        "extracted yet)",
    )
    parser.add_argument("--retain-last", type=int, metavar="N", help="keep the newest N versions readable")
    parser.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")


def show_paths(console: Console, paths: list[str]) -> None:
    """Echo the first paths of a dry run to the progress console."""
    for path in paths[:SHOWN_PATHS]:
        console.print(f"  would delete {path}", soft_wrap=True, highlight=False)
    if len(paths) > SHOWN_PATHS:
        console.print(f"  ... and {len(paths) - SHOWN_PATHS} more (--json lists them all)")


def run(
    args: argparse.Namespace, storage_options: StorageOptions, progress: Console
) -> ExpiryReport | IcechunkExpiryReport:
    """``lakeops expire``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=SparkSettings(), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> ExpiryReport | IcechunkExpiryReport:
    """Plan and delete on the driver (``spark`` is unused: a few log files need no cluster)."""
    target = resolve_target(table, CatalogOptions(), storage_options)
    if target.format == "icechunk":
        assert target.location is not None
        refuse_options(target.location, options, "keep_from_version", "retain_last")
        return icechunk.expire(
            target.location,
            older_than=options.older_than,
            force=options.force,
            dry_run=options.dry_run,
            storage_options=storage_options,
            progress=progress,
        )
    started = time.monotonic()
    retention = parse_retention(options.older_than) if options.older_than is not None else None
    progress.print(f"planning log expiry of {table} ...")
    planned = ExpiryOptions(
        retention=retention,
        force=options.force,
        keep_from_version=options.keep_from_version,
        retain_last=options.retain_last,
    )
    plan = expiry.plan(table, planned, storage_options)
    if plan.note:
        progress.print(plan.note)
    else:
        progress.print(
            f"keeping the checkpoint at version {plan.checkpoint_version} and everything after it; "
            f"{len(plan.files)} log files ({format_size(plan.bytes)}) below it expire"
        )
    if options.dry_run:
        report = expiry.dry_run_report(plan, started)
        show_paths(progress, report.paths)
        return report
    return expiry.execute(plan, storage_options, started)


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="expire"))
