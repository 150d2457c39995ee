"""Where an Iceberg table's current metadata file is, and the atomic swap that commits a new one
("Optimistic Concurrency", "File System Tables", "Metastore Tables" in the Iceberg spec).

Two catalogs, one contract: :meth:`Catalog.current` names the current metadata file and
:meth:`Catalog.swap` replaces it only if it is still the one the writer started from.

- :class:`FileSystemCatalog`: a table is a location; version ``N`` is ``metadata/vN.metadata.json``,
  created with put-if-absent (the creation *is* the commit) and ``metadata/version-hint.text`` is
  rewritten afterwards as a hint only.
- :class:`SqlCatalog`: the tables PyIceberg's ``SqlCatalog`` uses (``iceberg_tables``,
  ``iceberg_namespace_properties``), so both tools share one catalog; the swap is
  ``UPDATE ... WHERE metadata_location = <expected>`` and zero rows updated means a conflict.
  SQLite is the embedded default, PostgreSQL the production one.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from dataclasses import dataclass
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from lakeops.errors import (
    AlreadyExists,
    CommitConflict,
    CommitStateUnknown,
    InvalidArgument,
    NotATable,
    NotFound,
    StorageError,
)
from lakeops.storage import Storage, StorageOptions, open_storage
from lakeops.storage.uri import join, normalize

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

    def swap(self, expected: str, new: str, payload: bytes) -> None:
        """Write ``payload`` at ``new`` and make it current if ``expected`` still is.

        Raises :class:`CommitConflict` (nothing changed; ``new`` is removed when it was written) or
        :class:`CommitStateUnknown` (the outcome cannot be established: delete nothing).
        """
        ...


def metadata_version(location: str) -> int | None:
    """The version number in a metadata file name (``v3.metadata.json`` / ``00003-<uuid>.metadata.json``)."""
    name = location.rsplit("/", 1)[-1]
    match = _FS_VERSION.match(name) or _SQL_VERSION.match(name)
    return int(match.group(1)) if match else None


class FileSystemCatalog:
    """A table addressed by its location; commits by creating ``vN.metadata.json`` exclusively."""

    def __init__(self, storage: Storage, location: str) -> None:
        self.storage = storage
        self.location = location
        self.table = location

    def _metadata_files(self) -> dict[int, str]:
        prefix = join(self.location, METADATA_DIR)
        found: dict[int, str] = {}
        for info in self.storage.list(prefix):
            name = info.path[len(prefix) + 1 :]
            if match := _FS_VERSION.match(name):
                found[int(match.group(1))] = info.path
        return found

    def current(self) -> str:
        """The highest ``vN.metadata.json``. ``version-hint.text`` is only a hint that can lag a
        commit (it is written after the commit), so the listing decides."""
        files = self._metadata_files()
        if not files:
            raise NotATable(f"{self.location}: no Iceberg metadata (no metadata/v<N>.metadata.json files)")
        return files[max(files)]

    def new_metadata_location(self, table_location: str, current: str) -> str:
        version = metadata_version(current)
        if version is None:
            raise InvalidArgument(f"{current}: not a file-system table metadata file name (v<N>.metadata.json)")
        return join(self.location, METADATA_DIR, f"v{version + 1}.metadata.json")

    def swap(self, expected: str, new: str, payload: bytes) -> None:
        if self.current() != expected:
            raise CommitConflict(f"{self.table}: the table changed since {expected.rsplit('/', 1)[-1]}")
        try:
            self.storage.put_if_absent(new, payload)
        except AlreadyExists as exc:
            raise CommitConflict(f"{self.table}: another writer committed {new.rsplit('/', 1)[-1]} first") from exc
        except StorageError as exc:
            self._resolve_lost_answer(new, payload, exc)
        # The hint is advisory: readers that list find the new version even if this write fails.
        with contextlib.suppress(StorageError):
            self.storage.write(join(self.location, METADATA_DIR, VERSION_HINT), f"{metadata_version(new)}".encode())

    def _resolve_lost_answer(self, new: str, payload: bytes, failure: StorageError) -> None:
        """The create of ``new`` failed without a verdict (its answer lost, the store failing): the
        creation is the commit, so reading ``new`` back decides. Our bytes: committed, once. Other
        bytes: another writer's commit (a conflict). Absent or unreadable: unknown, because a
        request still in flight may land, so the caller must delete nothing."""
        name = new.rsplit("/", 1)[-1]
        try:
            found = self.storage.read(new)
        except NotFound:
            raise CommitStateUnknown(
                f"{self.table}: creating {new} failed ({failure}) and it is absent; the write may still land, "
                "so nothing may be deleted"
            ) from failure
        except StorageError as exc:
            raise CommitStateUnknown(
                f"{self.table}: creating {new} failed ({failure}) and reading it back failed ({exc}); "
                "whether it was committed is unknown"
            ) from failure
        if found != payload:
            raise CommitConflict(f"{self.table}: another writer committed {name} first") from failure


_METADATA = sa.MetaData()
ICEBERG_TABLES = sa.Table(
    "iceberg_tables",
    _METADATA,
    sa.Column("catalog_name", sa.String(255), primary_key=True),
    sa.Column("table_namespace", sa.String(255), primary_key=True),
    sa.Column("table_name", sa.String(255), primary_key=True),
    sa.Column("metadata_location", sa.String(1000), nullable=True),
    sa.Column("previous_metadata_location", sa.String(1000), nullable=True),
    sa.Column("iceberg_type", sa.String(5), nullable=True),
)
ICEBERG_NAMESPACE_PROPERTIES = sa.Table(
    "iceberg_namespace_properties",
    _METADATA,
    sa.Column("catalog_name", sa.String(255), primary_key=True),
    sa.Column("namespace", sa.String(255), primary_key=True),
    sa.Column("property_key", sa.String(255), primary_key=True),
    sa.Column("property_value", sa.String(1000), nullable=False),
)

_ENGINES: dict[str, sa.Engine] = {}


#: DB-API modules SQLAlchemy dialects import -> the package that provides them.
_DRIVER_PACKAGES = {
    "psycopg2": "psycopg2-binary",
    "psycopg": "psycopg[binary]",
    "pg8000": "pg8000",
    "asyncpg": "asyncpg",
    "MySQLdb": "mysqlclient",
    "pymysql": "PyMySQL",
}


def sql_engine(uri: str, *, option: str = "--catalog-uri") -> sa.Engine:
    """One engine (connection pool) per URI and process. A URI SQLAlchemy cannot use is an
    :class:`InvalidArgument` naming ``option`` (the table and how the user gave the URI), the URI
    (its password masked) and the fix: malformed, an unknown dialect, or a driver that is not
    installed (which SQLAlchemy imports when it creates the engine, as a bare ``ModuleNotFoundError``)."""
    if uri in _ENGINES:
        return _ENGINES[uri]
    try:
        engine = sa.create_engine(uri, pool_pre_ping=True)
    except ModuleNotFoundError as exc:
        dialect = make_url(uri).drivername
        package = _DRIVER_PACKAGES.get(exc.name or "", exc.name)
        raise InvalidArgument(
            f"{option} {uri!r}: the {dialect} dialect needs the Python module {exc.name!r}, which is not "
            f"installed (pip install {package}), or name another driver (postgresql+psycopg2://...)"
        ) from None
    except NoSuchModuleError:
        raise InvalidArgument(
            f"{option} {uri!r}: unknown database dialect {uri.partition(':')[0]!r}; expected a SQLAlchemy URL "
            "such as sqlite:////path/catalog.db or postgresql+psycopg2://user@host/db"
        ) from None
    except (ArgumentError, ValueError) as exc:  # unparseable, a bad port, SQLite with a host or user
        # Not SQLAlchemy's own words: they quote the URL re-encoded (a password's "=" as %3D, past any
        # mask) or what it took for the port, which may be part of a password.
        if isinstance(exc, ValueError):
            problem = "its port is not a number"
        elif uri.startswith("sqlite"):
            problem = "a SQLite URL names only a file: no user, password or host"
        else:
            problem = "SQLAlchemy cannot parse it"
        raise InvalidArgument(
            f"{option} {uri!r}: not a usable SQLAlchemy URL ({problem}); expected e.g. sqlite:////path/catalog.db "
            "or postgresql+psycopg2://user@host/db"
        ) from None
    return _ENGINES.setdefault(uri, engine)


class SqlCatalog:
    """One table of a SQL catalog shared with PyIceberg (same tables, same commit protocol)."""

    def __init__(
        self,
        uri: str,
        identifier: TableIdentifier,
        catalog_name: str = "default",
        *,
        storage_options: StorageOptions | None = None,
    ) -> None:
        self.storage_options = storage_options or StorageOptions()
        self.uri = uri
        self.identifier = identifier
        self.catalog_name = catalog_name
        self.table = f"{catalog_name}.{identifier}"
        self.engine = sql_engine(uri)

    def _where(self) -> sa.ColumnElement[bool]:
        t = ICEBERG_TABLES.c
        return sa.and_(
            t.catalog_name == self.catalog_name,
            t.table_namespace == self.identifier.namespace,
            t.table_name == self.identifier.name,
            sa.or_(t.iceberg_type == ICEBERG_TABLE_TYPE, t.iceberg_type.is_(None)),
        )

    def current(self) -> str:
        try:
            with self.engine.connect() as conn:
                row = conn.execute(sa.select(ICEBERG_TABLES.c.metadata_location).where(self._where())).first()
        except SQLAlchemyError as exc:
            raise StorageError(f"{self.table}: cannot read the catalog at {self.uri}: {exc}") from exc
        if row is None or row[0] is None:
            raise NotATable(f"{self.table}: no such table in catalog {self.catalog_name!r} at {self.uri}")
        return str(row[0])

    def new_metadata_location(self, table_location: str, current: str) -> str:
        version = metadata_version(current)
        next_version = 0 if version is None else version + 1
        location = normalize(table_location, literal=True)  # the metadata's ``location``: an Iceberg path
        return join(location, METADATA_DIR, f"{next_version:05d}-{uuid.uuid4()}.metadata.json")

    def swap(self, expected: str, new: str, payload: bytes) -> None:
        # The table's files may live on another store than the catalog: open the one ``new`` is on, at the
        # table location (``new`` is ``<location>/metadata/<name>``, see new_metadata_location), so a
        # metadata directory that is a symlink out of the table is refused.
        storage = open_storage(new.rsplit("/", 2)[0], self.storage_options)
        storage.put_if_absent(new, payload)
        statement = (
            sa.update(ICEBERG_TABLES)
            .where(self._where(), ICEBERG_TABLES.c.metadata_location == expected)
            .values(metadata_location=new, previous_metadata_location=expected)
        )
        try:
            with self.engine.begin() as conn:
                updated = conn.execute(statement).rowcount
        except SQLAlchemyError as exc:
            # The transaction may have committed with its answer lost: only a re-read can tell, and
            # if the pointer moved on since, ours may still have landed first. Never delete here.
            try:
                landed = self.current() == new
            except StorageError:
                landed = False
            if landed:
                return
            raise CommitStateUnknown(
                f"{self.table}: the catalog update to {new} failed ({exc}); whether it landed is unknown"
            ) from exc
        if updated != 1:
            storage.delete_many([new])
            raise CommitConflict(f"{self.table}: another writer committed since {expected.rsplit('/', 1)[-1]}")
