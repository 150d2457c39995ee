"""The peers, through their public Python APIs: delta-rs (``deltalake``) for Delta, PyIceberg for
Iceberg expiry. Options are set so each does the same work as ours (module notes per runner)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from deltalake import DeltaTable, WriterProperties, write_deltalake
from pyiceberg.catalog.sql import SqlCatalog

from bench.settings import TARGET_FILE_SIZE


def compact(params: dict[str, Any]) -> dict[str, Any]:
    metrics = DeltaTable(params["target"]).optimize.compact(target_size=TARGET_FILE_SIZE)
    return {"files_added": metrics["numFilesAdded"], "files_removed": metrics["numFilesRemoved"]}


def checkpoint(params: dict[str, Any]) -> dict[str, Any]:
    table = DeltaTable(params["target"])
    table.create_checkpoint()
    return {"version": table.version()}


def snapshot(params: dict[str, Any]) -> dict[str, Any]:
    """Load the table and materialise its live files (the checkpoint's content) as Arrow."""
    table = DeltaTable(params["target"])
    return {"files": table.get_add_actions().num_rows, "version": table.version()}


def vacuum(params: dict[str, Any]) -> dict[str, Any]:
    """``full=True``: like ours, tombstones past retention and untracked files (a listing)."""
    deleted = DeltaTable(params["target"]).vacuum(dry_run=False, full=True)
    return {"deleted_files": len(deleted)}


def cdf_write(params: dict[str, Any]) -> dict[str, Any]:
    """Like for like with ours: the change feed from version 1 written by delta-rs as a new Delta table,
    with the codec and level ours writes (the workload's ``parquet``)."""
    rows = DeltaTable(params["target"]).load_cdf(starting_version=1).read_all()
    parquet = params.get("parquet", {})
    codec = str(parquet.get("compression", "snappy")).upper()
    properties = WriterProperties(compression=codec, compression_level=parquet.get("compression_level"))
    write_deltalake(params["scratch"] + "/changes", rows, writer_properties=properties)
    return {"change_rows": rows.num_rows}


def expire(params: dict[str, Any]) -> dict[str, Any]:
    """PyIceberg's ``expire_snapshots`` (``table.maintenance``): metadata only, it deletes no file."""
    catalog = SqlCatalog("default", uri=params["catalog_uri"])
    table = catalog.load_table(params["identifier"])
    before = len(table.metadata.snapshots)
    table.maintenance.expire_snapshots().older_than(datetime.now(UTC)).commit()
    after = len(catalog.load_table(params["identifier"]).metadata.snapshots)
    return {"expired_snapshots": before - after}


RUNNERS = {
    "compact": compact,
    "checkpoint": checkpoint,
    "snapshot": snapshot,
    "vacuum": vacuum,
    "cdf_write": cdf_write,
    "expire": expire,
}
