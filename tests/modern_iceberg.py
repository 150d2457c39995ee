"""duckdb-iceberg's tables under ``tests/data/modern/iceberg``, made loadable in a tmp dir.

duckdb-iceberg records every location relative to its repository root
(``data/persistent/<fixture>/...``: metadata JSON, manifest lists, manifests). :func:`unpack` copies
a fixture and rewrites those locations to the copy's absolute path: JSON as text, Avro files
re-encoded with the same schema and key-value metadata (manifests first, so the manifest lists
carry the new manifests' lengths). The SQLite catalogs upstream keeps beside the tables are not in
the checkout (no database is tracked): :data:`CATALOG_ROWS` holds their one row each, and
:func:`unpack` writes it into a new PyIceberg ``SqlCatalog`` database.
"""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro

from lakeops.ops.target import CatalogOptions

MODERN_ICEBERG = Path(__file__).parent / "data" / "modern" / "iceberg"

#: Upstream's catalog row of each fixture: catalog name, namespace, table, current metadata file.
CATALOG_ROWS = {
    "legacy_bare_deletion_vector": (
        "persistent",
        "default",
        "legacy_bare_deletion_vector",
        "warehouse/default/legacy_bare_deletion_vector/metadata/00001-844030fa-6b44-406b-ac35-494fe3c8e4a2.metadata.json",
    ),
    "iceberg_v1_repro": (
        "repro",
        "repro",
        "merch_v1",
        "repro/merch_v1/metadata/00003-8d01e4aa-d143-49c9-898e-b5e477577b70.metadata.json",
    ),
    "add_columns_with_defaults": (
        "default",
        "default",
        "add_columns_with_defaults",
        "default.db/add_columns_with_defaults/metadata/00003-3f1801a5-7dfb-4072-b14a-39cd12f9279b.metadata.json",
    ),
}
#: PyIceberg's ``SqlCatalog`` table (its columns as SPEC-NOTES.md gives them under "Iceberg").
_CATALOG_TABLE = """CREATE TABLE iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL, table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name))"""


def _relocated(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return new + value[len(old) :] if value.startswith(old) else value
    if isinstance(value, dict):
        return {k: _relocated(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_relocated(v, old, new) for v in value]
    return value


def edit_avro(path: Path, edit: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
    """Re-encode the Avro file at ``path`` with ``edit`` applied to each record, the same schema, codec
    and key-value metadata; returns the new length."""
    with path.open("rb") as f:
        reader = fastavro.reader(f)
        schema = json.loads(reader.metadata["avro.schema"])
        codec = reader.metadata.get("avro.codec", "null")
        metadata = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
        records = [edit(r) for r in reader]  # type: ignore[arg-type]
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), records, metadata=metadata, codec=codec)
    path.write_bytes(out.getvalue())
    return len(out.getvalue())


def relength(lengths: dict[str, int]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An edit giving the manifest-list records of the manifests in ``lengths`` their new length."""
    return lambda r: {**r, "manifest_length": lengths[r["manifest_path"]]} if r.get("manifest_path") in lengths else r


def unpack(name: str, tmp_path: Path, *, current: str | None = None) -> tuple[str, CatalogOptions]:
    """Copy fixture ``name`` under ``tmp_path`` with absolute locations; returns the table's
    ``namespace.table`` and its catalog. ``current``: a metadata file name the catalog is pointed at
    instead of its own (the fixture's ``version-hint.text`` may name a newer one)."""
    root = tmp_path / name
    shutil.copytree(MODERN_ICEBERG / name, root)
    old, new = f"data/persistent/{name}/", f"{root}/"
    lengths: dict[str, int] = {}
    avro = sorted(root.rglob("*.avro"), key=lambda p: p.name.startswith("snap-"))  # manifests, then lists
    for path in avro:
        lengths[str(path)] = edit_avro(path, lambda r: relength(lengths)(_relocated(r, old, new)))
    for path in root.rglob("*.metadata.json"):
        path.write_text(path.read_text().replace(old, new))
    catalog_name, namespace, table, location = CATALOG_ROWS[name]
    if current is not None:
        location = f"{location.rsplit('/', 1)[0]}/{current}"
    catalog = tmp_path / f"{name}-catalog.db"
    with sqlite3.connect(catalog) as db:
        db.execute(_CATALOG_TABLE)
        db.execute(
            "INSERT INTO iceberg_tables VALUES (?, ?, ?, ?, NULL, 'TABLE')",
            (catalog_name, namespace, table, str(root / location)),
        )
    return f"{namespace}.{table}", CatalogOptions(catalog_uri=f"sqlite:///{catalog}", catalog_name=catalog_name)
