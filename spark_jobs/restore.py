"""``lakeops restore TABLE RUN_ID``: put back every file a ``--quarantine`` run moved to the table's trash.

Runs on the driver (no Spark): a restore is as many moves as the run made, each one request or rename.
Nothing is restored if any file to restore exists again at its original path (the error names it).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pydantic import BaseModel
from rich.console import Console

from lakeops.ops.options import RestoreOptions
from lakeops.storage import StorageOptions
from spark_jobs.operations import options_from_args
from spark_jobs.option_arguments import CommandOptions
from spark_jobs.spark_settings import SparkSettings

if TYPE_CHECKING:
    from lakeops.ops.trash import RestoreReport

HELP = "put back the files a --quarantine run of orphans or expire moved to the table's trash"
USES_SPARK = False

Options = RestoreOptions
#: The model declaring restore's one argument, RUN_ID.
SECTIONS: dict[type[BaseModel], str | None] = {RestoreOptions: None}


#: The command's options, declared once: its parser and docs/options.md are made from them.
OPTIONS = CommandOptions(Options, SECTIONS)
configure = OPTIONS.configure


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> RestoreReport:
    """``lakeops restore``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=SparkSettings(), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> RestoreReport:
    """:func:`lakeops.api.restore`, on the driver (``spark`` is not used)."""
    from lakeops import api

    return api.restore(table, options, storage_options=storage_options, progress=progress)


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="restore"))
