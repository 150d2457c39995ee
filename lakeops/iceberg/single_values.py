"""Single values of Iceberg types as bytes and as JSON (Appendix D "Single-value serialization").

The binary form is what manifests store as column ``lower_bounds``/``upper_bounds`` and manifest lists
as partition field summaries; the JSON form is what schemas store as ``initial-default``/``write-default``
and metadata as partition values. Values are in lakeops' canonical representation (days, microseconds
and nanoseconds as ints, ``Decimal``, ``UUID``, ``bytes``, ``str``), which is what both encodings
store, so encoding a bound needs no calendar arithmetic. Decimals are their unscaled integer in the
fewest two's-complement bytes; Appendix B hashes exactly these bytes, so bucketing reuses
:func:`to_bytes`. :func:`canonical` brings the ``date``/``datetime``/UUID-bytes forms that Arrow, Parquet
statistics and Avro readers hand out into that representation, so every writer encodes the same way.

JSON is read as the reference implementation reads it: ``timestamptz`` needs a zone offset (any offset,
converted to UTC) and ``timestamp`` must not have one, so a zone is never silently dropped or invented.

String and binary bounds are truncated as the default metrics mode ``truncate(16)`` does (see
"Manifests", note on ``lower_bounds``/``upper_bounds``): a lower bound is a prefix; an upper bound is
a prefix whose last code point (byte) is incremented so it still bounds every longer value; when
every kept element is already maximal there is no upper bound at all.
"""

from __future__ import annotations

import datetime as dt
import re
import struct
import uuid
from decimal import Decimal, InvalidOperation
from typing import Any

from lakeops.errors import CorruptFile, InvalidArgument, UnsupportedFeature
from lakeops.iceberg.types import DecimalType, FixedType, IcebergType, ListType, MapType, PrimitiveType, StructType

__all__ = [
    "canonical",
    "decimal_from_unscaled",
    "decimal_unscaled",
    "from_bytes",
    "from_json",
    "to_bytes",
    "to_json",
    "truncate_lower",
    "truncate_upper",
]

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_TIMESTAMPS = ("timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns")
#: little-endian fixed-width primitives (Appendix D's table)
_PACKED = {"int": "<i", "date": "<i", "long": "<q", "time": "<q", "float": "<f", "double": "<d"}
_PACKED |= dict.fromkeys(_TIMESTAMPS, "<q")
_MICROS_PER_DAY = 86_400_000_000
_SURROGATES = range(0xD800, 0xE000)
_MAX_CODE_POINT = 0x10FFFF


def _type_name(type_: IcebergType) -> str:
    if isinstance(type_, PrimitiveType):
        return type_.name
    return type_.type if isinstance(type_, StructType | ListType | MapType) else str(type_)


def decimal_unscaled(type_: DecimalType, value: Decimal | int | str) -> int:
    """The unscaled integer of a decimal value of ``type_`` (``14.20`` in ``decimal(4,2)`` → 1420).
    A value with more fractional digits than the scale, or more digits than the precision, is not a
    value of the type: :class:`InvalidArgument`."""
    try:
        number = Decimal(value)
    except (InvalidOperation, TypeError, ValueError) as exc:
        raise InvalidArgument(f"{value!r} is not a {type_} value") from exc
    sign, digits, exponent = number.as_tuple()
    if not isinstance(exponent, int):
        raise InvalidArgument(f"{value!r} is not a finite {type_} value")
    shift = exponent + type_.scale
    magnitude = int("".join(map(str, digits)))
    power: int = 10 ** abs(shift)
    if shift < 0:
        magnitude, dropped = divmod(magnitude, power)
        if dropped:
            raise InvalidArgument(f"{value!r} has more than {type_.scale} digits after the point for {type_}")
    else:
        magnitude *= power
    if magnitude >= 10**type_.precision:
        raise InvalidArgument(f"{value!r} has more than {type_.precision} digits for {type_}")
    return -magnitude if sign else magnitude


def decimal_from_unscaled(type_: DecimalType, unscaled: int) -> Decimal:
    """The decimal of ``type_`` whose unscaled value is ``unscaled``, with exactly ``scale`` digits
    after the point (``Decimal("14.20")``, not ``Decimal("14.2")``). Built from its digits, exactly:
    decimal arithmetic would round to the context's 28 digits, and ``decimal(38,S)`` has up to 38."""
    return Decimal((int(unscaled < 0), tuple(map(int, str(abs(unscaled)))), -type_.scale))


