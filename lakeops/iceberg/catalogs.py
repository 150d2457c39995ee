"""Which catalog client serves a table address: the one place that dispatches on the catalog type, so
that adding a type is one branch here (and one value of :data:`CatalogType`). Each client is imported
only when a table names its type (SQLAlchemy, the HTTP client)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from lakeops.iceberg.catalog import Catalog, FileSystemCatalog, TableIdentifier
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize

if TYPE_CHECKING:
    from lakeops.iceberg.table_ref import TableRef

__all__ = ["CatalogType", "check_catalog", "open_catalog"]

#: The catalog types a table address may name (``TableRef.catalog_type``, the registry's ``catalog.type``).
CatalogType = Literal["sql", "rest"]


def open_catalog(ref: TableRef, storage_options: StorageOptions) -> Catalog:
    """The catalog of ``ref``: its location's file-system catalog, else a client of its catalog type."""
    if ref.location is not None:
        location = normalize(ref.location)
        return FileSystemCatalog(open_storage(location, storage_options), location)
    assert ref.catalog_uri is not None and ref.identifier is not None
    identifier = TableIdentifier.parse(ref.identifier)
    match ref.catalog_type:
        case "sql":
            from lakeops.iceberg.sql_catalog import SqlCatalog

            return SqlCatalog(ref.catalog_uri, identifier, ref.catalog_name, storage_options=storage_options)
        case "rest":
            from lakeops.iceberg.rest_catalog import RestCatalog
            from lakeops.iceberg.rest_client import rest_client

            return RestCatalog(rest_client(ref), identifier, ref.catalog_name, storage_options=storage_options)


def check_catalog(ref: TableRef, option: str) -> None:
    """Refuse a catalog address its client cannot use, naming ``option`` (who gave it), before any
    work: a SQL URL SQLAlchemy cannot open; a REST URI that is no http(s) URL or names no variable."""
    assert ref.catalog_uri is not None
    match ref.catalog_type:
        case "sql":
            from lakeops.iceberg.sql_catalog import sql_engine

            sql_engine(ref.catalog_uri, option=option)
        case "rest":
            from lakeops.iceberg.rest_client import check_settings

            check_settings(ref, option)
