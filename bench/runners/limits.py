"""The hardware limit: the least work that moves the same bytes, done with pyarrow and every core.

- ``rewrite``: read every data file of each directory (a partition) and write it back as one file,
  directories in parallel, pyarrow's own threads within each read (compaction, CDC), with the writer
  options the contenders write with (the workload's ``parquet``: codec and level).
- ``log_to_parquet``: parse every JSON commit with pyarrow's JSON reader and write one Parquet file
  (a checkpoint's bytes in and out, without replay rules).
- ``read_checkpoint``: read the checkpoint's Parquet files (a snapshot load without replay rules).
- ``delete``: list the tree and unlink the files the generator knows are garbage (vacuum, GC).
"""

from __future__ import annotations

import os
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.json as pj
import pyarrow.parquet as pq

CORES = os.cpu_count() or 1
#: Directories holding metadata, not data.
_METADATA_DIRS = {"_delta_log", "metadata"}


def _data_files(root: Path) -> dict[Path, list[Path]]:
    groups: dict[Path, list[Path]] = defaultdict(list)
    for path in sorted(root.rglob("*.parquet")):
        if not _METADATA_DIRS.intersection(path.relative_to(root).parts):
            groups[path.parent].append(path)
    return groups


def rewrite(params: dict[str, Any]) -> dict[str, Any]:
    root, scratch = Path(params["root"]), Path(params["scratch"])
    groups = list(_data_files(root).values())

    def one(item: tuple[int, list[Path]]) -> int:
        index, files = item
        table = ds.dataset([str(f) for f in files], format="parquet").to_table(use_threads=True)
        pq.write_table(table, scratch / f"group-{index}.parquet", **params.get("parquet", {}))
        return table.num_rows

    with ThreadPoolExecutor(CORES) as pool:
        rows = sum(pool.map(one, enumerate(groups)))
    return {"files_read": sum(len(g) for g in groups), "files_written": len(groups), "rows": rows}


def log_to_parquet(params: dict[str, Any]) -> dict[str, Any]:
    log = Path(params["root"]) / "_delta_log"
    commits = sorted(log.glob("*.json"))[1:]  # version 0 holds protocol and metadata only

    def parse(path: Path) -> pa.Table:
        return pj.read_json(path)

    with ThreadPoolExecutor(CORES) as pool:
        tables = list(pool.map(parse, commits))
    actions = pa.concat_tables(tables, promote_options="default")
    pq.write_table(actions, Path(params["scratch"]) / "actions.parquet")
    return {"actions": actions.num_rows}


def read_checkpoint(params: dict[str, Any]) -> dict[str, Any]:
    parts = sorted((Path(params["root"]) / "_delta_log").glob("*.checkpoint*.parquet"))
    table = ds.dataset([str(p) for p in parts], format="parquet").to_table(use_threads=True)
    return {"actions": table.num_rows}


def delete(params: dict[str, Any]) -> dict[str, Any]:
    root = Path(params["root"])
    listed = sum(len(files) for _, _, files in os.walk(root))
    with ThreadPoolExecutor(CORES) as pool:
        list(pool.map(lambda relative: (root / relative).unlink(), params["garbage"]))
    return {"listed": listed, "deleted_files": len(params["garbage"])}


RUNNERS = {
    "rewrite": rewrite,
    "log_to_parquet": log_to_parquet,
    "read_checkpoint": read_checkpoint,
    "delete": delete,
}
