"""Bin-packing files into rewrite groups and re-cutting rows into files, shared by every format's compaction.

First-fit decreasing: largest files first, each into the first group it still fits, so groups come
out full and few; ties are broken by name so a plan is the same on every run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol, TypeVar

import pyarrow as pa

__all__ = [
    "UNBOUNDED_ROWS",
    "OutputFile",
    "first_fit_decreasing",
    "rows_per_file",
    "split_into_files",
    "write_files",
]

Item = TypeVar("Item")
WrittenT = TypeVar("WrittenT")
WrittenT_co = TypeVar("WrittenT_co", covariant=True)

#: Rows per file when no estimate is possible: the group becomes one file.
UNBOUNDED_ROWS = 2**62


def first_fit_decreasing(
    items: Sequence[Item], size: Callable[[Item], int], name: Callable[[Item], str], limit: int
) -> list[list[Item]]:
    """Groups of at most ``limit`` total size (an item larger than ``limit`` gets a group alone).

    Items come largest first, so a group with less room than the smallest item is closed for good:
    only open groups are tried, which keeps a partition of a million equal files linear."""
    ordered = sorted(items, key=lambda i: (-size(i), name(i)))
    smallest = size(ordered[-1]) if ordered else 0
    groups: list[list[Item]] = []
    used: list[int] = []
    open_groups: list[int] = []  # indexes of groups that may still take an item, in creation order
    for item in ordered:
        need = size(item)
        for position, index in enumerate(open_groups):
            if used[index] + need <= limit:
                groups[index].append(item)
                used[index] += need
                if used[index] + smallest > limit:
                    del open_groups[position]
                break
        else:
            groups.append([item])
            used.append(need)
            if need + smallest <= limit:
                open_groups.append(len(groups) - 1)
    return groups


def rows_per_file(target_bytes: int, input_bytes: int, input_rows: int | None) -> int:
    """Rows per output file so files land near ``target_bytes``, from the inputs' bytes per row
    (compression of rewritten rows is about that of the inputs)."""
    if not input_rows or not input_bytes:
        return UNBOUNDED_ROWS
    return max(1, math.floor(target_bytes / (input_bytes / input_rows)))


Chunk = TypeVar("Chunk", pa.Table, pa.RecordBatch)


def split_into_files(chunks: Iterable[Chunk], rows_per_file: int) -> Iterator[tuple[Chunk, bool]]:
    """Re-cut a stream of Arrow tables or batches into pieces that fill files of ``rows_per_file``
    rows: yields ``(piece, file_complete)``; a writer writes each piece and starts a new file after
    every complete one. The last file may be short (its last piece is not marked complete)."""
    in_file = 0
    for chunk in chunks:
        while chunk.num_rows:
            room = rows_per_file - in_file
            piece = chunk.slice(0, room)
            chunk = chunk.slice(room)
            in_file += piece.num_rows
            complete = in_file >= rows_per_file
            if complete:
                in_file = 0
            yield piece, complete


class OutputFile(Protocol[WrittenT_co]):
    """One output file being written by a format's writer: rows in, then stored (or dropped)."""

    def write(self, data: pa.Table | pa.RecordBatch) -> None: ...

    def finish(self) -> WrittenT_co | None:
        """Store the file and describe it; None when it holds no rows (nothing stored)."""

    def abort(self) -> None:
        """Drop what was written; nothing of this file is stored."""


def write_files(
    chunks: Iterable[Chunk],
    rows_per_file: int,
    open_file: Callable[[int], OutputFile[WrittenT]],
    remove: Callable[[list[WrittenT]], object],
) -> list[WrittenT]:
    """Write ``chunks`` into files of ``rows_per_file`` rows, one :class:`OutputFile` at a time
    (``open_file`` gets the number of files stored so far), so a task holds one file's buffer
    whatever it rewrites. On any failure the open file is aborted and ``remove`` deletes the files
    already stored before the error goes up: a failed task leaves nothing behind."""
    written: list[WrittenT] = []
    current = open_file(0)
    try:
        for piece, complete in split_into_files(chunks, rows_per_file):
            current.write(piece)
            if complete:
                if (done := current.finish()) is not None:
                    written.append(done)
                current = open_file(len(written))
        if (done := current.finish()) is not None:
            written.append(done)
    except BaseException:
        current.abort()
        remove(written)
        raise
    return written
