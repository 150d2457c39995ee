"""A log-only Delta table of millions of actions, generated streaming (issue 23 part 4's workload).

The table starts at a multi-part checkpoint (the commits before it expired, as log expiry leaves
them) of ``actions - 4 * per_commit`` adds, followed by three commits of ``per_commit`` new adds and
one removing ``per_commit`` checkpoint files 30 days ago. No data files exist. The checkpoint's
Arrow schema is the one lakeops itself writes for this table (taken from a 2-file probe), so the
bytes are what a lakeops checkpoint of the same state would hold; parts are written with pyarrow a
row group at a time, so generating 10 M actions holds one batch, not the table.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq

from bench.workloads import delta_log
from bench.workloads.model import Workload, tree_bytes

#: The checkpoint's version: the first JSON commit after it is this plus one.
CHECKPOINT_VERSION = 10
PART_ROWS = 1_000_000
BATCH_ROWS = 100_000


def scale_log(root: Path, *, actions: int, per_commit: int = 10_000, days: int = 30) -> Workload:
    """``actions`` actions: a checkpoint of adds, three commits of adds, one commit of removes."""
    now_ms = int(time.time() * 1000)
    in_checkpoint = actions - 4 * per_commit
    if in_checkpoint < 1:
        raise ValueError(f"{actions} actions leave no checkpoint after 4 commits of {per_commit}")
    log = root / "_delta_log"
    log.mkdir(parents=True)
    table_rows, file_row = _probe()
    schema = table_rows.schema
    parts = -(-in_checkpoint // PART_ROWS)
    for part in range(parts):
        name = f"{CHECKPOINT_VERSION:020d}.checkpoint.{part + 1:010d}.{parts:010d}.parquet"
        start, stop = part * PART_ROWS, min(in_checkpoint, (part + 1) * PART_ROWS)
        with pq.ParquetWriter(log / name, schema) as writer:
            if part == 0:
                writer.write_table(table_rows)
            for first in range(start, stop, BATCH_ROWS):
                writer.write_batch(_add_batch(file_row, first, min(stop, first + BATCH_ROWS), days, now_ms))
    pointer = {"version": CHECKPOINT_VERSION, "size": in_checkpoint + table_rows.num_rows, "parts": parts}
    (log / "_last_checkpoint").write_text(json.dumps(pointer))
    version = CHECKPOINT_VERSION
    for commit in range(3):
        version += 1
        first = in_checkpoint + commit * per_commit
        adds = (delta_log._add(i, days, now_ms) for i in range(first, first + per_commit))
        delta_log._write_commit(log, version, [delta_log._commit_info(now_ms, "WRITE"), *adds])
    then_ms = now_ms - 30 * delta_log.DAY_MS
    removes = (delta_log._remove(i, days, then_ms) for i in range(per_commit))
    delta_log._write_commit(log, version + 1, [delta_log._commit_info(now_ms, "DELETE"), *removes])
    return Workload(
        root=root,
        target=str(root),
        size=actions,
        unit="actions",
        bytes=tree_bytes(root),
        params={"version": version + 1, "checkpoint_parts": parts},
    )


def _probe() -> tuple[pa.Table, pa.Table]:
    """The protocol/metaData rows of the checkpoint lakeops writes for the bench table, and one of
    its add rows (whose other action columns are null as the writer encodes them)."""
    from lakeops import api

    with tempfile.TemporaryDirectory() as tmp:
        delta_log.add_log(Path(tmp), actions=2, per_commit=2)
        api.checkpoint(tmp)
        (written,) = Path(tmp, "_delta_log").glob("*.checkpoint.parquet")
        table = pq.read_table(written)
    files = pa.compute.is_valid(table.column("add"))
    return table.filter(pa.compute.invert(files)), table.filter(files).slice(0, 1)


def _add_batch(file_row: pa.Table, start: int, stop: int, days: int, now_ms: int) -> pa.RecordBatch:
    """Adds ``start..stop`` of the bench log (the same paths and stats as its JSON adds)."""
    schema = file_row.schema
    add_type = schema.field("add").type
    rows = range(start, stop)
    days_of = [f"2024-01-{1 + i % days:02d}" for i in rows]
    stats = [
        f'{{"numRecords":1000,"minValues":{{"id":{i * 1000},"amount":0.0}},'
        f'"maxValues":{{"id":{i * 1000 + 999},"amount":1.0}},"nullCount":{{"id":0,"amount":0}}}}'
        for i in rows
    ]
    count = stop - start
    values = {
        "path": pa.array([delta_log._path(i, days) for i in rows], pa.string()),
        "partitionValues": pa.array([[("day", d)] for d in days_of], add_type.field("partitionValues").type),
        "size": pa.array([4096] * count, pa.int64()),
        "modificationTime": pa.array([now_ms] * count, pa.int64()),
        "dataChange": pa.array([True] * count, pa.bool_()),
        "stats": pa.array(stats, pa.string()),
    }
    repeat = pa.array([0] * count, pa.int64())
    template = file_row.column("add").combine_chunks()
    children = [values[f.name] if f.name in values else template.field(f.name).take(repeat) for f in add_type]
    adds = pa.StructArray.from_arrays(children, fields=list(add_type))
    columns = [adds if f.name == "add" else file_row.column(f.name).take(repeat).combine_chunks() for f in schema]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
