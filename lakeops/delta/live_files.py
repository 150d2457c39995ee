"""A snapshot's live files as a mapping ``(path, dvId) -> Add`` ("Action Reconciliation").

A large table's files come mostly from its checkpoint. Holding each as a pydantic object costs about
2 KB and 2 µs per file (a million files: gigabytes and seconds before any operation starts), and most
operations look at a fraction of them. So the checkpoint's ``add`` rows stay Arrow columns
(:class:`~lakeops.delta.checkpoint_reader.AddColumn`, minus the files later commits touched) and the
adds of commits after it are objects; ``Add`` objects of checkpoint rows are built in batches while
iterating, or one by one on lookup, and not kept.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, Mapping, Sequence, ValuesView
from itertools import chain

import pyarrow as pa
import pyarrow.compute as pc

from lakeops.arrays import string_array
from lakeops.delta.actions import Add, Remove
from lakeops.delta.checkpoint_reader import AddColumn

FileKey = tuple[str, str | None]

#: Rows turned into objects at a time while iterating: bounds the objects alive at once.
BATCH_ROWS = 65_536


class LiveFiles(Mapping[FileKey, Add]):
    """Live files: checkpoint rows (``columns``, keys ``(path, None)``, none of them in ``objects``)
    first, in checkpoint order, then ``objects`` in replay order."""

    def __init__(self, columns: Sequence[AddColumn] = (), objects: dict[FileKey, Add] | None = None) -> None:
        self._columns = [c for c in columns if len(c)]
        self._objects: dict[FileKey, Add] = {} if objects is None else objects
        self._index: dict[str, tuple[int, int]] | None = None

    @property
    def columns(self) -> list[AddColumn]:
        """The checkpoint rows kept as Arrow (for consumers that can work on columns)."""
        return self._columns

    @property
    def objects(self) -> dict[FileKey, Add]:
        """The files held as objects (commit adds, and checkpoint rows that could not stay columns)."""
        return self._objects

    def __len__(self) -> int:
        return len(self._objects) + sum(len(c) for c in self._columns)

    def __iter__(self) -> Iterator[FileKey]:
        for column in self._columns:
            for start in range(0, len(column), BATCH_ROWS):
                for path in column.paths.slice(start, BATCH_ROWS).to_pylist():
                    yield (path, None)
        yield from self._objects

    def __contains__(self, key: object) -> bool:
        return key in self._objects or self._locate(key) is not None

    def __getitem__(self, key: FileKey) -> Add:
        found = self._objects.get(key)
        if found is not None:
            return found
        where = self._locate(key)
        if where is None:
            raise KeyError(key)
        column, row = where
        return self._columns[column].build(row, row + 1)[0]

    def _locate(self, key: object) -> tuple[int, int] | None:
        if not self._columns or not isinstance(key, tuple) or len(key) != 2 or key[1] is not None:
            return None
        if self._index is None:  # built on the first lookup only: iteration needs none
            self._index = {
                path: (i, row)
                for i, column in enumerate(self._columns)
                for row, path in enumerate(column.paths.to_pylist())
            }
        return self._index.get(key[0])

    def _column_adds(self) -> Iterator[Add]:
        for column in self._columns:
            for start in range(0, len(column), BATCH_ROWS):
                yield from column.build(start, start + BATCH_ROWS)

    def values(self) -> ValuesView[Add]:
        return _Values(self)

    def items(self) -> ItemsView[FileKey, Add]:
        return _Items(self)

    def __repr__(self) -> str:
        return f"LiveFiles({len(self)} files, {sum(len(c) for c in self._columns)} as Arrow rows)"


class _Values(ValuesView[Add]):
    _mapping: LiveFiles

    def __iter__(self) -> Iterator[Add]:
        return chain(self._mapping._column_adds(), self._mapping.objects.values())


class _Items(ItemsView[FileKey, Add]):
    _mapping: LiveFiles

    def __iter__(self) -> Iterator[tuple[FileKey, Add]]:
        column_items = (((add.path, None), add) for add in self._mapping._column_adds())
        return chain(column_items, self._mapping.objects.items())


class ColumnReplay:
    """Log replay's share for adds kept as Arrow rows (all without a deletion vector: keys
    ``(path, None)``): which rows stay live, decided at the end with Arrow rather than row by row.

    A row is live unless a later version touched its path: a remove or add held as an object
    (recorded by :meth:`touch`), or a later row of the same path (the last row wins).
    """

    def __init__(self) -> None:
        self._columns: list[AddColumn] = []
        self._versions: list[int] = []
        self._version = 0  # 0: the checkpoint; each commit after it counts one more
        self._touched: dict[str, int] = {}  # path -> the last version a remove or object add named it

    def __bool__(self) -> bool:
        return bool(self._columns)

    def next_version(self) -> None:
        self._version += 1

    def touch(self, actions: Iterable[Add | Remove]) -> None:
        if self._columns:
            version = self._version
            self._touched.update((a.path, version) for a in actions if a.deletion_vector is None)

    def add(
        self, column: AddColumn, files: Mapping[FileKey, Add] = {}, tombstones: Mapping[FileKey, Remove] = {}
    ) -> list[FileKey]:
        """Keep ``column``'s rows; returns the keys of ``files`` and ``tombstones`` its rows replace."""
        self._columns.append(column)
        self._versions.append(self._version)
        plain = [path for held in (files, tombstones) for path, dv in held if dv is None]
        if not plain:
            return []
        hit = column.paths.filter(pc.is_in(column.paths, value_set=pa.array(plain, type=column.paths.type)))
        return [(path, None) for path in hit.to_pylist()]

    def are_keys(self, files: Mapping[FileKey, Add]) -> bool:
        """Whether the rows hold each path once and ``files`` none of their keys."""
        if not self._columns:
            return True
        paths = pa.chunked_array([c.paths for c in self._columns])
        if not distinct(paths):
            return False
        plain = [path for path, dv in files if dv is None]
        return not plain or not pc.any(pc.is_in(paths, value_set=pa.array(plain, type=paths.type))).as_py()

    def live(self) -> list[AddColumn]:
        """The rows still live after the last version (the replay hands its columns over)."""
        by_version: dict[int, list[str]] = {}
        for path, version in self._touched.items():
            by_version.setdefault(version, []).append(path)
        touches = sorted(by_version.items(), reverse=True)
        later: list[str] = []  # distinct: each path is in one version's list
        later_array = string_array(later)
        kept: list[AddColumn] = []
        while self._columns:  # each column let go once filtered: never two copies of every row
            column, version = self._columns.pop(), self._versions.pop()
            if touches and touches[0][0] > version:
                while touches and touches[0][0] > version:
                    later += touches.pop(0)[1]
                later_array = string_array(later)  # once per set, not per column
            kept.append(column.without(later_array))
            del column
        kept.reverse()
        return _last_rows(kept)


