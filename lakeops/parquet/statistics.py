"""Per-column statistics of a Parquet file, read from its footer and typed by logical type.

Implements the reading side of the Parquet ``Statistics`` of every column chunk, interpreted with
the logical types of Parquet's LogicalTypes.md (sections "Numeric Types", "Temporal Types",
"String Types", "Embedded Types", the ``ConvertedType`` compatibility tables, and the sort order each
type declares), aggregated over all row groups of the file.

The result is format-neutral: :mod:`lakeops.delta.stats` turns it into Delta ``stats`` JSON and the
Iceberg manifest writer will turn it into ``lower_bounds``/``upper_bounds``. Nothing here knows
either table format.

Conservative by design: a bound that cannot be proven correct is reported as unknown (``None``),
never guessed. In particular:

* a row group without statistics (or without min/max while it holds non-null values) makes the
  column's bounds unknown for the whole file;
* types whose sort order is undefined (INT96, INTERVAL, GEOMETRY, GEOGRAPHY, UNKNOWN) have no bounds;
* floating-point bounds follow parquet-format's reader rules: a NaN bound is ignored (the column's
  bounds become unknown), a zero minimum is read as ``-0.0`` and a zero maximum as ``+0.0``. The
  footer never says whether NaN values are present (writers leave them out of min/max), so callers
  that need that fact use :func:`nan_counts` on the data they wrote;
* nanosecond timestamps and times are widened to microseconds (minimum floored, maximum ceiled) so
  that they fit ``datetime``/``time`` and remain valid bounds.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakeops.errors import CorruptFile, UnsupportedFeature

__all__ = [
    "ColumnStatistics",
    "ColumnType",
    "FileStatistics",
    "Kind",
    "LeafColumn",
    "StatValue",
    "TimeUnit",
    "column_type",
    "decode_raw",
    "file_statistics",
    "nan_counts",
]

TimeUnit = Literal["ms", "us", "ns"]

#: A typed bound: what a value of the column's logical type is in Python.
StatValue = bool | int | float | Decimal | str | bytes | dt.date | dt.datetime | dt.time | uuid.UUID

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_UNIT_PER_MICRO: dict[str, tuple[int, int]] = {"ms": (1000, 1), "us": (1, 1), "ns": (1, 1000)}


class Kind(StrEnum):
    """The logical kind of a leaf column, after LogicalType/ConvertedType resolution."""

    BOOLEAN = "boolean"
    INT = "int"  # signed or unsigned, see ColumnType.signed / bit_width
    FLOAT = "float"
    DOUBLE = "double"
    FLOAT16 = "float16"
    DECIMAL = "decimal"
    DATE = "date"
    TIME = "time"
    TIMESTAMP = "timestamp"
    INT96 = "int96"  # legacy Impala/Spark timestamp (nanoseconds, instant semantics by convention)
    STRING = "string"  # STRING/UTF8 and ENUM: UTF-8 text
    JSON = "json"
    BSON = "bson"
    UUID = "uuid"
    BINARY = "binary"  # BYTE_ARRAY / FIXED_LEN_BYTE_ARRAY without annotation
    INTERVAL = "interval"
    UNKNOWN = "unknown"  # the always-null UNKNOWN/Null annotation
    UNSUPPORTED = "unsupported"  # annotations with undefined order (GEOMETRY, GEOGRAPHY) or new ones


#: Kinds whose Parquet sort order is undefined: their footer min/max must be ignored.
_UNORDERED = frozenset({Kind.INT96, Kind.INTERVAL, Kind.UNKNOWN, Kind.UNSUPPORTED})


@dataclass(frozen=True)
class ColumnType:
    """Physical type plus the logical annotation's parameters that matter for decoding."""

    kind: Kind
    physical_type: str
    bit_width: int | None = None
    signed: bool | None = None
    precision: int | None = None
    scale: int | None = None
    unit: TimeUnit | None = None
    utc_adjusted: bool | None = None
    length: int | None = None

    @property
    def ordered(self) -> bool:
        """Whether min/max of this type are defined at all (parquet "sort order")."""
        return self.kind not in _UNORDERED


