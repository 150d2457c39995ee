"""``lakeops purge-trash TABLE [--older-than 7d] [--dry-run]``: delete quarantine runs past their retention.

A run's age is its run id's timestamp (when it quarantined), not the files' mtimes. Runs on the driver.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field
from rich.console import Console

from lakeops.ops.options import PurgeOptions
from lakeops.storage import StorageOptions
from spark_jobs.operations import options_from_args
from spark_jobs.option_arguments import CommandOptions
from spark_jobs.spark_settings import SparkSettings

if TYPE_CHECKING:
    from lakeops.ops.trash import PurgeReport

HELP = "delete quarantined files (the table's trash) of runs older than a retention"
USES_SPARK = False


class Options(PurgeOptions):
    """The purge's options plus ``dry_run`` (list the runs that would be purged, delete nothing)."""

    dry_run: bool = Field(default=False, description="list the runs that would be purged, delete nothing")


#: The models declaring purge-trash's options.
SECTIONS: dict[type[BaseModel], str | None] = {PurgeOptions: None, Options: None}


#: The command's options, declared once: its parser and docs/options.md are made from them.
OPTIONS = CommandOptions(Options, SECTIONS)
configure = OPTIONS.configure


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> PurgeReport:
    """``lakeops purge-trash``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=SparkSettings(), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> PurgeReport:
    """:func:`lakeops.api.purge_trash`, on the driver (``spark`` is not used)."""
    from lakeops import api

    return api.purge_trash(table, options, dry_run=options.dry_run, storage_options=storage_options, progress=progress)


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="purge-trash"))
