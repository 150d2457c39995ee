"""Delta partition values written as the protocol spells them ("Partition Value Serialization"): the
inverse of :func:`lakeops.delta.partitions.parse_partition_value`, for tests."""

from __future__ import annotations

import datetime as dt
import math
import operator
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

from lakeops.delta.partitions import _INT_RANGES, _fit_decimal, _normalize_type, _parse
from lakeops.errors import InvalidArgument


def serialize_partition_value(value: Any, delta_type: str) -> str | None:
    """The ``partitionValues`` string for ``value`` in a column of ``delta_type``; ``None`` for null.

    An empty string also becomes ``None``: the protocol reads ``""`` as null for every type, so
    writing ``None`` keeps the log honest about what readers will see. A ``str`` given for a
    non-string type is validated by parsing and rewritten in canonical form. Raises
    :class:`~lakeops.errors.InvalidArgument` for a value the type cannot hold.
    """
    name, precision, scale = _normalize_type(delta_type)
    if value is None or (isinstance(value, str | bytes) and len(value) == 0):
        return None
    if isinstance(value, str) and name not in ("string", "binary"):
        try:
            value = _parse(value, name, precision, scale)
        except (ValueError, InvalidOperation, OverflowError) as exc:
            raise InvalidArgument(f"partition value {value!r} is not a valid {delta_type} ({exc})") from exc
    try:
        return _serialize(value, name, precision, scale)
    except (TypeError, ValueError, InvalidOperation, OverflowError) as exc:
        raise InvalidArgument(f"cannot write {value!r} as a {delta_type} partition value ({exc})") from exc


def _serialize(value: Any, name: str, precision: int, scale: int) -> str:
    if name == "string":
        if not isinstance(value, str):
            raise TypeError("not a str")
        return value
    if name == "binary":
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError("not bytes")
        return bytes(value).decode("utf-8")  # readers take the string's UTF-8 bytes back
    if name in _INT_RANGES:
        if isinstance(value, bool):
            raise TypeError("a bool is not an integer")
        number = operator.index(value)
        low, high = _INT_RANGES[name]
        if not low <= number <= high:
            raise ValueError(f"out of range {low}..{high}")
        return str(number)
    if name in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
            raise TypeError("not a number")
        real = float(value)
        if math.isnan(real):
            return "NaN"
        if math.isinf(real):
            return "Infinity" if real > 0 else "-Infinity"
        return str(np.float32(real)) if name == "float" else repr(real)
    if name == "boolean":
        if not isinstance(value, bool | np.bool_):
            raise TypeError("not a bool")
        return "true" if value else "false"
    if name == "date":
        if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
            raise TypeError("not a date (a datetime would lose its time)")
        return value.isoformat()
    if name in ("timestamp", "timestamp_ntz"):
        return _serialize_timestamp(value, utc=name == "timestamp")
    if name == "decimal":
        if isinstance(value, bool) or not isinstance(value, Decimal | int):
            raise TypeError("not a Decimal or int (a float would round)")
        return format(_fit_decimal(Decimal(value), precision, scale), "f")
    raise AssertionError(name)  # pragma: no cover


def _serialize_timestamp(value: Any, *, utc: bool) -> str:
    if not isinstance(value, dt.datetime):
        raise TypeError("not a datetime")
    if value.tzinfo is not None:
        if not utc:
            raise ValueError("timestamp_ntz values must be naive datetimes")
        value = value.astimezone(dt.UTC)
    # Formatted by hand: strftime's %Y does not zero-pad years below 1000 on every platform.
    text = f"{value.year:04d}-{value.month:02d}-{value.day:02d} {value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    return f"{text}.{value.microsecond:06d}" if value.microsecond else text
