"""Orphan-file removal as a Spark job: ``spark-submit spark_jobs/orphans.py TABLE [options]`` (same
options as ``lakeops orphans``). Delta (VACUUM): listing and planning run on the driver. Iceberg: the
location is listed on the driver, or one Spark task per second-level directory for large trees; the
plan is made on the driver. Batches of ~1000 paths are then deleted by threads on the driver, or one
Spark task each when there are many (:meth:`~spark_jobs.operations.SparkSettings.delete`)."""

from __future__ import annotations

import argparse
import sys
import time

from pydantic import ConfigDict, Field
from rich.console import Console

from lakeops.iceberg.maintenance.orphans import DEFAULT_OLDER_THAN, PrefixMismatchMode
from lakeops.iceberg.table import TableRef
from lakeops.ops import consumers, orphans
from lakeops.ops.icechunk import orphans as icechunk_orphans
from lakeops.ops.icechunk.orphans import IcechunkGcReport
from lakeops.ops.orphans import IcebergOrphansReport, OrphanOptions, OrphansReport, UnitListing, VacuumOptions
from lakeops.ops.target import CatalogOptions, IcebergTarget, IcechunkTarget, resolve_target
from lakeops.quarantine import new_run_id
from lakeops.storage import StorageOptions
from lakeops.units import format_size, parse_retention
from spark_jobs.expire import add_quarantine_flag, show_paths
from spark_jobs.operations import SparkSettings, options_from_args, refuse_options, spark_from_args

HELP = (
    "delete files no metadata references (Delta VACUUM: expired tombstoned and untracked data files; "
    "Iceberg: files under the table location no metadata file, snapshot or statistics entry reaches)"
)
USES_SPARK = True

Report = OrphansReport | IcebergOrphansReport | IcechunkGcReport


