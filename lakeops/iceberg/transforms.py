"""Partition transforms ("Partition Transforms", "Bucket Transform Details", "Truncate Transform
Details", Appendix B "32-bit Hash Requirements", and the transform strings of Appendix C).

A transform turns a source column value into a partition value, one value at a time
(:meth:`Transform.apply`, canonical Python values in and out) or a whole Arrow column at a time
(:meth:`Transform.apply_arrow`, what writers, compaction and sorts use); both agree value by value.
The rules the spec spells out and implementations get wrong are kept explicit here:

* bucket hashes with 32-bit Murmur3 (x86, seed 0) and drops the sign bit before ``% N``; ints hash as
  longs and floats as doubles so type promotion keeps buckets; nanosecond timestamps hash their
  microseconds, as the reference implementations do, for the same reason;
* truncate keeps remainders positive (``v - (((v % W) + W) % W)``), on the unscaled value for decimals;
* year/month/day/hour count units from 1970 and *floor*, so an instant before the epoch falls in the
  unit that contains it (1969-12-31T23:00 is hour -1, day -1, month -1, year -1);
* ``day`` is typed ``date`` (physically the int the spec's table names): Java Iceberg and PyIceberg
  type it so, and manifest readers expect the partition field annotated as an Avro date.

Transform strings are parsed leniently in case (as the Java reference does) and strictly in shape:
a malformed string is a :class:`ProtocolError`; a well-formed name this spec does not define (a
transform from a newer spec) is :class:`UnsupportedFeature`, so callers can tell the two apart.
"""

from __future__ import annotations

import base64
import re
import struct
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import mmh3
import pyarrow as pa
import pyarrow.compute as pc

from lakeops.errors import InvalidArgument, ProtocolError, UnsupportedFeature
from lakeops.iceberg.single_values import canonical, decimal_from_unscaled, decimal_unscaled, to_bytes, to_json
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
_TIMESTAMPS = frozenset({"timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"})
_LONG_HASHED = frozenset({"int", "long", "date", "time", "timestamp", "timestamptz"})
_BYTES_HASHED = frozenset({"string", "uuid", "binary"})
_INT_MAX = 0x7FFFFFFF
_SMALLEST = {"int": -(2**31), "long": -(2**63)}
_CANONICAL_NAN_BITS = 0x7FF8000000000000
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_SECONDS_PER_HOUR = 3600


def _units_per_second(source: IcebergType) -> int:
    """Canonical units per second of a time/timestamp type: micros, or nanos for ``*_ns``."""
    return _PER_SECOND["ns" if str(source).endswith("_ns") else "us"]


def bucket_hash(source: IcebergType, value: Any) -> int:
    """The signed 32-bit Murmur3 hash (x86, seed 0) of a value of ``source``, per Appendix B.

    boolean, float and double are hashed by Appendix B's second table although they cannot be
    bucketed; nested types have no hash (:class:`UnsupportedFeature`)."""
    name = str(source)
    if name in _LONG_HASHED or name == "boolean":
        number = int(value)
    elif name in _TIMESTAMPS:  # the *_ns ones: their microseconds
        number = value // 1000
    elif name in ("float", "double"):
        as_double = float(value)
        if as_double != as_double:
            number = _CANONICAL_NAN_BITS
        else:  # adding 0.0 turns -0.0 into 0.0
            number = struct.unpack("<q", struct.pack("<d", as_double + 0.0))[0]
    elif name in _BYTES_HASHED or isinstance(source, DecimalType | FixedType):
        return mmh3.hash(to_bytes(source, value), 0)
    else:
        raise UnsupportedFeature(f"values of type {source} have no Appendix B hash")
    return mmh3.hash(struct.pack("<q", number), 0)


