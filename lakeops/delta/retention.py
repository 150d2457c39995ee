"""Retention properties of a Delta table and the safety check on overriding them.

The protocol leaves how long tombstones ("Add File and Remove File": "A tombstone expires when current
time ... exceeds the expiration threshold added to the remove action timestamp"), log files
("Checkpoints": older JSON entries "deleted after a period of time") and transaction identifiers
are kept to table properties; these are their names and Delta's defaults, read in one place.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from lakeops.delta.actions import Metadata
from lakeops.errors import InvalidArgument, ProtocolError, UnsafeOperation
from lakeops.units import parse_delta_interval, parse_duration

if TYPE_CHECKING:
    from lakeops.delta.snapshot import DeltaSnapshot

LOG_RETENTION_PROPERTY = "delta.logRetentionDuration"
DEFAULT_LOG_RETENTION = "interval 30 days"
DELETED_FILE_RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
DEFAULT_DELETED_FILE_RETENTION = "interval 1 week"
SET_TRANSACTION_RETENTION_PROPERTY = "delta.setTransactionRetentionDuration"


def table_retention(metadata: Metadata, table: str, property_name: str, default: str) -> timedelta:
    """The interval a retention property holds, or ``default``; a malformed value names the property."""
    text = metadata.configuration.get(property_name, default)
    try:
        return parse_delta_interval(text)
    except InvalidArgument as exc:
        raise ProtocolError(f"{table}: table property {property_name}={text!r} is not an interval ({exc})") from exc


def cutoff_ms(retention: timedelta, now_ms: int) -> int:
    """``now`` minus ``retention``: things older than this are past retention."""
    return now_ms - int(retention.total_seconds() * 1000)


def format_duration(value: timedelta) -> str:
    """``30d``, ``12h``, ``90s``: the unit the CLI accepts, for messages and reports."""
    seconds = value.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def parse_retention(text: str) -> timedelta:
    """A retention given on the command line (``7d``); a negative one is refused by name."""
    if text.strip().startswith("-"):
        raise InvalidArgument(f"retention {text!r} is negative; give a duration such as '7d'")
    return parse_duration(text)


def resolve_retention(
    snapshot: DeltaSnapshot,
    requested: timedelta | None,
    *,
    property_name: str,
    default: str,
    override: bool,
    override_flag: str,
    allow_zero: bool,
) -> timedelta:
    """The retention to apply: ``requested`` if given, else the table property, else ``default``.

    A request shorter than the table's own setting is the classic way to destroy files a reader or
    writer still needs, so it is refused unless ``override`` (Delta's retention-duration check).
    """
    table = snapshot.table_root
    configured = table_retention(snapshot.metadata, table, property_name, default)
    if configured < timedelta(0):
        raise InvalidArgument(f"{table}: table property {property_name} is negative ({format_duration(configured)})")
    if requested is None:
        return configured
    if requested < timedelta(0):
        raise InvalidArgument(f"{table}: retention {format_duration(requested)} is negative")
    if requested == timedelta(0) and not allow_zero:
        raise InvalidArgument(f"{table}: retention must be longer than zero")
    if requested < configured and not override:
        raise UnsafeOperation(
            f"{table}: retention {format_duration(requested)} is shorter than the table's {property_name} "
            f"({format_duration(configured)}); files that concurrent readers, writers or time travel still "
            f"need could be deleted. Pass {override_flag} only if nothing uses the table from before that horizon"
        )
    return requested
