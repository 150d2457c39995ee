"""Expiry: ``lakeops expire TABLE`` / ``spark-submit spark_jobs/expire.py TABLE`` (same options).

Delta (log expiry): no Spark job, the deletions are a handful of log files, done on the driver in one
batched request. Iceberg (snapshot expiry): the driver commits the new metadata, then the files only
expired snapshots reached are deleted, one Spark task per batch — on the driver when they fit in one
batch, so small expiries start no cluster. Icechunk: :mod:`lakeops.ops.icechunk.expiry`.
"""

from __future__ import annotations

import argparse
import sys
import time

from pydantic import ConfigDict, Field
from rich.console import Console

from lakeops.iceberg.table import TableRef
from lakeops.ops import expiry
from lakeops.ops.expiry import ExpireOptions, ExpiryOptions, ExpiryReport, SnapshotExpiryReport, parse_retention
from lakeops.ops.icechunk import expiry as icechunk_expiry
from lakeops.ops.icechunk.expiry import IcechunkExpiryReport
from lakeops.ops.target import CatalogOptions, IcebergTarget, IcechunkTarget, resolve_target
from lakeops.quarantine import TRASH_DIR, new_run_id
from lakeops.storage import StorageOptions
from lakeops.units import format_size
from spark_jobs.operations import SparkSettings, options_from_args, refuse_options, spark_from_args

HELP = (
    "expire Iceberg snapshots (and the files only they reach) by the table's retention policy; "
    "delete Delta log files older than delta.logRetentionDuration; expire Icechunk snapshots"
)
USES_SPARK = True

#: Paths echoed to the console by a dry run; ``--json`` lists them all.
SHOWN_PATHS = 20


class Options(CatalogOptions):
    """``older_than`` as given on the command line (``30d``; None: the table's own policy); Delta's
    floors keep versions readable whatever their age (see ``ExpiryOptions``); Iceberg's
    ``retain_last`` and ``older_than`` override every branch's policy, ``snapshot_id`` names
    snapshots to expire as well, and ``keep_from_version`` is a sequence number from which every
    snapshot stays (a changelog consumer's watermark)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    older_than: str | None = None
    force: bool = False
    keep_from_version: int | None = Field(default=None, ge=0)
    retain_last: int | None = Field(default=None, ge=1)
    snapshot_id: list[int] | None = None
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
    """Plan, then delete: Delta on the driver (a few log files need no cluster), Iceberg after its commit."""
    target = resolve_target(table, options, storage_options)
    quarantine_run = new_run_id() if options.quarantine and not options.dry_run else None
    if isinstance(target, IcebergTarget):
        return expire_snapshots(
            target.ref, options, storage_options, spark=spark, progress=progress, quarantine_run=quarantine_run
        )
    refuse_options(str(target), options, "snapshot_id")
    if isinstance(target, IcechunkTarget):
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
    return expiry.execute(plan, storage_options, started, quarantine_run=quarantine_run)


def expire_snapshots(
    table: TableRef,
    options: Options,
    storage_options: StorageOptions,
    *,
    spark: SparkSettings,
    progress: Console,
    quarantine_run: str | None = None,
) -> SnapshotExpiryReport:
    """Iceberg: plan, commit, then delete what only the expired snapshots reached."""
    started = time.monotonic()
    iceberg_options = ExpireOptions(
        older_than_ms=(
            int(parse_retention(options.older_than).total_seconds() * 1000) if options.older_than is not None else None
        ),
        retain_last=options.retain_last,
        snapshot_ids=tuple(options.snapshot_id or ()),
        keep_from_sequence_number=options.keep_from_version,
        force=options.force,
    )
    progress.print(f"planning snapshot expiry of {table} ...")
    plan = expiry.plan_snapshots(table, iceberg_options, storage_options, now_ms=int(time.time() * 1000))
    decision = plan.decision
    progress.print(
        f"{len(decision.expired)} of {plan.snapshots} snapshots expire, {len(decision.dropped_refs)} refs are dropped; "
        f"{len(plan.deletion.files)} files ({format_size(sum(c.size for c in plan.deletion.files))}) only they reach"
    )
    if options.dry_run:
        report = expiry.snapshots_report(plan, started)
        show_paths(progress, report.paths)
        return report
    committed = expiry.commit_snapshots(plan, storage_options)
    if committed.attempts:
        progress.print(f"committed {committed.metadata_location}")
    results = spark.delete(
        committed.batches,
        label=f"deleting {len(committed.deletion.files)} files in {len(committed.batches)} batches",
        description=f"lakeops expire {table}",
        progress=progress,
        quarantine_run=quarantine_run,
        operation="expire",
    )
    report = expiry.snapshots_report(plan, started, committed=committed, results=results)
    return report.model_copy(update={"quarantine_run": quarantine_run})


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="expire"))
