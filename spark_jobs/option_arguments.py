"""A command's arguments generated from its options model, so that each option is declared once.

Every field of the model becomes ``--<name>`` (or the field's own ``flag``: a switch that turns a
default off; without dashes: a positional argument), parsed as its
:class:`~lakeops.option_fields.OptionKind` says (``128MB``, ``10m``, ``7d``, ``a,b``, a predicate: a
bad one is a usage error, exit 2) or as its type (a number, an ISO timestamp, one of an enum's values,
a list: the flag repeated), required when the field has no default, with the field's description as
its help and its default shown. Fields declared by a format's own model go in that format's argument
group, so ``--help`` says which options a format has.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import datetime
from enum import Enum
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from lakeops.ops.target import CatalogOptions
from lakeops.option_fields import option_flag, option_kind
from lakeops.units import format_size

__all__ = ["CommandOptions", "add_option_arguments", "options_markdown"]


def _declaring(model: type[BaseModel], sections: Sequence[type[BaseModel]]) -> list[tuple[int, str]]:
    """Each field of ``model`` with the position in ``sections`` of the model that declares it
    (``len(sections)``: none of them, e.g. a command's own ``dry_run``), in that order."""

    def position(name: str) -> int:
        owners = [i for i, cls in enumerate(sections) if name in vars(cls).get("__annotations__", {})]
        return owners[0] if owners else len(sections)

    return sorted(((position(name), name) for name in model.model_fields), key=lambda pair: pair[0])


def _declared(field: FieldInfo) -> Any:
    """The field's type without ``None`` (``list[int] | None``: ``list[int]``)."""
    kinds = [arg for arg in get_args(field.annotation) if arg is not type(None)]
    return kinds[0] if len(kinds) == 1 else field.annotation


def _value_type(field: FieldInfo) -> Any:
    """The type of the field's value (``int | None``: ``int``; ``list[int]``: ``int``), or None when it
    is a union of several (``int | str``: kept as the text given)."""
    declared = _declared(field)
    if get_origin(declared) is list:
        return get_args(declared)[0]
    return None if get_args(declared) else declared


def _parser(field: FieldInfo) -> Callable[[str], Any] | None:
    from spark_jobs.cli import (
        columns_arg,
        duration_arg,
        location_arg,
        positive_int_arg,
        retention_arg,
        run_id_arg,
        size_arg,
        timestamp_arg,
        where_arg,
    )

    parsers: dict[str | None, Callable[[str], Any]] = {
        "size": size_arg,
        "duration": duration_arg,
        "retention": retention_arg,
        "columns": columns_arg,
        "where": where_arg,
        "positive": positive_int_arg,
        "location": location_arg,
        "run_id": run_id_arg,
    }
    kind = option_kind(field).kind
    if kind is not None:
        return parsers[kind]
    value = _value_type(field)
    if value in (int, float):
        return value
    return timestamp_arg if value is datetime else None  # None: the text as given


def _choices(field: FieldInfo) -> list[str] | None:
    """An enum's values, the only ones the command line takes."""
    value = _value_type(field)
    return [member.value for member in value] if isinstance(value, type) and issubclass(value, Enum) else None


def _metavar(name: str, field: FieldInfo) -> str:
    """What the help shows for the field's value, as argparse shows it."""
    choices = _choices(field)
    if choices is not None:
        return "{" + ",".join(choices) + "}"
    return option_kind(field).metavar or name.upper()


def _described(field: FieldInfo) -> str:
    """The field's description with its default, unless the description says it (or it is a switch)."""
    text = field.description or ""
    default = field.default
    if field.is_required() or default is None or isinstance(default, bool) or "(default" in text:
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
    exclusive: Collection[str] = (),
) -> None:
    """An argument per field of ``model`` but ``skip`` (``dest``: the field's name), in the order of
    ``sections``, the models that declare them: a titled one's in an argument group of that title
    (a format's own options), the others at the top; those in ``exclusive`` in one group of which a
    command line gives one at most."""
    classes = list(sections)
    groups: dict[str, argparse._ArgumentGroup] = {}
    either: Any = parser.add_mutually_exclusive_group() if exclusive else None
    for position, name in _declaring(model, classes):
        if name in skip:
            continue
        field = model.model_fields[name]
        title = sections[classes[position]] if position < len(classes) else None
        target: Any = parser if title is None else groups.setdefault(title, parser.add_argument_group(title))
        target = either if name in exclusive else target
        flag = option_flag(name, field)
        if field.annotation is bool:
            action = "store_false" if field.default else "store_true"
            target.add_argument(flag, dest=name, action=action, help=_help(field))
            continue
        kind = option_kind(field)
        given: dict[str, Any] = {"type": _parser(field), "metavar": kind.metavar, "help": _help(field)}
        if (choices := _choices(field)) is not None:
            given |= {"choices": choices, "metavar": None}
        if not flag.startswith("-"):
            target.add_argument(flag, **given)  # positional: its dest is its name
            continue
        given["dest"] = name
        if field.is_required():
            given["required"] = True
        else:
            given["default"] = field.default
        if get_origin(_declared(field)) is list and kind.kind is None:
            given["action"] = "append"  # repeatable: each value one item
        target.add_argument(flag, **given)


def options_markdown(
    model: type[BaseModel],
    *,
    sections: Mapping[type[BaseModel], str | None],
    formats: Mapping[str, type[BaseModel]],
    skip: Collection[str] = (),
) -> str:
    """The options of ``model`` as a Markdown table (flag, the formats whose model in ``formats`` has
    it, what it does), in the order of the help: the docs' table, from the same declarations."""
    rows = (
        ["| option | formats | what it does |", "|---|---|---|"]
        if formats
        else ["| option | what it does |", "|---|---|"]
    )
    for _, name in _declaring(model, list(sections)):
        if name in skip:
            continue
        field = model.model_fields[name]
        flag = option_flag(name, field)
        if not flag.startswith("-"):
            flag = _metavar(name, field)
        elif field.annotation is not bool:
            flag += " " + _metavar(name, field)
        text = _described(field).replace("|", "\\|")
        owners = ", ".join(title for title, of in formats.items() if name in of.model_fields) or "every format"
        rows.append(f"| `{flag}` | {owners} | {text} |" if formats else f"| `{flag}` | {text} |")
    return "\n".join(rows) + "\n"


@dataclass(frozen=True)
class CommandOptions:
    """A command's options as its module declares them once: its ``model``, the models declaring its
    fields (``sections``, in the help's order, a format's titled), each format's own model
    (``formats``, for the docs' column), the fields that are not its own arguments (``skip``: the
    catalog's, which :mod:`spark_jobs.cli` adds for every command) and those of which one at most is
    given (``exclusive``). Both the parser and the docs are made from it."""

    model: type[BaseModel]
    sections: Mapping[type[BaseModel], str | None]
    formats: Mapping[str, type[BaseModel]] = dataclass_field(default_factory=dict)
    skip: Collection[str] = frozenset(CatalogOptions.model_fields)
    exclusive: Collection[str] = ()

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """The command's arguments, generated from its models."""
        add_option_arguments(parser, self.model, sections=self.sections, skip=self.skip, exclusive=self.exclusive)

    def markdown(self) -> str:
        """The command's options table in the docs (docs/options.md), from the same declarations."""
        return options_markdown(self.model, sections=self.sections, formats=self.formats, skip=self.skip)
