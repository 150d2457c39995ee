"""Delta partition values: the strings in ``partitionValues`` <-> Python and Arrow values.

Implements the protocol section "Partition Value Serialization" (types as in "Primitive Types"):
an empty string or a JSON null is a null value for every type; numbers are their decimal string;
``date`` is ``YYYY-MM-DD``; ``timestamp`` is ``YYYY-MM-DD HH:MM:SS`` with an optional fraction of up
to microseconds; booleans are ``true``/``false``; binary is the string whose characters are the
bytes (UTF-8, as the reference readers decode it).

Beyond the protocol text, what real writers produce is accepted when reading: the ISO-8601 form
``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (newer Delta writers) and an explicit UTC offset; ``NaN``/
``Infinity``/``-Infinity`` for floating point; scientific notation for ``decimal``. A ``timestamp``
written without a zone is read as UTC, as delta-rs and delta-kernel do (old Spark writers used the
session time zone, which the log does not record). ``timestamp_ntz`` values are naive. Writing
always uses the protocol's space-separated form, UTC for ``timestamp``.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Context, Decimal, InvalidOperation

import pyarrow as pa

from lakeops.errors import InvalidArgument, ProtocolError, UnsupportedFeature

__all__ = [
    "PartitionValue",
    "parse_partition_value",
    "partition_arrow_type",
    "partition_arrow_value",
]

PartitionValue = str | int | float | bool | dt.date | dt.datetime | Decimal | bytes | None

_INT_RANGES: dict[str, tuple[int, int]] = {
    "byte": (-(2**7), 2**7 - 1),
    "short": (-(2**15), 2**15 - 1),
    "integer": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
}
_SIMPLE_TYPES = frozenset(
    {*_INT_RANGES, "string", "float", "double", "boolean", "date", "timestamp", "timestamp_ntz", "binary"}
)
_DECIMAL_TYPE = re.compile(r"^decimal(?:\(\s*(\d+)\s*,\s*(\d+)\s*\))?$")
_INT_TEXT = re.compile(r"^[+-]?\d+$")
#: Plain decimal or scientific notation; Python's own parsers also take "1_000" and spaces, Delta's do not.
_NUMBER_TEXT = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_FLOAT_SPECIAL = {
    **dict.fromkeys(("nan", "+nan", "-nan"), math.nan),
    **dict.fromkeys(("infinity", "+infinity", "inf", "+inf"), math.inf),
    **dict.fromkeys(("-infinity", "-inf"), -math.inf),
}
_DECIMAL_CONTEXT = Context(prec=80)
_DATE_TEXT = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_TIMESTAMP_TEXT = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?$"
)


def _normalize_type(delta_type: str) -> tuple[str, int, int]:
    """``(name, precision, scale)``; precision/scale are 0 except for decimals (default ``decimal(10,0)``)."""
    name = delta_type.strip().lower()
    if name == "int":
        name = "integer"
    if name in _SIMPLE_TYPES:
        return name, 0, 0
    match = _DECIMAL_TYPE.match(name)
    if match:
        precision = int(match.group(1)) if match.group(1) else 10
        scale = int(match.group(2)) if match.group(2) else 0
        if not 1 <= precision <= 38 or scale > precision:
            raise UnsupportedFeature(f"partition column type {delta_type!r} is not a valid decimal (precision 1-38)")
        return "decimal", precision, scale
    raise UnsupportedFeature(f"partition column type {delta_type!r} is not a primitive type lakeops can partition by")


# ---------------------------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------------------------


def parse_partition_value(text: str | None, delta_type: str, *, context: str = "") -> PartitionValue:
    """The Python value of one ``partitionValues`` entry of a column of ``delta_type``.

    ``context`` (e.g. ``"<log file>: add <path> column <name>"``) prefixes error messages so they
    name the file. Raises :class:`~lakeops.errors.ProtocolError` for text that is not a valid value
    of the type and :class:`~lakeops.errors.UnsupportedFeature` for a non-primitive type.
    """
    name, precision, scale = _normalize_type(delta_type)
    if text is None or text == "":
        return None
    try:
        return _parse(text, name, precision, scale)
    except (ValueError, InvalidOperation, OverflowError) as exc:
        where = f"{context}: " if context else ""
        raise ProtocolError(f"{where}partition value {text!r} is not a valid {delta_type} ({exc})") from exc


def _parse(text: str, name: str, precision: int, scale: int) -> PartitionValue:
    if name == "string":
        return text
    if name == "binary":
        return text.encode("utf-8")
    if name in _INT_RANGES:
        if not _INT_TEXT.match(text):
            raise ValueError("not an integer")
        value = int(text)
        low, high = _INT_RANGES[name]
        if not low <= value <= high:
            raise ValueError(f"out of range {low}..{high}")
        return value
    if name in ("float", "double"):
        special = _FLOAT_SPECIAL.get(text.lower())
        if special is not None:
            return special
        if not _NUMBER_TEXT.match(text):
            raise ValueError("not a number")
        return float(text)
    if name == "boolean":
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise ValueError("not true or false")
        return lowered == "true"
    if name == "date":
        match = _DATE_TEXT.match(text)
        if not match:
            raise ValueError("not YYYY-MM-DD")
        return dt.date(*(int(part) for part in match.groups()))
    if name == "timestamp_ntz" and (match := _DATE_TEXT.match(text)):
        # A partition column widened from date keeps the values of files written before ("Type
        # Widening": readers convert them to the wider type), which is midnight of that day.
        year, month, day = (int(part) for part in match.groups())
        return dt.datetime(year, month, day)
    if name in ("timestamp", "timestamp_ntz"):
        return _parse_timestamp(text, utc=name == "timestamp")
    if name == "decimal":
        return _parse_decimal(text, precision, scale)
    raise AssertionError(name)  # pragma: no cover - _normalize_type admits nothing else


def _parse_timestamp(text: str, *, utc: bool) -> dt.datetime:
    match = _TIMESTAMP_TEXT.match(text)
    if not match:
        raise ValueError("not YYYY-MM-DD HH:MM:SS[.ffffff]")
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    fraction, zone = match.group(7) or "", match.group(8)
    if len(fraction) > 6 and fraction[6:].strip("0"):
        raise ValueError("finer than microsecond precision")
    micros = int(fraction[:6].ljust(6, "0"))
    value = dt.datetime(year, month, day, hour, minute, second, micros)
    if zone is None:
        return value.replace(tzinfo=dt.UTC) if utc else value
    if not utc:
        raise ValueError("timestamp_ntz values carry no time zone")
    if zone == "Z":
        return value.replace(tzinfo=dt.UTC)
    digits = zone[1:].replace(":", "")
    offset = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    zone_info = dt.timezone(offset if zone[0] == "+" else -offset)
    return value.replace(tzinfo=zone_info).astimezone(dt.UTC)


def _parse_decimal(text: str, precision: int, scale: int) -> Decimal:
    if not _NUMBER_TEXT.match(text):
        raise ValueError("not a decimal number")
    return _fit_decimal(Decimal(text), precision, scale)


def _fit_decimal(value: Decimal, precision: int, scale: int) -> Decimal:
    """``value`` at exactly ``scale`` digits, refusing to round or to exceed ``precision``."""
    if not value.is_finite():
        raise ValueError("not a finite number")
    if value and value.adjusted() >= precision - scale:
        raise ValueError(f"has more than {precision - scale} integer digits")
    # The default context keeps only 28 digits; decimal(38, s) needs more.
    fitted = value.quantize(Decimal(1).scaleb(-scale), context=_DECIMAL_CONTEXT)
    if fitted != value:
        raise ValueError(f"has more than {scale} fractional digits")
    return fitted


# ---------------------------------------------------------------------------------------------
# serialisation
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Arrow
# ---------------------------------------------------------------------------------------------


def partition_arrow_type(delta_type: str) -> pa.DataType:
    """The Arrow type a partition column of ``delta_type`` is materialised as."""
    name, precision, scale = _normalize_type(delta_type)
    simple: dict[str, pa.DataType] = {
        "string": pa.string(),
        "binary": pa.binary(),
        "byte": pa.int8(),
        "short": pa.int16(),
        "integer": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "boolean": pa.bool_(),
        "date": pa.date32(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "timestamp_ntz": pa.timestamp("us"),
    }
    return pa.decimal128(precision, scale) if name == "decimal" else simple[name]


def partition_arrow_value(value: PartitionValue, arrow_type: pa.DataType) -> pa.Scalar:
    """``value`` (from :func:`parse_partition_value`) as a scalar of ``arrow_type`` (null for ``None``).

    Built through a one-element array so dictionary-encoded and large types work as well.
    """
    try:
        return pa.array([value], type=arrow_type)[0]
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise InvalidArgument(f"partition value {value!r} does not fit Arrow type {arrow_type} ({exc})") from exc
