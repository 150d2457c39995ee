"""Where an Iceberg table is, as lakeops addresses it ("File System Tables", "Metastore Tables"): the
JSON-serialisable address that travels in plans and registry entries, in a module of its own so that
resolving a table's format and options imports none of the Iceberg metadata code.

It is also the one place that dispatches on the catalog type (:meth:`TableRef.catalog`,
:meth:`TableRef.check`): a new type is one value of :data:`lakeops.registry.CatalogType` and one branch in
each. Each client is imported only when a table names its type (SQLAlchemy, boto3's Glue client, the
HTTP client)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, model_validator

from lakeops.errors import UsageError
from lakeops.iceberg.catalog import Catalog, FileSystemCatalog, TableIdentifier
from lakeops.registry import CatalogType
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize

if TYPE_CHECKING:
    from lakeops.iceberg.rest_client import RestSettings

__all__ = ["TableRef"]


class TableRef(BaseModel):
    """Where a table is: ``location`` for a file-system table, else ``identifier`` (``namespace.table``)
    in a catalog of ``catalog_type``: ``sql`` (``catalog_uri`` a SQLAlchemy URL of a catalog shared
    with PyIceberg's ``SqlCatalog``, ``catalog_name`` the catalog within it); ``glue`` (an AWS Glue
    Data Catalog: ``catalog_uri`` its endpoint, None for AWS; ``catalog_region``; ``catalog_id`` the
    account, None for the caller's); ``rest`` (``catalog_uri`` the base URL of an Iceberg REST catalog
    with its ``warehouse``, ``prefix`` and the names of the environment variables holding its secrets,
    ``credential_env`` and ``token_env``: names only, so a plan or an audit record never holds a secret;
    ``vended_credentials`` whether to ask it for the table's storage credentials)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    location: str | None = None
    catalog_type: CatalogType = "sql"
    catalog_uri: str | None = None
    identifier: str | None = None
    catalog_name: str = "default"
    catalog_region: str | None = None
    catalog_id: str | None = None
    warehouse: str | None = None
    credential_env: str | None = None
    token_env: str | None = None
    prefix: str | None = None
    vended_credentials: bool = True

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
        """The catalog of this address: its location's file-system catalog, else a client of its type."""
        if self.location is not None:
            location = normalize(self.location)
            return FileSystemCatalog(open_storage(location, storage_options), location)
        assert self.identifier is not None
        identifier = TableIdentifier.parse(self.identifier)
        match self.catalog_type:
            case "sql":
                from lakeops.iceberg.sql_catalog import SqlCatalog

                assert self.catalog_uri is not None
                return SqlCatalog(self.catalog_uri, identifier, self.catalog_name, storage_options=storage_options)
            case "glue":
                from lakeops.iceberg.glue_catalog import GlueCatalog

                return GlueCatalog(
                    identifier,
                    region=self.catalog_region,
                    endpoint_url=self.catalog_uri,
                    catalog_id=self.catalog_id,
                    storage_options=storage_options,
                )
            case "rest":
                from lakeops.iceberg.rest_catalog import RestCatalog
                from lakeops.iceberg.rest_client import rest_client

                client = rest_client(self._rest_settings())
                return RestCatalog(client, identifier, self.catalog_name, storage_options=storage_options)

    def check(self, option: str) -> None:
        """Refuse a catalog address its client cannot use, naming ``option`` (who gave it), before any
        work: a SQL URL SQLAlchemy cannot open; a REST URI that is no http(s) URL, or a secret's
        variable that is not set. A Glue address is checked when its client is made."""
        match self.catalog_type:
            case "sql":
                from lakeops.iceberg.sql_catalog import sql_engine

                assert self.catalog_uri is not None
                sql_engine(self.catalog_uri, option=option)
            case "rest":
                from lakeops.iceberg.rest_client import check_settings

                if self.catalog_uri is None:
                    raise UsageError(f"{option}: missing; a REST catalog is reached at its base URL")
                check_settings(self._rest_settings(), option)

    def _rest_settings(self) -> RestSettings:
        from lakeops.iceberg.rest_client import RestSettings

        assert self.catalog_uri is not None
        return RestSettings(
            self.catalog_uri.rstrip("/"),
            self.warehouse,
            self.credential_env,
            self.token_env,
            self.prefix,
            self.vended_credentials,
        )
