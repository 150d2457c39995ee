"""Change data capture as a Spark job: ``spark-submit spark_jobs/cdc.py TABLE --from V [--to W] --output OUT``
(same options as ``lakeops cdc``). The plan and the commit run on the driver; each batch of change
files is read, and written as one output file, by one task."""

from __future__ import annotations

import argparse
import sys
import time

from rich.console import Console

from lakeops.ops import cdc
from lakeops.ops.cdc import CdcOptions, CdcReport
from lakeops.storage import StorageOptions
from lakeops.units import format_size
from spark_jobs.operations import SparkSettings, options_from_args, spark_from_args
from spark_jobs.runner import TaskFailed

HELP = "extract the change rows of versions V..W into a Delta table (Delta change data feed)"
USES_SPARK = True


class Options(CdcOptions):
    """The planner's options plus ``dry_run`` (plan and report, write nothing)."""

    dry_run: bool = False


def _version(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a table version (an integer >= 0), got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a table version is >= 0, got {value}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from", dest="from_version", type=_version, required=True, metavar="V", help="first source version"
    )
    parser.add_argument(
        "--to", dest="to_version", type=_version, metavar="W", help="last source version (default: the latest)"
    )
    parser.add_argument(
        "--output", required=True, metavar="OUT", help="Delta table the change rows are appended to (created if absent)"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")


def run(args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> CdcReport:
    """``lakeops cdc``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=spark_from_args(args), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> CdcReport:
    """Plan, extract on Spark, commit."""
    console = progress
    started = time.monotonic()
    console.print(f"planning the change feed of {table} from version {options.from_version} ...")
    plan = cdc.plan(table, options, storage_options)
    if plan.already_extracted:
        console.print(f"{plan.output_root} already holds versions through {plan.extracted_through}: nothing to do")
        return cdc.dry_run_report(plan, started) if options.dry_run else cdc.commit(plan, [], storage_options, started)
    console.print(
        f"versions {plan.from_version}..{plan.to_version}: {plan.source_files} files "
        f"({format_size(plan.source_bytes)}) in {len(plan.units)} units"
    )
    if options.dry_run:
        return cdc.dry_run_report(plan, started)
    cdc.require_output_writable(plan, storage_options)
    results: list[cdc.ExportResult] = []
    if plan.units:
        try:
            results = spark.run_units(
                plan.units,
                cdc.task_for(plan),
                cdc.ExportResult,
                label=f"extracting {len(plan.units)} units",
                description=f"lakeops cdc {plan.table_root} v{plan.from_version}..v{plan.to_version}",
                progress=console,
            )
        except TaskFailed as failure:
            # Nothing was committed: the units that did finish leave no files behind either.
            finished = [r for r in failure.completed.values() if isinstance(r, cdc.ExportResult)]
            cdc.discard(plan, finished, storage_options)
            raise
    console.print(f"committing to {plan.output_root} ...")
    report = cdc.commit(plan, results, storage_options, started)
    console.print(f"committed version {report.committed_version} of {plan.output_root}")
    return report


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="cdc"))
