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
from spark_jobs.runner import TaskFailed, run_units
from spark_jobs.session import build_session

HELP = "extract the change rows of versions V..W into a Delta table (Delta change data feed)"
USES_SPARK = True


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
    """Plan, extract on Spark, commit; ``args`` are the parsed ``cdc`` options."""
    console = progress
    started = time.monotonic()
    options = CdcOptions(from_version=args.from_version, to_version=args.to_version, output=args.output)
    console.print(f"planning the change feed of {args.table} from version {args.from_version} ...")
    plan = cdc.plan(args.table, options, storage_options)
    if plan.already_extracted:
        console.print(f"{plan.output_root} already holds versions through {plan.extracted_through}: nothing to do")
        return cdc.dry_run_report(plan, started) if args.dry_run else cdc.commit(plan, [], storage_options, started)
    console.print(
        f"versions {plan.from_version}..{plan.to_version}: {plan.source_files} files "
        f"({format_size(plan.source_bytes)}) in {len(plan.units)} units"
    )
    if args.dry_run:
        return cdc.dry_run_report(plan, started)
    cdc.require_output_writable(plan, storage_options)
    results: list[cdc.ExportResult] = []
    if plan.units:
        spark = build_session(master=args.master, conf=dict(args.conf))
        console.print(f"extracting {len(plan.units)} units on Spark ({spark.conf.get('spark.master', 'connect')}) ...")
        try:
            results = run_units(
                spark,
                plan.units,
                cdc.task_for(plan),
                cdc.ExportResult,
                description=f"lakeops cdc {plan.table_root} v{plan.from_version}..v{plan.to_version}",
                progress=lambda done, total: console.print(f"  {done}/{total} Spark tasks done"),
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
