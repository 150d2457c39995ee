"""Delta tables written by delta-rs: many small files partitioned by day (compaction), and a table
with the change data feed enabled and a run of inserts, updates and deletes (CDC)."""

from __future__ import annotations

from pathlib import Path

from deltalake import DeltaTable, write_deltalake

from bench.settings import DELTA_PARQUET
from bench.workloads.model import Workload, tree_bytes
from bench.workloads.rows import event_rows
from lakeops.delta.properties import ENABLE_CHANGE_DATA_FEED


def small_files(root: Path, *, files: int, rows_per_file: int, days: int) -> Workload:
    """``files`` small files: ``files / days`` appends, each writing one file into each of ``days``
    day partitions (one delta-rs write per append, as a streaming ingester leaves them)."""
    days = max(1, min(days, files))
    appends = max(1, files // days)
    for k in range(appends):
        for d in range(days):
            part = event_rows((k * days + d) * rows_per_file, rows_per_file, day=d, seed=k * days + d)
            write_deltalake(str(root), part, partition_by=["day"], mode="append")
    written = appends * days
    return Workload(
        root=root,
        target=str(root),
        size=written,
        unit="files",
        bytes=tree_bytes(root),
        params={"parquet": DELTA_PARQUET},
    )


def change_feed(root: Path, *, rows: int, commits: int = 10) -> Workload:
    """A CDF-enabled table whose versions 1.. hold ``rows`` changed rows: ``commits`` appends, then an
    update and a delete each touching a tenth of the appended rows (cdc files, pre/post images)."""
    base = event_rows(0, 1000, day=0, seed=0)
    write_deltalake(str(root), base, mode="error", configuration={ENABLE_CHANGE_DATA_FEED: "true"})
    per_commit = max(1, rows // commits)
    for k in range(commits):
        write_deltalake(str(root), event_rows(1000 + k * per_commit, per_commit, day=k % 7, seed=k), mode="append")
    table = DeltaTable(str(root))
    appended = per_commit * commits
    tenth = appended // 10
    table.update(predicate=f"id >= 1000 AND id < {1000 + tenth}", updates={"amount": "amount + 1"})
    table.delete(predicate=f"id >= {1000 + tenth} AND id < {1000 + 2 * tenth}")
    # Change rows: every insert, a pre- and post-image per updated row, one row per deleted row.
    changed = appended + 3 * tenth
    return Workload(
        root=root,
        target=str(root),
        size=changed,
        unit="change rows",
        bytes=tree_bytes(root),
        params={"parquet": DELTA_PARQUET},
    )
