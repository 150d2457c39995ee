"""duckdb-iceberg's tables under ``tests/data/modern/iceberg``, made loadable in a tmp dir.

duckdb-iceberg records every location relative to its repository root
(``data/persistent/<fixture>/...``: metadata JSON, manifest lists, manifests, the SQLite catalog).
:func:`unpack` copies a fixture and rewrites those locations to the copy's absolute path: JSON as
text, Avro files re-encoded with the same schema and key-value metadata (manifests first, so the
manifest lists carry the new manifests' lengths), the catalog row last. duckdb-iceberg's catalog
tables predate PyIceberg's ``iceberg_type`` column, which lakeops's catalog queries: it is added.
"""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import fastavro

from lakeops.ops.target import CatalogOptions

MODERN_ICEBERG = Path(__file__).parent / "data" / "modern" / "iceberg"


def _relocated(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return new + value[len(old) :] if value.startswith(old) else value
    if isinstance(value, dict):
        return {k: _relocated(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_relocated(v, old, new) for v in value]
    return value


def _rewrite_avro(path: Path, old: str, new: str, lengths: dict[str, int]) -> None:
    with path.open("rb") as f:
        reader = fastavro.reader(f)
        schema = json.loads(reader.metadata["avro.schema"])
        codec = reader.metadata.get("avro.codec", "null")
        metadata = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
        records = [_relocated(r, old, new) for r in reader]
    for record in records:
        if record.get("manifest_path") in lengths:
            record["manifest_length"] = lengths[record["manifest_path"]]
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), records, metadata=metadata, codec=codec)
    path.write_bytes(out.getvalue())


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
        _rewrite_avro(path, old, new, lengths)
        lengths[str(path)] = path.stat().st_size
    for path in root.rglob("*.metadata.json"):
        path.write_text(path.read_text().replace(old, new))
    (catalog,) = [p for p in root.glob("*.db") if p.is_file()]
    with sqlite3.connect(catalog) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(iceberg_tables)")}
        if "iceberg_type" not in columns:
            db.execute("ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)")
        catalog_name, namespace, table, location = db.execute(
            "SELECT catalog_name, table_namespace, table_name, metadata_location FROM iceberg_tables"
        ).fetchone()
        if current is not None:
            (location,) = [str(p) for p in root.rglob(current)]
        db.execute(
            "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = NULL",
            (location.replace(old, new),),
        )
    return f"{namespace}.{table}", CatalogOptions(catalog_uri=f"sqlite:///{catalog}", catalog_name=catalog_name)
