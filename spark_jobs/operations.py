"""The programmatic entry point of every operation, shared by the ``lakeops`` CLI and Dagster.

Each command module of :data:`spark_jobs.commands.COMMANDS` defines ``Options`` (a pydantic model of its
options, named as the CLI names them; unknown options are an error) and ``execute(table, options,
storage_options, *, spark, progress) -> Report`` (plan → execute on Spark → commit → report). Its
``run(args, ...)`` only maps parsed command-line arguments onto those, so the CLI, ``spark-submit``
and Dagster run the same code. :func:`run_operation` is that call by command name, with the options
as a mapping.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Mapping
from typing import Any, Protocol, TypeVar, cast

from pydantic import BaseModel, ValidationError
from rich.console import Console

from lakeops.errors import InvalidArgument
from lakeops.ops.report import Report
from lakeops.storage import StorageOptions
from spark_jobs.commands import COMMANDS
from spark_jobs.spark_settings import SparkSettings

__all__ = ["options_from_args", "run_operation", "spark_from_args"]

OptionsT = TypeVar("OptionsT", bound=BaseModel)


class Operation(Protocol):
    """What :func:`run_operation` needs of a command module."""

    Options: type[BaseModel]

    def execute(
        self,
        table: str,
        options: Any,
        storage_options: StorageOptions,
        *,
        spark: SparkSettings,
        progress: Console,
    ) -> Report: ...


def options_from_args(model: type[OptionsT], args: argparse.Namespace) -> OptionsT:
    """``model`` from the parsed arguments of the same names (argparse ``dest`` = field name)."""
    return model.model_validate({name: getattr(args, name) for name in model.model_fields if hasattr(args, name)})


def spark_from_args(args: argparse.Namespace) -> SparkSettings:
    return SparkSettings(master=args.master, conf=dict(args.conf))


def run_operation(
    name: str,
    table: str,
    options: Mapping[str, object] | None = None,
    *,
    storage_options: StorageOptions | None = None,
    spark: SparkSettings | None = None,
    progress: Console | None = None,
) -> Report:
    """Run command ``name`` (``compact``, ``expire``, ...) on ``table`` and return its report.

    ``options`` uses the CLI's option names (``{"older_than": "7d", "dry_run": True}``); an unknown
    name or a bad value raises :class:`InvalidArgument` naming the table, the command and the
    option. Progress lines go to ``progress`` (default: discarded).
    """
    if name not in COMMANDS:
        raise InvalidArgument(f"{table}: unknown operation {name!r}; expected one of {', '.join(COMMANDS)}")
    operation = cast(Operation, importlib.import_module(COMMANDS[name]))
    try:
        parsed = operation.Options.model_validate(dict(options or {}))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'options'}: {e['msg']}" for e in exc.errors())
        raise InvalidArgument(f"{table}: lakeops {name}: {problems}") from None
    return operation.execute(
        table,
        parsed,
        storage_options or StorageOptions(),
        spark=spark or SparkSettings(),
        progress=progress or Console(quiet=True),
    )