def canonical(type_: IcebergType, value: Any) -> Any:
    """``value`` in lakeops' canonical representation of ``type_``, from the Python forms that Arrow's
    ``to_pylist``, Parquet footer statistics and Avro readers produce: ``date``/``time``/``datetime``
    (aware ones converted to UTC, naive ones taken as UTC), UUIDs as 16 bytes, decimals of any exponent,
    ``bytearray``, maps as ``(key, value)`` pairs. Values already canonical come back equal."""
    if value is None:
        return None
    name = _type_name(type_)
    if isinstance(type_, StructType):
        return {f.name: canonical(f.type, value.get(f.name)) for f in type_.fields}
    if isinstance(type_, ListType):
        return [canonical(type_.element, v) for v in value]
    if isinstance(type_, MapType):
        pairs = value.items() if isinstance(value, dict) else value
        return {canonical(type_.key, k): canonical(type_.value, v) for k, v in pairs}
    if name == "date" and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return (value - _EPOCH_DATE).days
    if name == "time" and isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    if name in _TIMESTAMPS and isinstance(value, dt.datetime):
        naive = value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo is not None else value
        micros = (naive - _EPOCH) // dt.timedelta(microseconds=1)
        return micros * 1000 if name.endswith("_ns") else micros
    if name == "uuid":
        return uuid.UUID(bytes=bytes(value)) if isinstance(value, bytes | bytearray | memoryview) else _as_uuid(value)
    if isinstance(type_, DecimalType):
        return decimal_from_unscaled(type_, decimal_unscaled(type_, value))
    if isinstance(type_, FixedType) or name == "binary":
        return bytes(value)
    return value


