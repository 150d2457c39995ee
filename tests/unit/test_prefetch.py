"""read_ahead: the items in order, produced one step ahead in another thread, errors where they happen."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from lakeops.prefetch import read_ahead


def test_items_come_in_order_each_read_one_step_ahead_in_another_thread() -> None:
    produced: list[int] = []
    readers: set[str] = set()

    def source() -> Iterator[int]:
        for i in range(5):
            readers.add(threading.current_thread().name)
            produced.append(i)
            yield i

    seen = []
    for item in read_ahead(source()):
        seen.append((item, len(produced)))
    assert [item for item, _ in seen] == [0, 1, 2, 3, 4]
    # While the caller holds item i, item i + 1 is being (or has been) read, never i + 2.
    assert all(count <= item + 2 for item, count in seen)
    assert readers and threading.current_thread().name not in readers


def test_an_error_is_raised_at_the_item_that_failed() -> None:
    def source() -> Iterator[int]:
        yield 1
        raise ValueError("file 2 is not Parquet")

    items = read_ahead(source())
    assert next(items) == 1
    with pytest.raises(ValueError, match="file 2 is not Parquet"):
        next(items)


def test_stopping_early_reads_no_further_than_one_item_ahead() -> None:
    produced: list[int] = []

    def source() -> Iterator[int]:
        for i in range(100):
            produced.append(i)
            yield i

    items = read_ahead(source())
    assert next(items) == 0
    items.close()
    assert produced == [0, 1]
