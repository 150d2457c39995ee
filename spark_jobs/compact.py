"""Compaction as a Spark job: ``spark-submit spark_jobs/compact.py TABLE [options]`` (same options as
``lakeops compact``). The plan and the commits run on the driver; each file group is rewritten by one
task. With ``--partial-progress K`` (Delta and Iceberg) groups run and commit K at a time."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pydantic import BaseModel
from rich.console import Console

from lakeops.compaction_options import CommitRetries, FileRewrites, RewritePiece, Sizing
from lakeops.delta.maintenance.options import DeltaCompactionOptions
from lakeops.iceberg.maintenance.options import IcebergCompactionOptions
from lakeops.icechunk.maintenance.options import IcechunkPackingOptions
from lakeops.ops.options import CompactionOptions
from lakeops.storage import StorageOptions
from spark_jobs.operations import PlanOnly, options_from_args, spark_from_args
from spark_jobs.option_arguments import CommandOptions
from spark_jobs.spark_settings import SparkSettings

if TYPE_CHECKING:
    from lakeops.ops.compaction import CompactionReport
    from lakeops.ops.icechunk.compaction import IcechunkCompactionReport

HELP = (
    "bin-pack small files into larger ones (Delta OPTIMIZE; Iceberg rewrite_data_files, applying deletes; "
    "Icechunk: small chunk objects into shared chunk files)"
)
USES_SPARK = True


class Options(CompactionOptions, PlanOnly):
    """The planner's options plus ``dry_run`` (plan and report, write nothing)."""


#: The models declaring compaction's options, in the help's order: the shared ones at the top, each
#: format's in a group of its name.
SECTIONS: dict[type[BaseModel], str | None] = {
    Sizing: None,
    FileRewrites: None,
    RewritePiece: None,
    CommitRetries: None,
    DeltaCompactionOptions: "Delta",
    IcebergCompactionOptions: "Iceberg",
    IcechunkPackingOptions: "Icechunk",
}
#: Each format's own options model.
FORMATS: dict[str, type[BaseModel]] = {
    "Delta": DeltaCompactionOptions,
    "Iceberg": IcebergCompactionOptions,
    "Icechunk": IcechunkPackingOptions,
}


#: Compaction's options, declared once: its parser and docs/options.md are made from them.
OPTIONS = CommandOptions(Options, SECTIONS, FORMATS)
configure = OPTIONS.configure


def run(
    args: argparse.Namespace, storage_options: StorageOptions, progress: Console
) -> CompactionReport | IcechunkCompactionReport:
    """``lakeops compact``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=spark_from_args(args), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> CompactionReport | IcechunkCompactionReport:
    """:func:`lakeops.api.compact`, its groups rewritten on Spark (or the driver, as ``spark`` decides)."""
    from lakeops import api

    return api.compact(
        table, options, dry_run=options.dry_run, storage_options=storage_options, executor=spark, progress=progress
    )


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="compact"))