@dataclass(frozen=True)
class LeafColumn:
    """One leaf column of the Parquet schema."""

    index: int
    path: tuple[str, ...]
    field_id: int | None
    type: ColumnType
    #: Inside a list or map (or a legacy repeated field): per-row bounds do not apply to such
    #: columns in Delta, and Iceberg keys them by the element/key/value field id.
    repeated: bool


@dataclass(frozen=True)
class ColumnStatistics:
    """Statistics of one leaf column over the whole file.

    ``min``/``max`` are ``None`` when unknown: no statistics in some row group, a type without
    order, an untrustworthy bound (NaN), or only nulls. ``null_count`` is ``None`` when some row
    group did not record it. ``value_count`` counts leaf values including nulls (Iceberg's
    ``value_counts``; equals the row count for a column outside lists and maps).
    """

    column: LeafColumn
    value_count: int
    null_count: int | None
    min: StatValue | None
    max: StatValue | None

    @property
    def all_null(self) -> bool:
        """Every value is null (so absent bounds carry no information)."""
        return self.null_count is not None and self.null_count == self.value_count


@dataclass(frozen=True)
class FileStatistics:
    """Statistics of every leaf column of one Parquet file."""

    num_rows: int
    columns: tuple[ColumnStatistics, ...]
    _by_path: dict[tuple[str, ...], ColumnStatistics] = field(init=False, repr=False, compare=False)
    _by_id: dict[int, ColumnStatistics] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_path", {c.column.path: c for c in self.columns})
        by_id = {c.column.field_id: c for c in self.columns if c.column.field_id is not None}
        object.__setattr__(self, "_by_id", by_id)

    def get(self, path: tuple[str, ...]) -> ColumnStatistics | None:
        """The leaf at ``path`` (Parquet names, e.g. ``("a", "b")``), or ``None``."""
        return self._by_path.get(tuple(path))

    def get_by_field_id(self, field_id: int) -> ColumnStatistics | None:
        """The leaf whose Parquet ``field_id`` is ``field_id``, or ``None``."""
        return self._by_id.get(field_id)

    def __iter__(self) -> Iterator[ColumnStatistics]:
        return iter(self.columns)


# --------------------------------------------------------------------------------------------
# Logical type resolution
# --------------------------------------------------------------------------------------------

_TIME_UNITS: dict[str, TimeUnit] = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}

_CONVERTED: dict[str, tuple[Kind, dict[str, Any]]] = {
    "UTF8": (Kind.STRING, {}),
    "ENUM": (Kind.STRING, {}),
    "JSON": (Kind.JSON, {}),
    "BSON": (Kind.BSON, {}),
    "DATE": (Kind.DATE, {}),
    "DECIMAL": (Kind.DECIMAL, {}),
    "INTERVAL": (Kind.INTERVAL, {}),
    "TIME_MILLIS": (Kind.TIME, {"unit": "ms", "utc_adjusted": True}),
    "TIME_MICROS": (Kind.TIME, {"unit": "us", "utc_adjusted": True}),
    "TIMESTAMP_MILLIS": (Kind.TIMESTAMP, {"unit": "ms", "utc_adjusted": True}),
    "TIMESTAMP_MICROS": (Kind.TIMESTAMP, {"unit": "us", "utc_adjusted": True}),
    **{
        f"{'U' if unsigned else ''}INT_{bits}": (Kind.INT, {"bit_width": bits, "signed": not unsigned})
        for bits in (8, 16, 32, 64)
        for unsigned in (False, True)
    },
}


