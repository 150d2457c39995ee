"""Consumer-aware retention: what a change-feed consumer has extracted, and what the source table
must keep until it has extracted the rest.

A consumer's output records the last source version it holds as a ``txn`` action keyed by the
source's table id (Delta "Transaction Identifiers"; :mod:`lakeops.changefeed.cdf_export`).
Having extracted through version ``w`` it next reads the changes of ``w+1..``, which needs

* the commits from ``w`` on and the state at ``w`` (log expiry keeps them:
  ``ExpiryOptions.keep_from_version = w``), and
* every file those commits retire or write: data files and deletion vectors that ``remove`` actions
  of ``w+1..`` tombstone, and their change data files (VACUUM keeps them when its cutoff is no later
  than the earliest of those removes' ``deletionTimestamp`` and of those commits' times:
  :func:`vacuum_retention`).

An orchestrator extracting by commit time (one day of commits per run) asks :func:`pending_changes`
which versions are still to extract up to a time, and :func:`consumer_floor` which version its
maintenance must keep. Iceberg changelogs (:mod:`lakeops.iceberg.maintenance.changelog`) follow
``main``'s ancestry and keep the sequence number of the last snapshot extracted as the watermark:
the next run resumes from that snapshot, so expiry keeps it and every later one
(``keep_from_version`` is a sequence number there); orphan removal never deletes what a retained
snapshot reaches, so it needs no floor. Commit times are the protocol's (the commit file's modification time, raised
to keep versions ordered, or the in-commit timestamp where the table has them:
:class:`lakeops.delta.commit_time.CommitClock`: the times the change rows' ``_commit_timestamp``
carry). Extraction always continues from the watermark, so a run for a later day also extracts the earlier days still
missing, and a run for a day already covered extracts nothing: no gap, no duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from lakeops.delta.commit_file import parse_commit
from lakeops.delta.commit_time import CommitClock
from lakeops.delta.log_segment import read_log_file
from lakeops.delta.properties import DELETED_FILE_RETENTION_DURATION
from lakeops.delta.retention import DEFAULT_DELETED_FILE_RETENTION, table_retention
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import NotATable, VersionNotFound
from lakeops.iceberg.metadata import Snapshot
from lakeops.ops.table import Table, as_table, handle_of
from lakeops.ops.target import CatalogOptions, IcebergTarget, Target
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize

__all__ = [
    "PendingRange",
    "consumer_floor",
    "extracted_through",
    "pending_changes",
    "vacuum_retention",
]


def _require_delta(source: Table | str, storage_options: StorageOptions | None, what: str) -> Table:
    """A handle on the Delta table ``source`` (a location, or a handle whose state is then reused)."""
    handle = as_table(source, CatalogOptions(), storage_options or StorageOptions())
    handle.target.require("delta", operation=what)
    return handle


def extracted_through(source: Table | str, output: str, storage_options: StorageOptions | None = None) -> int | None:
    """The last version of ``source`` that the change-feed table ``output`` holds (its watermark);
    None when the output does not exist or holds nothing of this source."""
    handle = _require_delta(source, storage_options, "change-feed watermarks")
    return _watermark(output, handle.delta_snapshot().metadata.id, storage_options)


def _watermark(output: str, app_id: str, storage_options: StorageOptions | None) -> int | None:
    """The ``txn`` version the change-feed table ``output`` holds for ``app_id`` (None: no such table
    or transaction). Only read: a table no writer could commit to still tells its watermark."""
    root = normalize(output)
    try:
        txn = load_snapshot(open_storage(root, storage_options), root).txns.get(app_id)
    except NotATable:
        return None
    return txn.version if txn is not None else None


def vacuum_retention(
    location: Table | str,
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
    handle = _require_delta(location, storage_options, "consumer-aware VACUUM")
    storage, snapshot = handle.storage(), handle.delta_snapshot()
    listing = snapshot.listing
    later = sorted(v for v in listing.commits if v > keep_from_version)
    if not later:
        return requested
    retired = [snapshot.clock(storage).timestamp(later[0])]
    for version in later:
        info = listing.commits[version]
        commit = parse_commit(read_log_file(storage, info), version, info.path)
        retired += [r.deletion_timestamp or 0 for r in commit.removes]
    # One millisecond more than "now - earliest": the cutoff then lies at or before that retirement
    # whatever rounding the planner applies, and VACUUM keeps what was retired at or after its cutoff.
    needed = timedelta(milliseconds=now_ms - min(retired) + 1)
    current = requested or table_retention(
        snapshot.metadata, handle.root, DELETED_FILE_RETENTION_DURATION, DEFAULT_DELETED_FILE_RETENTION
    )
    return needed if needed > current else requested


@dataclass(frozen=True)
class PendingRange:
    """What ``lakeops cdc`` still has to extract: ``from_option``/``to_option`` as its ``--from``/``--to``
    take them, the source positions ``first..last`` it covers (Delta versions; Iceberg sequence
    numbers), for logs and run keys, and when ``first`` was committed (how far the consumer lags)."""

    from_option: int
    to_option: int
    first: int
    last: int
    first_committed_ms: int


def _first_needed(source: Table, storage_options: StorageOptions | None, output: str, since_ms: int) -> int | None:
    """The first version the consumer still needs: after its watermark, else the first committed at
    or after ``since_ms`` (when its extraction starts); None when no retained commit qualifies."""
    through = extracted_through(source, output, storage_options)
    if through is not None:
        return through + 1
    return _clock(source).first_at_or_after(since_ms)


def _clock(source: Table) -> CommitClock:
    """Commit times of the table's listed versions, by its latest version's in-commit timestamp settings."""
    return source.delta_snapshot().clock(source.storage())


def _iceberg_pending(
    table: Table, output: str, storage_options: StorageOptions | None, *, since_ms: int
) -> tuple[Snapshot | None, list[Snapshot]]:
    """The snapshot of ``main`` the consumer resumes from (its watermark, else the last one before
    ``since_ms``; None: the table's creation) and those after it, oldest first."""
    metadata = table.iceberg_table().metadata
    head = metadata.current_snapshot()
    chain = list(metadata.ancestors(head.snapshot_id))[::-1] if head is not None else []
    through = _watermark(output, f"iceberg:{metadata.table_uuid}", storage_options)
    if through is None:
        before = [s for s in chain if s.timestamp_ms < since_ms]
        return (before[-1] if before else None), [s for s in chain if s.timestamp_ms >= since_ms]
    start = next((s for s in chain if s.sequence_number == through), None)
    if start is None:
        raise VersionNotFound(
            f"{table.target}: {output} holds the changes up to sequence number {through}, whose snapshot is no longer "
            "on the ancestry of main (expired, or another branch); the consumer cannot resume"
        )
    return start, [s for s in chain if s.sequence_number > through]


def pending_changes(
    source: Table | Target, output: str, *, since_ms: int, until_ms: int, storage_options: StorageOptions | None = None
) -> PendingRange | None:
    """The commits before ``until_ms`` that ``output`` does not hold yet (extraction starting at
    ``since_ms``); None when there are none. A handle's state is reused."""
    handle = handle_of(source, storage_options or StorageOptions())
    if isinstance(handle.target, IcebergTarget):
        # Here, not at the top: the changelog's module graph (compaction, scans, deletes) would
        # otherwise load with every VACUUM and expiry that asks this module for a retention.
        from lakeops.iceberg.maintenance.changelog import FROM_CREATION

        start, after = _iceberg_pending(handle, output, storage_options, since_ms=since_ms)
        todo = [s for s in after if s.timestamp_ms < until_ms]
        if not todo:
            return None
        return PendingRange(
            from_option=start.snapshot_id if start is not None else FROM_CREATION,
            to_option=todo[-1].snapshot_id,
            first=todo[0].sequence_number,
            last=todo[-1].sequence_number,
            first_committed_ms=todo[0].timestamp_ms,
        )
    _require_delta(handle, storage_options, "change-feed ranges")
    first = _first_needed(handle, storage_options, output, since_ms)
    clock = _clock(handle)
    last = clock.latest_at_or_before(until_ms - 1)
    if first is None or last is None or last < first:
        return None
    # The oldest listed commit from ``first`` on (``first`` itself, unless log expiry removed it).
    committed = clock.timestamp(min(v for v in clock.listing.commits if v >= first))
    return PendingRange(first, last, first, last, committed)


def consumer_floor(
    source: Table | Target, output: str, *, since_ms: int, storage_options: StorageOptions | None = None
) -> int | None:
    """The ``keep_from_version`` that keeps every version the consumer still reads readable (Delta:
    the version before the first it needs; Iceberg: the sequence number of the snapshot it resumes
    from), or None when it needs nothing retained. A handle's state is reused."""
    handle = handle_of(source, storage_options or StorageOptions())
    if isinstance(handle.target, IcebergTarget):
        start, _ = _iceberg_pending(handle, output, storage_options, since_ms=since_ms)
        return start.sequence_number if start is not None else 0
    _require_delta(handle, storage_options, "consumer-aware retention")
    first = _first_needed(handle, storage_options, output, since_ms)
    return None if first is None else max(first - 1, 0)
