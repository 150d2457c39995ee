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

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich.console import Console

from lakeops.errors import InvalidArgument
from lakeops.ops.report import Report
from lakeops.quarantine import TRASH_DIR
from lakeops.storage import StorageOptions
from spark_jobs.commands import COMMANDS
from spark_jobs.spark_settings import SparkSettings

__all__ = ["Deletions", "PlanOnly", "options_from_args", "run_operation", "spark_from_args"]

OptionsT = TypeVar("OptionsT", bound=BaseModel)


class PlanOnly(BaseModel):
    """``--dry-run`` of a command that writes (compact, checkpoint, cdc), declared once for all of them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dry_run: bool = Field(default=False, description="print the plan, write nothing")


class Deletions(BaseModel):
    """What a command that deletes files (expire, orphans) does with them, declared once for both:
    ``dry_run`` lists them, ``quarantine`` moves them into a trash run instead of deleting them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dry_run: bool = Field(default=False, description="list what would be deleted, delete nothing")
    quarantine: bool = Field(
        default=False,
        description=f"move the files to {TRASH_DIR}/RUN_ID/ under the table root instead of deleting them; "
        "undo with lakeops restore TABLE RUN_ID, free the space with lakeops purge-trash",
    )


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
