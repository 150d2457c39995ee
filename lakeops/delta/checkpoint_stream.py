"""The second pass of a large checkpoint: the winning rows, read again from their sources, part by part.

The first pass replays the log with the checkpoint's ``add`` rows cut to their keys and row numbers
(``load_snapshot(keys_only=True)``, "Action Reconciliation"): it decides which rows win and how the
sorted paths are cut into parts, holding no file's statistics. This pass reads each checkpoint file
(part or sidecar) once, a row group at a time (``ParquetFile.iter_batches``), keeps its winning
rows, casts them to the checkpoint schema's ``add`` type and appends each to a spill file of the
part its path falls in. A part is then its spill file, the winning rows of commits, and its objects
(tombstones, adds with a deletion vector, the table's actions in part 1): sorted and written by
:class:`~lakeops.delta.checkpoint_rows.CheckpointRows` as the whole-table path writes it, so memory
holds one part's rows, not the table's
(https://github.com/delta-io/delta/blob/master/PROTOCOL.md#checkpoints: "rows clustered by path").
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakeops.delta.actions import Add, Remove
from lakeops.delta.checkpoint_reader import AddColumn
from lakeops.delta.checkpoint_rows import CheckpointRows, cast_add_struct
from lakeops.delta.checkpoint_writer import CheckpointAction
from lakeops.errors import CorruptFile, ProtocolError
from lakeops.storage import Storage

__all__ = ["PathRange", "StreamedRows", "part_rows"]

#: ``add`` rows read from a source at a time.
BATCH_ROWS = 65_536


class PathRange(Protocol):
    """A part's path range ``[first_path, end_path)`` (None: an open end), as a plan's part holds it."""

    first_path: str | None
    end_path: str | None

    def holds(self, path: str) -> bool: ...


def _inside(bounds: PathRange, paths: pa.Array) -> pa.Array:
    """Which of ``paths`` fall in ``bounds``."""
    inside = pa.array(np.ones(len(paths), dtype=bool))
    if bounds.first_path is not None:
        inside = pc.and_(inside, pc.greater_equal(paths, bounds.first_path))
    if bounds.end_path is not None:
        inside = pc.and_(inside, pc.less(paths, bounds.end_path))
    return inside


@dataclass
class StreamedRows:
    """What the first pass leaves the second: the rows held as objects (``head``: the table's
    actions; ``objects``: file actions), winning commit rows kept as Arrow (``columns``), and per
    checkpoint file the numbers of its winning ``add`` rows (``sources``)."""

    head: list[CheckpointAction]
    objects: list[Add | Remove]
    columns: list[AddColumn] = field(default_factory=list)
    sources: dict[str, pa.Array] = field(default_factory=dict)

    @classmethod
    def of(
        cls, head: list[CheckpointAction], objects: list[Add | Remove], columns: Sequence[AddColumn]
    ) -> StreamedRows:
        sources: dict[str, list[pa.Array]] = {}
        for column in columns:
            if column.source is not None:
                sources.setdefault(column.source.location, []).append(column.struct.field("row"))
        return cls(
            head,
            objects,
            [c for c in columns if c.source is None],
            {location: pa.concat_arrays(rows) for location, rows in sources.items()},
        )


def part_rows(
    storage: Storage, rows: StreamedRows, parts: Sequence[PathRange], add_type: pa.StructType
) -> Iterator[CheckpointRows]:
    """Each part's rows in order. Every source is read before the first part is given: the spill
    files are complete. Raises :class:`~lakeops.errors.ProtocolError` for a row the ``add`` type has
    no place for (the plan checked the fields the rows set: a source changed since)."""
    spill = tempfile.TemporaryDirectory(prefix="lakeops-checkpoint-")
    try:
        files = [Path(spill.name) / f"part-{index}.parquet" for index in range(len(parts))]
        _spill(storage, rows, parts, add_type, files)
    except BaseException:
        spill.cleanup()
        raise
    return _parts(rows, parts, files, spill)


def _parts(
    rows: StreamedRows, parts: Sequence[PathRange], files: list[Path], spill: tempfile.TemporaryDirectory[str]
) -> Iterator[CheckpointRows]:
    with spill:
        for index, (bounds, file) in enumerate(zip(parts, files, strict=True)):
            spilled = pq.read_table(file).column("add").chunks if file.exists() else []
            file.unlink(missing_ok=True)
            objects = [a for a in rows.objects if bounds.holds(a.path)]
            yield CheckpointRows(rows.head if index == 0 else [], objects, spilled)


def _spill(
    storage: Storage, rows: StreamedRows, parts: Sequence[PathRange], add_type: pa.StructType, files: list[Path]
) -> None:
    """Route every winning Arrow row to its part's spill file."""
    writers: dict[int, pq.ParquetWriter] = {}
    schema = pa.schema([pa.field("add", add_type)])

    def route(struct: pa.StructArray, source: str) -> None:
        cast = cast_add_struct(struct, add_type)
        if cast is None:
            raise ProtocolError(f"{source}: add rows hold a field the checkpoint schema has no place for")
        paths = cast.field("path")
        for index, bounds in enumerate(parts):
            inside = _inside(bounds, paths)
            if not pc.any(inside).as_py():
                continue
            if index not in writers:
                writers[index] = pq.ParquetWriter(files[index], schema, compression="snappy")
            writers[index].write_table(pa.Table.from_arrays([cast.filter(inside)], schema=schema))

    try:
        for column in rows.columns:
            route(column.struct, "commit adds")
        for location, winners in rows.sources.items():
            for batch in _winning_batches(storage, location, winners):
                route(batch, location)
    finally:
        for writer in writers.values():
            writer.close()


def _winning_batches(storage: Storage, location: str, winners: pa.Array) -> Iterator[pa.StructArray]:
    """The ``add`` rows of the file at ``location`` whose numbers are in ``winners``, a row group at a
    time."""
    try:
        parquet = pq.ParquetFile(pa.BufferReader(storage.read(location)))
        keep = np.zeros(parquet.metadata.num_rows, dtype=bool)
        keep[winners.to_numpy()] = True
        offset = 0
        for batch in parquet.iter_batches(columns=["add"], batch_size=BATCH_ROWS):
            taken = keep[offset : offset + batch.num_rows]
            offset += batch.num_rows
            if taken.any():
                yield batch.column(0).filter(pa.array(taken))
    except (pa.ArrowException, OSError, IndexError) as exc:
        raise CorruptFile(f"{location}: checkpoint rows cannot be read again for the new checkpoint ({exc})") from exc
