"""Reading ahead: the next input of a rewrite is read while the current one is encoded.

A compaction or change-data task alternates between reading an input file (Parquet decoding) and
encoding output (dictionary, compression), both in pyarrow, which releases the GIL. Run in one thread
they add up; with the next read in a second thread they overlap, so a task that has a core to itself
(one CDC unit, the last groups of a compaction) takes about the longer of the two instead of their sum.
Memory grows by one input item: the one being read while the caller holds the current one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar, cast

__all__ = ["read_ahead"]

T = TypeVar("T")
_END = object()


def read_ahead(items: Iterable[T]) -> Iterator[T]:
    """``items`` in order, each produced in a background thread while the caller works on the previous
    one. ``items`` is advanced by one thread only, one step at a time (a generator is safe); its errors
    are raised here, at the item that failed; stopping early waits for the read in progress."""
    source = iter(items)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="lakeops-read-ahead") as pool:
        pending = pool.submit(next, source, _END)
        while (item := pending.result()) is not _END:
            pending = pool.submit(next, source, _END)
            yield cast(T, item)