def column_type(column: Any) -> ColumnType:
    """Resolve a ``pyarrow.parquet.ColumnSchema`` to a :class:`ColumnType`.

    The ``LogicalType`` wins; the deprecated ``ConvertedType`` is the fallback, as the spec's
    "Compatibility" paragraphs require of readers.
    """
    physical = str(column.physical_type)
    logical = column.logical_type
    ltype = str(logical.type) if logical is not None else "NONE"
    params: dict[str, Any] = json.loads(logical.to_json()) if ltype != "NONE" else {}
    length = int(column.length) if physical == "FIXED_LEN_BYTE_ARRAY" else None

    def decimal_params() -> dict[str, Any]:
        precision = params.get("precision", column.precision)
        scale = params.get("scale", column.scale)
        return {"precision": int(precision), "scale": max(int(scale), 0)}

    if ltype == "NONE":
        converted = str(column.converted_type)
        if converted in _CONVERTED:
            kind, extra = _CONVERTED[converted]
            if kind is Kind.DECIMAL:
                extra = decimal_params()
            return ColumnType(kind, physical, length=length, **extra)
        if converted not in ("NONE", "NA"):
            return ColumnType(Kind.UNSUPPORTED, physical, length=length)
        return ColumnType(_PLAIN_KINDS.get(physical, Kind.UNSUPPORTED), physical, length=length)
    if ltype == "INT":
        return ColumnType(Kind.INT, physical, bit_width=int(params["bitWidth"]), signed=bool(params["isSigned"]))
    if ltype == "DECIMAL":
        return ColumnType(Kind.DECIMAL, physical, length=length, **decimal_params())
    if ltype in ("TIMESTAMP", "TIME"):
        unit = _TIME_UNITS.get(str(params.get("timeUnit")))
        if unit is None:
            # "unknown units must be handled as unsupported features" (TIMESTAMP section)
            return ColumnType(Kind.UNSUPPORTED, physical)
        kind = Kind.TIMESTAMP if ltype == "TIMESTAMP" else Kind.TIME
        return ColumnType(kind, physical, unit=unit, utc_adjusted=bool(params.get("isAdjustedToUTC")))
    simple = {
        "STRING": Kind.STRING,
        "ENUM": Kind.STRING,
        "JSON": Kind.JSON,
        "BSON": Kind.BSON,
        "UUID": Kind.UUID,
        "DATE": Kind.DATE,
        "FLOAT16": Kind.FLOAT16,
        "INTERVAL": Kind.INTERVAL,
        "UNKNOWN": Kind.UNKNOWN,
    }
    return ColumnType(simple.get(ltype, Kind.UNSUPPORTED), physical, length=length)


_PLAIN_KINDS: dict[str, Kind] = {
    "BOOLEAN": Kind.BOOLEAN,
    "INT32": Kind.INT,
    "INT64": Kind.INT,
    "INT96": Kind.INT96,
    "FLOAT": Kind.FLOAT,
    "DOUBLE": Kind.DOUBLE,
    "BYTE_ARRAY": Kind.BINARY,
    "FIXED_LEN_BYTE_ARRAY": Kind.BINARY,
}


# --------------------------------------------------------------------------------------------
# Value decoding
# --------------------------------------------------------------------------------------------


