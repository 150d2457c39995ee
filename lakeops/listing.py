"""Listing a table's tree for orphan removal (Iceberg orphans, Delta VACUUM): the top two levels on
the driver, and below them one unit per second-level directory (``data/<partition>``) when there
are more than a threshold, for an executor to list (Spark tasks on a cluster: a 10-million-file
table is not listed by one driver thread).

Every unit lists only below its prefix, refused unless the prefix is inside the table location
(:func:`lakeops.storage.uri.require_within`), and lakeops' own trash and audit directories
(:mod:`lakeops.quarantine`) are never listed. Symlinked directories are not followed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from lakeops.errors import StorageError
from lakeops.quarantine import is_reserved
from lakeops.storage import ConfinedStorage, FileInfo, LocalStorage, Storage, StorageOptions, open_storage
from lakeops.storage.uri import normalize, require_within, scheme

if TYPE_CHECKING:
    from lakeops.storage.s3 import S3Storage

__all__ = [
    "DEFAULT_LISTING_THRESHOLD",
    "ListedFile",
    "ListingUnit",
    "TreeListing",
    "UnitListing",
    "list_tree",
    "list_unit",
    "as_listed",
]

#: More second-level directories than this are listed as units (Spark tasks), fewer on the driver.
DEFAULT_LISTING_THRESHOLD = 100


class ListedFile(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str
    size: int
    mtime_ms: int

    def info(self) -> FileInfo:
        return FileInfo(self.path, self.size, self.mtime_ms)


class ListingUnit(BaseModel):
    """One Spark task's listing: everything under ``prefix`` (inside ``table_location``)."""

    model_config = ConfigDict(frozen=True)

    unit_id: int
    table_location: str
    prefix: str
    storage: StorageOptions


class UnitListing(BaseModel):
    unit_id: int
    files: list[ListedFile]


def as_listed(infos: Iterable[FileInfo]) -> list[ListedFile]:
    return [ListedFile(path=i.path, size=i.size, mtime_ms=i.mtime_ms) for i in infos]


def list_unit(unit: ListingUnit) -> UnitListing:
    """List one prefix recursively (runs in a Spark task)."""
    prefix = require_within(unit.table_location, unit.prefix)
    return UnitListing(unit_id=unit.unit_id, files=as_listed(open_storage(prefix, unit.storage).list(prefix)))


def _local_children(prefix: str) -> tuple[list[FileInfo], list[str]]:
    """One level of :meth:`lakeops.storage.local.LocalStorage.list`: the same files (links to files
    included, sockets, fifos and dangling links not) and the directories it would walk into
    (symlinked ones are not: they could leave the table)."""
    directory = normalize(prefix, literal=True)
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        raise StorageError(f"cannot list directory {directory!r}: {exc.strerror or exc}") from exc
    files: list[FileInfo] = []
    dirs: list[str] = []
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                dirs.append(f"{directory}/{entry.name}")
                continue
            if not entry.is_file():
                continue
            st = entry.stat()
        except FileNotFoundError:
            continue  # deleted since scandir
        except OSError as exc:
            raise StorageError(f"cannot stat {entry.path!r}: {exc.strerror or exc}") from exc
        files.append(FileInfo(f"{directory}/{entry.name}", st.st_size, st.st_mtime_ns // 1_000_000))
    return files, dirs


def _s3_children(storage: S3Storage, prefix: str) -> tuple[list[FileInfo], list[str]]:
    """One level of an S3 prefix, its path taken literally (an Iceberg path is never percent-decoded),
    signed as every request of the storage (keys leased for the prefix, else its own)."""
    bucket, _, key = normalize(prefix, literal=True)[5:].partition("/")
    return storage.list_level(bucket, f"{key}/" if key else "")


def _children(storage: Storage, prefix: str) -> tuple[list[FileInfo], list[str]]:
    """The files directly under ``prefix`` and its subdirectories (the storage protocol only lists
    recursively; a store without a one-level listing is listed whole, on the driver)."""
    if isinstance(storage, ConfinedStorage):  # listing is not confined: list with the store itself
        storage = storage.inner
    if isinstance(storage, LocalStorage):
        return _local_children(prefix)
    if scheme(prefix) == "s3":
        from lakeops.storage.s3 import S3Storage

        if isinstance(storage, S3Storage):
            return _s3_children(storage, prefix)
    return list(storage.list(prefix)), []


@dataclass(frozen=True)
class TreeListing:
    """The files the driver listed, the directories seen, and the prefixes left to units."""

    files: list[FileInfo]
    directories: int
    units: list[ListingUnit]


def list_tree(storage: Storage, location: str, storage_options: StorageOptions, *, threshold: int) -> TreeListing:
    """List ``location`` (normalised) two levels deep on the driver; the second-level directories are
    listed recursively on the driver when at most ``threshold``, else they become units
    (:func:`list_unit`)."""
    files, top = _children(storage, location)
    files = [f for f in files if not is_reserved(location, f.path)]
    top = [d for d in top if not is_reserved(location, d)]
    second: list[str] = []
    for directory in top:
        found, below = _children(storage, directory)
        files += found
        second += below
    if len(second) > threshold:
        units = [
            ListingUnit(unit_id=i, table_location=location, prefix=p, storage=storage_options)
            for i, p in enumerate(second)
        ]
        return TreeListing(files, len(top) + len(second), units)
    for directory in second:
        files += storage.list(directory)
    return TreeListing(files, len(top) + len(second), [])
