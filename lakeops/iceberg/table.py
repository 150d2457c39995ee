"""An Iceberg table as lakeops addresses it: a location (file-system table) or a catalog entry, and
the metadata its catalog currently points at ("File System Tables", "Metastore Tables").

:class:`TableRef` is the JSON-serialisable address that travels in plans; :func:`load_table`
resolves it to the current metadata file and parses it. A pointer to a metadata file that is gone is
reported as such (the catalog row, the file), never as "no table".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lakeops.errors import InvalidArgument, NotFound
from lakeops.iceberg.catalog import Catalog
from lakeops.iceberg.metadata import TableMetadata, parse_metadata
from lakeops.iceberg.properties import WRITE_DATA_PATH, WRITE_METADATA_PATH
from lakeops.iceberg.table_ref import TableRef
from lakeops.storage import Storage, StorageOptions, open_storage
from lakeops.storage.uri import normalize

__all__ = ["IcebergTable", "TableRef", "load_table", "read_metadata", "table_storage"]

#: Table properties that may place data and metadata files outside the table location ("Write properties").
PATH_PROPERTIES = (WRITE_DATA_PATH, WRITE_METADATA_PATH)


@dataclass(frozen=True)
class IcebergTable:
    """One table at one metadata version."""

    ref: TableRef
    catalog: Catalog
    storage_options: StorageOptions
    metadata_location: str
    metadata: TableMetadata

    @property
    def name(self) -> str:
        return str(self.ref)

    @property
    def storage(self) -> Storage:
        """The store the table's files (data, manifests, metadata) live on, confined to them."""
        return table_storage(self.metadata.location, self.metadata.properties, self.storage_options)

    def refresh(self) -> IcebergTable:
        """The table as its catalog points at it now; the table's UUID must not have changed
        ("Table Metadata Fields": ``table-uuid``)."""
        fresh = load_table(self.ref, self.storage_options, catalog=self.catalog)
        if self.metadata.table_uuid is not None and fresh.metadata.table_uuid != self.metadata.table_uuid:
            raise InvalidArgument(
                f"{self.name}: table-uuid changed from {self.metadata.table_uuid} to {fresh.metadata.table_uuid}: "
                "the table was dropped and re-created"
            )
        return fresh


def table_storage(location: str, properties: Mapping[str, str], storage_options: StorageOptions) -> Storage:
    """The storage of a table's files: deletes, moves and writes confined to its location and to the data
    and metadata paths its properties name (:data:`PATH_PROPERTIES`), symlinks resolved. All are Iceberg
    paths, taken literally (:mod:`lakeops.storage.uri`)."""
    also = [normalize(properties[p], literal=True) for p in PATH_PROPERTIES if properties.get(p)]
    return open_storage(normalize(location, literal=True), storage_options, also=also)


def read_metadata(storage: Storage, location: str, table: str) -> TableMetadata:
    """Parse the metadata file at ``location``; a missing file names the table that points at it."""
    try:
        payload = storage.read(normalize(location, literal=True))  # an Iceberg path: literal
    except NotFound as exc:
        raise NotFound(f"{table}: the current metadata file {location} does not exist") from exc
    return parse_metadata(payload, location)


def load_table(ref: TableRef, storage_options: StorageOptions, *, catalog: Catalog | None = None) -> IcebergTable:
    """The table's current metadata, as its catalog names it."""
    catalog = catalog or ref.catalog(storage_options)
    location = catalog.current()
    metadata = read_metadata(open_storage(normalize(location, literal=True), storage_options), location, str(ref))
    return IcebergTable(ref, catalog, storage_options, location, metadata)