def _to_micros(value: int, unit: TimeUnit, *, round_up: bool) -> int:
    """Epoch/day offset in ``unit`` as microseconds, rounding nanoseconds outward when asked."""
    mul, div = _UNIT_PER_MICRO[unit]
    if div == 1:
        return value * mul
    return -(-value // div) if round_up else value // div


def _decode_float16(raw: bytes) -> float:
    if len(raw) != 2:
        raise ValueError("FLOAT16 value must be 2 bytes")
    return float(struct.unpack("<e", raw)[0])


def _decode_decimal_bytes(raw: bytes, scale: int) -> Decimal:
    unscaled = int.from_bytes(raw, "big", signed=True)
    return Decimal(f"{unscaled}E-{scale}") if scale else Decimal(unscaled)


def _as_int(raw: Any, ctype: ColumnType) -> int:
    """A raw INT32/INT64 footer value with the annotation's signedness applied."""
    value = int(raw)
    if ctype.signed is False:
        bits = 32 if ctype.physical_type == "INT32" else 64
        value &= (1 << bits) - 1
    return value


def _timestamp(micros: int, utc: bool) -> dt.datetime:
    base = _EPOCH_UTC if utc else _EPOCH_NAIVE
    return base + dt.timedelta(microseconds=micros)


def _time(micros: int) -> dt.time:
    if not 0 <= micros < 86_400_000_000:
        raise ValueError("time of day out of range")
    seconds, micro = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return dt.time(hour, minute, second, micro)


def decode_raw(raw: Any, ctype: ColumnType, which: Literal["min", "max"]) -> StatValue | None:
    """Decode a raw footer bound (``Statistics.min_raw``/``max_raw``) of a column of ``ctype``.

    Raw values are Python ``int`` (INT32/INT64, two's complement as stored), ``float``, ``bool``
    or ``bytes``. ``None`` means "no trustworthy bound": an unordered type, a NaN, undecodable
    bytes, or a value outside what Python's date/time types hold.
    """
    kind = ctype.kind
    try:
        if kind is Kind.BOOLEAN:
            return bool(raw)
        if kind is Kind.INT:
            return _as_int(raw, ctype)
        if kind in (Kind.FLOAT, Kind.DOUBLE):
            return _float_bound(float(raw), which)
        if kind is Kind.FLOAT16:
            return _float_bound(_decode_float16(bytes(raw)), which)
        if kind is Kind.DECIMAL:
            scale = ctype.scale or 0
            if isinstance(raw, (bytes, bytearray)):
                return _decode_decimal_bytes(bytes(raw), scale)
            return Decimal(f"{int(raw)}E-{scale}") if scale else Decimal(int(raw))
        if kind is Kind.DATE:
            return _EPOCH_DATE + dt.timedelta(days=int(raw))
        if kind in (Kind.TIMESTAMP, Kind.TIME):
            assert ctype.unit is not None
            micros = _to_micros(int(raw), ctype.unit, round_up=which == "max")
            if kind is Kind.TIMESTAMP:
                return _timestamp(micros, bool(ctype.utc_adjusted))
            return _time(min(micros, 86_400_000_000 - 1))
        if kind in (Kind.STRING, Kind.JSON):
            return bytes(raw).decode("utf-8")
        if kind is Kind.UUID:
            return uuid.UUID(bytes=bytes(raw))
        if kind in (Kind.BINARY, Kind.BSON):
            return bytes(raw)
    except (ValueError, TypeError, OverflowError, ArithmeticError):
        return None
    return None  # INT96, INTERVAL, UNKNOWN, UNSUPPORTED: no defined order


def _float_bound(number: float, which: Literal["min", "max"]) -> float | None:
    """parquet-format's reader rules: ignore NaN bounds; a zero min may hide -0.0, a zero max +0.0."""
    if math.isnan(number):
        return None
    if number == 0.0:
        return -0.0 if which == "min" else 0.0
    return number


def _int_in_range(value: int, ctype: ColumnType) -> bool:
    """Whether ``value`` fits the annotation (a signed reading of an unsigned column does not)."""
    bits = ctype.bit_width or (32 if ctype.physical_type == "INT32" else 64)
    if ctype.signed is False:
        return 0 <= value < 1 << bits
    return -(1 << (bits - 1)) <= value < 1 << (bits - 1)


def _typed_bound(value: Any, ctype: ColumnType, which: Literal["min", "max"]) -> StatValue | None:
    """pyarrow's typed value, if it is exact for this type and of the expected Python type."""
    kind = ctype.kind
    if kind is Kind.BOOLEAN and isinstance(value, bool):
        return value
    if kind is Kind.INT and isinstance(value, int) and not isinstance(value, bool):
        return value if _int_in_range(value, ctype) else None
    if kind in (Kind.FLOAT, Kind.DOUBLE) and isinstance(value, float):
        return _float_bound(value, which)
    if kind is Kind.DECIMAL and ctype.physical_type != "BYTE_ARRAY" and isinstance(value, Decimal):
        return value
    if kind is Kind.DATE and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    if kind is Kind.TIMESTAMP and ctype.unit != "ns" and isinstance(value, dt.datetime):
        return value.replace(tzinfo=dt.UTC) if ctype.utc_adjusted else value.replace(tzinfo=None)
    if kind is Kind.TIME and ctype.unit != "ns" and isinstance(value, dt.time):
        return value
    if kind is Kind.STRING and isinstance(value, str):
        return value
    return None


#: Kinds for which pyarrow's typed ``Statistics.min``/``max`` can be exact. Not in here, decoded
#: from the raw bytes instead: FLOAT16, UUID, JSON, BSON (pyarrow returns bytes), and, excluded in
#: :func:`_typed_bound`, nanosecond timestamps/times (pyarrow truncates them or returns pandas
#: objects) and decimals on BYTE_ARRAY.
_TYPED_KINDS = frozenset(
    {Kind.BOOLEAN, Kind.INT, Kind.FLOAT, Kind.DOUBLE, Kind.DECIMAL, Kind.DATE, Kind.TIMESTAMP, Kind.TIME, Kind.STRING}
)


def _decode(stats: Any, ctype: ColumnType, which: Literal["min", "max"]) -> StatValue | None:
    """The bound ``which`` of one row group: pyarrow's typed value where exact, else the raw one."""
    if not ctype.ordered:
        return None
    if ctype.kind in _TYPED_KINDS:
        try:
            typed = stats.min if which == "min" else stats.max
        except (ValueError, TypeError, OverflowError, ArithmeticError):
            typed = None  # e.g. invalid UTF-8, a date beyond year 9999
        value = _typed_bound(typed, ctype, which)
        if value is not None or (ctype.kind in (Kind.FLOAT, Kind.DOUBLE) and isinstance(typed, float)):
            return value  # a NaN float is untrustworthy either way
    try:
        raw = stats.min_raw if which == "min" else stats.max_raw
    except (ValueError, TypeError, OverflowError):
        return None
    return decode_raw(raw, ctype, which)


# --------------------------------------------------------------------------------------------
# Footer walk
# --------------------------------------------------------------------------------------------

_FIELD_ID = b"PARQUET:field_id"


def _arrow_leaves(schema: pa.Schema) -> list[tuple[tuple[str, ...], int | None]]:
    """Leaf (names, field id) pairs of an Arrow schema, depth first — Parquet's leaf order."""
    out: list[tuple[tuple[str, ...], int | None]] = []

    def field_id(f: pa.Field) -> int | None:
        raw = (f.metadata or {}).get(_FIELD_ID)
        try:
            return int(raw) if raw is not None else None
        except ValueError:
            return None

    def walk(f: pa.Field, prefix: tuple[str, ...]) -> None:
        path = (*prefix, f.name)
        t = f.type
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(t.field(i), path)
        elif pa.types.is_map(t):
            walk(t.key_field, path)
            walk(t.item_field, path)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            walk(t.value_field, path)
        else:
            out.append((path, field_id(f)))

    for f in schema:
        walk(f, ())
    return out


def _leaf_columns(footer: Any) -> list[LeafColumn]:
    schema = footer.schema
    try:
        arrow_leaves: list[tuple[tuple[str, ...], int | None]] | None = _arrow_leaves(schema.to_arrow_schema())
    except (pa.ArrowException, NotImplementedError, ValueError):
        arrow_leaves = None
    if arrow_leaves is not None and len(arrow_leaves) != footer.num_columns:
        arrow_leaves = None
    leaves: list[LeafColumn] = []
    for i in range(footer.num_columns):
        col = schema.column(i)
        dotted = str(col.path)
        path = tuple(dotted.split("."))
        field_id: int | None = None
        repeated = int(col.max_repetition_level) > 0
        if arrow_leaves is not None:
            names, field_id = arrow_leaves[i]
            # Outside lists/maps the Arrow names are the Parquet names, exactly (dots included).
            if not repeated and ".".join(names) == dotted:
                path = names
        leaves.append(LeafColumn(i, path, field_id, column_type(col), repeated))
    return leaves


class _Accumulator:
    def __init__(self, leaf: LeafColumn) -> None:
        self.leaf = leaf
        self.value_count = 0
        self.null_count: int | None = 0
        self.bounds_known = leaf.type.ordered
        self.min: Any = None
        self.max: Any = None

    def add(self, chunk: Any) -> None:
        num_values = int(chunk.num_values)
        self.value_count += num_values
        stats = chunk.statistics if chunk.is_stats_set else None
        nulls: int | None = None
        if stats is not None and stats.has_null_count:
            nulls = int(stats.null_count)
        elif self.leaf.type.kind is Kind.UNKNOWN:
            nulls = num_values  # the UNKNOWN annotation means "always null"
        self.null_count = None if nulls is None or self.null_count is None else self.null_count + nulls
        if not self.bounds_known or num_values == 0:
            return
        if stats is None or not stats.has_min_max:
            if nulls is not None and nulls == num_values:
                return  # an all-null row group bounds nothing
            self.bounds_known = False
            return
        lo = _decode(stats, self.leaf.type, "min")
        hi = _decode(stats, self.leaf.type, "max")
        if lo is None or hi is None:
            self.bounds_known = False
            return
        self.min = lo if self.min is None or lo < self.min else self.min
        self.max = hi if self.max is None or hi > self.max else self.max

    def result(self) -> ColumnStatistics:
        known = self.bounds_known
        return ColumnStatistics(
            column=self.leaf,
            value_count=self.value_count,
            null_count=self.null_count,
            min=self.min if known else None,
            max=self.max if known else None,
        )


def file_statistics(footer: pq.FileMetaData) -> FileStatistics:
    """Aggregate the footer's column-chunk statistics over all row groups, typed by logical type."""
    leaves = _leaf_columns(footer)
    accumulators = [_Accumulator(leaf) for leaf in leaves]
    for rg_index in range(footer.num_row_groups):
        row_group = footer.row_group(rg_index)
        if row_group.num_columns != len(leaves):
            raise CorruptFile(
                f"row group {rg_index} has {row_group.num_columns} column chunks, "
                f"the schema has {len(leaves)} leaf columns"
            )
        for i, acc in enumerate(accumulators):
            acc.add(row_group.column(i))
    return FileStatistics(num_rows=int(footer.num_rows), columns=tuple(acc.result() for acc in accumulators))


# --------------------------------------------------------------------------------------------
# NaN counts (not in the footer)
# --------------------------------------------------------------------------------------------


def nan_counts(data: pa.Table | pa.RecordBatch) -> dict[tuple[str, ...], int]:
    """NaN values per floating-point leaf of ``data``, keyed by the Parquet leaf path.

    The footer cannot tell whether NaN values are present, since writers leave them out of min/max.
    Writers compute this from the data they just wrote, before they trust a float
    maximum (Delta) or to fill Iceberg's ``nan_value_counts``. Paths follow pyarrow's compliant
    nesting: list elements under ``("list", "element")``, map entries under
    ``("key_value", "key"|"value")``. Values under a null parent are not counted.
    """
    counts: dict[tuple[str, ...], int] = {}

    def visit(arr: pa.Array, path: tuple[str, ...]) -> None:
        t = arr.type
        if pa.types.is_dictionary(t):
            visit(arr.dictionary_decode(), path)
        elif pa.types.is_floating(t):
            values = arr.cast(pa.float32()) if pa.types.is_float16(t) else arr
            found = pc.sum(pc.is_nan(values)).as_py() or 0
            counts[path] = counts.get(path, 0) + int(found)
        elif pa.types.is_struct(t):
            for i, child in enumerate(arr.flatten()):
                visit(child, (*path, t.field(i).name))
        elif pa.types.is_map(t):
            # MapArray.keys/items ignore slicing; a list of entries flattens correctly.
            entry = pa.struct([t.key_field, t.item_field])
            entries = arr.cast(pa.list_(pa.field("entries", entry, nullable=False))).flatten()
            visit(entries.field(0), (*path, "key_value", "key"))
            visit(entries.field(1), (*path, "key_value", "value"))
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            visit(arr.flatten(), (*path, "list", "element"))
        elif pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
            raise UnsupportedFeature(f"column {'.'.join(path)}: list views are not supported here")

    columns = data.columns
    for name, column in zip(data.schema.names, columns, strict=True):
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        for chunk in chunks:
            visit(chunk, (name,))
        if not chunks and pa.types.is_floating(column.type):
            counts[(name,)] = 0
    return counts
