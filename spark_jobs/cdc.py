"""Change data capture as a Spark job: ``spark-submit spark_jobs/cdc.py TABLE --from V [--to W] --output OUT``
(same options as ``lakeops cdc``). The plan and the commit run on the driver; each batch of change
files (Delta) or of changed data files of one snapshot (Iceberg) is read, and written as one output
file, by one task."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pydantic import BaseModel
from rich.console import Console

from lakeops.ops.options import CatalogOptions, CdcOptions
from lakeops.storage import StorageOptions
from spark_jobs.operations import PlanOnly, options_from_args, spark_from_args
from spark_jobs.option_arguments import CommandOptions
from spark_jobs.spark_settings import SparkSettings

if TYPE_CHECKING:
    from lakeops.ops.cdc import CdcReport
    from lakeops.ops.icechunk.cdc import IcechunkCdcReport

HELP = (
    "extract the change rows of versions V..W into a Delta table (Delta change data feed; Iceberg "
    "changelog of the snapshots after V, or from the table's creation with V=0; Icechunk snapshot diffs)"
)
USES_SPARK = True


class Options(CdcOptions, PlanOnly):
    """The planner's options (with ``--catalog-uri``/``--catalog-name`` for Iceberg catalog tables)
    plus ``dry_run`` (plan and report, write nothing). ``from_version`` and ``to_version`` are table
    versions for Delta; snapshot ids, branches or tags for Iceberg and Icechunk."""


#: The models declaring cdc's options: every format takes each of them.
SECTIONS: dict[type[BaseModel], str | None] = {CdcOptions: None, PlanOnly: None}
#: ``unit_bytes`` is the API's alone (how much one task reads).
SKIP = {*CatalogOptions.model_fields, "unit_bytes"}


#: The command's options, declared once: its parser and docs/options.md are made from them.
OPTIONS = CommandOptions(Options, SECTIONS, skip=SKIP)
configure = OPTIONS.configure


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> CdcReport | IcechunkCdcReport:
    """``lakeops cdc``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=spark_from_args(args), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> CdcReport | IcechunkCdcReport:
    """:func:`lakeops.api.cdc`, its units extracted on Spark (or the driver, as ``spark`` decides)."""
    from lakeops import api

    return api.cdc(
        table, options, dry_run=options.dry_run, storage_options=storage_options, executor=spark, progress=progress
    )


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="cdc"))
