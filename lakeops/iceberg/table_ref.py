"""Where an Iceberg table is, as lakeops addresses it ("File System Tables", "Metastore Tables"): the
JSON-serialisable address that travels in plans and registry entries, in a module of its own so that
resolving a table's format and options imports none of the Iceberg metadata code."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator

from lakeops.iceberg.catalog import Catalog, FileSystemCatalog, TableIdentifier
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize

__all__ = ["TableRef"]


class TableRef(BaseModel):
    """Where a table is: ``location`` for a file-system table, else ``catalog_uri`` (a SQLAlchemy URL
    of a catalog shared with PyIceberg's ``SqlCatalog``) + ``identifier`` (``namespace.table``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    location: str | None = None
    catalog_uri: str | None = None
    identifier: str | None = None
    catalog_name: str = "default"

    @model_validator(mode="after")
    def _one_address(self) -> TableRef:
        if (self.location is None) == (self.catalog_uri is None):
            raise ValueError("give either a table location or a catalog URI with an identifier")
        if self.catalog_uri is not None and self.identifier is None:
            raise ValueError("a catalog table needs an identifier (namespace.table)")
        return self

    def __str__(self) -> str:
        return self.location if self.location is not None else f"{self.catalog_name}.{self.identifier}"

    def catalog(self, storage_options: StorageOptions) -> Catalog:
        if self.location is not None:
            location = normalize(self.location)
            return FileSystemCatalog(open_storage(location, storage_options), location)
        assert self.catalog_uri is not None and self.identifier is not None
        from lakeops.iceberg.sql_catalog import SqlCatalog  # SQLAlchemy only for a catalogued table

        return SqlCatalog(
            self.catalog_uri,
            TableIdentifier.parse(self.identifier),
            self.catalog_name,
            storage_options=storage_options,
        )
