"""The retention window of Icechunk expiry and garbage collection.

The spec ("Storage Operations": files "are not moved or altered once they are written"; "Deletes -
Delete files that are no longer used (via a garbage-collection operation)") leaves *when* an object
is no longer used to the operator. lakeops applies one window to both operations: something is old
when the object store's modification time is before ``now - retention``. The store's clock is the one
every writer shares (a writer's own clock, recorded as ``written_at``, may be skewed), and it is what
protects a concurrent writer: its objects are younger than any sensible window until it commits.
"""

from __future__ import annotations

from datetime import timedelta

from lakeops.errors import InvalidArgument, UnsafeOperation
from lakeops.units import format_duration

#: Default window, as Delta's VACUUM: a week covers long-running readers and writers.
DEFAULT_RETENTION = timedelta(days=7)


def resolve_retention(root: str, requested: timedelta | None, *, override: bool, override_flag: str) -> timedelta:
    """``requested`` (default :data:`DEFAULT_RETENTION`); shorter than the default only with ``override``.

    A short window is how a maintenance job deletes what a reader opened a minute ago or what a
    writer wrote but has not committed yet, so it must be asked for explicitly.
    """
    if requested is None:
        return DEFAULT_RETENTION
    if requested < timedelta(0):
        raise InvalidArgument(f"{root}: retention {format_duration(requested)} is negative")
    if requested < DEFAULT_RETENTION and not override:
        raise UnsafeOperation(
            f"{root}: retention {format_duration(requested)} is shorter than the default "
            f"{format_duration(DEFAULT_RETENTION)} for Icechunk repositories; snapshots and objects that "
            f"concurrent readers or uncommitted writers still need could be removed. "
            f"Pass {override_flag} only if nothing uses the repository from before that horizon"
        )
    return requested
