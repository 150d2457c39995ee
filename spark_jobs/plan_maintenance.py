"""``lakeops plan-maintenance``: the ranked maintenance plan of a registry's tables within a compute
budget, printed without running anything (:mod:`lakeops.planning`); reads metadata only (no Spark)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from lakeops.errors import LakeopsError
from lakeops.storage import StorageOptions
from lakeops.units import parse_duration
from spark_jobs.operations import options_from_args
from spark_jobs.spark_settings import SparkSettings

if TYPE_CHECKING:
    from lakeops.planning.models import MaintenancePlan

HELP = "rank the maintenance a registry's tables need by benefit per cost, within a core-minute budget"
USES_SPARK = False
#: The command plans over a registry, not one TABLE.
TAKES_TABLE = False


class Options(BaseModel):
    """``registry``: the registry file; ``budget``: core-minutes per window (None: the registry's)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    registry: Path
    budget: float | None = Field(default=None, gt=0)


def _core_minutes(text: str) -> float:
    """``120m``, ``2h`` or a bare number: core-minutes (a usage error otherwise)."""
    if text.replace(".", "", 1).isdigit():
        return float(text)
    try:
        return parse_duration(text).total_seconds() / 60
    except LakeopsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--registry", type=Path, required=True, help="the registry file (lakeops.yaml)")
    parser.add_argument(
        "--budget",
        type=_core_minutes,
        help="core-minutes to spend this window: 120m, 2h or 120 (default: the registry's maintenance_budget)",
    )


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> MaintenancePlan:
    options = options_from_args(Options, args)
    return execute(str(options.registry), options, storage_options, spark=SparkSettings(), progress=progress)


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> MaintenancePlan:
    """:func:`lakeops.planning.estate.plan_registry` of ``options.registry`` (``table`` names it in
    messages; ``spark`` is unused: planning reads metadata and dry-run plans only)."""
    from lakeops.planning.estate import plan_registry

    return plan_registry(
        options.registry,
        core_minutes=options.budget,
        storage_options=storage_options,
        on_table=lambda name: progress.print(f"observing {name}", highlight=False),
    )
