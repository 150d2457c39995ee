"""A large commit file's ``add`` lines read as Arrow columns ("Delta Log Entries", "Add File and Remove File").

A commit of thousands of adds (a big write, a table without checkpoints) costs about 5 µs a line to
validate into an object and 2 KB to hold it. Its add lines are read instead by Arrow's JSON reader
into one :class:`~lakeops.delta.checkpoint_reader.AddColumn`, in checkpoint form (``partitionValues``
as a map), and the other lines by :func:`~lakeops.delta.commit_file.parse_commit` as before.

The columns are used only where they say exactly what validation would: every add line is one object
with only the ``add`` key, its fields are the protocol's (no deletion vector, no undeclared field) and
of the protocol's JSON types, and no partition value or tag is null (Arrow cannot tell a null from an
absent key). Anything else — and any error — is left to ``parse_commit``, which gives the objects or
the error naming the line.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.json as pj

from lakeops.delta.checkpoint_reader import AddColumn, fits_add_column
from lakeops.delta.commit_file import CommitActions, parse_commit
from lakeops.errors import CorruptFile

__all__ = ["MIN_COLUMN_ROWS", "parse_commit_columnar"]

#: Commits with fewer add lines are read as objects: the columns pay off on large commits only.
MIN_COLUMN_ROWS = 1_000

_ADD_LINE = b'{"add"'
_FIELDS = {"path", "partitionValues", "size", "modificationTime", "dataChange", "stats", "tags"}
_MAPS = ("partitionValues", "tags")


def parse_commit_columnar(
    raw: bytes, version: int, location: str, partition_columns: list[str]
) -> tuple[CommitActions, AddColumn | None]:
    """The commit's actions, its adds as one column when it has many plain ones (else as objects in
    ``adds``); the same actions and errors as :func:`parse_commit`. ``partition_columns``: the
    table's, so their values are read as the strings they are (not as dates Arrow would infer)."""
    lines = raw.split(b"\n")
    adds = [line for line in lines if line.startswith(_ADD_LINE)]
    if len(adds) < MIN_COLUMN_ROWS:
        return parse_commit(raw, version, location), None
    try:
        # The other lines keep their numbers (add lines become blank ones) for parse_commit's errors.
        others = parse_commit(
            b"\n".join(b"" if line.startswith(_ADD_LINE) else line for line in lines), version, location
        )
    except CorruptFile:
        others = None  # the first error in file order may be an add line's: let the full parse report it
    column = _add_column(adds, partition_columns) if others is not None and not others.adds else None
    if column is None:
        return parse_commit(raw, version, location), None
    return others, column  # type: ignore[return-value]


def _add_column(lines: list[bytes], partition_columns: list[str]) -> AddColumn | None:
    # The protocol's JSON types, declared: a value of another type is an error here (then validation
    # decides), never a conversion. Other fields are inferred, then refused or checked below.
    partitions = pa.struct([pa.field(name, pa.string()) for name in dict.fromkeys(partition_columns)])
    declared = [
        ("path", pa.string()),
        ("partitionValues", partitions),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("stats", pa.string()),
    ]
    parse = pj.ParseOptions(
        explicit_schema=pa.schema([("add", pa.struct(declared))]), unexpected_field_behavior="infer"
    )
    try:
        table = pj.read_json(
            pa.BufferReader(b"\n".join(lines)), read_options=pj.ReadOptions(block_size=1 << 24), parse_options=parse
        )
    except (pa.ArrowException, OSError):
        return None
    if table.column_names != ["add"] or table.num_rows != len(lines):  # a line holding two objects, or more keys
        return None
    adds = table.column("add").combine_chunks()
    if not pa.types.is_struct(adds.type) or adds.null_count or not set(adds.type.names) <= _FIELDS:
        return None
    fields, arrays = [], []
    for i, field in enumerate(adds.type):
        child = adds.field(i)
        if field.name in _MAPS:
            child = _struct_to_map(child, required=field.name == "partitionValues")
            if child is None:
                return None
        fields.append(pa.field(field.name, child.type))
        arrays.append(child)
    struct = pa.StructArray.from_arrays(arrays, fields=fields)
    return AddColumn(struct) if fits_add_column(struct) else None


def _struct_to_map(array: pa.Array, *, required: bool) -> pa.Array | None:
    """A JSON object column (inferred as a struct) as ``map<string, string>``: only when every value
    is a string and present (a null could be an absent key), and the object itself is never null
    (``tags`` may be absent on every row: then it stays all null)."""
    if pa.types.is_null(array.type):
        return None if required else pa.nulls(len(array), type=pa.map_(pa.string(), pa.string()))
    if not pa.types.is_struct(array.type) or array.null_count:
        return None
    names = array.type.names
    children = [array.field(i) for i in range(len(names))]
    if any(not pa.types.is_string(c.type) or c.null_count for c in children):
        return None
    rows, width = len(array), len(names)
    offsets = pa.array(range(0, rows * width + 1, width) if width else [0] * (rows + 1), type=pa.int32())
    keys = pa.array(names * rows, type=pa.string())
    if width <= 1:
        items = children[0] if width else pa.array([], type=pa.string())
    else:  # row-major: each row's values in key order
        flat = pa.concat_arrays(children)
        items = flat.take(pa.array([c * rows + r for r in range(rows) for c in range(width)], type=pa.int64()))
    return pa.MapArray.from_arrays(offsets, keys, items)
