"""Partition predicates for ``--where``: a small, strict SQL subset evaluated on partition values.

Grammar: ``cond (AND cond)*`` where ``cond`` is ``column op literal``, ``column IN (literal, ...)``,
``column IS [NOT] NULL``; ``op`` is one of ``= == != <> < <= > >=``; literals are single-quoted
strings (``''`` escapes a quote), numbers, ``true``/``false``. Only conjunctions: a maintenance
filter that silently widened (an ``OR`` misparsed) could rewrite or delete more than asked.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from lakeops.errors import InvalidArgument

_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<number>-?\d+(?:\.\d+)?)|(?P<op><=|>=|<>|!=|==|=|<|>)"
    r"|(?P<punct>[(),])|(?P<ident>`[^`]+`|[A-Za-z_][A-Za-z0-9_.]*))"
)
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "==": operator.eq,
    "!=": operator.ne,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@dataclass(frozen=True)
class Condition:
    column: str
    op: str  # one of _OPS, "in", "is null", "is not null"
    values: tuple[Any, ...]


@dataclass(frozen=True)
class PartitionPredicate:
    """A parsed ``--where`` filter: every condition must hold (AND)."""

    text: str
    conditions: tuple[Condition, ...]

    @property
    def columns(self) -> set[str]:
        return {c.column for c in self.conditions}

    def require_columns(self, allowed: list[str], table: str) -> None:
        """Refuse conditions on anything but partition columns (case-insensitive, as SQL is)."""
        lower = {a.lower() for a in allowed}
        bad = sorted(c for c in self.columns if c.lower() not in lower)
        if bad:
            columns = ", ".join(allowed) or "none: the table is not partitioned"
            raise InvalidArgument(
                f"{table}: --where may only use partition columns ({columns}); {', '.join(bad)} is not one"
            )

    def matches(self, values: Mapping[str, Any]) -> bool:
        """Evaluate on typed partition values (``None`` is SQL NULL: comparisons with it are false)."""
        by_lower = {k.lower(): v for k, v in values.items()}
        for cond in self.conditions:
            value = by_lower.get(cond.column.lower())
            if cond.op == "is null":
                ok = value is None
            elif cond.op == "is not null":
                ok = value is not None
            elif value is None:
                ok = False
            elif cond.op == "in":
                ok = any(_compare(operator.eq, value, v, self.text) for v in cond.values)
            else:
                ok = _compare(_OPS[cond.op], value, cond.values[0], self.text)
            if not ok:
                return False
        return True


def _compare(op: Callable[[Any, Any], bool], value: Any, literal: Any, text: str) -> bool:
    """Compare a typed partition value with a literal, coercing the literal to the value's type."""
    try:
        if isinstance(value, bool):
            # Only a boolean or 'true'/'false': anything else (1, 'yes', a typo) must not select False.
            if isinstance(literal, bool):
                coerced: Any = literal
            elif isinstance(literal, str) and literal.lower() in ("true", "false"):
                coerced = literal.lower() == "true"
            else:
                raise ValueError("a boolean column compares with true or false only")
        elif isinstance(value, int | float) and not isinstance(literal, bool):
            # A numeric literal is compared as written: int(2.5) == 2 would widen `x = 2.5` to x = 2.
            coerced = literal if isinstance(literal, int | float) else type(value)(literal)
        elif isinstance(value, Decimal) and isinstance(literal, float):
            coerced = Decimal(repr(literal))  # Decimal(1.1) is 1.100000000000000088...
        elif hasattr(value, "isoformat") and isinstance(literal, str):
            coerced = type(value).fromisoformat(literal)
            if isinstance(value, datetime) and isinstance(coerced, datetime):
                if value.tzinfo is not None and coerced.tzinfo is None:
                    coerced = coerced.replace(tzinfo=UTC)  # as zone-less timestamp partition values are
                elif value.tzinfo is None and coerced.tzinfo is not None:
                    raise ValueError("a timestamp_ntz column compares with a literal without time zone")
        elif isinstance(value, str):
            coerced = str(literal)
        else:
            coerced = type(value)(literal)
        return bool(op(value, coerced))
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"--where {text!r}: cannot compare {value!r} with {literal!r} ({exc})") from exc


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None:
            raise InvalidArgument(f"--where {text!r}: cannot parse at {text[pos:]!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        pos = match.end()
    return tokens


def _literal(kind: str, value: str, text: str) -> Any:
    if kind == "string":
        return value[1:-1].replace("''", "'")
    if kind == "number":
        return float(value) if "." in value else int(value)
    if kind == "ident" and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise InvalidArgument(f"--where {text!r}: expected a literal, found {value!r}")


def parse_predicate(text: str) -> PartitionPredicate:
    """Parse a ``--where`` string; raises :class:`InvalidArgument` naming what it could not read."""
    tokens = _tokens(text)
    conditions: list[Condition] = []
    i = 0

    def expect(kind: str) -> str:
        nonlocal i
        if i >= len(tokens) or tokens[i][0] != kind:
            found = tokens[i][1] if i < len(tokens) else "end of input"
            raise InvalidArgument(f"--where {text!r}: expected {kind}, found {found!r}")
        i += 1
        return tokens[i - 1][1]

    while True:
        column = expect("ident").strip("`")
        if i >= len(tokens):
            raise InvalidArgument(f"--where {text!r}: condition on {column} is incomplete")
        kind, value = tokens[i]
        if kind == "op":
            i += 1
            if i >= len(tokens):
                raise InvalidArgument(f"--where {text!r}: missing value after {value}")
            conditions.append(Condition(column, value, (_literal(*tokens[i], text),)))
            i += 1
        elif kind == "ident" and value.lower() == "in":
            i += 1
            if i >= len(tokens) or tokens[i][1] != "(":
                raise InvalidArgument(f"--where {text!r}: expected '(' after IN")
            i += 1
            values: list[Any] = []
            while True:
                if i >= len(tokens):
                    raise InvalidArgument(f"--where {text!r}: unterminated IN list")
                values.append(_literal(*tokens[i], text))
                i += 1
                sep = expect("punct")
                if sep == ")":
                    break
                if sep != ",":
                    raise InvalidArgument(f"--where {text!r}: expected ',' or ')' in IN list")
            conditions.append(Condition(column, "in", tuple(values)))
        elif kind == "ident" and value.lower() == "is":
            i += 1
            negate = i < len(tokens) and tokens[i][1].lower() == "not"
            i += negate
            if i >= len(tokens) or tokens[i][1].lower() != "null":
                raise InvalidArgument(f"--where {text!r}: expected NULL after IS")
            i += 1
            conditions.append(Condition(column, "is not null" if negate else "is null", ()))
        else:
            raise InvalidArgument(f"--where {text!r}: expected an operator after {column}, found {value!r}")
        if i == len(tokens):
            break
        if tokens[i][1].lower() == "or":
            raise InvalidArgument(f"--where {text!r}: OR is not supported; run the operation once per condition")
        if tokens[i][1].lower() != "and":
            raise InvalidArgument(f"--where {text!r}: expected AND, found {tokens[i][1]!r}")
        i += 1
    return PartitionPredicate(text, tuple(conditions))
