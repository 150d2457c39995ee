"""Single values of Iceberg types as bytes and as JSON (Appendix D "Single-value serialization").

Binary form: the ``lower_bounds``/``upper_bounds`` of manifests and the partition field summaries of
manifest lists. JSON form: ``initial-default``/``write-default`` in schemas and partition values
written into metadata. Values are in lakeops' canonical representation (days, microseconds and
nanoseconds as ints; ``Decimal``, ``UUID``, ``bytes``, ``str``), which is what the binary form stores,
so no calendar arithmetic happens on the hot path.

String and binary bounds are truncated as metrics mode ``truncate(N)`` does: the lower bound is a
prefix; the upper bound is a prefix whose last code point (byte) is incremented, so it still bounds
every value from above. When no such prefix exists (all maximal), there is no upper bound.
"""

from __future__ import annotations

import datetime as dt
import re
import struct
import uuid
from decimal import Decimal
from typing import Any

from lakeops.errors import CorruptFile, InvalidArgument, UnsupportedFeature
from lakeops.iceberg.types import DecimalType, FixedType, IcebergType, ListType, MapType, PrimitiveType, StructType

__all__ = ["from_bytes", "from_json", "to_bytes", "to_json", "truncate_lower", "truncate_upper"]

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_TIMESTAMPS = frozenset({"timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"})
#: struct formats of the fixed-width types: little-endian 4 or 8 bytes.
_FIXED_WIDTH = {
    "int": "<i",
    "date": "<i",
    "long": "<q",
    "time": "<q",
    "float": "<f",
    "double": "<d",
    **dict.fromkeys(_TIMESTAMPS, "<q"),
}
_MAX_CODE_POINT = 0x10FFFF


def _name(type_: IcebergType) -> str:
    return type_.name if isinstance(type_, PrimitiveType) else str(type_)


def _unscaled(value: Decimal, scale: int) -> int:
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise InvalidArgument(f"decimal value {value} is not finite")
    unscaled = int("".join(map(str, digits)) or "0") * 10 ** (exponent + scale) if exponent + scale >= 0 else None
    if unscaled is None:
        raise InvalidArgument(f"decimal value {value} has more than {scale} digits after the point")
    return -unscaled if sign else unscaled


def _min_bytes(number: int) -> bytes:
    """Two's-complement big-endian in the fewest bytes that hold ``number``."""
    length = max(1, (number + (number < 0)).bit_length() // 8 + 1)
    return number.to_bytes(length, "big", signed=True)


def to_bytes(type_: IcebergType, value: Any) -> bytes:
    """The binary single value of ``value`` (Appendix D)."""
    name = _name(type_)
    if isinstance(type_, StructType | ListType | MapType):
        raise UnsupportedFeature(f"{type_.type} values have no binary single-value form")
    if name == "boolean":
        return b"\x01" if value else b"\x00"
    if name in _FIXED_WIDTH:
        return struct.pack(_FIXED_WIDTH[name], value)
    if name == "string":
        return str(value).encode("utf-8")
    if name == "uuid":
        return (value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))).bytes
    if isinstance(type_, DecimalType):
        return _min_bytes(_unscaled(Decimal(value), type_.scale))
    if isinstance(type_, FixedType) or name == "binary":
        return bytes(value)
    raise UnsupportedFeature(f"{name} values have no binary single-value form")


def from_bytes(type_: IcebergType, data: bytes) -> Any:
    """The value a binary single value holds; a length that does not fit the type is corrupt."""
    name = _name(type_)
    try:
        if name == "boolean":
            _expect_length(type_, data, 1)
            return data != b"\x00"
        if name in _FIXED_WIDTH:
            fmt = _FIXED_WIDTH[name]
            _expect_length(type_, data, struct.calcsize(fmt))
            return struct.unpack(fmt, data)[0]
        if name == "string":
            return data.decode("utf-8")
        if name == "uuid":
            _expect_length(type_, data, 16)
            return uuid.UUID(bytes=bytes(data))
        if isinstance(type_, DecimalType):
            if not data:
                raise CorruptFile(f"an empty single value cannot be a {type_}")
            return Decimal(int.from_bytes(data, "big", signed=True)).scaleb(-type_.scale)
        if isinstance(type_, FixedType):
            _expect_length(type_, data, type_.length)
            return bytes(data)
        if name == "binary":
            return bytes(data)
    except UnicodeDecodeError as exc:
        raise CorruptFile(f"a string single value is not UTF-8 ({exc})") from exc
    raise UnsupportedFeature(f"{name} values have no binary single-value form")


def _expect_length(type_: IcebergType, data: bytes, length: int) -> None:
    if len(data) != length:
        raise CorruptFile(f"a {_name(type_)} single value has {len(data)} bytes, expected {length}")


def _iso_fraction(seconds_value: dt.datetime | dt.time, fraction: int, digits: int) -> str:
    base = seconds_value.replace(microsecond=0).isoformat()
    return f"{base}.{fraction:0{digits}d}"


def _split(value: int, per_second: int) -> tuple[int, int]:
    seconds, fraction = divmod(value, per_second)
    return seconds, fraction


