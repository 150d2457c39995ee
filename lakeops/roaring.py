"""Position bitmaps in the magic-prefixed portable 64-bit Roaring layout that both Delta deletion
vectors and Iceberg ``deletion-vector-v1`` blobs use: the magic ``1681511377`` little-endian
(``D1 D3 39 64``), then the portable format (8-byte little-endian bucket count, then per bucket a
4-byte little-endian key and a 32-bit Roaring bitmap).

Specifications: https://github.com/delta-io/delta/blob/master/PROTOCOL.md#deletion-vector-format and
https://iceberg.apache.org/puffin-spec/#deletion-vector-v1-blob-type; ``pyroaring.BitMap64``
serialises exactly the portable part (the shared SPEC-NOTES.md, "Delta deletion vectors").
"""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap64

from lakeops.errors import CorruptFile, InvalidArgument

__all__ = [
    "MAGIC_PORTABLE",
    "MAX_POSITION",
    "check_positions",
    "decode_portable",
    "encode_portable",
    "is_portable",
    "positions",
]

#: The magic number (little-endian) before the portable 64-bit Roaring bytes.
MAGIC_PORTABLE = 1681511377
#: Both formats require the most significant bit of a position to be 0.
MAX_POSITION = (1 << 63) - 1


def encode_portable(bitmap: BitMap64) -> bytes:
    """Magic + portable bytes of ``bitmap``, run-optimised (readers accept every container kind)."""
    if len(bitmap) and bitmap.max() > MAX_POSITION:
        raise InvalidArgument(f"position {bitmap.max()} exceeds the deletion vector maximum 2**63-1")
    bitmap = bitmap.copy()
    bitmap.run_optimize()
    return struct.pack("<I", MAGIC_PORTABLE) + bitmap.serialize()


def is_portable(data: bytes) -> bool:
    """Whether ``data`` starts with the portable layout's magic."""
    return len(data) >= 4 and struct.unpack_from("<I", data)[0] == MAGIC_PORTABLE


def decode_portable(data: bytes, source: str) -> BitMap64:
    """The bitmap of magic + portable bytes; ``source`` names the file or blob in errors."""
    if not is_portable(data):
        raise CorruptFile(f"{source}: deletion vector starts with {data[:4].hex()}, not the magic d1d33964")
    try:
        bitmap = BitMap64.deserialize(data[4:])
    except (ValueError, IndexError) as exc:
        raise CorruptFile(f"{source}: deletion vector is not a valid portable 64-bit Roaring bitmap") from exc
    return check_positions(bitmap, source)


def check_positions(bitmap: BitMap64, source: str) -> BitMap64:
    """``bitmap`` if every position is at most 2**63-1, else a :class:`CorruptFile` naming ``source``."""
    if len(bitmap) and bitmap.max() > MAX_POSITION:
        raise CorruptFile(f"{source}: deletion vector holds position {bitmap.max()} above 2**63-1")
    return bitmap


def positions(bitmap: BitMap64) -> npt.NDArray[np.uint64]:
    """The set positions as a sorted ``uint64`` array (for masking Arrow batches)."""
    return np.frombuffer(bitmap.to_array(), dtype=np.uint64)
