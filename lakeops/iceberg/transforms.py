"""Partition transforms ("Partition Transforms", "Bucket Transform Details", "Truncate Transform
Details"; Appendix B "32-bit Hash Requirements"; Appendix C transform strings).

Transforms work on lakeops' canonical values (days and microseconds as ints, ``Decimal``, ``UUID``),
one value at a time (:meth:`Transform.apply`) and on whole Arrow columns (:meth:`Transform.apply_arrow`,
what writers and sorts use); both give the same result for every value. Time transforms floor, so a
timestamp before 1970 lands in the hour, day, month or year that contains it.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
import struct
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import mmh3
import pyarrow as pa
import pyarrow.compute as pc

from lakeops.errors import ProtocolError, UnsupportedFeature
from lakeops.iceberg.single_values import to_json
from lakeops.iceberg.types import DecimalType, FixedType, IcebergType, PrimitiveType

__all__ = [
    "BucketTransform",
    "DayTransform",
    "HourTransform",
    "IdentityTransform",
    "MonthTransform",
    "Transform",
    "TruncateTransform",
    "VoidTransform",
    "YearTransform",
    "bucket_hash",
    "parse_transform",
]

_INT = PrimitiveType(name="int")
_DATE = PrimitiveType(name="date")
_EPOCH_DATE = dt.date(1970, 1, 1)
_MICROS_PER_HOUR = 3_600_000_000
_MICROS_PER_DAY = 86_400_000_000
_TIMESTAMPS = frozenset({"timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"})
_BUCKETABLE = frozenset({"int", "long", "date", "time", "string", "uuid", "binary", *_TIMESTAMPS})
_TRUNCATABLE = frozenset({"int", "long", "string", "binary"})
_PARAMETERISED = re.compile(r"(?P<name>[a-z_]+)\[(?P<arg>[^\]]*)\]")
_SIMPLE = re.compile(r"[a-z_]+")


def _name(type_: IcebergType) -> str:
    return type_.name if isinstance(type_, PrimitiveType) else type(type_).__name__


def _is_decimal(type_: IcebergType) -> bool:
    return isinstance(type_, DecimalType)


def _micros(type_: IcebergType, value: int) -> int:
    """Microseconds of a timestamp value; nanosecond types are floored to micros."""
    return value // 1000 if _name(type_).endswith("_ns") else value


def _unscaled(value: Decimal) -> int:
    sign, digits, exponent = value.as_tuple()
    unscaled = int("".join(map(str, digits)) or "0")
    return -unscaled if sign else unscaled


def bucket_hash(source: IcebergType, value: Any) -> int:
    """The 32-bit Murmur3 (x86, seed 0) hash of a value, per Appendix B (signed)."""
    name = _name(source)
    if name in ("int", "long", "date", "time", *_TIMESTAMPS):
        number = _micros(source, value) if name in _TIMESTAMPS else value
        return mmh3.hash(struct.pack("<q", number), 0)
    if name == "boolean":
        return mmh3.hash(struct.pack("<q", int(bool(value))), 0)
    if name in ("float", "double"):
        number = float(value) + 0.0  # + 0.0 turns -0.0 into 0.0
        canonical_nan = 0x7FF8000000000000  # every NaN hashes as this one
        bits = canonical_nan if number != number else struct.unpack("<q", struct.pack("<d", number))[0]
        return mmh3.hash(struct.pack("<q", bits), 0)
    if _is_decimal(source):
        unscaled = _unscaled(Decimal(value))
        length = max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1)
        return mmh3.hash(unscaled.to_bytes(length, "big", signed=True), 0)
    if name == "string":
        return mmh3.hash(str(value).encode("utf-8"), 0)
    if name == "uuid":
        return mmh3.hash((value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))).bytes, 0)
    if isinstance(source, FixedType) or name == "binary":
        return mmh3.hash(bytes(value), 0)
    raise UnsupportedFeature(f"values of type {source} cannot be hashed for bucketing")


def _floor_divide(array: pa.Array, divisor: int) -> pa.Array:
    """Integer division rounding toward negative infinity (Arrow's ``divide`` truncates)."""
    quotient = pc.divide(array, divisor)
    remainder = pc.subtract(array, pc.multiply(quotient, divisor))
    return pc.subtract(quotient, pc.cast(pc.less(remainder, 0), array.type))


def _as_int64(source: IcebergType, array: pa.Array) -> pa.Array:
    """Days (dates) or microseconds (timestamps, whatever the column's unit) of an Arrow temporal column."""
    if _name(source) == "date":
        return pc.cast(pc.cast(array, pa.int32()), pa.int64())
    values = pc.cast(array, pa.int64())  # a timestamp's storage: UTC ticks in the column's unit
    unit = array.type.unit
    if unit == "ns":
        return _floor_divide(values, 1000)
    return pc.multiply(values, {"us": 1, "ms": 1000, "s": 1_000_000}[unit])


def _days_array(source: IcebergType, array: pa.Array) -> pa.Array:
    numbers = _as_int64(source, array)
    return numbers if _name(source) == "date" else _floor_divide(numbers, _MICROS_PER_DAY)


@dataclass(frozen=True)
class Transform(ABC):
    """A partition (or sort) transform; ``str()`` is its Appendix C spelling."""

    @abstractmethod
    def __str__(self) -> str: ...

    @abstractmethod
    def can_transform(self, source: IcebergType) -> bool: ...

    @abstractmethod
    def result_type(self, source: IcebergType) -> IcebergType: ...

    @abstractmethod
    def _apply(self, source: IcebergType, value: Any) -> Any: ...

    def apply(self, source: IcebergType, value: Any) -> Any:
        """The transformed value; null stays null ("All transforms must return null for a null input")."""
        return None if value is None else self._apply(source, value)

    def apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        """The transform of a whole Arrow column (canonical Arrow forms of the source type)."""
        values = [self.apply(source, _canonical(source, v)) for v in array.to_pylist()]
        return pa.array(values, _arrow_type(self.result_type(source)))

    def to_human(self, source: IcebergType, value: Any) -> str:
        """The value as a partition directory names it (``2017-11``, ``2017-11-16-22``, ``a%2Fb`` unescaped)."""
        if value is None:
            return "null"
        return _human(self.result_type(source), value)

    def _check(self, source: IcebergType) -> None:
        if not self.can_transform(source):
            raise ProtocolError(f"transform {self} cannot be applied to a {source} column")


def _canonical(source: IcebergType, value: Any) -> Any:
    """An Arrow-converted Python value back in canonical form."""
    if value is None:
        return None
    name = _name(source)
    if name == "date" and isinstance(value, dt.date):
        return (value - _EPOCH_DATE).days
    if name == "time" and isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    if name in _TIMESTAMPS and isinstance(value, dt.datetime):
        naive = value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value
        micros = (naive - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
        return micros * 1000 if name.endswith("_ns") else micros
    if name == "uuid" and isinstance(value, bytes):
        return uuid.UUID(bytes=value)
    return value


def _arrow_type(type_: IcebergType) -> pa.DataType:
    name = _name(type_)
    simple = {
        "boolean": pa.bool_(),
        "int": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "date": pa.int32(),  # day transforms: days since the epoch, as the value is stored
        "time": pa.int64(),
        "string": pa.string(),
        "binary": pa.binary(),
        "uuid": pa.binary(16),
    }
    if name in simple:
        return simple[name]
    if name in _TIMESTAMPS:
        return pa.int64()
    if isinstance(type_, DecimalType):
        return pa.decimal128(type_.precision, type_.scale)
    if isinstance(type_, FixedType):
        return pa.binary(type_.length)
    raise UnsupportedFeature(f"no Arrow form for transform results of type {type_}")


def _human(type_: IcebergType, value: Any) -> str:
    name = _name(type_)
    if name in ("binary",) or isinstance(type_, FixedType):
        return base64.b64encode(bytes(value)).decode()
    if name in _TIMESTAMPS:
        return str(to_json(type_, value)).removesuffix("+00:00")
    if name in ("boolean",):
        return "true" if value else "false"
    return str(to_json(type_, value))


@dataclass(frozen=True)
class IdentityTransform(Transform):
    def __str__(self) -> str:
        return "identity"

    def can_transform(self, source: IcebergType) -> bool:
        return isinstance(source, PrimitiveType | DecimalType | FixedType)

    def result_type(self, source: IcebergType) -> IcebergType:
        return source

    def _apply(self, source: IcebergType, value: Any) -> Any:
        return value

    def apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        return array


@dataclass(frozen=True)
class VoidTransform(Transform):
    def __str__(self) -> str:
        return "void"

    def can_transform(self, source: IcebergType) -> bool:
        return True

    def result_type(self, source: IcebergType) -> IcebergType:
        return source

    def _apply(self, source: IcebergType, value: Any) -> Any:
        return None

    def apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        return pa.nulls(len(array), array.type)


@dataclass(frozen=True)
class BucketTransform(Transform):
    num_buckets: int

    def __str__(self) -> str:
        return f"bucket[{self.num_buckets}]"

    def can_transform(self, source: IcebergType) -> bool:
        return _name(source) in _BUCKETABLE or isinstance(source, DecimalType | FixedType)

    def result_type(self, source: IcebergType) -> IcebergType:
        return _INT

    def _apply(self, source: IcebergType, value: Any) -> Any:
        self._check(source)
        return (bucket_hash(source, value) & 0x7FFFFFFF) % self.num_buckets


@dataclass(frozen=True)
class TruncateTransform(Transform):
    width: int

    def __str__(self) -> str:
        return f"truncate[{self.width}]"

    def can_transform(self, source: IcebergType) -> bool:
        return _name(source) in _TRUNCATABLE or isinstance(source, DecimalType)

    def result_type(self, source: IcebergType) -> IcebergType:
        return source

    def _apply(self, source: IcebergType, value: Any) -> Any:
        self._check(source)
        name = _name(source)
        if name in ("int", "long"):
            return value - (((value % self.width) + self.width) % self.width)
        if isinstance(source, DecimalType):
            unscaled = _unscaled(Decimal(value).quantize(Decimal(1).scaleb(-source.scale)))
            truncated = unscaled - (((unscaled % self.width) + self.width) % self.width)
            return Decimal(truncated).scaleb(-source.scale)
        return value[: self.width]  # strings by code point, binary by byte

    def apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        if _name(source) == "binary":
            return pc.binary_slice(array, 0, self.width)
        return super().apply_arrow(source, array)


@dataclass(frozen=True)
class _TimeTransform(Transform):
    """year, month, day, hour: ordinal of the unit since 1970, floored."""

    def can_transform(self, source: IcebergType) -> bool:
        return _name(source) in ("date", *_TIMESTAMPS)

    def result_type(self, source: IcebergType) -> IcebergType:
        return _INT

    def _days(self, source: IcebergType, value: int) -> int:
        return value if _name(source) == "date" else _micros(source, value) // _MICROS_PER_DAY


def _month_ordinal(days: int) -> tuple[int, int]:
    date = _EPOCH_DATE + dt.timedelta(days=days)
    return date.year - 1970, date.month - 1


@dataclass(frozen=True)
class YearTransform(_TimeTransform):
    def __str__(self) -> str:
        return "year"

    def _apply(self, source: IcebergType, value: Any) -> Any:
        self._check(source)
        return _month_ordinal(self._days(source, value))[0]

    def apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        self._check(source)
        dates = pc.cast(pc.cast(_days_array(source, array), pa.int32()), pa.date32())
        return pc.cast(pc.subtract(pc.year(dates), 1970), pa.int32())

    def to_human(self, source: IcebergType, value: Any) -> str:
        return "null" if value is None else f"{1970 + value:04d}"


@dataclass(frozen=True)
class MonthTransform(_TimeTransform):
    def __str__(self) -> str:
        return "month"

    def _apply(self, source: IcebergType, value: Any) -> Any:
        self._check(source)
        years, month = _month_ordinal(self._days(source, value))
        return years * 12 + month

    def apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        self._check(source)
        dates = pc.cast(pc.cast(_days_array(source, array), pa.int32()), pa.date32())
        months = pc.add(pc.multiply(pc.subtract(pc.year(dates), 1970), 12), pc.subtract(pc.month(dates), 1))
        return pc.cast(months, pa.int32())

    def to_human(self, source: IcebergType, value: Any) -> str:
        if value is None:
            return "null"
        years, month = divmod(value, 12)
        return f"{1970 + years:04d}-{month + 1:02d}"


@dataclass(frozen=True)
class DayTransform(_TimeTransform):
    """Days since 1970; typed ``date`` as the reference implementations type it (physically the int
    the spec's table names), so manifests annotate the partition field as an Avro date."""

    def __str__(self) -> str:
        return "day"

    def result_type(self, source: IcebergType) -> IcebergType:
        return _DATE

    def _apply(self, source: IcebergType, value: Any) -> Any:
        self._check(source)
        return self._days(source, value)

    def apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        self._check(source)
        return pc.cast(_days_array(source, array), pa.int32())


@dataclass(frozen=True)
class HourTransform(_TimeTransform):
    def __str__(self) -> str:
        return "hour"

    def can_transform(self, source: IcebergType) -> bool:
        return _name(source) in _TIMESTAMPS

    def _apply(self, source: IcebergType, value: Any) -> Any:
        self._check(source)
        return _micros(source, value) // _MICROS_PER_HOUR

    def apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        self._check(source)
        return pc.cast(_floor_divide(_as_int64(source, array), _MICROS_PER_HOUR), pa.int32())

    def to_human(self, source: IcebergType, value: Any) -> str:
        if value is None:
            return "null"
        moment = dt.datetime(1970, 1, 1) + dt.timedelta(hours=value)
        return moment.strftime("%Y-%m-%d-%H")


_SIMPLE_TRANSFORMS: dict[str, Transform] = {
    "identity": IdentityTransform(),
    "void": VoidTransform(),
    "year": YearTransform(),
    "month": MonthTransform(),
    "day": DayTransform(),
    "hour": HourTransform(),
}
_VALID_FORMS = "identity, bucket[N], truncate[W], year, month, day, hour, void"


def parse_transform(text: str) -> Transform:
    """The transform a string names. Malformed strings are a :class:`ProtocolError`; a well-formed
    name this spec does not define (a newer one) is :class:`UnsupportedFeature`."""
    cleaned = text.strip() if isinstance(text, str) else text
    if not isinstance(cleaned, str):
        raise ProtocolError(f"partition transform {text!r} is not a string (expected one of {_VALID_FORMS})")
    if cleaned in _SIMPLE_TRANSFORMS:
        return _SIMPLE_TRANSFORMS[cleaned]
    if match := _PARAMETERISED.fullmatch(cleaned):
        name, arg = match["name"], match["arg"].strip()
        if name in ("bucket", "truncate"):
            if not arg.isdigit() or int(arg) <= 0:
                raise ProtocolError(
                    f"malformed partition transform {text!r}: {name}[...] takes a positive integer "
                    f"(valid forms: {_VALID_FORMS})"
                )
            return BucketTransform(int(arg)) if name == "bucket" else TruncateTransform(int(arg))
        raise UnsupportedFeature(f"partition transform {text!r} is not supported (lakeops knows {_VALID_FORMS})")
    if _SIMPLE.fullmatch(cleaned):
        raise UnsupportedFeature(f"partition transform {text!r} is not supported (lakeops knows {_VALID_FORMS})")
    raise ProtocolError(f"malformed partition transform {text!r} (valid forms: {_VALID_FORMS})")
