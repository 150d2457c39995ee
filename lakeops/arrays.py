"""Arrow arrays built from Python values without pyarrow's conversion machinery.

pyarrow's ``pa.array`` (and ``pa.table`` of Python lists, ``pa.scalar``) first asks whether its input
is a pandas object, which imports pandas wherever it is installed: a fifth of a second, on the path of
every ``lakeops inspect``. Strings and fixed-width integers, what reading a Delta log builds, are
laid out here from their offsets and values directly (https://arrow.apache.org/docs/format/Columnar.html,
"Variable-size Binary Layout", "Fixed-size Primitive Layout").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa

__all__ = ["int_array", "string_array", "take_chunked"]

#: Past this many bytes a ``string`` array's 32-bit offsets overflow.
_MAX_STRING_BYTES = 2**31 - 1


def string_array(values: Sequence[str]) -> pa.Array:
    """``pa.array(values, pa.string())``: the UTF-8 bytes concatenated, with their offsets."""
    encoded = [value.encode() for value in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    if offsets[-1] > _MAX_STRING_BYTES:
        return pa.array(values, type=pa.string())  # rare: pyarrow chooses the layout
    data = pa.py_buffer(b"".join(encoded))
    return pa.StringArray.from_buffers(len(encoded), pa.py_buffer(offsets.astype(np.int32)), data)


def int_array(values: Iterable[int], type: pa.DataType) -> pa.Array:
    """``pa.array(values, type)`` for a signed integer ``type`` (``int8`` .. ``int64``), no nulls."""
    if not pa.types.is_signed_integer(type):
        raise TypeError(f"int_array builds signed integers, not {type}")
    numbers = np.fromiter(values, dtype=np.dtype(f"int{type.bit_width}"))
    return pa.Array.from_buffers(type, len(numbers), [None, pa.py_buffer(numbers)])


def take_chunked(values: pa.ChunkedArray, indices: pa.Array) -> pa.Array:
    """``values.take(indices)`` as one array, taking from each chunk only its own rows:
    ``ChunkedArray.take`` concatenates every chunk first, a copy of the whole column per call."""
    chunks = values.chunks
    if len(chunks) == 1:
        return chunks[0].take(indices)
    wanted = indices.to_numpy(zero_copy_only=False).astype(np.int64)
    starts = np.zeros(len(chunks) + 1, dtype=np.int64)
    np.cumsum([len(chunk) for chunk in chunks], out=starts[1:])
    owner = np.searchsorted(starts, wanted, side="right") - 1
    order = np.argsort(owner, kind="stable")  # rows grouped by chunk, each group in request order
    pieces = [
        chunks[chunk].take(pa.array(wanted[order[owner[order] == chunk]] - starts[chunk])) for chunk in np.unique(owner)
    ]
    if not pieces:
        return pa.array([], type=values.type)
    grouped = pa.concat_arrays(pieces)
    back = np.empty_like(order)
    back[order] = np.arange(len(order))  # where each requested row landed in ``grouped``
    return grouped.take(pa.array(back))
