"""``lakeops inspect``: a table's health numbers; reads metadata on the driver only (no Spark)."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from lakeops.ops.options import CatalogOptions
from lakeops.storage import StorageOptions
from spark_jobs.operations import options_from_args
from spark_jobs.option_arguments import CommandOptions
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

    version: int | None = Field(default=None, ge=0, description="inspect this version instead of the latest (Delta)")
    snapshot_id: int | None = Field(
        default=None, description="inspect this snapshot instead of the current one (Iceberg)"
    )
    timestamp: datetime | None = Field(
        default=None, description="inspect the version current at this time (ISO 8601; UTC unless it names a zone)"
    )


#: The model declaring inspect's options (one point in time at most).
SECTIONS: dict[type[BaseModel], str | None] = {Options: None}


#: The command's options, declared once: its parser and docs/options.md are made from them.
OPTIONS = CommandOptions(Options, SECTIONS, exclusive=("version", "snapshot_id", "timestamp"))
configure = OPTIONS.configure


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
