"""Arrow arrays built from Python values without pyarrow's conversion machinery.

pyarrow's ``pa.array`` (and ``pa.table`` of Python lists, ``pa.scalar``) first asks whether its input
is a pandas object, which imports pandas wherever it is installed: a fifth of a second, on the path of
every ``lakeops inspect``. Strings and fixed-width integers, what reading a Delta log builds, are
laid out here from their offsets and values directly (https://arrow.apache.org/docs/format/Columnar.html,
"Variable-size Binary Layout", "Fixed-size Primitive Layout", "Validity bitmaps").

Listed file names are looked up in such columns, and a POSIX name need not be UTF-8: ``os.fsdecode``
keeps each undecodable byte as a lone surrogate, which UTF-8 cannot encode. Arrow, Parquet and Avro
strings are UTF-8, so no column a table's metadata gives holds such a name: :func:`lookup_array` makes
it a null (found nowhere) where :func:`string_array` would raise ``UnicodeEncodeError``. Every lookup
of listed names in Arrow (Delta VACUUM on a checkpoint's rows, Iceberg orphans on manifests' columns)
goes through it, so such a file is what it is without Arrow: unreferenced.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa

__all__ = ["int_array", "lookup_array", "string_array", "take_chunked"]

#: Past this many bytes a ``string`` array's 32-bit offsets overflow.
_MAX_STRING_BYTES = 2**31 - 1


def string_array(values: Sequence[str]) -> pa.Array:
    """``pa.array(values, pa.string())``: the UTF-8 bytes concatenated, with their offsets."""
    return _strings([value.encode() for value in values])


def lookup_array(values: Sequence[str | None]) -> pa.Array:
    """``values`` to look for in string columns (``pc.is_in``): a null for None and for each value
    that is not UTF-8 (a file name's lone surrogates), which equals no Arrow string."""
    encoded = [_utf8(value) for value in values]
    valid = np.fromiter((e is not None for e in encoded), dtype=np.bool_, count=len(encoded))
    return _strings([e or b"" for e in encoded], None if valid.all() else valid)


def _utf8(value: str | None) -> bytes | None:
    if value is None:
        return None
    try:
        return value.encode()
    except UnicodeEncodeError:
        return None


def _strings(encoded: Sequence[bytes], valid: np.ndarray | None = None) -> pa.Array:
    """A string array of the UTF-8 ``encoded`` values; where ``valid`` is False, a null."""
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    if offsets[-1] > _MAX_STRING_BYTES:  # rare: pyarrow chooses the layout
        texts = [e.decode() if valid is None or valid[i] else None for i, e in enumerate(encoded)]
        return pa.array(texts, type=pa.string())
    validity = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    nulls = 0 if valid is None else len(encoded) - int(valid.sum())
    data = pa.py_buffer(b"".join(encoded))
    return pa.StringArray.from_buffers(
        len(encoded), pa.py_buffer(offsets.astype(np.int32)), data, validity, null_count=nulls
    )


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