def to_json(type_: IcebergType, value: Any) -> Any:
    """The JSON single value of ``value`` (Appendix D)."""
    if value is None:
        return None
    name = _name(type_)
    if isinstance(type_, StructType):
        return {str(f.id): to_json(f.type, value.get(f.name)) for f in type_.fields}
    if isinstance(type_, ListType):
        return [to_json(type_.element, v) for v in value]
    if isinstance(type_, MapType):
        items = value.items() if isinstance(value, dict) else value
        keys, values = zip(*items, strict=True) if items else ((), ())
        return {"keys": [to_json(type_.key, k) for k in keys], "values": [to_json(type_.value, v) for v in values]}
    if name in ("boolean", "int", "long"):
        return value
    if name in ("float", "double"):
        return float(value)
    if isinstance(type_, DecimalType):
        unscaled = _unscaled(Decimal(value), type_.scale)
        return f"{Decimal(unscaled).scaleb(-type_.scale):f}"
    if name == "date":
        return (_EPOCH_DATE + dt.timedelta(days=value)).isoformat()
    if name == "time":
        seconds, micros = _split(value, 1_000_000)
        return _iso_fraction((_EPOCH + dt.timedelta(seconds=seconds)).time(), micros, 6)
    if name in _TIMESTAMPS:
        per_second, digits = (1_000_000_000, 9) if name.endswith("_ns") else (1_000_000, 6)
        seconds, fraction = _split(value, per_second)
        text = _iso_fraction(_EPOCH + dt.timedelta(seconds=seconds), fraction, digits)
        return text + "+00:00" if name.startswith("timestamptz") else text
    if name == "string":
        return str(value)
    if name == "uuid":
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))).lower()
    if isinstance(type_, FixedType) or name == "binary":
        return bytes(value).hex()
    raise UnsupportedFeature(f"{name} values have no JSON single-value form")


_TIMESTAMP = re.compile(
    r"(?P<base>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?)(?:\.(?P<fraction>\d{1,9}))?(?P<zone>Z|[+-]\d{2}:\d{2})?"
)


def _parse_timestamp(text: str, name: str) -> int:
    """Micro- or nanoseconds since the epoch of an ISO-8601 timestamp; a zone offset is converted to
    UTC (``datetime`` alone cannot hold nanoseconds, so the fraction is read separately)."""
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        raise ValueError("not an ISO-8601 timestamp")
    zone = match["zone"] or ""
    moment = dt.datetime.fromisoformat(match["base"] + zone.replace("Z", "+00:00"))
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    digits = 9 if name.endswith("_ns") else 6
    whole = (moment - _EPOCH) // dt.timedelta(seconds=1)
    return whole * 10**digits + int(((match["fraction"] or "") + "0" * digits)[:digits])


def from_json(type_: IcebergType, obj: Any) -> Any:
    """The value a JSON single value holds; malformed input is an :class:`InvalidArgument` naming it."""
    if obj is None:
        return None
    name = _name(type_)
    try:
        if isinstance(type_, StructType):
            return {f.name: from_json(f.type, obj.get(str(f.id))) for f in type_.fields}
        if isinstance(type_, ListType):
            return [from_json(type_.element, v) for v in obj]
        if isinstance(type_, MapType):
            return dict(
                zip(
                    (from_json(type_.key, k) for k in obj["keys"]),
                    (from_json(type_.value, v) for v in obj["values"]),
                    strict=True,
                )
            )
        if name == "boolean" and isinstance(obj, bool):
            return obj
        if name in ("int", "long") and isinstance(obj, int) and not isinstance(obj, bool):
            return obj
        if name in ("float", "double") and isinstance(obj, int | float) and not isinstance(obj, bool):
            return float(obj)
        if isinstance(type_, DecimalType):
            value = Decimal(str(obj))
            return Decimal(_unscaled(value, type_.scale)).scaleb(-type_.scale)
        if name == "date":
            return (dt.date.fromisoformat(obj) - _EPOCH_DATE).days
        if name == "time":
            parsed = dt.time.fromisoformat(obj)
            return ((parsed.hour * 60 + parsed.minute) * 60 + parsed.second) * 1_000_000 + parsed.microsecond
        if name in _TIMESTAMPS:
            return _parse_timestamp(obj, name)
        if name == "string" and isinstance(obj, str):
            return obj
        if name == "uuid":
            return uuid.UUID(obj)
        if isinstance(type_, FixedType) or name == "binary":
            data = bytes.fromhex(obj)
            if isinstance(type_, FixedType) and len(data) != type_.length:
                raise ValueError(f"{len(data)} bytes, expected {type_.length}")
            return data
    except (ValueError, TypeError, KeyError, AttributeError, ArithmeticError) as exc:
        raise InvalidArgument(f"{obj!r} is not a JSON single value of type {type_} ({exc})") from exc
    raise InvalidArgument(f"{obj!r} is not a JSON single value of type {type_}")


def truncate_lower(type_: IcebergType, value: Any, width: int) -> Any:
    """A lower bound of at most ``width`` code points (strings) or bytes (binary): a prefix."""
    return value[:width] if _name(type_) in ("string", "binary") else value


def truncate_upper(type_: IcebergType, value: Any, width: int) -> Any:
    """An upper bound of at most ``width`` code points/bytes: the prefix with its last element
    incremented (carrying past maximal ones), or None when no shorter bound exists."""
    name = _name(type_)
    if name not in ("string", "binary") or len(value) <= width:
        return value
    if name == "binary":
        prefix = bytearray(value[:width])
        while prefix:
            if prefix[-1] < 0xFF:
                prefix[-1] += 1
                return bytes(prefix)
            prefix.pop()
        return None
    points = [ord(c) for c in value[:width]]
    while points:
        following = points[-1] + 1
        if 0xD800 <= following <= 0xDFFF:
            following = 0xE000  # surrogates are not characters: skip them
        if following <= _MAX_CODE_POINT:
            points[-1] = following
            return "".join(map(chr, points))
        points.pop()
    return None
