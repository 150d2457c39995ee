"""Iceberg tables in catalogs as older or careless writers left them (issue 38).

Item 2: a SQLite catalog created by an older PyIceberg, whose ``iceberg_tables`` has no ``iceberg_type``
column, failed every command (``no such column: iceberg_tables.iceberg_type``). Every command now runs
through it and the catalog is left in its schema (never migrated). PyIceberg 0.12's ``SqlCatalog``
queries ``iceberg_type`` itself, so it judges through ``StaticTable``: the metadata file the catalog's
row points to, read before and after. Item 7: a snapshot id past a long."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from pyiceberg.table import StaticTable
from pyiceberg_tables import PyIcebergTable, rows_of, small_file_table

from spark_jobs.cli import main as lakeops

#: ``iceberg_tables`` as PyIceberg created it before ``iceberg_type`` (same columns, same key).
OLD_SCHEMA = """
CREATE TABLE iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
)
"""


def _columns(database: Path) -> list[str]:
    with sqlite3.connect(database) as connection:
        return [row[1] for row in connection.execute("PRAGMA table_info(iceberg_tables)")]


def _pointed(database: Path) -> StaticTable:
    """The table as PyIceberg reads the metadata file the catalog row names."""
    with sqlite3.connect(database) as connection:
        ((location,),) = connection.execute("SELECT metadata_location FROM iceberg_tables").fetchall()
    return StaticTable.from_metadata(location)


def _to_old_schema(database: Path) -> None:
    with sqlite3.connect(database) as connection:
        connection.execute("ALTER TABLE iceberg_tables RENAME TO current_tables")
        connection.execute(OLD_SCHEMA)
        connection.execute(
            "INSERT INTO iceberg_tables SELECT catalog_name, table_namespace, table_name, metadata_location, "
            "previous_metadata_location FROM current_tables"
        )
        connection.execute("DROP TABLE current_tables")


@pytest.fixture
def old(tmp_path: Path) -> PyIcebergTable:
    table = small_file_table(tmp_path, "identity", appends=6)
    _to_old_schema(tmp_path / "catalog.db")
    assert "iceberg_type" not in _columns(tmp_path / "catalog.db")
    return table


def test_every_command_runs_through_a_catalog_without_iceberg_type(
    old: PyIcebergTable, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database = tmp_path / "catalog.db"
    before = rows_of(_pointed(database).scan().to_arrow())
    table = [old.identifier, "--catalog-uri", old.catalog_uri]
    commands = [
        ["inspect", *table],
        ["compact", *table, "--min-input-files", "2"],
        ["checkpoint", *table],
        ["cdc", *table, "--output", str(tmp_path / "changes"), "--from", "0"],
        ["expire", *table, "--older-than", "0s", "--retain-last", "1", "--force"],
        ["orphans", *table, "--older-than", "0s", "--force-short-retention"],
    ]
    for command in commands:
        assert lakeops(command) == 0, (command, capsys.readouterr().err)
    out = capsys.readouterr().out
    assert "iceberg_type" not in out

    after = _pointed(database)  # the metadata lakeops committed last, through the old catalog
    assert rows_of(after.scan().to_arrow()) == before
    assert len(after.inspect.files()) < 6 * 3  # compacted: fewer files than the appends wrote
    assert len(after.snapshots()) == 1  # expired down to the last
    assert "iceberg_type" not in _columns(database)  # never migrated


def test_a_snapshot_id_past_a_long_is_a_corrupt_metadata_file_named_with_its_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38, item 7: a hand-made snapshot id above the 64-bit range ended in ``OverflowError`` inside
    a CDC unit; now every command refuses the metadata file, naming it and the field."""
    import json

    table = small_file_table(tmp_path, appends=2)
    location = _pointed(tmp_path / "catalog.db").metadata_location
    metadata = Path(location.removeprefix("file://"))
    document = json.loads(metadata.read_text())
    document["snapshots"][0]["snapshot-id"] = 2**64
    metadata.write_text(json.dumps(document))
    for command in (["cdc", "--output", str(tmp_path / "changes"), "--from", "0"], ["inspect"]):
        assert lakeops([command[0], table.identifier, "--catalog-uri", table.catalog_uri, *command[1:]]) == 1
        err = " ".join(capsys.readouterr().err.split())
        assert f"CorruptFile: {location}: invalid table metadata: snapshots.0.snapshot-id:" in err, err
        assert "OverflowError" not in err
