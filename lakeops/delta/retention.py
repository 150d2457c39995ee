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
from lakeops.units import format_duration, parse_delta_interval

if TYPE_CHECKING:
    from lakeops.delta.snapshot import DeltaSnapshot

DEFAULT_LOG_RETENTION = "interval 30 days"
DEFAULT_DELETED_FILE_RETENTION = "interval 1 week"


def table_retention(metadata: Metadata, table: str, property_name: str, default: str) -> timedelta:
    """The interval a retention property holds, or ``default``; a malformed value names the property."""
    text = metadata.configuration.get(property_name, default)
    try:
        return parse_delta_interval(text)
    except InvalidArgument as exc:
        raise ProtocolError(f"{table}: table property {property_name}={text!r} is not an interval ({exc})") from exc


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
