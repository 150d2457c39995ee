"""``lakeops inspect``: a table's health numbers; reads metadata on the driver only (no Spark)."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import ConfigDict, Field
from rich.console import Console

from lakeops.ops.options import CatalogOptions
from lakeops.storage import StorageOptions
from spark_jobs.operations import options_from_args
from spark_jobs.spark_settings import SparkSettings

if TYPE_CHECKING:
    from lakeops.ops.icechunk.inspect import IcechunkInspectReport
    from lakeops.ops.inspect import InspectReport

HELP = "show a table's health: files, small files, deletes, snapshots or log, checkpoint or manifest lag"
USES_SPARK = False


class Options(CatalogOptions):
    """Time travel: ``version`` (Delta), ``snapshot_id`` (Iceberg) or ``timestamp`` (default: the latest;
    Icechunk repositories are inspected at their ``main`` tip)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int | None = Field(default=None, ge=0)
    snapshot_id: int | None = None
    timestamp: datetime | None = None


def configure(parser: argparse.ArgumentParser) -> None:
    from spark_jobs.cli import timestamp_arg

    travel = parser.add_mutually_exclusive_group()
    travel.add_argument("--version", type=int, help="inspect this version instead of the latest (Delta)")
    travel.add_argument("--snapshot-id", type=int, help="inspect this snapshot instead of the current one (Iceberg)")
    travel.add_argument(
        "--timestamp",
        type=timestamp_arg,
        help="inspect the version current at this time (ISO 8601; UTC unless it names a zone)",
    )


def run(
    args: argparse.Namespace, storage_options: StorageOptions, progress: Console
) -> InspectReport | IcechunkInspectReport:
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=SparkSettings(), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> InspectReport | IcechunkInspectReport:
    """:func:`lakeops.api.inspect` (``spark`` is unused: nothing here needs a cluster)."""
    from lakeops import api

    return api.inspect(
        table,
        CatalogOptions(**options.catalog_fields()),
        version=options.version,
        snapshot_id=options.snapshot_id,
        timestamp=options.timestamp,
        storage_options=storage_options,
    )
