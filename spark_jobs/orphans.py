"""Orphan-file removal as a Spark job: ``spark-submit spark_jobs/orphans.py TABLE [options]`` (same
options as ``lakeops orphans``). Delta (VACUUM) and Iceberg: the location is listed on the driver,
or one Spark task per second-level directory for large trees; the plan is made on the driver.
Batches of ~1000 paths are then deleted by threads on the driver, or one Spark task each when there
are many (:meth:`~spark_jobs.spark_settings.SparkSettings.delete`). The
steps are :mod:`lakeops.ops.orphans`'s; this module parses options and prints."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pydantic import BaseModel
from rich.console import Console

from lakeops.delta.maintenance.options import DeltaVacuumOptions
from lakeops.iceberg.maintenance.options import IcebergOrphanOptions
from lakeops.icechunk.maintenance.options import IcechunkGcOptions
from lakeops.ops.options import OrphansOptions
from lakeops.retention_options import ListingThreshold, OrphansAge, ShortRetention
from lakeops.storage import StorageOptions
from spark_jobs.operations import Deletions, options_from_args, spark_from_args
from spark_jobs.option_arguments import CommandOptions
from spark_jobs.spark_settings import SparkSettings

if TYPE_CHECKING:
    from lakeops.ops.icechunk.orphans import IcechunkGcReport
    from lakeops.ops.orphans import IcebergOrphansReport, OrphansReport

    Report = OrphansReport | IcebergOrphansReport | IcechunkGcReport

HELP = (
    "delete files no metadata references (Delta VACUUM: expired tombstoned and untracked data files; "
    "Iceberg: files under the table location no metadata file, snapshot or statistics entry reaches)"
)
USES_SPARK = True


class Options(OrphansOptions, Deletions):
    """The planner's options plus the job's own: ``dry_run`` lists what would be deleted, deleting
    nothing; ``quarantine`` moves the files into a trash run instead of deleting them."""


#: The models declaring orphan removal's options, in the help's order: the shared ones at the top,
#: each format's own in a group of its name.
SECTIONS: dict[type[BaseModel], str | None] = {
    OrphansAge: None,
    ShortRetention: None,
    ListingThreshold: None,
    Deletions: None,
    DeltaVacuumOptions: "Delta",
    IcebergOrphanOptions: "Iceberg",
}
#: Each format's own options model.
FORMATS: dict[str, type[BaseModel]] = {
    "Delta": DeltaVacuumOptions,
    "Iceberg": IcebergOrphanOptions,
    "Icechunk": IcechunkGcOptions,
}


#: The command's options, declared once: its parser and docs/options.md are made from them.
OPTIONS = CommandOptions(Options, SECTIONS, FORMATS)
configure = OPTIONS.configure


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> Report:
    """``lakeops orphans``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=spark_from_args(args), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> Report:
    """:func:`lakeops.api.orphans`, listing large Iceberg trees and deleting many batches on Spark."""
    from lakeops import api

    return api.orphans(
        table,
        options,
        dry_run=options.dry_run,
        quarantine=options.quarantine,
        storage_options=storage_options,
        executor=spark,
        progress=progress,
    )


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="orphans"))
