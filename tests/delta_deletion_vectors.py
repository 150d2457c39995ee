"""Deletion vectors written the way the protocol says ("Deletion Vector Descriptor Schema", "Deletion
Vector File Storage Format"), for fixtures: inline descriptors and DV files."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from uuid import UUID, uuid4

from pyroaring import BitMap64

from lakeops.delta.actions import DeletionVectorDescriptor
from lakeops.delta.deletion_vectors import (
    DV_FILE_FORMAT_VERSION,
    dv_file_name,
    encode_bitmap_array,
    uuid_to_z85,
    z85_encode,
)
from lakeops.errors import AlreadyExists, InvalidArgument
from lakeops.storage.base import Storage
from lakeops.storage.uri import join


def inline_dv_descriptor(bitmap: BitMap64) -> DeletionVectorDescriptor:
    """An ``i`` descriptor carrying the DV in the log itself (sensible only for small bitmaps)."""
    payload = encode_bitmap_array(bitmap)
    return DeletionVectorDescriptor(
        storageType="i", pathOrInlineDv=z85_encode(payload), sizeInBytes=len(payload), cardinality=len(bitmap)
    )


def write_dv_file(
    storage: Storage, table_root: str, bitmaps: Sequence[BitMap64], *, prefix: str = ""
) -> list[DeletionVectorDescriptor]:
    """Write ``bitmaps`` to one new DV file under ``table_root`` and return their ``u`` descriptors.

    The file gets a fresh UUID and is created with put-if-absent: a DV file is never overwritten.
    """
    if not bitmaps:
        raise InvalidArgument("write_dv_file needs at least one bitmap")
    if prefix and not prefix.isalnum():
        raise InvalidArgument(f"DV random prefix {prefix!r} must be alphanumeric")
    file_uuid = uuid4()
    data, places = encode_dv_file(bitmaps)
    path = join(table_root, prefix, dv_file_name(file_uuid))
    try:
        storage.put_if_absent(path, data)
    except AlreadyExists as exc:  # a UUID4 collision: report rather than clobber
        raise AlreadyExists(f"{path}: deletion vector file already exists; refusing to overwrite") from exc
    return [
        new_dv_descriptor(bitmap, file_uuid=file_uuid, offset=offset, size_in_bytes=size, prefix=prefix)
        for bitmap, (offset, size) in zip(bitmaps, places, strict=True)
    ]


def encode_dv_file(bitmaps: Sequence[BitMap64]) -> tuple[bytes, list[tuple[int, int]]]:
    """A whole DV file holding ``bitmaps``, and each one's ``(offset, sizeInBytes)`` for its descriptor."""
    out = bytearray([DV_FILE_FORMAT_VERSION])
    places: list[tuple[int, int]] = []
    for bitmap in bitmaps:
        payload = encode_bitmap_array(bitmap)
        places.append((len(out), len(payload)))
        out += struct.pack(">I", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))
    return bytes(out), places


def new_dv_descriptor(
    bitmap: BitMap64, *, file_uuid: UUID, offset: int, size_in_bytes: int, prefix: str = ""
) -> DeletionVectorDescriptor:
    """The ``u`` descriptor of a DV written at ``offset`` into ``<prefix>/deletion_vector_<uuid>.bin``."""
    return DeletionVectorDescriptor(
        storageType="u",
        pathOrInlineDv=prefix + uuid_to_z85(file_uuid),
        offset=offset,
        sizeInBytes=size_in_bytes,
        cardinality=len(bitmap),
    )
