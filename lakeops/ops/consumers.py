"""Consumer-aware retention: what a change-feed consumer has extracted, and what the source table
must keep until it has extracted the rest.

A consumer's output records the last source version it holds as a ``txn`` action keyed by the
source's table id (Delta "Transaction Identifiers"; :mod:`lakeops.delta.maintenance.cdf_export`).
Having extracted through version ``w`` it next reads the changes of ``w+1..``, which needs

* the commits from ``w`` on and the state at ``w`` (log expiry keeps them:
  ``ExpiryOptions.keep_from_version = w``), and
* every file those commits retire or write: data files and deletion vectors that ``remove`` actions
  of ``w+1..`` tombstone, and their change data files (VACUUM keeps them when its cutoff is no later
  than the earliest of those removes' ``deletionTimestamp`` and of those commits' times:
  :func:`vacuum_retention`).

An orchestrator extracting by commit time (one day of commits per run) asks :func:`pending_changes`
which versions are still to extract up to a time, and :func:`consumer_floor` which version its
maintenance must keep. Commit times are the protocol's (the commit file's modification time, raised
to keep versions ordered: :func:`lakeops.delta.log_segment.commit_timestamps`). Extraction always
continues from the watermark, so a run for a later day also extracts the earlier days still
missing, and a run for a day already covered extracts nothing: no gap, no duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from lakeops.delta.commit_file import parse_commit
from lakeops.delta.log_segment import commit_timestamps, list_log, read_log_file
from lakeops.delta.retention import DEFAULT_DELETED_FILE_RETENTION, DELETED_FILE_RETENTION_PROPERTY, table_retention
from lakeops.delta.snapshot import load_snapshot
from lakeops.delta.writer import read_target
from lakeops.errors import UnsupportedFeature
from lakeops.ops.detect import detect_format
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize

__all__ = ["VersionRange", "consumer_floor", "extracted_through", "pending_changes", "vacuum_retention"]


def _require_delta(location: str, storage_options: StorageOptions | None, what: str) -> str:
    location = normalize(location)
    fmt = detect_format(open_storage(location, storage_options), location)
    if fmt != "delta":
        raise UnsupportedFeature(f"{location}: {what} of {fmt} tables is not available yet")
    return location


def extracted_through(source: str, output: str, storage_options: StorageOptions | None = None) -> int | None:
    """The last version of ``source`` that the change-feed table ``output`` holds (its watermark);
    None when the output does not exist or holds nothing of this source."""
    source = _require_delta(source, storage_options, "change-feed watermarks")
    source_id = load_snapshot(open_storage(source, storage_options), source).metadata.id
    target = read_target(open_storage(output, storage_options), normalize(output))
    return target.txn_version(source_id) if target.exists else None


def vacuum_retention(
    location: str,
    keep_from_version: int,
    requested: timedelta | None,
    storage_options: StorageOptions | None = None,
    *,
    now_ms: int,
) -> timedelta | None:
    """The VACUUM retention (applied at ``now_ms``) that keeps every file a reader of versions
    ``keep_from_version..`` needs: ``requested`` (None: the table's) when that already does, else the
    longer retention whose cutoff falls at the earliest retirement after ``keep_from_version``. A
    remove without ``deletionTimestamp`` counts as retired at 0 (as VACUUM dates it): nothing
    tombstoned is deleted then."""
    location = _require_delta(location, storage_options, "consumer-aware VACUUM")
    storage = open_storage(location, storage_options)
    snapshot = load_snapshot(storage, location)
    listing = snapshot.listing
    times = dict(commit_timestamps(listing))
    later = sorted(v for v in listing.commits if v > keep_from_version)
    if not later:
        return requested
    retired = [times[later[0]]]
    for version in later:
        info = listing.commits[version]
        commit = parse_commit(read_log_file(storage, info), version, info.path)
        retired += [r.deletion_timestamp or 0 for r in commit.removes]
    # One millisecond more than "now - earliest": the cutoff then lies at or before that retirement
    # whatever rounding the planner applies, and VACUUM keeps what was retired at or after its cutoff.
    needed = timedelta(milliseconds=now_ms - min(retired) + 1)
    current = requested or table_retention(
        snapshot.metadata, location, DELETED_FILE_RETENTION_PROPERTY, DEFAULT_DELETED_FILE_RETENTION
    )
    return needed if needed > current else requested


@dataclass(frozen=True)
class VersionRange:
    """Versions ``first..last`` (inclusive) still to extract."""

    first: int
    last: int


def _first_needed(location: str, storage_options: StorageOptions | None, output: str, since_ms: int) -> int | None:
    """The first version the consumer still needs: after its watermark, else the first committed at
    or after ``since_ms`` (when its extraction starts); None when no retained commit qualifies."""
    through = extracted_through(location, output, storage_options)
    if through is not None:
        return through + 1
    listing = list_log(open_storage(location, storage_options), location)
    return next((v for v, ts in commit_timestamps(listing) if ts >= since_ms), None)


def pending_changes(
    source: str, output: str, *, since_ms: int, until_ms: int, storage_options: StorageOptions | None = None
) -> VersionRange | None:
    """The versions committed before ``until_ms`` that ``output`` does not hold yet (extraction
    starting at ``since_ms``); None when there are none."""
    location = _require_delta(source, storage_options, "change-feed ranges")
    first = _first_needed(location, storage_options, output, since_ms)
    listing = list_log(open_storage(location, storage_options), location)
    last = max((v for v, ts in commit_timestamps(listing) if ts < until_ms), default=None)
    if first is None or last is None or last < first:
        return None
    return VersionRange(first, last)


def consumer_floor(
    source: str, output: str, *, since_ms: int, storage_options: StorageOptions | None = None
) -> int | None:
    """The ``keep_from_version`` that keeps every version the consumer still reads readable (the
    version before the first it needs), or None when it needs nothing retained."""
    location = _require_delta(source, storage_options, "consumer-aware retention")
    first = _first_needed(location, storage_options, output, since_ms)
    return None if first is None else max(first - 1, 0)
