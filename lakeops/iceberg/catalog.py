"""Where an Iceberg table's current metadata file is, and the atomic swap that commits a new one
("Optimistic Concurrency", "File System Tables", "Metastore Tables" in the Iceberg spec).

Several catalogs, one contract: :meth:`Catalog.current` names the current metadata file and
:meth:`Catalog.swap` replaces it only if it is still the one the writer started from.

- :class:`FileSystemCatalog`: a table is a location; version ``N`` is ``metadata/vN.metadata.json``,
  created with put-if-absent (the creation *is* the commit) and ``metadata/version-hint.text`` is
  rewritten afterwards as a hint only.
- :class:`~lakeops.iceberg.sql_catalog.SqlCatalog`: the tables PyIceberg's ``SqlCatalog`` uses, in a
  module of its own so that only a command on a catalogued table imports SQLAlchemy.
- :class:`~lakeops.iceberg.glue_catalog.GlueCatalog`: an AWS Glue Data Catalog table's parameters,
  in a module of its own so that only a command on a Glue table imports boto3's Glue client.
- :class:`~lakeops.iceberg.rest_catalog.RestCatalog`: an Iceberg REST catalog, whose server writes
  the metadata file from the changes it is sent.

Which one serves a table address: :meth:`lakeops.iceberg.table_ref.TableRef.catalog`.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from lakeops.errors import (
    AlreadyExists,
    CommitConflict,
    CommitStateUnknown,
    InvalidArgument,
    NotATable,
    StorageError,
)
from lakeops.storage import Storage
from lakeops.storage.uri import join, normalize

if TYPE_CHECKING:  # a Delta command imports this module (table addresses) but never Iceberg's metadata
    from lakeops.iceberg.metadata import TableMetadata

METADATA_DIR = "metadata"
VERSION_HINT = "version-hint.text"
ICEBERG_TABLE_TYPE = "TABLE"
_FS_VERSION = re.compile(r"^v(\d+)\.metadata\.json$")
_SQL_VERSION = re.compile(r"^(\d+)-[0-9a-fA-F-]{36}\.metadata\.json$")


@dataclass(frozen=True)
class TableIdentifier:
    """``namespace.table``; namespaces may have several levels (``a.b.table``)."""

    namespace: str
    name: str

    @classmethod
    def parse(cls, text: str) -> TableIdentifier:
        namespace, _, name = text.rpartition(".")
        if not namespace or not name or any(not part for part in text.split(".")):
            raise InvalidArgument(f"bad table identifier {text!r}: expected namespace.table")
        return cls(namespace, name)

    def __str__(self) -> str:
        return f"{self.namespace}.{self.name}"


class Catalog(Protocol):
    """The metadata pointer of one table."""

    table: str  # for messages: a location or namespace.table

    def current(self) -> str:
        """The current metadata file's location; :class:`NotATable` if there is none."""
        ...

    def new_metadata_location(self, table_location: str, current: str) -> str:
        """Where the next metadata file goes (the catalog decides the naming)."""
        ...

    def swap(self, expected: str, new: str, payload: bytes) -> str:
        """Write ``payload`` at ``new`` and make it current if ``expected`` still is; returns the
        location the catalog names as current (``new``, or the file a catalog that writes metadata
        itself chose).

        Raises :class:`CommitConflict` when the catalog refused (``new`` is removed when it was
        written and nobody else can know it) or :class:`CommitStateUnknown` when it gave no verdict.
        Neither answer, nor a success, is the outcome: :mod:`lakeops.iceberg.commit` reads the table
        back to decide (:mod:`lakeops.commit_outcome`).
        """
        ...

    def could_land(
        self, expected: str, base: TableMetadata, new: TableMetadata, now_location: str, now: TableMetadata
    ) -> bool:
        """Whether a swap from ``base`` (current at ``expected``) to ``new`` could still land on the
        table as read back (``now``, current at ``now_location``): the catalog's condition still holds."""
        ...


