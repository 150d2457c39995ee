"""Where an Iceberg table is, as lakeops addresses it ("File System Tables", "Metastore Tables"): the
JSON-serialisable address that travels in plans and registry entries, in a module of its own so that
resolving a table's format and options imports none of the Iceberg metadata code."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator

from lakeops.iceberg.catalog import Catalog, FileSystemCatalog, TableIdentifier
from lakeops.registry import CatalogType
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize

__all__ = ["TableRef"]


class TableRef(BaseModel):
    """Where a table is: ``location`` for a file-system table, else ``identifier`` (``namespace.table``)
    in a catalog of ``catalog_type``: ``sql`` (``catalog_uri`` a SQLAlchemy URL of a catalog shared
    with PyIceberg's ``SqlCatalog``, ``catalog_name`` the catalog within it) or ``glue`` (an AWS Glue
    Data Catalog: ``catalog_uri`` its endpoint, None for AWS; ``catalog_region``; ``catalog_id`` the
    account, None for the caller's)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    location: str | None = None
    catalog_type: CatalogType = "sql"
    catalog_uri: str | None = None
    identifier: str | None = None
    catalog_name: str = "default"
    catalog_region: str | None = None
    catalog_id: str | None = None

    @model_validator(mode="after")
    def _one_address(self) -> TableRef:
        catalogued = self.catalog_uri is not None or self.catalog_type != "sql"
        if (self.location is None) != catalogued:
            raise ValueError("give either a table location or a catalog (a SQL catalog URI) with an identifier")
        if catalogued and self.identifier is None:
            raise ValueError("a catalog table needs an identifier (namespace.table)")
        return self

    def __str__(self) -> str:
        if self.location is not None:
            return self.location
        if self.catalog_type == "glue":  # named by its account, if given; catalog_name is not Glue's
            account = f"{self.catalog_id}." if self.catalog_id else ""
            return f"glue:{account}{self.identifier}"
        return f"{self.catalog_name}.{self.identifier}"

    def catalog(self, storage_options: StorageOptions) -> Catalog:
        if self.location is not None:
            location = normalize(self.location)
            return FileSystemCatalog(open_storage(location, storage_options), location)
        assert self.identifier is not None
        identifier = TableIdentifier.parse(self.identifier)
        # Each catalog's client library is imported only for a table in that catalog.
        if self.catalog_type == "glue":
            from lakeops.iceberg.glue_catalog import GlueCatalog

            return GlueCatalog(
                identifier,
                region=self.catalog_region,
                endpoint_url=self.catalog_uri,
                catalog_id=self.catalog_id,
                storage_options=storage_options,
            )
        assert self.catalog_uri is not None
        from lakeops.iceberg.sql_catalog import SqlCatalog

        return SqlCatalog(self.catalog_uri, identifier, self.catalog_name, storage_options=storage_options)
