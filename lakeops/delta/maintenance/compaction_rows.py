"""Compaction candidates taken from a snapshot's Arrow rows, without an object per file.

A table of 10 M small files plans 10 M candidates; as ``Add`` and ``SourceFile`` objects that is
about 2.5 KB a file (25 GB). The checkpoint's rows (:class:`~lakeops.delta.checkpoint_reader.AddColumn`:
plain files, no deletion vector) are instead split by partition with an Arrow ``group_by``, filtered
by size, ordered and bin-packed from their size column; a group keeps the rows it took (the column
and row numbers, not copies), and its ``SourceFile`` objects are built only when the group is rewritten,
committed or serialized for a task. The rules are the object route's ("Add File and Remove File",
https://github.com/delta-io/delta/blob/master/PROTOCOL.md#add-file-and-remove-file): same
partition keys, same bins, same order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakeops.delta.checkpoint_reader import AddColumn, map_values
from lakeops.delta.live_paths import NOT_PLAIN
from lakeops.storage.uri import resolve

__all__ = ["PartitionKey", "SourceRows", "locations", "partitions"]

PartitionKey = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class SourceRows:
    """Rows ``rows`` (int64 positions) of ``column``: input files of one group."""

    column: AddColumn
    rows: pa.Array

    def __len__(self) -> int:
        return len(self.rows)

    def sizes(self) -> pa.Array:
        return self.column.struct.field("size").take(self.rows)

    def paths(self) -> pa.Array:
        return self.column.paths.take(self.rows)


def partitions(column: AddColumn) -> Iterator[tuple[PartitionKey, pa.Array]]:
    """Each partition of ``column``'s rows (its key as the object route sorts it) with its row positions."""
    values = column.struct.field("partitionValues")
    rows = len(values)
    offsets = np.asarray(values.offsets)
    width = int(offsets[1] - offsets[0]) if rows else 0
    names = values.keys.slice(offsets[0], width).to_pylist() if rows else []
    uniform = (
        rows
        and not values.null_count
        and bool(np.all(np.diff(offsets) == width))
        and (not width or pc.all(pc.equal(values.keys.slice(offsets[0], rows * width), pa.array(names * rows))).as_py())
    )
    if not uniform:  # a writer varied the keys: group the rows' dicts in Python (rare)
        by_key: dict[PartitionKey, list[int]] = {}
        for row, found in enumerate(map_values(values)):
            by_key.setdefault(tuple(sorted((found or {}).items())), []).append(row)
        for key, positions in by_key.items():
            yield key, pa.array(positions, pa.int64())
        return
    if not width:  # an unpartitioned table: one partition of every row
        yield (), pa.array(np.arange(rows, dtype=np.int64))
        return
    items = values.items.slice(offsets[0], rows * width)
    columns = {f"k{j}": items.take(pa.array(np.arange(j, rows * width, width))) for j in range(width)}
    table = pa.table({**columns, "row": pa.array(np.arange(rows, dtype=np.int64))})
    grouped = table.group_by(list(columns), use_threads=False).aggregate([("row", "list")])
    keys = [grouped.column(name).to_pylist() for name in columns]
    lists = grouped.column("row_list").combine_chunks()
    for i in range(len(lists)):
        yield tuple(sorted(zip(names, (k[i] for k in keys), strict=True))), lists[i].values


def locations(table_root: str, paths: pa.Array) -> pa.Array:
    """Each path's location (``resolve``): the root, a slash and the path when nothing needs decoding."""
    if (
        not table_root.startswith(("/", "s3://", "s3a://", "s3n://"))
        or pc.any(pc.match_substring_regex(paths, NOT_PLAIN)).as_py()
    ):
        return pa.array([resolve(table_root, p) for p in paths.to_pylist()], pa.string())
    prefix = table_root.rstrip("/") + "/"
    return pc.binary_join_element_wise(prefix, paths.cast(pa.string()), "")
