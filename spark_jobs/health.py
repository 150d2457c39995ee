"""``lakeops health``: every registered table's health, observed now — the same verdict as the Dagster
checks and overview (status, worst signal with its value and threshold, what to run, each operation's
last run), for whoever is not in the Dagster UI. ``--html FILE`` also writes a report with each table's
runs over time as plots, readable offline (:mod:`spark_jobs.health_html`). Reads only; no Spark."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict
from rich.console import Console

from lakeops.registry import REGISTRY_ENV
from lakeops.storage import StorageOptions
from spark_jobs.operations import options_from_args
from spark_jobs.spark_settings import SparkSettings

if TYPE_CHECKING:
    from lakeops.planning.registry_health import RegistryHealth

HELP = "every registered table's health now: status, worst signal, threshold and last runs (--html: with plots)"
USES_SPARK = False
#: The command observes a registry, not one TABLE.
TAKES_TABLE = False


class Options(BaseModel):
    """``registry``: the registry file (None: ``$LAKEOPS_REGISTRY``); ``html``: where to write the report."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    registry: Path | None = None
    html: Path | None = None


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--registry",
        type=Path,
        help=f"the registry file (default: ${REGISTRY_ENV}, else ./lakeops.yaml)",
        metavar="FILE",
    )
    parser.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write an HTML report with each table's runs over time as plots (needs the extra 'report')",
    )


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> RegistryHealth:
    options = options_from_args(Options, args)
    return execute("", options, storage_options, spark=SparkSettings(), progress=progress)


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> RegistryHealth:
    """:func:`lakeops.planning.registry_health.registry_health` of the registry (``table`` and ``spark``
    are unused: health reads metadata only), and the HTML report when asked for."""
    from lakeops.planning.registry_health import registry_health
    from lakeops.registry import registry_path

    path = options.registry or registry_path()
    if options.html is not None:
        from spark_jobs.health_html import write_report  # fails early, naming the extra, before any read

        health = registry_health(path, storage_options, history=True)
        write_report(health, options.html)
        progress.print(f"wrote {options.html}", highlight=False)
        return health
    return registry_health(path, storage_options)