def pointer_unmoved(
    expected: str, base: TableMetadata, new: TableMetadata, now_location: str, now: TableMetadata
) -> bool:
    """:meth:`Catalog.could_land` of a catalog whose swap is conditional on the pointer alone (a file
    created only if absent, ``UPDATE ... WHERE metadata_location = expected``, a Glue ``VersionId``):
    once the pointer moved off ``expected``, the swap can never land."""
    return now_location == expected


def metadata_version(location: str) -> int | None:
    """The version number in a metadata file name (``v3.metadata.json`` / ``00003-<uuid>.metadata.json``)."""
    name = location.rsplit("/", 1)[-1]
    match = _FS_VERSION.match(name) or _SQL_VERSION.match(name)
    return int(match.group(1)) if match else None


def numbered_metadata_location(table_location: str, current: str) -> str:
    """``<location>/metadata/<N+1, 5 digits>-<uuid>.metadata.json``: the naming metastore catalogs
    (PyIceberg's SQL and Glue catalogs, Java's) give the file after ``current``."""
    version = metadata_version(current)
    next_version = 0 if version is None else version + 1
    location = normalize(table_location, literal=True)  # the metadata's ``location``: an Iceberg path
    return join(location, METADATA_DIR, f"{next_version:05d}-{uuid.uuid4()}.metadata.json")


class FileSystemCatalog:
    """A table addressed by its location; commits by creating ``vN.metadata.json`` exclusively."""

    def __init__(self, storage: Storage, location: str) -> None:
        self.storage = storage
        self.location = location
        self.table = location

    def _metadata_files(self) -> tuple[dict[int, str], list[str]]:
        """``vN.metadata.json`` files by N, and the names of catalog-numbered ones (``NNNNN-<uuid>``)."""
        prefix = join(self.location, METADATA_DIR)
        found: dict[int, str] = {}
        numbered: list[str] = []
        for info in self.storage.list(prefix):
            name = info.path[len(prefix) + 1 :]
            if match := _FS_VERSION.match(name):
                found[int(match.group(1))] = info.path
            elif _SQL_VERSION.match(name):
                numbered.append(name)
        return found, numbered

    def current(self) -> str:
        """The highest ``vN.metadata.json``. ``version-hint.text`` is only a hint that can lag a
        commit (it is written after the commit), so the listing decides. A folder holding only
        catalog-numbered files belongs to a catalog, which alone knows which of them is current."""
        files, numbered = self._metadata_files()
        if not files and numbered:
            raise NotATable(
                f"{self.location}: a catalog-managed Iceberg table (metadata/{max(numbered)} and "
                f"{len(numbered) - 1} more, named by a catalog): only its catalog knows the current one; "
                "address it as NAMESPACE.TABLE with --catalog-uri (or --catalog-type glue / rest)"
            )
        if not files:
            raise NotATable(f"{self.location}: no Iceberg metadata (no metadata/v<N>.metadata.json files)")
        return files[max(files)]

    def new_metadata_location(self, table_location: str, current: str) -> str:
        version = metadata_version(current)
        if version is None:
            raise InvalidArgument(f"{current}: not a file-system table metadata file name (v<N>.metadata.json)")
        return join(self.location, METADATA_DIR, f"v{version + 1}.metadata.json")

    def swap(self, expected: str, new: str, payload: bytes) -> str:
        if self.current() != expected:
            raise CommitConflict(f"{self.table}: the table changed since {expected.rsplit('/', 1)[-1]}")
        try:
            self.storage.put_if_absent(new, payload)
        except AlreadyExists as exc:
            raise CommitConflict(f"{self.table}: another writer committed {new.rsplit('/', 1)[-1]} first") from exc
        except StorageError as exc:  # the creation is the commit: the table read back decides
            raise CommitStateUnknown(f"{self.table}: creating {new} failed ({exc})") from exc
        # The hint is advisory: readers that list find the new version even if this write fails.
        with contextlib.suppress(StorageError):
            self.storage.write(join(self.location, METADATA_DIR, VERSION_HINT), f"{metadata_version(new)}".encode())
        return new

    could_land = staticmethod(pointer_unmoved)
