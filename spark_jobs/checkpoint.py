"""Checkpoint as a Spark job: ``spark-submit spark_jobs/checkpoint.py TABLE [options]`` (same options as
``lakeops checkpoint``). Delta: the plan and ``_last_checkpoint`` are written on the driver; a
checkpoint of one part is written there too (no Spark session is started), each part of a larger one
by one task. Iceberg (rewrite manifests): the driver plans, one task writes each new manifest, the
driver commits the ``replace`` snapshot."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pydantic import BaseModel
from rich.console import Console

from lakeops.delta.maintenance.options import DeltaCheckpointOptions
from lakeops.iceberg.maintenance.options import IcebergManifestOptions
from lakeops.ops.options import CheckpointOptions
from lakeops.storage import StorageOptions
from spark_jobs.operations import PlanOnly, options_from_args, spark_from_args
from spark_jobs.option_arguments import CommandOptions
from spark_jobs.spark_settings import SparkSettings

if TYPE_CHECKING:
    from lakeops.ops.checkpoint import CheckpointReport

HELP = (
    "write a Delta checkpoint (single or multi-part) and _last_checkpoint; "
    "merge an Iceberg table's small manifests (rewrite_manifests)"
)
USES_SPARK = True


class Options(CheckpointOptions, PlanOnly):
    """The planner's options plus ``dry_run`` (plan and report, write nothing)."""


#: The models declaring checkpoint's options, in the help's order: each format's in a group of its name.
SECTIONS: dict[type[BaseModel], str | None] = {DeltaCheckpointOptions: "Delta", IcebergManifestOptions: "Iceberg"}
#: Each format's own options model (an Icechunk repository has no checkpoint).
FORMATS: dict[str, type[BaseModel]] = {"Delta": DeltaCheckpointOptions, "Iceberg": IcebergManifestOptions}


#: The command's options, declared once: its parser and docs/options.md are made from them.
OPTIONS = CommandOptions(Options, SECTIONS, FORMATS)
configure = OPTIONS.configure


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> CheckpointReport:
    """``lakeops checkpoint``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=spark_from_args(args), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> CheckpointReport:
    """:func:`lakeops.api.checkpoint`, its units on Spark (or the driver, as ``spark`` decides)."""
    from lakeops import api

    return api.checkpoint(
        table, options, dry_run=options.dry_run, storage_options=storage_options, executor=spark, progress=progress
    )


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="checkpoint"))