class Options(CatalogOptions):
    """``older_than`` as given on the command line (``7d``; None: the table property, else the format's
    default). Delta: ``keep_from_version`` V lengthens the retention until every file a reader of
    versions V.. needs is kept (:func:`lakeops.ops.consumers.vacuum_retention`). Iceberg:
    ``prefix_mismatch_mode`` (None: ``error``) and ``listing_threshold`` (None: the default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    older_than: str | None = None
    force_short_retention: bool = False
    keep_from_version: int | None = Field(default=None, ge=0)
    prefix_mismatch_mode: PrefixMismatchMode | None = None
    listing_threshold: int | None = Field(default=None, ge=0)
    dry_run: bool = False
    quarantine: bool = False


def configure(parser: argparse.ArgumentParser) -> None:
    from spark_jobs.cli import retention_arg

    parser.add_argument(
        "--older-than",
        type=retention_arg,
        metavar="DURATION",
        help="retention, e.g. 7d (default: Delta delta.deletedFileRetentionDuration, else 7 days; Iceberg "
        f"{DEFAULT_OLDER_THAN.days} days); nothing newer than this is deleted",
    )
    parser.add_argument(
        "--force-short-retention",
        action="store_true",
        help="allow a retention shorter than the table's delta.deletedFileRetentionDuration (Iceberg: "
        f"than {DEFAULT_OLDER_THAN.days} days), only when nothing reads or writes the table from before that horizon",
    )
    parser.add_argument(
        "--keep-from-version",
        type=int,
        metavar="V",
        help="keep every file needed to read versions V and later and their changes (e.g. for a change-feed "
        "consumer that has extracted through V)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    add_quarantine_flag(parser)
    iceberg = parser.add_argument_group("Iceberg")
    iceberg.add_argument(
        "--prefix-mismatch-mode",
        choices=[m.value for m in PrefixMismatchMode],
        help="a listed file that the metadata names under another scheme or authority (bucket): stop with an "
        "error (default), ignore (keep it) or delete (treat it as unreferenced)",
    )
    iceberg.add_argument(
        "--listing-threshold",
        type=int,
        metavar="N",
        help="list the location on Spark, one task per second-level directory (e.g. data/<partition>), when "
        "there are more than N of them (default 100)",
    )


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> Report:
    """``lakeops orphans``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=spark_from_args(args), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> Report:
    """List and plan, re-check, delete (on Spark when there are many batches)."""
    target = resolve_target(table, options, storage_options)
    quarantine_run = new_run_id() if options.quarantine and not options.dry_run else None
    if isinstance(target, IcebergTarget):
        refuse_options(str(target), options, "keep_from_version")
        return iceberg_orphans(
            target.ref, options, storage_options, spark=spark, progress=progress, quarantine_run=quarantine_run
        )
    refuse_options(str(target), options, "prefix_mismatch_mode", "listing_threshold")
    if isinstance(target, IcechunkTarget):
        refuse_options(target.location, options, "keep_from_version")
        return icechunk_orphans.collect_garbage(
            target.location,
            retention=parse_retention(options.older_than) if options.older_than is not None else None,
            force_short_retention=options.force_short_retention,
            dry_run=options.dry_run,
            storage_options=storage_options,
            executor=spark,
            progress=progress,
            quarantine_run=quarantine_run,
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
    return _carry_out(
        plan,
        f"version {plan.read_version}: {plan.files_scanned} files scanned in {plan.directories_scanned} directories",
        f"{plan.table_root} @ v{plan.read_version}",
        dry_run=options.dry_run,
        spark=spark,
        console=console,
        started=started,
        quarantine_run=quarantine_run,
    )


def _carry_out(
    plan: orphans.Plan,
    headline: str,
    description: str,
    *,
    dry_run: bool,
    spark: SparkSettings,
    console: Console,
    started: float,
    quarantine_run: str | None = None,
) -> OrphansReport | IcebergOrphansReport:
    """Report the plan (``dry_run``: listing the paths), or re-check it, delete its batches and report."""
    candidates = plan.candidates
    console.print(f"{headline}; {len(candidates)} files ({format_size(sum(c.size for c in candidates))}) to delete")
    if dry_run:
        report = orphans.dry_run_report(plan, started)
        show_paths(console, report.paths)
        return report
    plan = orphans.recheck(plan)
    if not plan.batches:
        return orphans.finish(plan, [], started)
    results = spark.delete(
        plan.batches,
        task=orphans.task_for(plan),
        label=f"deleting in {len(plan.batches)} batches",
        description=f"lakeops orphans {description}",
        progress=console,
        quarantine_run=quarantine_run,
        operation="orphans",
    )
    return orphans.finish(plan, results, started).model_copy(update={"quarantine_run": quarantine_run})


def iceberg_orphans(
    ref: TableRef,
    options: Options,
    storage_options: StorageOptions,
    *,
    spark: SparkSettings,
    progress: Console,
    quarantine_run: str | None = None,
) -> OrphansReport | IcebergOrphansReport:
    """List (on Spark for large trees), plan against every metadata file, re-check, delete (on Spark when
    there are many batches)."""
    console = progress
    started = time.monotonic()
    now_ms = int(time.time() * 1000)
    given = {
        "older_than": parse_retention(options.older_than) if options.older_than is not None else None,
        "force_short_retention": options.force_short_retention,
        "prefix_mismatch_mode": options.prefix_mismatch_mode,
        "listing_threshold": options.listing_threshold,
    }
    settings = OrphanOptions.model_validate({name: value for name, value in given.items() if value is not None})
    console.print(f"listing {ref} ...")
    listing = orphans.plan_iceberg_listing(ref, settings, storage_options)
    listed: list[UnitListing] = []
    if listing.units:
        listed = spark.run_units(
            listing.units,
            orphans.list_unit,
            UnitListing,
            label=f"listing {len(listing.units)} directories",
            description=f"lakeops orphans {ref}: listing",
            progress=console,
        )
    plan = orphans.plan_iceberg(listing, listed, settings, now_ms=now_ms)
    return _carry_out(
        plan,
        f"{plan.metadata_location.rsplit('/', 1)[-1]}: {plan.files_scanned} files scanned, {plan.referenced_files} "
        f"referenced by {plan.metadata_files} metadata files and {plan.snapshots} snapshots",
        str(ref),
        dry_run=options.dry_run,
        spark=spark,
        console=console,
        started=started,
        quarantine_run=quarantine_run,
    )


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="orphans"))
