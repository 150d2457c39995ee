"""Deletion vectors in Puffin files (https://iceberg.apache.org/spec/#deletion-vectors and
https://iceberg.apache.org/puffin-spec/#deletion-vector-v1-blob-type).

A delete manifest locates each DV by its Puffin file (``file_path``), the blob's offset
(``content_offset``) and length (``content_size_in_bytes``), so a DV is read with one ranged read and
the file's footer is never needed: the blob is the combined length of magic and vector (4 bytes,
big-endian), the magic ``D1 D3 39 64``, the vector in the portable 64-bit Roaring layout, and the
CRC-32 of magic and vector (4 bytes, big-endian). duckdb-iceberg's ``legacy_bare_deletion_vector``
table stores the bare blob without the Puffin header and footer; offsets make both readable alike.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pyarrow as pa

from lakeops.errors import CorruptFile
from lakeops.iceberg.manifest import DeletionVectorRef
from lakeops.roaring import decode_portable, positions
from lakeops.storage import Storage

__all__ = ["read_deletion_vector"]

#: Length field before, CRC after the magic and vector.
_FRAMING = 8


def read_deletion_vector(storage: Storage, dv: DeletionVectorRef) -> dict[str, pa.Array]:
    """The positions the DV ``dv`` deletes, keyed by its ``referenced_data_file`` (the shape
    :func:`lakeops.iceberg.deletes.read_position_deletes` returns), ascending int64."""
    where = f"{dv.file_path} (deletion vector at offset {dv.content_offset})"
    size = dv.content_size_in_bytes
    blob = storage.read_range(dv.file_path, dv.content_offset, size)
    if size < _FRAMING + 4 or len(blob) != size:
        raise CorruptFile(f"{where}: the blob has {len(blob)} of its {size} bytes, too short for a deletion vector")
    (length,) = struct.unpack_from(">I", blob)
    if length != size - _FRAMING:
        raise CorruptFile(f"{where}: the blob's length field says {length} bytes, its size {size} leaves {size - 8}")
    body = blob[4 : 4 + length]
    (crc,) = struct.unpack_from(">I", blob, 4 + length)
    if zlib.crc32(body) != crc:
        raise CorruptFile(f"{where}: CRC-32 {zlib.crc32(body):08x} of the vector does not match the stored {crc:08x}")
    bitmap = decode_portable(body, where)
    if dv.record_count != len(bitmap):
        raise CorruptFile(f"{where}: the manifest says {dv.record_count} deleted rows, the vector holds {len(bitmap)}")
    return {dv.referenced_data_file: pa.array(positions(bitmap).astype(np.int64))}
