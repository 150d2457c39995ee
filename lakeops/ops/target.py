"""The table an operation acts on: a location (its format detected), an Iceberg table in a SQL, Glue
or REST catalog (``namespace.table`` with the catalog's options), or a name from the registry file.

A registry name is turned into its entry's address once (:func:`lookup_name`, which
:func:`lakeops.ops.table.open_table` calls for every :mod:`lakeops.api` call before anything else);
everything after that sees only addresses.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from lakeops import registry
from lakeops.errors import InvalidArgument, NotATable, UnsupportedFeature, UsageError
from lakeops.iceberg.table_ref import TableRef
from lakeops.ops.detect import TableFormat, detect_format
from lakeops.option_fields import option_flag
from lakeops.registry import CatalogType
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize

__all__ = [
    "CatalogOptions",
    "DeltaTarget",
    "IcebergTarget",
    "IcechunkTarget",
    "Target",
    "refuse_options",
    "ResolvedName",
    "lookup_name",
    "require_declared",
    "resolve_output",
    "resolve_target",
    "table_root",
]


class CatalogOptions(BaseModel):
    """The catalog of an Iceberg table named ``namespace.table`` (all unset: the table is a location).
    ``catalog_type`` ``sql`` (default): ``catalog_uri`` a SQLAlchemy URL of an Iceberg SQL catalog
    (PyIceberg's ``SqlCatalog`` tables), ``catalog_name`` the catalog within it. ``glue``: an AWS Glue
    Data Catalog at endpoint ``catalog_uri`` (None: AWS) in ``catalog_region`` (None: the S3 region,
    else the AWS chain's) of account ``catalog_id`` (None: the caller's). ``rest``: ``catalog_uri`` the
    base URL of an Iceberg REST catalog, with ``catalog_warehouse``, ``catalog_prefix`` and the *names*
    of the environment variables holding its OAuth2 client credential (``client_id:client_secret``) or
    bearer token, never the secrets themselves; ``catalog_vended_credentials`` False stops lakeops asking
    the catalog for the table's S3 credentials (None: ask)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    catalog_type: CatalogType = "sql"
    catalog_uri: str | None = None
    catalog_name: str = "default"
    catalog_region: str | None = None
    catalog_id: str | None = None
    catalog_warehouse: str | None = None
    catalog_credential_env: str | None = None
    catalog_token_env: str | None = None
    catalog_prefix: str | None = None
    catalog_vended_credentials: bool | None = Field(
        default=None, json_schema_extra={"flag": "--catalog-no-vended-credentials"}
    )

    @property
    def catalogued(self) -> bool:
        """Whether these options name a catalog (the table is then ``namespace.table``)."""
        return self.catalog_uri is not None or self.catalog_type != "sql"

    def catalog_fields(self) -> dict[str, Any]:
        """These options' catalog fields alone (an operation's options carry more)."""
        return self.model_dump(include=set(CatalogOptions.model_fields))

    def table_ref(self, identifier: str) -> TableRef:
        """``identifier``'s address in this catalog."""
        return TableRef(
            catalog_type=self.catalog_type,
            catalog_uri=self.catalog_uri,
            identifier=identifier,
            catalog_name=self.catalog_name,
            catalog_region=self.catalog_region,
            catalog_id=self.catalog_id,
            warehouse=self.catalog_warehouse,
            credential_env=self.catalog_credential_env,
            token_env=self.catalog_token_env,
            prefix=self.catalog_prefix,
            vended_credentials=self.catalog_vended_credentials is not False,
        )


class _TargetBase:
    """What every target says of itself: its format, and which operations it takes."""

    format: ClassVar[TableFormat]

    def require(self, *formats: TableFormat, operation: str) -> None:
        """Refuse ``operation`` on a table of a format it is not written for, naming both."""
        if self.format not in formats:
            raise UnsupportedFeature(f"{self}: {operation} of {self.format} tables is not available yet")


@dataclass(frozen=True)
class DeltaTarget(_TargetBase):
    """A Delta table at ``location`` (normalised)."""

    location: str
    format: ClassVar[TableFormat] = "delta"

    def __str__(self) -> str:
        return self.location


@dataclass(frozen=True)
class IcebergTarget(_TargetBase):
    """An Iceberg table: a file-system table (``ref.location``) or a catalog table (``ref.identifier``)."""

    ref: TableRef
    format: ClassVar[TableFormat] = "iceberg"

    def __str__(self) -> str:
        return str(self.ref)


@dataclass(frozen=True)
class IcechunkTarget(_TargetBase):
    """An Icechunk repository at ``location`` (normalised)."""

    location: str
    format: ClassVar[TableFormat] = "icechunk"

    def __str__(self) -> str:
        return self.location


#: The table an operation acts on, one type per format: code that needs a format's address matches on
#: the type (``case IcebergTarget(ref=ref)``), so no field is ever optional.
Target = DeltaTarget | IcebergTarget | IcechunkTarget


def refuse_options(table: str, options: BaseModel, *names: str) -> None:
    """Refuse options another format has but ``table``'s does not: set (other than their default), they
    would be silently ignored."""
    fields = type(options).model_fields
    given = [name for name in names if getattr(options, name) != fields[name].get_default(call_default_factory=True)]
    if given:
        flags = ", ".join(option_flag(name, fields[name]) for name in given)
        raise UsageError(f"{table}: {flags} does not apply to this table's format")


#: The options only a REST catalog has.
_REST_OPTIONS = tuple(f"catalog_{key}" for key in registry.REST_ONLY)


def _looks_like_name(table: str) -> bool:
    return "/" not in table and "://" not in table and not table.startswith(".")


@dataclass(frozen=True)
class ResolvedName:
    """What a table name stands for: its ``address`` and ``catalog``, and for a registry entry
    (``name``) at a location the format it declares (None: ``auto``, or not a registry entry)."""

    address: str
    catalog: CatalogOptions
    name: str | None = None
    declared: TableFormat | None = None


def lookup_name(table: str, catalog: CatalogOptions) -> ResolvedName:
    """``table`` as an address: a bare name found in the registry file becomes its entry's location, or
    its catalog identifier with the entry's catalog; a location, or a name given with a catalog URI, is
    returned as given. Resolving once, up front, is what keeps a command from reading a name as a path
    in the working directory. A bare name that is neither a registry table nor a file here is refused,
    naming the registry searched (or its absence) and its closest names. Nothing is read: a registry
    entry's declared format is checked (:func:`require_declared`) once the format is detected."""
    if catalog.catalog_type != "glue" and (catalog.catalog_region is not None or catalog.catalog_id is not None):
        raise UsageError(
            f"{table}: --catalog-region and --catalog-id apply to a Glue catalog only (--catalog-type glue)"
        )
    rest_only = [name for name in _REST_OPTIONS if getattr(catalog, name) is not None]
    if catalog.catalog_type != "rest" and rest_only:
        fields = CatalogOptions.model_fields
        flags = ", ".join(option_flag(name, fields[name]) for name in rest_only)
        raise UsageError(f"{table}: {flags}: only a REST catalog takes them (--catalog-type rest)")
    if catalog.catalogued or not _looks_like_name(table):
        return ResolvedName(table, catalog)
    entry = registry.lookup(table)
    if entry is None:
        if os.path.lexists(table):
            return ResolvedName(table, catalog)
        raise NotATable(f"{table}: no file or directory {os.path.abspath(table)}, and {registry.why_unknown(table)}")
    if entry.catalog is not None:
        options = CatalogOptions.model_validate(entry.catalog.options())
        options.table_ref(str(entry.identifier)).check(f"{table}: catalog.uri in registry {registry.registry_path()}")
        return ResolvedName(str(entry.identifier), options)
    declared = None if entry.format == "auto" else entry.format
    return ResolvedName(normalize(str(entry.location)), CatalogOptions(), table, declared)


def require_declared(name: ResolvedName, found: TableFormat) -> None:
    """Refuse a registry table whose location holds another format than the one its entry declares."""
    if name.declared is not None and found != name.declared:
        raise InvalidArgument(
            f"registry table {name.name!r} is declared {name.declared} but {name.address} holds a {found} table"
        )


def resolve_output(output: str) -> str:
    """``cdc --output``: a registry name stands for its entry's location, like TABLE; any other value is
    a location (the output table is created when absent, so an unknown name is a new table here)."""
    entry = registry.lookup(output) if _looks_like_name(output) else None
    if entry is None:
        return output
    if entry.location is None:
        raise UsageError(
            f"--output {output!r}: registry table {output!r} is an Iceberg catalog table; change rows are "
            "appended to a Delta table location"
        )
    return normalize(entry.location)


def resolve_target(table: str, catalog: CatalogOptions, storage_options: StorageOptions) -> Target:
    """Where ``table`` (an address: see :func:`lookup_name`) is and which format it has. A catalog
    makes it a catalog identifier; anything else is a location. A catalog URI its client cannot use
    is refused here, where it is known who gave it."""
    if catalog.catalogued:
        ref = catalog.table_ref(table)
        ref.check(f"{table}: --catalog-uri")  # an unusable URI: an error naming it
        return IcebergTarget(ref)
    location = normalize(table)
    match detect_format(open_storage(location, storage_options), location):
        case "delta":
            return DeltaTarget(location)
        case "iceberg":
            return IcebergTarget(TableRef(location=location))
        case "icechunk":
            return IcechunkTarget(location)


def table_root(target: Target, storage_options: StorageOptions) -> str:
    """The normalised root directory of ``target`` (a catalog table's metadata ``location``), where
    lakeops keeps its trash and audit records."""
    match target:
        case IcebergTarget(ref=TableRef(location=str(location))):  # a file-system table: no need to read it
            return normalize(location)
        case IcebergTarget(ref=ref):  # a catalog table's metadata location, literal as Iceberg paths are
            from lakeops.iceberg.table import load_table

            return normalize(load_table(ref, storage_options).metadata.location, literal=True)
        case DeltaTarget(location=location) | IcechunkTarget(location=location):
            return normalize(location)
