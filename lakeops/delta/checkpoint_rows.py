"""A checkpoint's rows in checkpoint order, from action objects and Arrow add rows ("Checkpoints").

The rows are the table's actions (``protocol``, ``metaData``, ``txn``) first, then every live add and
kept tombstone sorted by ``(path, kind, dvId)`` (adds before removes), as
:func:`lakeops.delta.maintenance.checkpoint.select_actions` orders them. A large table's adds are
mostly Arrow rows (:class:`~lakeops.delta.live_files.LiveFiles`); they are sorted, cut into parts
and written as Arrow — cast once to the checkpoint schema's ``add`` type and taken into place —
without an object per file. Objects (table actions, tombstones, adds with a deletion vector) are
encoded by :func:`~lakeops.delta.checkpoint_writer.encode_actions` and taken into place beside them.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakeops.arrays import int_array, string_array, take_chunked
from lakeops.delta.actions import KEY_OF, Add, Remove
from lakeops.delta.checkpoint_reader import AddColumn
from lakeops.delta.checkpoint_writer import CheckpointAction, encode_actions
from lakeops.errors import ProtocolError

__all__ = ["CheckpointRows", "cast_add_rows", "cast_add_struct"]

_PARSED = ("stats_parsed", "partitionValues_parsed")

#: Rows encoded and written at a time (one row group each) when writing a part.
BATCH_ROWS = 131_072


def cast_add_rows(columns: Sequence[AddColumn], add_type: pa.StructType) -> list[pa.StructArray] | None:
    """The rows of ``columns`` as the checkpoint schema's ``add`` struct, or None when they hold a
    field the schema has no place for (a value an object would carry as an extra) or typed
    statistics are asked for: then they are written as objects, whose encoding knows what to do."""
    if any(field.name in _PARSED for field in add_type):
        return None  # typed statistics are derived per object
    cast = [cast_add_struct(column.struct, add_type) for column in columns]
    return None if any(c is None for c in cast) else cast


def cast_add_struct(struct: pa.StructArray, add_type: pa.StructType) -> pa.StructArray | None:
    """``add`` rows as ``add_type``, or None when a value has no place there (see :func:`cast_add_rows`)."""
    rows = len(struct)
    present = {struct.type.field(i).name: struct.field(i) for i in range(struct.type.num_fields)}
    children = []
    for field in add_type:
        child = present.pop(field.name, None)
        if child is None or child.null_count == rows:
            if not field.nullable:
                return None
            # A null struct still holds values for its required children: Parquet refuses nulls there.
            nulls = pa.array([None] * rows, type=field.type) if pa.types.is_struct(field.type) else None
            children.append(nulls if nulls is not None else pa.nulls(rows, type=field.type))
            continue
        try:
            children.append(child.cast(field.type))
        except (pa.ArrowException, ValueError):
            return None
    if any(child.null_count != rows for name, child in present.items() if name != "stats"):
        return None  # "stats" alone may go: a table that writes no JSON stats drops it for objects too
    return pa.StructArray.from_arrays(children, fields=list(add_type))


class CheckpointRows:
    """``head`` objects, then the body: ``objects`` (file actions) and ``column_rows`` (chunks of
    the ``add`` type, never concatenated: a copy of every file) merged in checkpoint order.
    Positions ``[0, len)`` index the whole; parts are ``[start, end)`` ranges."""

    def __init__(
        self,
        head: list[CheckpointAction],
        objects: list[Add | Remove],
        column_rows: list[pa.StructArray] | None = None,
    ) -> None:
        self.head = head
        self.objects = objects
        self.column_rows = column_rows or []
        columns = sum(len(chunk) for chunk in self.column_rows)
        paths = [chunk.field("path") for chunk in self.column_rows] + [string_array([a.path for a in objects])]
        body = pa.Table.from_pydict(
            {
                # Concatenated for the sort only (a sort over chunks takes twice as long), then let go:
                # positions keep the sort's row numbers, not a sorted copy of every path.
                "path": pa.concat_arrays(paths),
                "kind": int_array([0] * columns + [0 if type(a) is Add else 1 for a in objects], pa.int8()),
                "dv": string_array(
                    [""] * columns + [a.deletion_vector.unique_id if a.deletion_vector else "" for a in objects]
                ),
            }
        )
        # Body rows below ``columns`` are column rows; the others are objects (minus ``columns``).
        order = pc.sort_indices(body, sort_keys=[("path", "ascending"), ("kind", "ascending"), ("dv", "ascending")])
        self._columns = columns
        self._unsorted_paths = pa.chunked_array(paths, type=pa.string())
        self._kinds = body.column("kind").take(order).combine_chunks()
        self._sources = order.cast(pa.int64())

    def __len__(self) -> int:
        return len(self.head) + len(self._sources)

    def path(self, position: int) -> str | None:
        """The file path at ``position``; None for a table action."""
        body = position - len(self.head)
        return None if body < 0 else self._unsorted_paths[self._sources[body].as_py()].as_py()

    def counts(self, start: int, end: int) -> tuple[int, int]:
        """``(adds, removes)`` among positions ``[start, end)``."""
        body = self._kinds.slice(max(0, start - len(self.head)), max(0, end - max(start, len(self.head))))
        adds = len(body) - pc.sum(body).as_py() if len(body) else 0
        return adds, len(body) - adds

    def ranges(self, part_size: int) -> list[tuple[int, int]]:
        """Ranges of at most ``part_size`` rows, cut only between different paths (the table's actions
        stay in the first); a path with more rows than that is a range of its own."""
        total = len(self)
        ranges: list[tuple[int, int]] = []
        start = 0
        while total - start > part_size:
            end = start + part_size
            group = end  # the first row of the group ``end`` is in
            while group > start and self._same(group - 1, end):
                group -= 1
            if group > start:
                end = group
            else:  # one group fills the range: it takes all its rows
                while end < total and self._same(end - 1, end):
                    end += 1
            ranges.append((start, end))
            start = end
        ranges.append((start, total))
        return ranges

    def _same(self, a: int, b: int) -> bool:
        """Whether positions ``a`` and ``b`` are of one group: the table's actions, or one path."""
        head = len(self.head)
        return (a < head) == (b < head) and (a < head or self.path(a) == self.path(b))

    def parquet(self, start: int, end: int, schema: pa.Schema, *, batch_rows: int = BATCH_ROWS) -> bytes:
        """The checkpoint file of positions ``[start, end)``, encoded and written ``batch_rows`` at a
        time (a row group each): memory holds one batch's rows, not a copy of every file."""
        sink = pa.BufferOutputStream()
        with pq.ParquetWriter(sink, schema, compression="snappy") as writer:
            for batch in range(start, end, batch_rows):
                writer.write_table(self.encode(batch, min(end, batch + batch_rows), schema))
            if start == end:
                writer.write_table(schema.empty_table())
        return bytes(sink.getvalue().to_pybytes())

    def encode(self, start: int, end: int, schema: pa.Schema) -> pa.Table:
        """The checkpoint table of positions ``[start, end)`` in ``schema``."""
        head = self.head[start : min(end, len(self.head))]
        body_start = max(0, start - len(self.head))
        sources = self._sources.slice(body_start, max(0, end - len(self.head) - body_start))
        kinds = self._kinds.slice(body_start, len(sources))
        is_object = pc.greater_equal(sources, self._columns)
        picked = sources.filter(is_object).to_pylist()
        objects: list[CheckpointAction] = [*head, *(self.objects[s - self._columns] for s in picked)]
        encoded = encode_actions(objects, schema)
        if not self._columns or len(picked) == len(sources):
            return encoded  # no column rows here: the objects are all of it, in order
        # Where each row's value is: objects by their order in ``encoded``, column rows after them.
        object_at = pc.add(pc.subtract(pc.cumulative_sum(pc.cast(is_object, pa.int64())), 1), len(head))
        index = pc.if_else(is_object, object_at, pc.add(sources, len(objects)))
        index = pa.concat_arrays([pa.array(range(len(head)), type=pa.int64()), index])
        body_kind = pc.if_else(pc.equal(kinds, 0), "add", "remove")
        kind = pa.concat_arrays([pa.array([KEY_OF[type(a)] for a in head], type=pa.string()), body_kind])
        arrays = []
        for name in schema.names:
            target = schema.field(name).type
            values = encoded.column(name).chunks
            column = pa.chunked_array([*values, *self.column_rows] if name == "add" else values, type=target)
            arrays.append(_place(column, index, pc.equal(kind, name), target))
        try:
            return pa.Table.from_arrays(arrays, schema=schema)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise ProtocolError(f"cannot encode checkpoint rows into the checkpoint schema ({exc})") from exc


def _place(values: pa.ChunkedArray, index: pa.Array, member: pa.Array, target: pa.StructType) -> pa.Array:
    """The column whose ``member`` rows hold ``values[index]`` and the others are null. Those slots
    take a null struct's empty values underneath (Parquet refuses a null in a non-nullable child even
    under a null parent): an empty string per slot, not a copy of some member's action."""
    if not pc.any(member).as_py():
        return pa.array([None] * len(index), type=target)
    empty = pa.array([None], type=target)  # children hold empty values, not nulls
    values = pa.chunked_array([*values.chunks, empty], type=target)
    taken = take_chunked(values, pc.if_else(member, index, len(values) - 1))
    children = [taken.field(i) for i in range(target.num_fields)]
    absent = None if pc.all(member).as_py() else pc.invert(member)
    return pa.StructArray.from_arrays(children, fields=list(target), mask=absent)
