"""Human units used on the command line, in the registry and in reports: durations ("7d"), retentions
and their cutoffs, and sizes ("128MB")."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from lakeops.errors import InvalidArgument

_DURATION_UNITS = {
    "ms": 0.001,
    "s": 1,
    "m": 60,
    "min": 60,
    "h": 3600,
    "d": 86400,
    "w": 7 * 86400,
}
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1024,
    "kib": 1024,
    "mb": 1024**2,
    "mib": 1024**2,
    "gb": 1024**3,
    "gib": 1024**3,
    "tb": 1024**4,
    "tib": 1024**4,
}
#: Sizes are file and byte counts stored as signed 64-bit integers (Parquet, Arrow, the table formats).
MAX_SIZE = 2**63 - 1
_NUMBER_UNIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_duration(text: str | int | float | timedelta) -> timedelta:
    """Parse ``"30d"``, ``"12h"``, ``"90min"``, ``"1500ms"``; a bare number is seconds."""
    if isinstance(text, timedelta):
        return text
    if isinstance(text, int | float):
        return timedelta(seconds=text)
    match = _NUMBER_UNIT.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit is None or (unit and unit not in _DURATION_UNITS):
        raise InvalidArgument(
            f"bad duration {text!r}: expected a number and one of {', '.join(_DURATION_UNITS)} (e.g. '7d')"
        )
    return _timedelta(float(match.group(1)) * _DURATION_UNITS[unit or "s"], f"bad duration {text!r}")


def _timedelta(seconds: float, what: str) -> timedelta:
    """``seconds`` as a timedelta; NaN, or longer than a timedelta holds (about 2.7 million years), is an error."""
    try:
        return timedelta(seconds=seconds)
    except (OverflowError, ValueError):
        raise InvalidArgument(f"{what}: not a duration of at most {timedelta.max.days:,} days") from None


def parse_delta_interval(text: str) -> timedelta:
    """Parse a Delta table property interval such as ``"interval 30 days"`` or ``"7 days"``."""
    words = text.strip().lower().split()
    if words and words[0] == "interval":
        words = words[1:]
    if len(words) != 2:
        raise InvalidArgument(f"bad interval {text!r}: expected 'interval <n> <unit>'")
    number, unit = words
    unit = unit.rstrip("s")
    seconds = {
        "microsecond": 1e-6,
        "millisecond": 1e-3,
        "second": 1,
        "minute": 60,
        "hour": 3600,
        "day": 86400,
        "week": 7 * 86400,
    }.get(unit)
    try:
        value = float(number)
    except ValueError:
        seconds = None
    if seconds is None:
        raise InvalidArgument(f"bad interval {text!r}: unknown unit or number")
    return _timedelta(value * seconds, f"bad interval {text!r}")


def parse_size(text: str | int) -> int:
    """Parse ``"128MB"``, ``"1GiB"``, ``"512kb"`` (binary multiples) or a bare byte count."""
    if isinstance(text, int):
        return text
    match = _NUMBER_UNIT.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit is None or unit not in _SIZE_UNITS:
        raise InvalidArgument(f"bad size {text!r}: expected a number and a unit such as MB or GiB")
    size = int(float(match.group(1)) * _SIZE_UNITS[unit])
    if size > MAX_SIZE:
        raise InvalidArgument(f"bad size {text!r}: larger than {format_size(MAX_SIZE)}, the largest a file can be")
    return size


#: The earliest instant a datetime holds (0001-01-01), in milliseconds since the epoch.
_EARLIEST_MS = int((datetime.min.replace(tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(milliseconds=1))


def instant(ms: int) -> datetime:
    """The UTC time ``ms`` milliseconds after the epoch. A cutoff of "now minus a retention" longer
    than the years since year 1 (``--older-than 800000d``: keep everything) is the earliest datetime
    instead of an error: nothing predates it either."""
    return datetime.fromtimestamp(max(ms, _EARLIEST_MS) / 1000, UTC)


def epoch_ms(when: datetime) -> int:
    """``when`` in exact integer milliseconds since the epoch (the inverse of :func:`instant`); a naive
    time is UTC, as commit timestamps are and as delta-rs reads it. (``int(when.timestamp() * 1000)``
    rounds some exact commit times down by 1 ms, which would skip the very commit the caller named.)"""
    aware = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return (aware - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


def format_size(n: int) -> str:
    """Render a byte count for people: ``134217728`` -> ``"128.0 MiB"``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_utc(timestamp: float) -> str:
    """A moment for people, as a UTC time (``2026-12-02 13:50:20 UTC``): it stays true however late
    it is read, unlike an age."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def format_seconds(seconds: float) -> str:
    """Render a duration for people in the largest unit it reaches: ``0.23 s``, ``12.5 min``, ``45.2 d``."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if abs(seconds) >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.2f} s"


def parse_retention(text: str) -> timedelta:
    """A retention given on the command line (``7d``); a negative one is refused by name."""
    if text.strip().startswith("-"):
        raise InvalidArgument(f"retention {text!r} is negative; give a duration such as '7d'")
    return parse_duration(text)


def format_duration(value: timedelta) -> str:
    """``30d``, ``12h``, ``90s``: the unit the CLI accepts, for messages and reports."""
    seconds = value.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def cutoff_ms(retention: timedelta, now_ms: int) -> int:
    """``now`` minus ``retention``: things older than this are past retention."""
    return now_ms - int(retention.total_seconds() * 1000)
