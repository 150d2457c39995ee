"""A command's arguments generated from its options model, so that each option is declared once.

Every field of the model becomes ``--<name>`` (or the field's own ``flag``: a switch that turns a
default off), parsed as its :class:`~lakeops.option_fields.OptionKind` says (``128MB``, ``10m``,
``a,b``, a predicate: a bad one is a usage error, exit 2) or as its type, with the field's
description as its help and its default shown. Fields declared by a format's own model go in that
format's argument group, so ``--help`` says which options a format has.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, get_args

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from lakeops.option_fields import option_flag, option_kind
from lakeops.units import format_size

__all__ = ["add_option_arguments", "options_markdown"]


def _declaring(model: type[BaseModel], sections: Sequence[type[BaseModel]]) -> list[tuple[int, str]]:
    """Each field of ``model`` with the position in ``sections`` of the model that declares it
    (``len(sections)``: none of them, e.g. a command's own ``dry_run``), in that order."""

    def position(name: str) -> int:
        owners = [i for i, cls in enumerate(sections) if name in vars(cls).get("__annotations__", {})]
        return owners[0] if owners else len(sections)

    return sorted(((position(name), name) for name in model.model_fields), key=lambda pair: pair[0])


def _python_type(field: FieldInfo) -> Callable[[str], Any]:
    annotation = field.annotation
    kinds = [arg for arg in get_args(annotation) if arg is not type(None)] or [annotation]
    return kinds[0] if kinds[0] in (int, float) else str


def _parser(field: FieldInfo) -> Callable[[str], Any]:
    from spark_jobs.cli import columns_arg, duration_arg, size_arg, where_arg

    parsers: dict[str | None, Callable[[str], Any]] = {
        "size": size_arg,
        "duration": duration_arg,
        "columns": columns_arg,
        "where": where_arg,
    }
    kind = option_kind(field).kind
    return parsers[kind] if kind is not None else _python_type(field)


def _described(field: FieldInfo) -> str:
    """The field's description with its default, unless the description says it (or it is a switch)."""
    text = field.description or ""
    default = field.default
    if default is None or isinstance(default, bool) or "(default" in text:
        return text
    shown = format_size(default) if option_kind(field).kind == "size" else str(default)
    return f"{text} (default {shown})"


def _help(field: FieldInfo) -> str:
    return _described(field).replace("%", "%%")  # argparse formats help with %


def add_option_arguments(
    parser: argparse.ArgumentParser,
    model: type[BaseModel],
    *,
    sections: Mapping[type[BaseModel], str | None],
    skip: Collection[str] = (),
) -> None:
    """An argument per field of ``model`` but ``skip`` (``dest``: the field's name), in the order of
    ``sections``, the models that declare them: a titled one's in an argument group of that title
    (a format's own options), the others at the top."""
    classes = list(sections)
    groups: dict[str, argparse._ArgumentGroup] = {}
    for position, name in _declaring(model, classes):
        if name in skip:
            continue
        field = model.model_fields[name]
        title = sections[classes[position]] if position < len(classes) else None
        target: Any = parser if title is None else groups.setdefault(title, parser.add_argument_group(title))
        flag = option_flag(name, field)
        if field.annotation is bool:
            action = "store_false" if field.default else "store_true"
            target.add_argument(flag, dest=name, action=action, help=_help(field))
            continue
        kind = option_kind(field)
        target.add_argument(
            flag, dest=name, type=_parser(field), default=field.default, metavar=kind.metavar, help=_help(field)
        )


def options_markdown(
    model: type[BaseModel],
    *,
    sections: Mapping[type[BaseModel], str | None],
    formats: Mapping[str, type[BaseModel]],
    skip: Collection[str] = (),
) -> str:
    """The options of ``model`` as a Markdown table (flag, the formats whose model in ``formats`` has
    it, what it does), in the order of the help: the docs' table, from the same declarations."""
    rows = ["| option | formats | what it does |", "|---|---|---|"]
    for _, name in _declaring(model, list(sections)):
        if name in skip:
            continue
        field = model.model_fields[name]
        owners = ", ".join(title for title, of in formats.items() if name in of.model_fields) or "every format"
        metavar = option_kind(field).metavar
        flag = option_flag(name, field) + ("" if field.annotation is bool or metavar is None else f" {metavar}")
        text = _described(field).replace("|", "\\|")
        rows.append(f"| `{flag}` | {owners} | {text} |")
    return "\n".join(rows) + "\n"