#: Sorted paths compared a slice at a time by :func:`distinct`.
_SLICE_ROWS = 1 << 20


def distinct(paths: pa.ChunkedArray) -> bool:
    """Whether no path repeats. Sorted, then neighbours compared a slice at a time: ``unique`` would
    hash and copy every path (about 100 bytes a file, a gigabyte at 10 M files); this holds the sort's
    row numbers and one slice."""
    order = pc.sort_indices(paths)
    for start in range(0, max(len(paths) - 1, 0), _SLICE_ROWS):
        values = paths.take(order.slice(start, _SLICE_ROWS + 1))
        if pc.any(pc.equal(values.slice(0, len(values) - 1), values.slice(1))).as_py():
            return False
    return True


def _last_rows(columns: list[AddColumn]) -> list[AddColumn]:
    """``columns`` keeping, of rows with the same path, only the last (a later add replaces a file)."""
    if not columns:
        return columns
    paths = pa.chunked_array([c.paths for c in columns])
    if distinct(paths):
        return columns
    rows = pa.table({"path": paths, "row": pa.array(range(len(paths)), type=pa.int64())})
    last = rows.group_by("path", use_threads=False).aggregate([("row", "max")]).column("row_max")
    keep = pc.is_in(rows.column("row"), value_set=last.combine_chunks())
    result, start = [], 0
    for column in columns:
        result.append(column.keep(keep.slice(start, len(column))))
        start += len(column)
    return result
