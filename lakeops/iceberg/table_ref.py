"""Where an Iceberg table is, as lakeops addresses it ("File System Tables", "Metastore Tables"): the
JSON-serialisable address that travels in plans and registry entries, in a module of its own so that
resolving a table's format and options imports none of the Iceberg metadata code."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator

from lakeops.iceberg.catalog import Catalog
from lakeops.iceberg.catalogs import CatalogType, open_catalog
from lakeops.storage import StorageOptions

__all__ = ["TableRef"]


class TableRef(BaseModel):
    """Where a table is: ``location`` for a file-system table, else ``catalog_uri`` + ``identifier``
    (``namespace.table``) in a catalog of ``catalog_type``: ``sql``, a SQLAlchemy URL of a catalog shared
    with PyIceberg's ``SqlCatalog``; ``rest``, the base URL of an Iceberg REST catalog with its
    ``warehouse``, ``prefix`` and the names of the environment variables holding its secrets
    (``credential_env``, ``token_env``: names only, so a plan or an audit record never holds a secret)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    location: str | None = None
    catalog_type: CatalogType = "sql"
    catalog_uri: str | None = None
    identifier: str | None = None
    catalog_name: str = "default"
    warehouse: str | None = None
    credential_env: str | None = None
    token_env: str | None = None
    prefix: str | None = None

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
        return open_catalog(self, storage_options)
