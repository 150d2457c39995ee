"""A snapshot's live files as a mapping ``(path, dvId) -> Add`` ("Action Reconciliation").

A large table's files come mostly from its checkpoint. Holding each as a pydantic object costs about
2 KB and 2 µs per file (a million files: gigabytes and seconds before any operation starts), and most
operations look at a fraction of them. So the checkpoint's ``add`` rows stay Arrow columns
(:class:`~lakeops.delta.checkpoint_reader.AddColumn`, minus the files later commits touched) and the
adds of commits after it are objects; ``Add`` objects of checkpoint rows are built in batches while
iterating, or one by one on lookup, and not kept.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping, Sequence, ValuesView
from itertools import chain

from lakeops.delta.actions import Add
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
