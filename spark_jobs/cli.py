"""The ``lakeops`` command line: ``lakeops {inspect,compact} TABLE [options]``.

Every operation runs plan → execute (Spark) → commit → report. Progress goes to stderr; stdout holds
the report only (a table, or one JSON object with ``--json``). Errors exit 1 with a message naming
the table, the file and the problem; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime

from rich.console import Console
from rich.table import Table

from lakeops.errors import LakeopsError
from lakeops.ops.report import Report
from lakeops.storage import StorageOptions
from lakeops.units import parse_size

stderr = Console(stderr=True, highlight=False)


def _conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except LakeopsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _timestamp(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 time such as 2026-11-01T12:00:00Z, got {text!r}"
        ) from exc


def _common(parser: argparse.ArgumentParser, *, spark: bool) -> None:
    parser.add_argument("table", help="table location: a path, file://, s3:// (s3a:// and s3n:// accepted)")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument("--endpoint-url", help="S3-compatible endpoint (default: AWS_ENDPOINT_URL or AWS)")
    parser.add_argument("--region", help="S3 region (default: the AWS configuration chain)")
    if spark:
        parser.add_argument("--master", help="Spark master (default: LAKEOPS_SPARK_MASTER or local[*])")
        parser.add_argument(
            "--conf", action="append", type=_conf_pair, default=[], metavar="KEY=VALUE", help="Spark configuration"
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lakeops", description="Maintain Delta Lake, Iceberg and Icechunk tables.")
    commands = parser.add_subparsers(dest="command", required=True)

    inspect = commands.add_parser("inspect", help="show a table's version, files, small files and features")
    _common(inspect, spark=False)
    travel = inspect.add_mutually_exclusive_group()
    travel.add_argument("--version", type=int, help="inspect this version instead of the latest")
    travel.add_argument(
        "--timestamp",
        type=_timestamp,
        help="inspect the version current at this time (ISO 8601; UTC unless it names a zone)",
    )

    compact = commands.add_parser("compact", help="bin-pack small files into larger ones (Delta OPTIMIZE)")
    _common(compact, spark=True)
    compact.add_argument("--target-file-size", type=_size, help="e.g. 128MB (default: table property, else 128MB)")
    compact.add_argument("--min-input-files", type=int, default=5, help="smallest bin worth rewriting (default 5)")
    compact.add_argument("--where", help="partition predicate, e.g. \"day >= '2024-01-01' AND region = 'eu'\"")
    compact.add_argument(
        "--dv-purge-ratio",
        type=float,
        default=0.05,
        help="rewrite files whose deletion vector hides more than this share of rows (default 0.05)",
    )
    compact.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    return parser


def storage_options(args: argparse.Namespace) -> StorageOptions:
    return StorageOptions(endpoint_url=args.endpoint_url, region=args.region)


def print_report(report: Report, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(report.model_dump_json() + "\n")
        return
    title = f"{report.operation} {report.format} {report.table}" + (" (dry run)" if report.dry_run else "")
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    for label, value in report.summary_lines():
        table.add_row(label, value)
    Console().print(table)


def _run(args: argparse.Namespace) -> Report:
    if args.command == "inspect":
        from lakeops.ops.inspect import inspect_table

        return inspect_table(args.table, storage_options(args), version=args.version, timestamp=args.timestamp)
    if args.command == "compact":
        from spark_jobs.compact import run_compaction

        return run_compaction(args, storage_options(args), progress=stderr)
    raise AssertionError(args.command)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        report = _run(args)
    except LakeopsError as exc:
        stderr.print(f"[red]error:[/red] {type(exc).__name__}: {exc}", markup=True, soft_wrap=True)
        return 1
    print_report(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