def _civil(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day count since 1970-01-01 in the proleptic Gregorian calendar, for
    every int (``datetime`` stops at year 9999; Arrow's kernels do not). Counts 400-year eras of
    146097 days from 0000-03-01 so leap days fall at the end of each counted year."""
    shifted = days + 719_468
    era = shifted // 146_097
    day_of_era = shifted - era * 146_097
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_from_march = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_from_march + 2) // 5 + 1
    month = month_from_march + 3 if month_from_march < 10 else month_from_march - 9
    return year_of_era + era * 400 + (month <= 2), month, day


def _human_date(days: int) -> str:
    year, month, day = _civil(days)
    return f"{year:04d}-{month:02d}-{day:02d}"


_ZERO_FRACTION = re.compile(r"\.0+(?=\+00:00$|$)")


def _human(type_: IcebergType, value: Any) -> str:
    """A source-typed value as a partition directory names it (the forms PyIceberg writes:
    ISO dates and times without an all-zero fraction, base64 for bytes, lowercase booleans)."""
    name = str(type_)
    if name == "boolean":
        return "true" if value else "false"
    if name == "date":
        return _human_date(value)
    if name == "time" or name in _TIMESTAMPS:
        return _ZERO_FRACTION.sub("", to_json(type_, value))
    if name == "binary" or isinstance(type_, FixedType):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(type_, DecimalType):  # scientific below 1E-6, as Java's BigDecimal.toString and PyIceberg
        return str(decimal_from_unscaled(type_, decimal_unscaled(type_, value)))
    return str(value)  # uuid: lowercase with hyphens


def _floor_divide(array: pa.Array, divisor: int) -> pa.Array:
    """Integer division rounding toward negative infinity (Arrow's ``divide`` truncates toward 0)."""
    quotient = pc.divide(array, divisor)
    remainder = pc.subtract(array, pc.multiply(quotient, divisor))
    return pc.subtract(quotient, pc.cast(pc.less(remainder, 0), array.type))


def _epoch_ints(source: IcebergType, array: pa.Array) -> pa.Array:
    """An int64 column of the canonical values of a date/time/timestamp column: days, microseconds
    (nanoseconds for ``*_ns``). Arrow columns of any unit are rescaled (flooring); integer columns
    are taken as canonical already."""
    name, arrow_type = str(source), array.type
    if pa.types.is_integer(arrow_type):
        return pc.cast(array, pa.int64())
    if name == "date" and pa.types.is_date(arrow_type):
        return pc.cast(pc.cast(pc.cast(array, pa.date32()), pa.int32()), pa.int64())
    fits = pa.types.is_time(arrow_type) if name == "time" else pa.types.is_timestamp(arrow_type)
    if name != "date" and fits:
        raw = pc.cast(pc.cast(array, pa.int32() if pa.types.is_time32(arrow_type) else pa.int64()), pa.int64())
        have, want = _PER_SECOND[arrow_type.unit], _units_per_second(source)
        return pc.multiply(raw, want // have) if have <= want else _floor_divide(raw, have // want)
    raise InvalidArgument(f"an Arrow {arrow_type} column does not hold Iceberg {source} values")


def _python_values(source: IcebergType, array: pa.Array) -> list[Any]:
    """A column's values in the canonical Python representation."""
    name = str(source)
    if name in ("date", "time") or name in _TIMESTAMPS:
        ints: list[Any] = _epoch_ints(source, array).to_pylist()
        return ints
    return [canonical(source, v) for v in array.to_pylist()]


@dataclass(frozen=True)
class Transform(ABC):
    """A partition (or sort) transform; ``str()`` is its spec spelling (Appendix C)."""

    name: ClassVar[str]

    def __str__(self) -> str:
        return self.name

    @abstractmethod
    def can_transform(self, source: IcebergType) -> bool:
        """Whether the spec lists ``source`` among this transform's source types."""

    def _result_type(self, source: IcebergType) -> IcebergType:
        return source

    @abstractmethod
    def _apply(self, source: IcebergType, value: Any) -> Any: ...

    @abstractmethod
    def _apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array: ...

    def result_type(self, source: IcebergType) -> IcebergType:
        """The partition value's type for a ``source`` column (the spec's "Result type")."""
        self._check(source)
        return self._result_type(source)

    def apply(self, source: IcebergType, value: Any) -> Any:
        """The partition value of ``value``; null stays null ("All transforms must return null for a
        null input value")."""
        self._check(source)
        return None if value is None else self._apply(source, value)

    def apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        """The partition values of a whole column; nulls stay null. Results are Arrow forms of the
        canonical values: int32 for year/month/day/hour/bucket (day: days since 1970)."""
        self._check(source)
        return self._apply_arrow(source, array)

    def to_human(self, source: IcebergType, value: Any) -> str:
        """A partition value (this transform's result) as its partition directory segment names it,
        before URL escaping: ``2017``, ``2017-11``, ``2017-11-16``, ``2017-11-16-22``, ``null``."""
        if value is None:
            return "null"
        try:
            return self._human(source, value)
        except (OverflowError, ValueError, TypeError) as exc:
            raise InvalidArgument(f"{value!r} is not a {self} partition value of a {source} column") from exc

    def _human(self, source: IcebergType, value: Any) -> str:
        return _human(self._result_type(source), value)

    def _check(self, source: IcebergType) -> None:
        if not self.can_transform(source):
            raise ProtocolError(f"partition transform {self} cannot be applied to a {source} column")


def _is_primitive(source: IcebergType) -> bool:
    return isinstance(source, PrimitiveType | DecimalType | FixedType)


@dataclass(frozen=True)
class IdentityTransform(Transform):
    name = "identity"

    def can_transform(self, source: IcebergType) -> bool:
        return _is_primitive(source)

    def _apply(self, source: IcebergType, value: Any) -> Any:
        return value

    def _apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        return array


@dataclass(frozen=True)
class VoidTransform(Transform):
    """Always null, typed as its source (the spec allows "Source type or int")."""

    name = "void"

    def can_transform(self, source: IcebergType) -> bool:
        return True

    def _apply(self, source: IcebergType, value: Any) -> Any:
        return None

    def _apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        return pa.nulls(len(array), array.type)


def _check_positive(what: str, number: int) -> None:
    if isinstance(number, bool) or not isinstance(number, int) or number <= 0:
        raise InvalidArgument(f"{what} must be a positive integer, got {number!r}")


@dataclass(frozen=True)
class BucketTransform(Transform):
    """``bucket[N]``: ``(murmur3_x86_32(v) & Integer.MAX_VALUE) % N``."""

    name = "bucket"
    num_buckets: int

    def __post_init__(self) -> None:
        _check_positive("the number of buckets", self.num_buckets)

    def __str__(self) -> str:
        return f"{self.name}[{self.num_buckets}]"

    def can_transform(self, source: IcebergType) -> bool:
        name = str(source)
        return (
            name in _LONG_HASHED
            or name in _TIMESTAMPS
            or name in _BYTES_HASHED
            or isinstance(source, DecimalType | FixedType)
        )

    def _result_type(self, source: IcebergType) -> IcebergType:
        return _INT

    def _apply(self, source: IcebergType, value: Any) -> Any:
        return (bucket_hash(source, value) & _INT_MAX) % self.num_buckets

    def _apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        values = _python_values(source, array)
        return pa.array([None if v is None else self._apply(source, v) for v in values], pa.int32())


@dataclass(frozen=True)
class TruncateTransform(Transform):
    """``truncate[W]``: ints and decimals down to a multiple of W (of the unscaled value), strings
    to W code points, binary to W bytes."""

    name = "truncate"
    width: int

    def __post_init__(self) -> None:
        _check_positive("the truncate width", self.width)

    def __str__(self) -> str:
        return f"{self.name}[{self.width}]"

    def can_transform(self, source: IcebergType) -> bool:
        return str(source) in ("int", "long", "string", "binary") or isinstance(source, DecimalType)

    def _truncate_number(self, number: int) -> int:
        return number - (((number % self.width) + self.width) % self.width)

    def _out_of_range(self, source: IcebergType, value: Any) -> InvalidArgument:
        return InvalidArgument(f"{self} of {value} is below the smallest {source}: it has no partition value")

    def _apply(self, source: IcebergType, value: Any) -> Any:
        if isinstance(source, DecimalType):
            unscaled = self._truncate_number(decimal_unscaled(source, value))
            if unscaled <= -(10**source.precision):
                raise self._out_of_range(source, value)
            return decimal_from_unscaled(source, unscaled)
        name = str(source)
        if name in ("int", "long"):
            truncated = self._truncate_number(value)
            if truncated < _SMALLEST[name]:
                raise self._out_of_range(source, value)
            return truncated
        return value[: self.width]  # str slices by code point, bytes by byte

    def _apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        name = str(source)
        if name in ("int", "long"):
            wide = pc.cast(array, pa.int64())
            try:  # checked: a silently wrapped result would file the row under a wrong partition
                return pc.cast(pc.multiply_checked(_floor_divide(wide, self.width), self.width), array.type)
            except pa.ArrowInvalid as exc:
                raise self._out_of_range(source, pc.min(array).as_py()) from exc
        if name == "string":
            return pc.utf8_slice_codeunits(array, 0, self.width)  # counts code points, not bytes
        if name == "binary":
            return pc.binary_slice(array, 0, self.width)
        return pa.array([None if v is None else self._apply(source, v) for v in array.to_pylist()], array.type)


@dataclass(frozen=True)
class _TimeTransform(Transform):
    """year, month, day, hour: whole units since 1970-01-01T00:00, floored."""

    def can_transform(self, source: IcebergType) -> bool:
        name = str(source)
        return name == "date" or name in _TIMESTAMPS

    def _result_type(self, source: IcebergType) -> IcebergType:
        return _INT

    @staticmethod
    def _days(source: IcebergType, value: int) -> int:
        return value if str(source) == "date" else value // (86_400 * _units_per_second(source))

    @staticmethod
    def _days_arrow(source: IcebergType, array: pa.Array) -> pa.Array:
        ints = _epoch_ints(source, array)
        return ints if str(source) == "date" else _floor_divide(ints, 86_400 * _units_per_second(source))


@dataclass(frozen=True)
class YearTransform(_TimeTransform):
    name = "year"

    def _apply(self, source: IcebergType, value: Any) -> Any:
        return _civil(self._days(source, value))[0] - 1970

    def _apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        dates = pc.cast(pc.cast(self._days_arrow(source, array), pa.int32()), pa.date32())
        return pc.cast(pc.subtract(pc.year(dates), 1970), pa.int32())

    def _human(self, source: IcebergType, value: Any) -> str:
        return f"{1970 + value:04d}"


@dataclass(frozen=True)
class MonthTransform(_TimeTransform):
    name = "month"

    def _apply(self, source: IcebergType, value: Any) -> Any:
        year, month, _ = _civil(self._days(source, value))
        return (year - 1970) * 12 + month - 1

    def _apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        dates = pc.cast(pc.cast(self._days_arrow(source, array), pa.int32()), pa.date32())
        months = pc.add(pc.multiply(pc.subtract(pc.year(dates), 1970), 12), pc.subtract(pc.month(dates), 1))
        return pc.cast(months, pa.int32())

    def _human(self, source: IcebergType, value: Any) -> str:
        years, month = divmod(value, 12)
        return f"{1970 + years:04d}-{month + 1:02d}"


@dataclass(frozen=True)
class DayTransform(_TimeTransform):
    """Days since 1970-01-01, typed ``date`` (see the module docstring)."""

    name = "day"

    def _result_type(self, source: IcebergType) -> IcebergType:
        return _DATE

    def _apply(self, source: IcebergType, value: Any) -> Any:
        return self._days(source, value)

    def _apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        return pc.cast(self._days_arrow(source, array), pa.int32())


@dataclass(frozen=True)
class HourTransform(_TimeTransform):
    name = "hour"

    def can_transform(self, source: IcebergType) -> bool:
        return str(source) in _TIMESTAMPS

    def _apply(self, source: IcebergType, value: Any) -> Any:
        return value // (_SECONDS_PER_HOUR * _units_per_second(source))

    def _apply_arrow(self, source: IcebergType, array: pa.Array) -> pa.Array:
        per_hour = _SECONDS_PER_HOUR * _units_per_second(source)
        return pc.cast(_floor_divide(_epoch_ints(source, array), per_hour), pa.int32())

    def _human(self, source: IcebergType, value: Any) -> str:
        days, hour = divmod(value, 24)
        return f"{_human_date(days)}-{hour:02d}"


_BY_NAME: dict[str, Transform] = {
    str(t): t
    for t in (IdentityTransform(), VoidTransform(), YearTransform(), MonthTransform(), DayTransform(), HourTransform())
}
_WITH_ARGUMENT = {t.name: t for t in (BucketTransform, TruncateTransform)}
_VALID_FORMS = "identity, bucket[N], truncate[W], year, month, day, hour, void (N, W positive integers)"
_WELL_FORMED = re.compile(r"(?P<name>[a-z][a-z0-9_]*)(?:\[(?P<argument>[^\[\]]*)\])?", re.IGNORECASE)


def parse_transform(text: str) -> Transform:
    """The transform a partition field or sort field names (Appendix C), surrounding whitespace
    trimmed. Malformed: :class:`ProtocolError` quoting ``text`` and listing the valid forms; a
    well-formed name the spec does not define: :class:`UnsupportedFeature` naming it."""
    match = _WELL_FORMED.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ProtocolError(f"malformed partition transform {text!r}; valid forms: {_VALID_FORMS}")
    name, argument = match["name"].lower(), match["argument"]
    if argument is None and name in _BY_NAME:
        return _BY_NAME[name]
    positive = argument is not None and argument.isascii() and argument.isdigit() and int(argument) > 0
    if name in _WITH_ARGUMENT and positive:
        return _WITH_ARGUMENT[name](int(argument or 0))
    if name in _BY_NAME or name in _WITH_ARGUMENT:
        raise ProtocolError(f"malformed partition transform {text!r}; valid forms: {_VALID_FORMS}")
    raise UnsupportedFeature(f"partition transform {text!r} is not supported; lakeops knows {_VALID_FORMS}")
