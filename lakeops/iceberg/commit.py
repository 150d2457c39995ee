"""Committing a change to an Iceberg table: optimistic concurrency with retries ("Optimistic
Concurrency", "Commit Conflict Resolution and Retry", "Table Metadata Fields": ``metadata-log``).

A :class:`TableChange` is applied to the table's current metadata and the catalog swaps the pointer
only if nobody committed in between. When somebody did, the change is re-validated against the new
current state — the spec's rule is that an update retries only when the conditions it relies on
still hold — and re-applied to it. Retries follow the table properties ``commit.retry.num-retries``,
``commit.retry.min-wait-ms``, ``commit.retry.max-wait-ms`` and ``commit.retry.total-timeout-ms``
(exponential backoff with jitter).

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

from lakeops.errors import CommitConflict, LakeopsError
from lakeops.iceberg.metadata import MetadataLogEntry, TableMetadata, TableOperation, serialize_metadata
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
            num_retries=metadata.int_property("commit.retry.num-retries", defaults.num_retries),
            min_wait_ms=metadata.int_property("commit.retry.min-wait-ms", defaults.min_wait_ms),
            max_wait_ms=metadata.int_property("commit.retry.max-wait-ms", defaults.max_wait_ms),
            total_timeout_ms=metadata.int_property("commit.retry.total-timeout-ms", defaults.total_timeout_ms),
        )

    def wait_ms(self, retry: int) -> float:
        """Backoff before retry number ``retry`` (1-based): doubling from the minimum, capped, with
        up to 10% jitter so racing writers do not retry in lockstep."""
        base = min(self.max_wait_ms, self.min_wait_ms * 2 ** (retry - 1))
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


def _with_history(base: IcebergTable, new: TableMetadata, now_ms: int) -> tuple[TableMetadata, list[str]]:
    """``new`` with the base metadata file added to ``metadata-log`` (trimmed to
    ``write.metadata.previous-versions-max``) and ``last-updated-ms`` set; also the metadata files
    trimmed from the log."""
    keep = max(base.metadata.int_property("write.metadata.previous-versions-max", DEFAULT_PREVIOUS_VERSIONS_MAX), 1)
    log = [
        *new.metadata_log,
        MetadataLogEntry.model_validate(
            {"metadata-file": base.metadata_location, "timestamp-ms": base.metadata.last_updated_ms}
        ),
    ]
    trimmed = [e.metadata_file for e in log[:-keep]]
    updated = new.model_copy(
        update={"metadata_log": tuple(log[-keep:]), "last_updated_ms": max(now_ms, base.metadata.last_updated_ms)}
    )
    return updated, trimmed


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
            new, trimmed = _with_history(current, change.apply(current), int(time.time() * 1000))
            location = current.catalog.new_metadata_location(current.metadata.location, current.metadata_location)
        except BaseException:
            change.abandon(None)  # nothing was sent to the catalog: every file of every attempt can go
            raise
        try:
            landed = current.catalog.swap(current.metadata_location, location, serialize_metadata(new))
        except CommitConflict:
            if attempt > policy.num_retries or time.monotonic() >= deadline:
                change.abandon(None)
                raise
            sleep(policy.wait_ms(attempt) / 1000)
            current = current.refresh()
            continue
        if landed != location:  # the catalog wrote the metadata file itself (REST): read what it wrote
            new = read_metadata(current.storage, landed, current.name)
        committed = IcebergTable(current.ref, current.catalog, current.storage_options, landed, new)
        change.abandon(new)
        if trimmed and new.properties.get("write.metadata.delete-after-commit.enabled", "false").lower() == "true":
            _delete_trimmed(committed, trimmed)
        return CatalogCommit(committed, attempt)


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
