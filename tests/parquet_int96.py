"""Parquet's legacy INT96 timestamps decoded (Impala/Spark layout). lakeops reads no INT96 value: their
sort order is undefined, so their statistics give no bounds (:mod:`lakeops.parquet.statistics`)."""

from __future__ import annotations

from lakeops.errors import CorruptFile

_JULIAN_DAY_OF_EPOCH = 2_440_588
_NANOS_PER_DAY = 86_400 * 1_000_000_000


def decode_int96(raw: bytes) -> int:
    """An INT96 timestamp as nanoseconds since the Unix epoch.

    Layout (Impala/Spark convention): 8-byte little-endian nanoseconds of the day, then a 4-byte
    little-endian Julian day number.
    """
    if len(raw) != 12:
        raise CorruptFile(f"INT96 value must be 12 bytes, got {len(raw)}")
    nanos_of_day = int.from_bytes(raw[:8], "little", signed=True)
    julian_day = int.from_bytes(raw[8:], "little", signed=True)
    return (julian_day - _JULIAN_DAY_OF_EPOCH) * _NANOS_PER_DAY + nanos_of_day
