"""The ``lakeops`` command line: ``lakeops {inspect,compact,...} TABLE [options]``.

Each command is a module of ``spark_jobs`` (listed in :data:`COMMANDS`) that declares its options
(``configure``) and runs plan → execute (Spark) → commit → report (``run``); the same module is its
``spark-submit`` entry point. Progress goes to stderr; stdout holds the report only (a table, or one
JSON object with ``--json``). Errors exit 1 with a message naming the table, the file and the
problem; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from types import ModuleType
from typing import Protocol, cast

from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lakeops.errors import LakeopsError, PartiallyCommitted, UsageError
from lakeops.jsontext import printable
from lakeops.ops.report import Report
from lakeops.predicate import parse_predicate
from lakeops.quarantine import require_run_id
from lakeops.redaction import mask_text
from lakeops.storage import StorageOptions
from lakeops.units import parse_duration, parse_retention, parse_size
from spark_jobs.commands import COMMANDS
from spark_jobs.console import MaskedConsole

#: Progress and errors; messages hold paths and user values, never rich markup (errors add their own),
#: and never a secret (:class:`~spark_jobs.console.MaskedConsole`).
stderr = MaskedConsole(stderr=True, highlight=False, markup=False)


class Command(Protocol):
    HELP: str
    USES_SPARK: bool
    Options: type[BaseModel]

    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace, storage_options: StorageOptions, progress: Console) -> Report: ...


def _conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _checked(parse: Callable[[str], object]) -> Callable[[str], object]:
    """Turn a lakeops parser's error into an argparse usage error (exit 2 with the message)."""

    def convert(text: str) -> object:
        try:
            return parse(text)
        except (LakeopsError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    return convert


def _where(text: str) -> str:
    """``--where`` parsed when read (a syntax error is a usage error), kept as written."""
    parse_predicate(text)
    return text


def location_arg(text: str) -> str:
    """TABLE and ``--output``: an empty one is a usage error, whatever the command."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a table location or name must not be empty")
    return text


def _columns(text: str) -> list[str]:
    """``--zorder-by a,b``: column names, comma-separated, none empty."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected column names separated by commas, got {text!r}")
    return names


def _retention(text: str) -> str:
    """``--older-than`` checked when parsed (a bad or negative one is a usage error), kept as written:
    the options, and so the audit record, hold what the user typed."""
    parse_retention(text)
    return text


