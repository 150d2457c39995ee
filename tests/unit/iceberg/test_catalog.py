"""The two catalogs' commit protocol, checked against PyIceberg sharing the same catalog."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow as pa
import pytest
import sqlalchemy as sa
from pyiceberg.catalog.sql import SqlCatalog as PyIcebergSqlCatalog

from lakeops import api
from lakeops.errors import CommitConflict, InvalidArgument, NotATable
from lakeops.iceberg.catalog import FileSystemCatalog, TableIdentifier, metadata_version
from lakeops.iceberg.sql_catalog import SqlCatalog
from lakeops.ops.target import CatalogOptions
from lakeops.storage import open_storage


def _pyiceberg_table(tmp_path: Path) -> tuple[PyIcebergSqlCatalog, str]:
    uri = f"sqlite:///{tmp_path}/catalog.db"
    catalog = PyIcebergSqlCatalog("default", uri=uri, warehouse=f"file://{tmp_path}/warehouse")
    catalog.create_namespace("db")
    table = catalog.create_table("db.events", schema=pa.schema([pa.field("id", pa.int64())]))
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    return catalog, uri


def _bumped(storage_path: str, storage: object) -> bytes:
    """The current metadata with one property added: a real, different metadata file."""
    metadata = json.loads(open_storage(storage_path).read(storage_path))
    metadata["properties"]["lakeops.test"] = "1"
    return json.dumps(metadata).encode()


def test_identifier_parsing() -> None:
    assert TableIdentifier.parse("a.b.events") == TableIdentifier("a.b", "events")
    for bad in ("events", ".events", "db.", "a..b"):
        with pytest.raises(InvalidArgument, match="namespace.table"):
            TableIdentifier.parse(bad)


def test_sql_catalog_swap_is_seen_by_pyiceberg(tmp_path: Path) -> None:
    pyiceberg, uri = _pyiceberg_table(tmp_path)
    storage = open_storage(str(tmp_path))
    ours = SqlCatalog(uri, TableIdentifier.parse("db.events"))
    current = ours.current()
    assert current == pyiceberg.load_table("db.events").metadata_location

    table_location = pyiceberg.load_table("db.events").location()
    new = ours.new_metadata_location(table_location.removeprefix("file://"), current)
    assert metadata_version(new) == (metadata_version(current) or 0) + 1
    ours.swap(current, new, _bumped(current, storage))

    reloaded = pyiceberg.load_table("db.events")
    assert reloaded.metadata_location == new and reloaded.properties["lakeops.test"] == "1"
    assert reloaded.scan().to_arrow().num_rows == 3


def test_sql_catalog_stale_swap_conflicts_and_removes_its_file(tmp_path: Path) -> None:
    pyiceberg, uri = _pyiceberg_table(tmp_path)
    storage = open_storage(str(tmp_path))
    ours = SqlCatalog(uri, TableIdentifier.parse("db.events"))
    stale = ours.current()
    pyiceberg.load_table("db.events").append(pa.table({"id": pa.array([4], pa.int64())}))  # moves the pointer

    location = pyiceberg.load_table("db.events").location().removeprefix("file://")
    new = ours.new_metadata_location(location, stale)
    with pytest.raises(CommitConflict, match="another writer committed"):
        ours.swap(stale, new, _bumped(stale, storage))
    assert not Path(new).exists()
    assert pyiceberg.load_table("db.events").scan().to_arrow().num_rows == 4


def test_sql_catalog_unknown_table(tmp_path: Path) -> None:
    _, uri = _pyiceberg_table(tmp_path)
    with pytest.raises(NotATable, match="db.missing"):
        SqlCatalog(uri, TableIdentifier.parse("db.missing")).current()


def test_file_system_catalog_racing_writers(tmp_path: Path) -> None:
    location = str(tmp_path / "t")
    storage = open_storage(location)
    storage.write(f"{location}/metadata/v1.metadata.json", b'{"format-version": 2}')
    catalog = FileSystemCatalog(storage, location)
    base = catalog.current()
    target = catalog.new_metadata_location(location, base)
    assert target.endswith("/metadata/v2.metadata.json")

    outcomes: list[str] = []

    def commit(n: int) -> None:
        try:
            catalog.swap(base, target, f'{{"writer": {n}}}'.encode())
            outcomes.append("won")
        except CommitConflict:
            outcomes.append("lost")

    threads = [threading.Thread(target=commit, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["lost"] * 5 + ["won"]
    assert catalog.current() == target
    assert (tmp_path / "t" / "metadata" / "version-hint.text").read_text() == "2"
    with pytest.raises(CommitConflict, match="changed since v1.metadata.json"):
        catalog.swap(base, f"{location}/metadata/v3.metadata.json", b"{}")


def test_a_catalog_row_naming_a_file_with_a_nul_character_is_refused_by_name(tmp_path: Path) -> None:
    _, uri = _pyiceberg_table(tmp_path)
    with sa.create_engine(uri).begin() as conn:
        location = conn.execute(sa.text("SELECT metadata_location FROM iceberg_tables")).scalar_one()
        conn.execute(sa.text("UPDATE iceberg_tables SET metadata_location = :l"), {"l": location + "\x00.json"})

    with pytest.raises(InvalidArgument, match=r"metadata.json\\x00.json': a file name cannot hold a NUL character"):
        api.inspect("db.events", CatalogOptions(catalog_uri=uri))
