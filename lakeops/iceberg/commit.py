"""Committing a change to an Iceberg table: optimistic concurrency with retries ("Optimistic
Concurrency", "Commit Conflict Resolution and Retry", "Table Metadata Fields": ``metadata-log``).

A :class:`TableChange` is applied to the table's current metadata and the catalog swaps the pointer
only if nobody committed in between. When somebody did, the change is re-validated against the new
current state — the spec's rule is that an update retries only when the conditions it relies on
still hold — and re-applied to it. Retries follow the table properties ``commit.retry.num-retries``,
``commit.retry.min-wait-ms``, ``commit.retry.max-wait-ms`` and ``commit.retry.total-timeout-ms``
(exponential backoff with jitter).

The catalog's answer to a swap never decides the outcome (:mod:`lakeops.commit_outcome`): only a
success naming metadata that holds the change does; after anything else (a 409, a 5xx, a lost answer,
a 200 naming older metadata or metadata without the change) the table is read back. It holds the
change when its snapshots list every snapshot the change added and none it removed, and keep none of
the refs it dropped (a change that does neither: when the current metadata file is the one lakeops
wrote, byte for byte). Whatever follows the commit is computed from the metadata read back: the
files of other attempts abandoned, the metadata files trimmed off its ``metadata-log``.

Outcomes are types: success returns :class:`CatalogCommit`; a change that no longer applies raises
:class:`~lakeops.errors.CommitConflict` after removing every file its attempts wrote; an unknown
outcome raises :class:`~lakeops.errors.CommitStateUnknown` and deletes nothing, because the
metadata that references those files may be current.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from lakeops.commit_outcome import Answer, Landmarks, settle
from lakeops.errors import CommitConflict, CommitStateUnknown, LakeopsError
from lakeops.iceberg.metadata import MetadataLogEntry, TableMetadata, TableOperation, serialize_metadata
from lakeops.iceberg.properties import (
    COMMIT_MAX_RETRY_WAIT_MS,
    COMMIT_MIN_RETRY_WAIT_MS,
    COMMIT_NUM_RETRIES,
    COMMIT_TOTAL_RETRY_TIME_MS,
    METADATA_DELETE_AFTER_COMMIT_ENABLED,
    METADATA_PREVIOUS_VERSIONS_MAX,
)
from lakeops.iceberg.table import IcebergTable, read_metadata
from lakeops.storage.uri import normalize

__all__ = ["CatalogCommit", "RetryPolicy", "TableChange", "commit_change"]

DEFAULT_PREVIOUS_VERSIONS_MAX = 100
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
#: A metadata file name: ``v<V>`` (file-system tables) or ``<V>-<uuid>`` (metastore tables), then
#: ``.metadata.json``, ``.gz.metadata.json`` (GZIP) or the legacy ``.metadata.json.gz``.
_METADATA_FILE = re.compile(rf"^(?:v\d+|\d+-{_UUID})(?:\.gz\.metadata\.json|\.metadata\.json(?:\.gz)?)$")
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """The ``commit.retry.*`` table properties (defaults as the reference implementation's)."""

    num_retries: int = 4
    min_wait_ms: int = 100
    max_wait_ms: int = 60_000
    total_timeout_ms: int = 1_800_000

    @classmethod
    def of(cls, metadata: TableMetadata) -> RetryPolicy:
        defaults = cls()
        return cls(
            num_retries=metadata.int_property(COMMIT_NUM_RETRIES, defaults.num_retries),
            min_wait_ms=metadata.int_property(COMMIT_MIN_RETRY_WAIT_MS, defaults.min_wait_ms),
            max_wait_ms=metadata.int_property(COMMIT_MAX_RETRY_WAIT_MS, defaults.max_wait_ms),
            total_timeout_ms=metadata.int_property(COMMIT_TOTAL_RETRY_TIME_MS, defaults.total_timeout_ms),
        )

    def wait_ms(self, retry: int) -> float:
        """Backoff before retry number ``retry`` (1-based): doubling from the minimum, capped, with
        up to 10% jitter so racing writers do not retry in lockstep."""
        doubling: int = 2 ** (retry - 1)
        base = min(self.max_wait_ms, self.min_wait_ms * doubling)
        return base * (1 + random.random() / 10)


class TableChange(Protocol):
    """One change, re-applicable to a newer base."""

    def validate(self, start: IcebergTable, current: IcebergTable) -> None:
        """Raise :class:`CommitConflict` if commits since ``start`` make this change invalid."""
        ...

    def apply(self, current: IcebergTable) -> TableMetadata:
        """The new metadata on top of ``current`` (may write files, e.g. a manifest list)."""
        ...

    def abandon(self, committed: TableMetadata | None) -> None:
        """Delete the files attempts wrote that ``committed`` does not reference (all when None)."""
        ...


@dataclass(frozen=True)
class CatalogCommit:
    table: IcebergTable
    attempts: int

    @property
    def metadata(self) -> TableMetadata:
        return self.table.metadata


def _with_history(base: IcebergTable, new: TableMetadata, now_ms: int) -> TableMetadata:
    """``new`` with the base metadata file added to ``metadata-log`` (trimmed to
    ``write.metadata.previous-versions-max``) and ``last-updated-ms`` set."""
    keep = max(base.metadata.int_property(METADATA_PREVIOUS_VERSIONS_MAX, DEFAULT_PREVIOUS_VERSIONS_MAX), 1)
    log = [
        *new.metadata_log,
        MetadataLogEntry.model_validate(
            {"metadata-file": base.metadata_location, "timestamp-ms": base.metadata.last_updated_ms}
        ),
    ]
    return new.model_copy(
        update={"metadata_log": tuple(log[-keep:]), "last_updated_ms": max(now_ms, base.metadata.last_updated_ms)}
    )


def commit_change(
    start: IcebergTable,
    change: TableChange,
    *,
    current: IcebergTable | None = None,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
    operation: TableOperation = "commit",
) -> CatalogCommit:
    """Commit ``change``, planned on ``start``, on top of ``current`` (default: ``start``), retrying
    on conflicts while it still applies, per ``policy`` (default: the table's ``commit.retry.*``).
    Whenever the base is not ``start``, the change is first validated against it. ``operation`` is
    checked against the current table's format version (another writer may have upgraded it)."""
    current = current or start
    policy = policy or RetryPolicy.of(current.metadata)
    deadline = time.monotonic() + policy.total_timeout_ms / 1000
    attempt = 0
    while True:
        attempt += 1
        try:
            current.metadata.check_writable(operation)
            if current.metadata_location != start.metadata_location:
                change.validate(start, current)  # a conflict here is final: the change no longer applies
            new = _with_history(current, change.apply(current), int(time.time() * 1000))
            location = current.catalog.new_metadata_location(current.metadata.location, current.metadata_location)
        except BaseException:
            change.abandon(None)  # nothing was sent to the catalog: every file of every attempt can go
            raise
        try:
            committed = _swap(current, new, location)
        except CommitConflict:
            if attempt > policy.num_retries or time.monotonic() >= deadline:
                change.abandon(None)
                raise
            sleep(policy.wait_ms(attempt) / 1000)
            current = current.refresh()
            continue
        change.abandon(committed.metadata)
        trimmed = _trimmed(current, committed)
        if trimmed and committed.metadata.properties.get(METADATA_DELETE_AFTER_COMMIT_ENABLED, "").lower() == "true":
            _delete_trimmed(committed, trimmed)
        return CatalogCommit(committed, attempt)


def _swap(current: IcebergTable, new: TableMetadata, location: str) -> IcebergTable:
    """Ask the catalog to make ``new`` (proposed at ``location``) current over ``current``, and return
    the table as it holds the change, read back unless the answer named metadata that holds it."""
    payload = serialize_metadata(new)
    answer, claimed = Answer.ACCEPTED, None
    failure: LakeopsError | None = None
    try:
        named = current.catalog.swap(current.metadata_location, location, payload)
    except CommitConflict as exc:
        answer, failure = Answer.REFUSED, exc
    except CommitStateUnknown as exc:
        answer, failure = Answer.NO_VERDICT, exc
    else:
        claimed = _named(current, named, new if named == location else None)
    return settle(current.name, answer, _landmarks(current, new, location, payload), claimed=claimed, failure=failure)


def _named(current: IcebergTable, location: str, metadata: TableMetadata | None) -> IcebergTable | None:
    """The table at the metadata file a catalog's answer named (``metadata``: its content when lakeops
    wrote it); None when that file cannot be read, which leaves the verdict to the table read back."""
    try:
        metadata = metadata or read_metadata(current.storage, location, current.name)
    except LakeopsError as exc:
        _log.warning("%s: the metadata file the catalog named, %s, cannot be read: %s", current.name, location, exc)
        return None
    return IcebergTable(current.ref, current.catalog, current.storage_options, location, metadata)


def _landmarks(current: IcebergTable, new: TableMetadata, location: str, payload: bytes) -> Landmarks[IcebergTable]:
    """How a table read back shows that ``new``, built on ``current``, landed (module docstring), and
    whether the swap could still land on it (the catalog's condition: :meth:`Catalog.could_land`)."""
    base_ids = {s.snapshot_id for s in current.metadata.snapshots}
    new_ids = {s.snapshot_id for s in new.snapshots}
    added, removed = new_ids - base_ids, base_ids - new_ids
    dropped_refs = set(current.metadata.refs) - set(new.refs)

    def holds(table: IcebergTable) -> bool:
        if added or removed or dropped_refs:
            ids = {s.snapshot_id for s in table.metadata.snapshots}
            return added <= ids and not removed & ids and not dropped_refs & set(table.metadata.refs)
        return table.metadata_location == location and _content(table, location) == payload

    def could_land(table: IcebergTable) -> bool:
        return current.catalog.could_land(
            current.metadata_location, current.metadata, new, table.metadata_location, table.metadata
        )

    return Landmarks(read_back=current.refresh, holds=holds, could_land=could_land)


def _content(table: IcebergTable, location: str) -> bytes | None:
    try:
        return table.storage.read(normalize(location, literal=True))
    except LakeopsError:
        return None


def _trimmed(base: IcebergTable, committed: IcebergTable) -> list[str]:
    """The metadata files the base's ``metadata-log`` named (and the base itself) that the committed
    metadata, as read back, no longer names."""
    kept = {committed.metadata_location, *(e.metadata_file for e in committed.metadata.metadata_log)}
    named = [*(e.metadata_file for e in base.metadata.metadata_log), base.metadata_location]
    return [f for f in named if f not in kept]


def _delete_trimmed(committed: IcebergTable, trimmed: list[str]) -> None:
    """Delete the metadata files ``write.metadata.previous-versions-max`` trimmed off the log, as
    ``write.metadata.delete-after-commit.enabled`` asks (https://iceberg.apache.org/docs/latest/configuration/).

    The log's entries are whatever the previous writer put there, so an entry is deleted only if it is a
    metadata file of this table: a metadata file name ("Table Metadata"; "File System Tables" and
    "Metastore Tables" for ``v<V>`` / ``<V>-<uuid>``, https://iceberg.apache.org/spec/), in the directory
    of the metadata file just committed (the table storage refuses it if that directory leads out of the
    table through a symlink), and named nowhere in the new metadata. Any other entry (a data file, a file
    behind a link, another table's metadata) is skipped with a warning; the commit has landed either way,
    so a failed delete is only a warning too: orphan cleanup finds leftovers.
    """
    metadata = committed.metadata
    current = _canonical(committed.metadata_location)
    directory = current.rsplit("/", 1)[0]
    referenced = {current, *(_canonical(e.metadata_file) for e in metadata.metadata_log)}
    referenced |= {_canonical(s.manifest_list) for s in metadata.snapshots if s.manifest_list}
    referenced |= {_canonical(f.statistics_path) for f in metadata.statistics}
    referenced |= {_canonical(f.statistics_path) for f in metadata.partition_statistics}
    doomed = []
    for entry in dict.fromkeys(trimmed):
        path = _canonical(entry)
        folder, _, name = path.rpartition("/")
        if folder != directory or not _METADATA_FILE.match(name) or path in referenced:
            why = "it is still referenced" if path in referenced else f"it is not a metadata file in {directory}"
            _log.warning("%s: metadata-log entry %s is not deleted after the commit: %s", committed.name, entry, why)
            continue
        doomed.append(path)
    try:
        committed.storage.delete_many(doomed)
    except LakeopsError as exc:
        _log.warning("%s: old metadata files were not deleted after the commit: %s", committed.name, exc)


def _canonical(location: str) -> str:
    """``location`` normalised for comparison (an Iceberg path: literal, never percent-decoded), or as
    written when it is no location at all."""
    try:
        return normalize(location, literal=True)
    except LakeopsError:
        return location