def positive_int_arg(text: str) -> int:
    """``--part-size``: an integer above 0, refused by name while parsing."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


size_arg = _checked(parse_size)
duration_arg = _checked(parse_duration)
retention_arg = _checked(_retention)
timestamp_arg = _checked(datetime.fromisoformat)
where_arg = _checked(_where)
run_id_arg = _checked(require_run_id)
columns_arg = _columns


def _common(parser: argparse.ArgumentParser, *, spark: bool, table: bool = True) -> None:
    if table:
        _table(parser)
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument("--endpoint-url", help="S3-compatible endpoint (default: AWS_ENDPOINT_URL or AWS)")
    parser.add_argument("--region", help="S3 region (default: the AWS configuration chain)")
    if spark:
        parser.add_argument("--master", help="Spark master (default: LAKEOPS_SPARK_MASTER or local[*])")
        parser.add_argument(
            "--conf", action="append", type=_conf_pair, default=[], metavar="KEY=VALUE", help="Spark configuration"
        )


def _table(parser: argparse.ArgumentParser) -> None:
    """TABLE and the catalog it may be in."""
    parser.add_argument(
        "table",
        type=location_arg,
        help="table location (a path, file://, s3://; s3a:// and s3n:// accepted), namespace.table with "
        "--catalog-uri or --catalog-type glue, or a table name from the registry file ($LAKEOPS_REGISTRY, "
        "else ./lakeops.yaml)",
    )
    parser.add_argument(
        "--catalog-type",
        choices=["sql", "glue", "rest"],
        default="sql",
        help="the Iceberg catalog of TABLE (namespace.table): sql (default; with --catalog-uri), glue "
        "(AWS Glue Data Catalog; TABLE is database.table) or rest (an Iceberg REST catalog at --catalog-uri)",
    )
    parser.add_argument(
        "--catalog-uri",
        help="Iceberg catalog: with --catalog-type sql a SQLAlchemy URL (sqlite:///catalog.db, "
        "postgresql+psycopg2://user@host/db with PGPASSWORD), with glue the Glue endpoint URL (default: AWS), "
        "with rest the catalog's base URL (https://host/api/catalog); TABLE is then namespace.table",
    )
    parser.add_argument(
        "--catalog-name", default="default", help="catalog name within --catalog-uri (default: default)"
    )
    parser.add_argument("--catalog-region", help="Glue: the catalog's region (default: --region, else the AWS chain)")
    parser.add_argument("--catalog-id", help="Glue: the Data Catalog's AWS account id (default: the caller's)")
    parser.add_argument("--catalog-warehouse", help="REST catalog: the warehouse to ask /v1/config for")
    parser.add_argument("--catalog-prefix", help="REST catalog: the path prefix, unless its configuration gives one")
    parser.add_argument(
        "--catalog-credential-env",
        metavar="NAME",
        help="REST catalog: the environment variable holding the OAuth2 client credential client_id:client_secret",
    )
    parser.add_argument(
        "--catalog-token-env", metavar="NAME", help="REST catalog: the environment variable holding a bearer token"
    )
    parser.add_argument(
        "--catalog-no-vended-credentials",
        dest="catalog_vended_credentials",
        action="store_const",
        const=False,
        help="REST catalog: do not ask for the table's storage credentials (X-Iceberg-Access-Delegation); "
        "S3 requests then use this process's own identity",
    )


def _command(name: str) -> Command:
    module: ModuleType = importlib.import_module(COMMANDS[name])
    return cast(Command, module)


def _installed_version() -> str:
    """The installed distribution's version (the one pip and the lock name)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lakeops")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lakeops", description="Maintain Delta Lake, Iceberg and Icechunk tables.")
    parser.add_argument("--version", action="version", version=f"lakeops {_installed_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS if only is None else [only]:
        command = _command(name)
        sub = commands.add_parser(name, help=command.HELP, description=command.HELP)
        _common(sub, spark=command.USES_SPARK, table=getattr(command, "TAKES_TABLE", True))
        command.configure(sub)
    return parser


def storage_options(args: argparse.Namespace) -> StorageOptions:
    return StorageOptions(endpoint_url=args.endpoint_url, region=args.region)


def print_report(report: Report, as_json: bool, console: Console | None = None) -> None:
    """``report`` as the CLI prints it: one line of JSON, else a table on ``console`` (default: stdout;
    an orchestrator passes its log's, :func:`orchestration.runs.progress_console`)."""
    if as_json:
        sys.stdout.write(report.to_json() + "\n")
        return
    title = printable(mask_text(f"{report.operation} {report.format} {report.table}"))
    title += " (dry run)" if report.dry_run else ""
    grid = report.columns()
    if grid is not None:
        header, rows = grid
        table = Table(*header, title=escape(title), title_justify="left")
        for row in rows:
            table.add_row(*(escape(printable(mask_text(cell))) for cell in row))
        (console or Console()).print(table)
        return
    table = Table(title=escape(title), show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    for label, value in report.summary_lines():
        table.add_row(escape(label), escape(value))
    (console or Console()).print(table)


def main(argv: Sequence[str] | None = None, *, only: str | None = None) -> int:
    """Run one command; ``only`` restricts the parser to one command (spark-submit entry points)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if only is not None:
        argv = [only, *argv]
    parser = build_parser(only)
    args = parser.parse_args(argv)
    try:
        command = _command(args.command)  # lakeops.api resolves registry names in TABLE and --output
        report = command.run(args, storage_options(args), stderr)
    except LakeopsError as exc:
        if isinstance(exc, PartiallyCommitted) and isinstance(exc.report, Report):
            print_report(exc.report, args.json)  # what did land stays in the table: say what it is
        # escape(): messages quote user data (``bucket[16]``) that rich would read as markup.
        stderr.print(f"[red]error:[/red] {type(exc).__name__}: {escape(str(exc))}", markup=True, soft_wrap=True)
        return 2 if isinstance(exc, UsageError) else 1
    except ValidationError as exc:  # an option outside its range, caught by the options model
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        stderr.print(f"[red]error:[/red] invalid option: {escape(problems)}", markup=True, soft_wrap=True)
        return 2
    print_report(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
