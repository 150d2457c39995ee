"""The SQL catalog: the ``iceberg_tables`` table PyIceberg's ``SqlCatalog`` uses (lakeops needs
none of its namespace properties), so both tools share one catalog ("Metastore Tables" in the Iceberg
spec). The swap is ``UPDATE ... WHERE metadata_location = <expected>`` and zero rows updated means a
conflict. SQLite is the embedded default, PostgreSQL the production one.
"""

from __future__ import annotations

import contextlib

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from lakeops.errors import CommitConflict, CommitStateUnknown, InvalidArgument, NotATable, StorageError
from lakeops.iceberg.catalog import ICEBERG_TABLE_TYPE, TableIdentifier, numbered_metadata_location, pointer_unmoved
from lakeops.redaction import register_secrets
from lakeops.storage import StorageOptions, open_storage

__all__ = ["ICEBERG_TABLES", "SqlCatalog", "sql_engine"]

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
    with contextlib.suppress(ArgumentError, ValueError):  # on every call: the registry keeps what is in use
        register_secrets(make_url(uri).password)  # masked by value, however a driver quotes it
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


_TYPED: dict[str, bool] = {}


def _has_type_column(engine: sa.Engine, uri: str, table: str) -> bool:
    """Whether the catalog's ``iceberg_tables`` has ``iceberg_type`` (PyIceberg added it later; catalogs
    created before have every row a table, and PyIceberg still reads them). Looked up once per catalog
    and process; an older catalog is read as it is, never migrated."""
    if uri not in _TYPED:
        try:
            columns = {column["name"] for column in sa.inspect(engine).get_columns(ICEBERG_TABLES.name)}
        except SQLAlchemyError as exc:
            raise StorageError(f"{table}: cannot read the catalog at {uri}: {exc}") from exc
        if not columns:
            raise NotATable(f"{table}: the catalog at {uri} has no {ICEBERG_TABLES.name} table")
        _TYPED[uri] = "iceberg_type" in columns
    return _TYPED[uri]


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
        row = [
            t.catalog_name == self.catalog_name,
            t.table_namespace == self.identifier.namespace,
            t.table_name == self.identifier.name,
        ]
        if _has_type_column(self.engine, self.uri, self.table):
            row.append(sa.or_(t.iceberg_type == ICEBERG_TABLE_TYPE, t.iceberg_type.is_(None)))
        return sa.and_(*row)

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
        return numbered_metadata_location(table_location, current)

    def swap(self, expected: str, new: str, payload: bytes) -> str:
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
        except SQLAlchemyError as exc:  # it may have committed with its answer lost: the table read back decides
            raise CommitStateUnknown(f"{self.table}: the catalog update to {new} failed ({exc})") from exc
        if updated != 1:  # no row updated: the pointer never named ``new``, which no one else knows
            storage.delete_many([new])
            raise CommitConflict(f"{self.table}: another writer committed since {expected.rsplit('/', 1)[-1]}")
        return new

    could_land = staticmethod(pointer_unmoved)
