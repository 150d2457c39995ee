"""Delta per-file statistics (``add.stats``) for a data file lakeops has just written.

Implements "Per-file Statistics" of the Delta protocol (PROTOCOL.md) from the file's Parquet footer
(:mod:`lakeops.parquet.statistics`): ``numRecords``, and per column ``minValues``, ``maxValues``
and ``nullCount``, nested like the schema and keyed by *physical* names ("Writer Requirements for
Column Mapping": statistics are tracked with physical names).

Which columns: the table's data columns (partition columns never), limited by
``delta.dataSkippingStatsColumns`` (a list of logical column names; a struct means all its leaves)
or else by ``delta.dataSkippingNumIndexedCols`` (default 32, ``-1`` = all): the first N leaves in
schema order, where a struct counts its leaves and every other column — arrays, maps, binary
included — counts one, as Delta Spark counts them.

Values, per the column's Delta type (what Delta Spark and delta-kernel write):

* numbers as JSON numbers; decimals exactly (``-12.30``, never through a double); non-finite
  floats are left out;
* ``date`` as ``YYYY-MM-DD``;
* ``timestamp`` as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC) and ``timestamp_ntz`` without the ``Z``,
  both truncated down to milliseconds (footnote 1 of the section: readers widen the maximum by a
  millisecond);
* ``string``: the minimum cut to a prefix of 32 characters, the maximum cut the same way and
  followed by a tie-breaker character (U+007F or U+10FFFF) that makes it an upper bound; if no such
  bound fits in twice the prefix length, the maximum is left out (footnote 1);
* ``boolean`` as ``true``/``false``; ``binary``, arrays and maps get no bounds (and arrays and maps
  no ``nullCount``, since a Parquet footer only counts nulls of their leaves).

Anything not provably right is left out, which readers treat as unknown: bounds of a column whose
footer lacks them, and the maximum of a ``float``/``double`` column unless the caller proves there
is no NaN (Delta orders NaN above every number, but Parquet writers leave NaN out of the footer's
max); pass :func:`lakeops.parquet.statistics.nan_counts` of the written data for that.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

import pyarrow.parquet as pq

from lakeops.delta.actions import Metadata
from lakeops.delta.properties import DATA_SKIPPING_NUM_INDEXED_COLS, DATA_SKIPPING_STATS_COLUMNS
from lakeops.delta.schema import (
    ArrayType,
    ColumnMappingMode,
    DataType,
    DecimalType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    column_id,
    data_schema,
    physical_name,
)
from lakeops.errors import ProtocolError
from lakeops.parquet.statistics import ColumnStatistics, FileStatistics, StatValue, file_statistics

__all__ = [
    "BOUNDED_TYPES",
    "DEFAULT_NUM_INDEXED_COLS",
    "DATA_SKIPPING_NUM_INDEXED_COLS",
    "DATA_SKIPPING_STATS_COLUMNS",
    "STRING_PREFIX_LENGTH",
    "DataSkippingConfig",
    "delta_stats",
    "delta_stats_json",
    "indexed_columns",
    "parse_column_list",
    "truncate_max_string",
    "truncate_min_string",
]

DEFAULT_NUM_INDEXED_COLS = 32
#: Delta Spark's ``spark.databricks.io.skipping.stringPrefixLength`` default.
STRING_PREFIX_LENGTH = 32

_ASCII_TIE_BREAKER = "\x7f"
_MAX_CODE_POINT = "\U0010ffff"
#: Primitive types whose minimum and maximum are kept in file statistics.
BOUNDED_TYPES = frozenset(
    {
        "byte",
        "short",
        "integer",
        "long",
        "float",
        "double",
        "date",
        "timestamp",
        "timestamp_ntz",
        "string",
        "boolean",
    }
)


# --------------------------------------------------------------------------------------------
# Which columns
# --------------------------------------------------------------------------------------------


def parse_column_list(text: str) -> tuple[tuple[str, ...], ...]:
    """Parse ``delta.dataSkippingStatsColumns``: comma-separated, dot-nested, backtick-quoted names.

    ```a.b, `c.d`.e, `x``y` ``` → ``(("a", "b"), ("c.d", "e"), ("x`y",))``.
    """
    columns: list[tuple[str, ...]] = []
    parts: list[str] = []
    current: list[str] = []
    quoted_part = False
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "`":
            end = i + 1
            buf: list[str] = []
            while True:
                if end >= len(text):
                    raise ProtocolError(f"table property {DATA_SKIPPING_STATS_COLUMNS}={text!r}: unclosed backtick")
                if text[end] == "`":
                    if end + 1 < len(text) and text[end + 1] == "`":
                        buf.append("`")
                        end += 2
                        continue
                    break
                buf.append(text[end])
                end += 1
            current.append("".join(buf))
            quoted_part = True
            i = end + 1
            continue
        if ch in ".,":
            parts.append(_finish_part(current, quoted_part, text))
            current, quoted_part = [], False
            if ch == ",":
                columns.append(tuple(parts))
                parts = []
        elif not ch.isspace() or current and not quoted_part:
            current.append(ch)
        i += 1
    if current or parts:
        parts.append(_finish_part(current, quoted_part, text))
        columns.append(tuple(parts))
    return tuple(columns)


def _finish_part(current: list[str], quoted: bool, text: str) -> str:
    part = "".join(current) if quoted else "".join(current).strip()
    if not part and not quoted:
        raise ProtocolError(f"table property {DATA_SKIPPING_STATS_COLUMNS}={text!r}: empty column name")
    return part


@dataclass(frozen=True)
class DataSkippingConfig:
    """The table properties that choose which columns get statistics."""

    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS
    #: Logical column paths; when set, they replace ``num_indexed_cols``.
    stats_columns: tuple[tuple[str, ...], ...] | None = None

    @classmethod
    def from_configuration(cls, configuration: Mapping[str, str] | Metadata) -> DataSkippingConfig:
        """Read ``delta.dataSkippingNumIndexedCols`` and ``delta.dataSkippingStatsColumns``."""
        if isinstance(configuration, Metadata):
            configuration = configuration.configuration
        raw_num = configuration.get(DATA_SKIPPING_NUM_INDEXED_COLS)
        num = DEFAULT_NUM_INDEXED_COLS
        if raw_num is not None:
            try:
                num = int(raw_num.strip())
            except ValueError:
                num = -2
            if num < -1:
                raise ProtocolError(
                    f"table property {DATA_SKIPPING_NUM_INDEXED_COLS}={raw_num!r}: expected an integer >= -1"
                )
        raw_columns = configuration.get(DATA_SKIPPING_STATS_COLUMNS)
        columns = parse_column_list(raw_columns) if raw_columns and raw_columns.strip() else None
        return cls(num_indexed_cols=num, stats_columns=columns)


Leaf = tuple[StructField, ...]
"""A column as the chain of fields from the top level to it."""


def _leaves(fields: Iterable[StructField], prefix: Leaf = ()) -> list[Leaf]:
    out: list[Leaf] = []
    for f in fields:
        chain = (*prefix, f)
        if isinstance(f.type, StructType):
            out.extend(_leaves(f.type.fields, chain))
        else:
            out.append(chain)
    return out


def _truncate(fields: Iterable[StructField], budget: int, prefix: Leaf = ()) -> tuple[list[Leaf], int]:
    """The first ``budget`` leaves, a struct counting its leaves and anything else one."""
    used = 0
    out: list[Leaf] = []
    for f in fields:
        if used >= budget:
            break
        chain = (*prefix, f)
        if isinstance(f.type, StructType):
            sub, count = _truncate(f.type.fields, budget - used, chain)
            out.extend(sub)
            used += count
        else:
            out.append(chain)
            used += 1
    return out, used


def indexed_columns(schema: StructType, partition_columns: Iterable[str], config: DataSkippingConfig) -> list[Leaf]:
    """The non-struct columns that get statistics, in schema order (partition columns never)."""
    data = data_schema(schema, partition_columns)
    if config.stats_columns is not None:
        wanted = [tuple(part.lower() for part in path) for path in config.stats_columns]
        selected: list[Leaf] = []
        for leaf in _leaves(data.fields):
            names = tuple(f.name.lower() for f in leaf)
            if any(names[: len(path)] == path for path in wanted):
                selected.append(leaf)
        return selected
    if config.num_indexed_cols == -1:
        return _leaves(data.fields)
    return _truncate(data.fields, config.num_indexed_cols)[0]


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


def truncate_min_string(value: str, prefix_length: int = STRING_PREFIX_LENGTH) -> str:
    """A lower bound of ``value`` at most ``prefix_length`` characters long: its prefix."""
    return value[:prefix_length]


def truncate_max_string(value: str, prefix_length: int = STRING_PREFIX_LENGTH) -> str | None:
    """A short upper bound of ``value``, or ``None`` if none fits in ``2 * prefix_length`` characters.

    The prefix is extended past any U+10FFFF (nothing sorts above it) and then followed by a
    tie-breaker greater than the next character: U+007F if that character is ASCII below it,
    else U+10FFFF. Code-point order is UTF-8 byte order, the order Delta compares strings in.
    """
    if len(value) <= prefix_length:
        return value
    if prefix_length <= 0:
        return None
    i = prefix_length
    while i <= 2 * prefix_length:
        if i >= len(value):
            return value
        ch = value[i]
        if ch == _MAX_CODE_POINT:
            i += 1
            continue
        return value[:i] + (_ASCII_TIE_BREAKER if ch < _ASCII_TIE_BREAKER else _MAX_CODE_POINT)
    return None


def _format_timestamp(value: dt.datetime, *, utc: bool) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    millis = value.microsecond // 1000  # truncated down, as the protocol prescribes
    text = (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
        f"T{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{millis:03d}"
    )
    return text + "Z" if utc else text


def _bound(
    dtype: DataType, value: StatValue, which: Literal["min", "max"], *, nan_free: bool, prefix_length: int
) -> Any:
    """The JSON value of a footer bound for a column of ``dtype``, or ``None`` to leave it out."""
    if isinstance(dtype, DecimalType):
        if isinstance(value, Decimal) and value.is_finite():
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return Decimal(value)  # an integer file column widened to decimal ("Type Widening")
        return None
    if not isinstance(dtype, PrimitiveType) or dtype.name not in BOUNDED_TYPES:
        return None
    name = dtype.name
    if name == "boolean":
        return value if isinstance(value, bool) else None
    if name in ("byte", "short", "integer", "long"):
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if name in ("float", "double"):
        if not isinstance(value, float) or not math.isfinite(value):
            return None
        if which == "max" and not nan_free:
            return None
        return value
    if name == "date":
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
        return None
    if name in ("timestamp", "timestamp_ntz"):
        if isinstance(value, dt.datetime):
            return _format_timestamp(value, utc=name == "timestamp")
        return None
    # string
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not isinstance(value, str):
        return None
    if which == "min":
        return truncate_min_string(value, prefix_length) if prefix_length > 0 else None
    return truncate_max_string(value, prefix_length)


# --------------------------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------------------------


def _put(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        tree = tree.setdefault(name, {})
    tree[path[-1]] = value


def _lookup(
    stats: FileStatistics, leaf: Leaf, path: tuple[str, ...], mode: ColumnMappingMode
) -> ColumnStatistics | None:
    found = stats.get(path)
    if found is None and mode == "id":
        wanted = column_id(leaf[-1])
        found = stats.get_by_field_id(wanted) if wanted is not None else None
    if found is None or found.column.repeated:
        return None
    return found


def delta_stats(
    footer: pq.FileMetaData | FileStatistics,
    schema: StructType,
    *,
    mode: ColumnMappingMode = "none",
    partition_columns: Iterable[str] = (),
    config: DataSkippingConfig | None = None,
    nan_counts: Mapping[tuple[str, ...], int] | None = None,
    tight_bounds: bool | None = None,
    string_prefix_length: int = STRING_PREFIX_LENGTH,
) -> dict[str, Any]:
    """The statistics of one data file as a JSON-ready dict (decimals as :class:`~decimal.Decimal`).

    ``footer`` is the written file's footer (or its :func:`file_statistics`); ``nan_counts`` maps
    Parquet leaf paths (physical names) to NaN counts of the written data and is what allows a
    float maximum; ``tight_bounds`` is written as ``tightBounds`` when given.
    """
    stats = footer if isinstance(footer, FileStatistics) else file_statistics(footer)
    config = config or DataSkippingConfig()
    partitions = list(partition_columns)
    min_values: dict[str, Any] = {}
    max_values: dict[str, Any] = {}
    null_count: dict[str, Any] = {}
    for leaf in indexed_columns(schema, partitions, config):
        dtype = leaf[-1].type
        if isinstance(dtype, (ArrayType, MapType)):
            continue
        if isinstance(dtype, PrimitiveType) and dtype.name == "void":
            continue
        path = tuple(physical_name(f, mode) for f in leaf)
        column = _lookup(stats, leaf, path, mode)
        if column is None:
            continue  # absent from the file, or unreadable: say nothing rather than guess
        if column.null_count is not None:
            _put(null_count, path, column.null_count)
        if column.min is None or column.max is None or column.all_null:
            continue
        nan_free = nan_counts is not None and nan_counts.get(path, 1) == 0
        lo = _bound(dtype, column.min, "min", nan_free=nan_free, prefix_length=string_prefix_length)
        hi = _bound(dtype, column.max, "max", nan_free=nan_free, prefix_length=string_prefix_length)
        if lo is not None:
            _put(min_values, path, lo)
        if hi is not None:
            _put(max_values, path, hi)
    out: dict[str, Any] = {
        "numRecords": stats.num_rows,
        "minValues": min_values,
        "maxValues": max_values,
        "nullCount": null_count,
    }
    if tight_bounds is not None:
        out["tightBounds"] = tight_bounds
    return out


def _encode(value: Any) -> str:
    """Compact JSON that writes decimals as exact numbers (``json`` would need a float)."""
    if isinstance(value, dict):
        items = (f"{json.dumps(k, ensure_ascii=False)}:{_encode(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, Decimal):
        return format(value, "f")
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def delta_stats_json(
    footer: pq.FileMetaData | FileStatistics,
    schema: StructType,
    *,
    mode: ColumnMappingMode = "none",
    partition_columns: Iterable[str] = (),
    config: DataSkippingConfig | None = None,
    nan_counts: Mapping[tuple[str, ...], int] | None = None,
    tight_bounds: bool | None = None,
    string_prefix_length: int = STRING_PREFIX_LENGTH,
) -> str:
    """The ``stats`` string of an ``add`` action; see :func:`delta_stats` for the arguments."""
    return _encode(
        delta_stats(
            footer,
            schema,
            mode=mode,
            partition_columns=partition_columns,
            config=config,
            nan_counts=nan_counts,
            tight_bounds=tight_bounds,
            string_prefix_length=string_prefix_length,
        )
    )
