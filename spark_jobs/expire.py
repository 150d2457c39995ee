"""Expiry: ``lakeops expire TABLE`` / ``spark-submit spark_jobs/expire.py TABLE`` (same options).

Delta (log expiry): no Spark job, the deletions are a handful of log files, done on the driver in one
batched request. Iceberg (snapshot expiry): the driver commits the new metadata, then the files only
expired snapshots reached are deleted, one Spark task per batch — on the driver when they fit in one
batch, so small expiries start no cluster. Icechunk: :mod:`lakeops.ops.icechunk.expiry`. The steps are
:mod:`lakeops.ops.expiry`'s; this module parses options and prints.
"""

from __future__ import annotations

import argparse
import sys
import time

from rich.console import Console

from lakeops.ops import expiry
from lakeops.ops.expiry import ExpiryOptions, ExpiryReport, SnapshotExpiryReport
from lakeops.ops.icechunk import expiry as icechunk_expiry
from lakeops.ops.icechunk.expiry import IcechunkExpiryReport
from lakeops.ops.target import IcechunkTarget, resolve_target
from lakeops.quarantine import TRASH_DIR, new_run_id
from lakeops.storage import StorageOptions
from lakeops.units import parse_retention
from spark_jobs.operations import SparkSettings, options_from_args, refuse_options, spark_from_args

HELP = (
    "expire Iceberg snapshots (and the files only they reach) by the table's retention policy; "
    "delete Delta log files older than delta.logRetentionDuration; expire Icechunk snapshots"
)
USES_SPARK = True

#: Paths echoed to the console by a dry run; ``--json`` lists them all.
SHOWN_PATHS = 20


class Options(ExpiryOptions):
    """The planner's options plus the job's own: ``dry_run`` lists what would be deleted, deleting
    nothing; ``quarantine`` moves the files into a trash run instead of deleting them."""

    dry_run: bool = False
    quarantine: bool = False


def configure(parser: argparse.ArgumentParser) -> None:
    from spark_jobs.cli import retention_arg

    parser.add_argument(
        "--older-than",
        type=retention_arg,
        metavar="DURATION",
        help="retention, e.g. 30d (default: Delta delta.logRetentionDuration, else 30 days; Iceberg each "
        "branch's max-snapshot-age-ms, else history.expire.max-snapshot-age-ms, else 5 days); "
        "negative values: --older-than=-1d is refused",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="allow a retention shorter than the table's own (Delta delta.logRetentionDuration, Iceberg "
        "history.expire.* and each branch's settings), a Delta table with delta.enableExpiredLogCleanup=false, "
        "or an Iceberg --snapshot-id younger than the retention",
    )
    parser.add_argument(
        "--keep-from-version",
        type=int,
        metavar="V",
        help="keep version V readable and every commit from V on (e.g. what a change-feed consumer has not "
        "extracted yet); Iceberg: keep every snapshot whose sequence number is V or more (lakeops cdc's watermark)",
    )
    parser.add_argument(
        "--retain-last",
        type=int,
        metavar="N",
        help="keep the newest N versions readable (Delta); keep at least N snapshots of every branch (Iceberg)",
    )
    parser.add_argument(
        "--snapshot-id",
        type=int,
        action="append",
        metavar="ID",
        help="Iceberg: expire this snapshot too (repeatable; never a branch or tag head)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    add_quarantine_flag(parser)


def add_quarantine_flag(parser: argparse.ArgumentParser) -> None:
    """``--quarantine``, shared by every command that deletes files."""
    parser.add_argument(
        "--quarantine",
        action="store_true",
        help=f"move the files to {TRASH_DIR}/RUN_ID/ under the table root instead of deleting them; "
        "undo with lakeops restore TABLE RUN_ID, free the space with lakeops purge-trash",
    )


def show_paths(console: Console, paths: list[str]) -> None:
    """Echo the first paths of a dry run to the progress console."""
    for path in paths[:SHOWN_PATHS]:
        console.print(f"  would delete {path}", soft_wrap=True, highlight=False)
    if len(paths) > SHOWN_PATHS:
        console.print(f"  ... and {len(paths) - SHOWN_PATHS} more (--json lists them all)")


def run(
    args: argparse.Namespace, storage_options: StorageOptions, progress: Console
) -> ExpiryReport | IcechunkExpiryReport | SnapshotExpiryReport:
    """``lakeops expire``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=spark_from_args(args), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> ExpiryReport | IcechunkExpiryReport | SnapshotExpiryReport:
    """Plan, commit, delete (Iceberg: on Spark when there are many batches): :mod:`lakeops.ops.expiry`
    with Spark as the executor."""
    target = resolve_target(table, options, storage_options)
    quarantine_run = new_run_id() if options.quarantine and not options.dry_run else None
    if isinstance(target, IcechunkTarget):
        refuse_options(str(target), options, "snapshot_id")
        refuse_options(target.location, options, "keep_from_version", "retain_last")
        return icechunk_expiry.expire(
            target.location,
            retention=parse_retention(options.older_than) if options.older_than is not None else None,
            force=options.force,
            dry_run=options.dry_run,
            storage_options=storage_options,
            progress=progress,
            quarantine_run=quarantine_run,
        )
    started = time.monotonic()
    plan = expiry.plan(table, options, storage_options, progress=progress)
    progress.print(plan.describe())
    if options.dry_run:
        report = expiry.dry_run_report(plan, started)
        show_paths(progress, report.paths)
        return report
    return expiry.run(
        plan,
        storage_options,
        executor=spark,
        progress=progress,
        description=f"lakeops expire {target}",
        started=started,
        quarantine_run=quarantine_run,
    )


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="expire"))
