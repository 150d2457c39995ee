"""The table an operation acts on: a location (its format detected), an Iceberg table in a SQL
catalog (``namespace.table`` with a catalog URI), or a name from the registry file."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from lakeops import registry
from lakeops.errors import InvalidArgument, UnsupportedFeature
from lakeops.iceberg.catalog import sql_engine
from lakeops.iceberg.table import TableRef, load_table
from lakeops.ops.detect import TableFormat, detect_format
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize

__all__ = ["CatalogOptions", "Target", "resolve_target", "table_root"]


class CatalogOptions(BaseModel):
    """``catalog_uri``: a SQLAlchemy URL of an Iceberg SQL catalog (PyIceberg's ``SqlCatalog`` tables);
    the table is then ``namespace.table`` in catalog ``catalog_name``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    catalog_uri: str | None = None
    catalog_name: str = "default"


@dataclass(frozen=True)
class Target:
    format: TableFormat
    #: The normalised location (Delta, Icechunk, file-system Iceberg tables); None for catalog tables.
    location: str | None
    #: How to load an Iceberg table (file-system or catalog); None for other formats.
    iceberg: TableRef | None = None

    def __str__(self) -> str:
        return str(self.iceberg) if self.iceberg is not None else str(self.location)

    def require(self, *formats: TableFormat, operation: str) -> None:
        if self.format not in formats:
            raise UnsupportedFeature(f"{self}: {operation} of {self.format} tables is not available yet")


def _looks_like_name(table: str) -> bool:
    return "/" not in table and "://" not in table and not table.startswith(".")


def resolve_target(table: str, catalog: CatalogOptions, storage_options: StorageOptions) -> Target:
    """Where ``table`` is and which format it has. A catalog URI makes it a catalog identifier; a
    bare name found in the registry file resolves through its entry; anything else is a location.
    A catalog URI SQLAlchemy cannot use is refused here, where it is known who gave it."""
    if catalog.catalog_uri is not None:
        sql_engine(catalog.catalog_uri, option=f"{table}: --catalog-uri")  # an unusable URI: an error naming it
        return Target(
            "iceberg",
            None,
            TableRef(catalog_uri=catalog.catalog_uri, identifier=table, catalog_name=catalog.catalog_name),
        )
    entry = registry.lookup(table) if _looks_like_name(table) else None
    if entry is not None and entry.catalog is not None:
        sql_engine(entry.catalog.uri, option=f"{table}: catalog.uri in registry {registry.registry_path()}")
        ref = TableRef(catalog_uri=entry.catalog.uri, identifier=entry.identifier, catalog_name=entry.catalog.name)
        return Target("iceberg", None, ref)
    location = normalize(entry.location if entry is not None and entry.location else table)
    fmt = detect_format(open_storage(location, storage_options), location)
    if entry is not None and entry.format not in ("auto", fmt):
        raise InvalidArgument(f"registry table {table!r} is declared {entry.format} but {location} holds a {fmt} table")
    return Target(fmt, location, TableRef(location=location) if fmt == "iceberg" else None)


def table_root(target: Target, storage_options: StorageOptions) -> str:
    """The normalised root directory of ``target`` (a catalog table's metadata ``location``), where
    lakeops keeps its trash and audit records."""
    if target.location is not None:
        return normalize(target.location)
    assert target.iceberg is not None
    return normalize(load_table(target.iceberg, storage_options).metadata.location, literal=True)  # Iceberg: literal
