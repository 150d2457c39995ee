"""The peers, through their public Python APIs: delta-rs (``deltalake``) for Delta, PyIceberg for
Iceberg expiry. Options are set so each does the same work as ours (module notes per runner)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from deltalake import DeltaTable, WriterProperties, write_deltalake
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestFile

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
    codec: Any = str(parquet.get("compression", "snappy")).upper()  # a codec name WriterProperties accepts
    properties = WriterProperties(compression=codec, compression_level=parquet.get("compression_level"))
    write_deltalake(params["scratch"] + "/changes", rows, writer_properties=properties)
    return {"change_rows": rows.num_rows}


def expire(params: dict[str, Any]) -> dict[str, Any]:
    """Like for like with ours: PyIceberg's ``expire_snapshots`` (``table.maintenance``; it commits
    metadata only), then deleting what only the expired snapshots reached, found and deleted with
    PyIceberg's own reader and FileIO: their manifest lists, the manifests no retained snapshot lists
    and, when there are such manifests, the data and delete files no retained manifest names. Each
    snapshot's manifest list is decoded once, in threads."""
    catalog = SqlCatalog("default", uri=params["catalog_uri"])
    table = catalog.load_table(params["identifier"])
    before = list(table.metadata.snapshots)
    table.maintenance.expire_snapshots().older_than(datetime.now(UTC)).commit()
    table = catalog.load_table(params["identifier"])
    kept = {s.snapshot_id for s in table.metadata.snapshots}
    expired = [s for s in before if s.snapshot_id not in kept]
    io = table.io
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        expired_lists = list(pool.map(lambda s: s.manifests(io), expired))
        retained_lists = list(pool.map(lambda s: s.manifests(io), table.metadata.snapshots))
        retained = {m.manifest_path for listed in retained_lists for m in listed}
        gone = {m.manifest_path: m for listed in expired_lists for m in listed if m.manifest_path not in retained}
        files: set[str] = set()
        if gone:
            named = {m.manifest_path: m for listed in retained_lists for m in listed}
            for paths in pool.map(lambda m: _file_paths(m, io), gone.values()):
                files |= paths
            for paths in pool.map(lambda m: _file_paths(m, io), named.values()):
                files -= paths
        garbage = [s.manifest_list for s in expired if s.manifest_list] + list(gone) + sorted(files)
        list(pool.map(io.delete, garbage))
    return {"expired_snapshots": len(expired), "deleted_files": len(garbage)}


def _file_paths(manifest: ManifestFile, io: FileIO) -> set[str]:
    return {entry.data_file.file_path for entry in manifest.fetch_manifest_entry(io, discard_deleted=False)}


RUNNERS = {
    "compact": compact,
    "checkpoint": checkpoint,
    "snapshot": snapshot,
    "vacuum": vacuum,
    "cdf_write": cdf_write,
    "expire": expire,
}