def _min_twos_complement(number: int) -> bytes:
    """Big-endian two's complement in the fewest bytes that hold ``number`` (at least one)."""
    magnitude_bits = (number if number >= 0 else ~number).bit_length()
    return number.to_bytes(magnitude_bits // 8 + 1, "big", signed=True)


def to_bytes(type_: IcebergType, value: Any) -> bytes:
    """The binary single value of ``value`` (Appendix D). Struct, list and map have none:
    :class:`UnsupportedFeature`; a value the type cannot hold: :class:`InvalidArgument`."""
    name = _type_name(type_)
    try:
        if name == "boolean":
            return b"\x01" if value else b"\x00"
        if name in _PACKED:
            return struct.pack(_PACKED[name], value)
        if name == "string":
            encoded: bytes = value.encode("utf-8")
            return encoded
        if name == "uuid":
            return _as_uuid(value).bytes
        if isinstance(type_, DecimalType):
            return _min_twos_complement(decimal_unscaled(type_, value))
        if isinstance(type_, FixedType):
            if len(value) != type_.length:
                raise InvalidArgument(f"{type_} value has {len(value)} bytes")
            return bytes(value)
        if name == "binary":
            return bytes(value)
    except (struct.error, OverflowError, TypeError, AttributeError, ValueError) as exc:
        raise InvalidArgument(f"{value!r} is not a {name} value ({exc})") from exc
    raise UnsupportedFeature(f"{name} values have no binary single-value form (Appendix D)")


def _as_uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def from_bytes(type_: IcebergType, data: bytes) -> Any:
    """The value a binary single value holds. A length the type cannot have is :class:`CorruptFile`
    naming the type and the length."""
    name = _type_name(type_)
    if name == "boolean":
        _expect_length(name, data, 1)
        return data != b"\x00"
    if name in _PACKED:
        fmt = _PACKED[name]
        _expect_length(name, data, struct.calcsize(fmt))
        return struct.unpack(fmt, data)[0]
    if name == "string":
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptFile(f"a string single value is not UTF-8 ({exc})") from exc
    if name == "uuid":
        _expect_length(name, data, 16)
        return uuid.UUID(bytes=bytes(data))
    if isinstance(type_, DecimalType):
        if not data:
            raise CorruptFile(f"a {name} single value has 0 bytes, expected at least 1")
        return decimal_from_unscaled(type_, int.from_bytes(data, "big", signed=True))
    if isinstance(type_, FixedType):
        _expect_length(name, data, type_.length)
        return bytes(data)
    if name == "binary":
        return bytes(data)
    raise UnsupportedFeature(f"{name} values have no binary single-value form (Appendix D)")


def _expect_length(name: str, data: bytes, length: int) -> None:
    if len(data) != length:
        raise CorruptFile(f"a {name} single value has {len(data)} bytes, expected {length}")


def _iso(moment: dt.datetime | dt.time, fraction: int, digits: int) -> str:
    return f"{moment.isoformat()}.{fraction:0{digits}d}"


def _digits(name: str) -> tuple[int, int]:
    """(units per second, fractional digits) of a time or timestamp type."""
    return (1_000_000_000, 9) if name.endswith("_ns") else (1_000_000, 6)


def to_json(type_: IcebergType, value: Any) -> Any:
    """The JSON single value of ``value`` (Appendix D). Structs are dicts keyed by field name
    (null fields are left out of the JSON, which is keyed by field id); maps are dicts."""
    if value is None:
        return None
    name = _type_name(type_)
    try:
        if isinstance(type_, StructType):
            fields = ((f, value.get(f.name)) for f in type_.fields)
            return {str(f.id): to_json(f.type, v) for f, v in fields if v is not None}
        if isinstance(type_, ListType):
            return [to_json(type_.element, v) for v in value]
        if isinstance(type_, MapType):
            return {
                "keys": [to_json(type_.key, k) for k in value],
                "values": [to_json(type_.value, v) for v in value.values()],
            }
        if name in ("boolean", "int", "long", "string") or isinstance(type_, DecimalType | FixedType):
            return _primitive_to_json(type_, name, value)
        return _temporal_to_json(name, value)
    except (OverflowError, TypeError, AttributeError, ValueError) as exc:
        raise InvalidArgument(f"{value!r} is not a {name} value ({exc})") from exc


def _primitive_to_json(type_: IcebergType, name: str, value: Any) -> Any:
    if isinstance(type_, DecimalType):
        return f"{decimal_from_unscaled(type_, decimal_unscaled(type_, value)):f}"
    if isinstance(type_, FixedType):
        return to_bytes(type_, value).hex()
    checks = {"boolean": bool, "int": int, "long": int, "string": str}
    if not isinstance(value, checks[name]) or (name in ("int", "long") and isinstance(value, bool)):
        raise InvalidArgument(f"{value!r} is not a {name} value")
    return value


def _temporal_to_json(name: str, value: Any) -> Any:
    """float, double, date, time, timestamps, uuid, binary (the ones whose JSON is not the value)."""
    if name in ("float", "double"):
        return float(value)
    if name == "date":
        return (_EPOCH_DATE + dt.timedelta(days=value)).isoformat()
    if name == "time":
        if not 0 <= value < _MICROS_PER_DAY:
            raise InvalidArgument(f"{value!r} microseconds is not a time of day")
        seconds, micros = divmod(value, 1_000_000)
        return _iso((_EPOCH + dt.timedelta(seconds=seconds)).time(), micros, 6)
    if name in _TIMESTAMPS:
        per_second, digits = _digits(name)
        seconds, fraction = divmod(value, per_second)
        text = _iso(_EPOCH + dt.timedelta(seconds=seconds), fraction, digits)
        return text + "+00:00" if name.startswith("timestamptz") else text
    if name == "uuid":
        return str(_as_uuid(value))
    if name == "binary":
        return bytes(value).hex()
    raise UnsupportedFeature(f"{name} values have no JSON single-value form (Appendix D)")


_TIMESTAMP = re.compile(
    r"(?P<base>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?)(?:\.(?P<fraction>\d{1,9}))?(?P<zone>Z|[+-]\d{2}:\d{2})?"
)


def _parse_timestamp(name: str, text: str) -> int:
    """Micro- or nanoseconds since the epoch of an ISO-8601 timestamp. ``timestamptz`` values must
    carry an offset (any offset; converted to UTC), ``timestamp`` values must not (Appendix D).
    The fraction is read apart from ``datetime``, which cannot hold nanoseconds."""
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        raise ValueError("not an ISO-8601 timestamp")
    zone = match["zone"]
    if name.startswith("timestamptz") != (zone is not None):
        raise ValueError("timestamptz values need a zone offset" if zone is None else "timestamp values take no offset")
    moment = dt.datetime.fromisoformat(match["base"] + ("" if zone is None else zone.replace("Z", "+00:00")))
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    per_second, digits = _digits(name)
    fraction = int(((match["fraction"] or "") + "0" * digits)[:digits])
    return (moment - _EPOCH) // dt.timedelta(seconds=1) * per_second + fraction


def from_json(type_: IcebergType, obj: Any) -> Any:
    """The value a JSON single value holds (structs as dicts keyed by field name, maps as dicts);
    malformed input is :class:`InvalidArgument` quoting it."""
    if obj is None:
        return None
    try:
        value = _from_json(type_, obj)
    except (ValueError, TypeError, KeyError, AttributeError, ArithmeticError) as exc:
        raise InvalidArgument(f"{obj!r} is not a JSON single value of type {type_} ({exc})") from exc
    if value is None:
        raise InvalidArgument(f"{obj!r} is not a JSON single value of type {type_}")
    return value


def _from_json(type_: IcebergType, obj: Any) -> Any:
    """The decoded value, or None when ``obj`` has the wrong JSON kind for the type."""
    name = _type_name(type_)
    if isinstance(type_, StructType):
        return {f.name: from_json(f.type, obj.get(str(f.id))) for f in type_.fields}
    if isinstance(type_, ListType):
        return [from_json(type_.element, v) for v in obj]
    if isinstance(type_, MapType):
        keys = [from_json(type_.key, k) for k in obj["keys"]]
        return dict(zip(keys, (from_json(type_.value, v) for v in obj["values"]), strict=True))
    if name == "boolean":
        return obj if isinstance(obj, bool) else None
    if isinstance(obj, bool):
        return None
    if name in ("int", "long"):
        return obj if isinstance(obj, int) else None
    if name in ("float", "double"):
        return float(obj) if isinstance(obj, int | float) else None
    if isinstance(type_, DecimalType):
        return decimal_from_unscaled(type_, decimal_unscaled(type_, str(obj)))
    if not isinstance(obj, str):
        return None
    return _text_from_json(type_, name, obj)


def _text_from_json(type_: IcebergType, name: str, text: str) -> Any:
    if name == "string":
        return text
    if name == "date":
        return (dt.date.fromisoformat(text) - _EPOCH_DATE).days
    if name == "time":
        parsed = dt.time.fromisoformat(text)
        if parsed.tzinfo is not None:
            raise ValueError("time values take no offset")
        return ((parsed.hour * 60 + parsed.minute) * 60 + parsed.second) * 1_000_000 + parsed.microsecond
    if name in _TIMESTAMPS:
        return _parse_timestamp(name, text)
    if name == "uuid":
        return uuid.UUID(text)
    if isinstance(type_, FixedType) or name == "binary":
        data = bytes.fromhex(text)
        if isinstance(type_, FixedType) and len(data) != type_.length:
            raise ValueError(f"{len(data)} bytes, expected {type_.length}")
        return data
    return None


def _check_bound(type_: IcebergType, width: int) -> bool:
    """Whether ``type_`` is truncated at all (string, binary); a width must be positive."""
    if width <= 0:
        raise InvalidArgument(f"a bound truncation width must be positive, got {width}")
    return _type_name(type_) in ("string", "binary")


def truncate_lower(type_: IcebergType, value: Any, width: int) -> Any:
    """A lower bound of at most ``width`` code points (string) or bytes (binary): the prefix.
    Values of other types (including fixed, whose bounds keep their length) are returned as they are."""
    return value[:width] if _check_bound(type_, width) else value


def truncate_upper(type_: IcebergType, value: Any, width: int) -> Any:
    """An upper bound of at most ``width`` code points (string) or bytes (binary): the prefix with
    its last element incremented, carrying past maximal ones (0xFF, U+10FFFF) and over the surrogate
    range; None when no such prefix exists. Values that fit, and other types, are returned as they are."""
    if not _check_bound(type_, width) or len(value) <= width:
        return value
    if isinstance(value, str):
        points = [ord(c) for c in value[:width]]
        limit = _MAX_CODE_POINT
    else:
        points = list(value[:width])
        limit = 0xFF
    while points:
        following = points.pop() + 1
        if following in _SURROGATES and limit == _MAX_CODE_POINT:
            following = _SURROGATES.stop
        if following <= limit:
            points.append(following)
            return "".join(map(chr, points)) if isinstance(value, str) else bytes(points)
    return None
