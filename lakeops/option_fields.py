"""What an option field says of itself beyond its type: how the command line reads it and which flag
names it.

The option models (:mod:`lakeops.ops.options` and each format's) are the one declaration of every
option: the command line's arguments and help (:mod:`spark_jobs.option_arguments`), the registry's
policy keys and the refusal of an option a table's format lacks all follow from their fields. A
field's ``description`` is its help; an :class:`OptionKind` in its type says how its text is parsed;
``json_schema_extra`` may name its ``flag`` (a switch that turns a default off; a name without
dashes: a positional argument) and ``metavar`` (None: argparse's own).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic.fields import FieldInfo

from lakeops.errors import LakeopsError
from lakeops.units import parse_retention, parse_size

__all__ = [
    "ByteCount",
    "ByteSize",
    "Columns",
    "Location",
    "OptionKind",
    "PositiveCount",
    "Predicate",
    "Retention",
    "RunId",
    "option_flag",
    "option_kind",
]


@dataclass(frozen=True)
class OptionKind:
    """How the command line reads a field (``size``: ``128MB``; ``duration``: ``10m``; ``retention``:
    ``7d``, not negative; ``columns``: ``a,b``; ``where``: a partition predicate; ``positive``: an
    integer above 0; ``location``: a table, not empty; ``run_id``: a quarantine run), and the
    ``metavar`` its help shows. A field without one is read as its type: a number, a timestamp, one
    of an enum's values, or (a list) once per repetition of the flag."""

    kind: Literal["size", "duration", "retention", "columns", "where", "positive", "location", "run_id"] | None = None
    metavar: str | None = None


def _bytes(value: object) -> object:
    """``"128MB"`` as the command line and the registry write sizes; a number of bytes as it is."""
    if not isinstance(value, str):
        return value
    try:
        return parse_size(value)
    except LakeopsError as exc:  # a ValueError: pydantic names the field
        raise ValueError(str(exc)) from None


#: A size in bytes, given as a number or as text (``128MB``); more than 0.
ByteSize = Annotated[int, BeforeValidator(_bytes), Field(gt=0), OptionKind("size", "SIZE")]
#: A size that may be 0 (a threshold nothing is below).
ByteCount = Annotated[int, BeforeValidator(_bytes), Field(ge=0), OptionKind("size", "SIZE")]


def _retention(value: str) -> str:
    """A retention checked (``7d``; a negative one is refused), kept as written: the audit record
    and the report hold what the user gave."""
    try:
        parse_retention(value)
    except LakeopsError as exc:
        raise ValueError(str(exc)) from None
    return value


#: A retention as the command line and the registry write it (``30d``), kept as written.
Retention = Annotated[str, AfterValidator(_retention), OptionKind("retention", "DURATION")]
#: A count above 0 (the command line refuses another while parsing).
PositiveCount = Annotated[int, Field(gt=0), OptionKind("positive")]
#: A table: a location or a registry name (the command line refuses an empty one while parsing).
Location = Annotated[str, OptionKind("location")]
#: A quarantine run's id (:func:`lakeops.quarantine.require_run_id` checks it).
RunId = Annotated[str, OptionKind("run_id", "RUN_ID")]
#: Column names (the command line: comma-separated).
Columns = Annotated[list[str], OptionKind("columns", "COLUMNS")]
#: A partition predicate (:mod:`lakeops.predicate`), kept as written.
Predicate = Annotated[str, OptionKind("where", "PREDICATE")]


def _kinds(annotation: object) -> Iterator[OptionKind]:
    """The :class:`OptionKind` marks in ``annotation``, an optional one's (``ByteSize | None``) included."""
    for arg in get_args(annotation):
        if isinstance(arg, OptionKind):
            yield arg
        else:
            yield from _kinds(arg)


def option_kind(field: FieldInfo) -> OptionKind:
    """The field's :class:`OptionKind`, with the ``metavar`` its ``json_schema_extra`` names (none: the
    field is read as its Python type)."""
    kind = next((m for m in field.metadata if isinstance(m, OptionKind)), None) or next(
        _kinds(field.annotation), OptionKind()
    )
    extra = _extra(field)
    if "metavar" not in extra:
        return kind
    metavar = extra["metavar"]
    return OptionKind(kind.kind, metavar if isinstance(metavar, str) else None)


def option_flag(name: str, field: FieldInfo) -> str:
    """The command-line flag of option ``name``: ``--target-file-size``, or the field's own ``flag``."""
    flag = _extra(field).get("flag")
    return flag if isinstance(flag, str) else "--" + name.replace("_", "-")


def _extra(field: FieldInfo) -> dict[str, object]:
    return dict(field.json_schema_extra) if isinstance(field.json_schema_extra, dict) else {}
