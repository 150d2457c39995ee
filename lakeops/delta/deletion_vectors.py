"""Delta deletion vectors: Z85, the RoaringBitmapArray layouts, DV files and descriptors.

Implements the protocol sections "Deletion Vectors" (descriptor schema, derived fields
``uniqueId``/``absolutePath``), "Deletion Vector Format" and "Deletion Vector File Storage Format",
as corrected by the real bytes (docs/architecture.md, "Where the bytes differ from the specs"):

* A DV file is ``version byte 1``, then per DV ``dataSize`` (4 bytes, big-endian), the bitmap bytes,
  and the CRC-32 of those bitmap bytes (4 bytes, big-endian). A descriptor's ``offset`` points at the
  ``dataSize`` field and its ``sizeInBytes`` equals ``dataSize``.
* Bitmap bytes start with a magic number. ``1681511377`` little-endian is followed by the portable
  64-bit Roaring format (what writers produce today, and all we write). ``1681511376`` big-endian is
  the older layout of the protocol's own inline example: a big-endian bitmap count, then per 32-bit
  bitmap a big-endian size and the standard 32-bit Roaring bytes; bitmap ``i`` holds the rows whose
  high 32 bits equal ``i``.
* Inline (``i``) DVs are the bitmap bytes Z85-encoded; ``sizeInBytes`` is their length. Writers end
  them zero-padded to a whole group (Delta's codec; what we write) or with a short ``#``-marked last
  group (the Rust ``z85`` crate's form, as delta-kernel reads it): :func:`z85_decode` reads both.
"""

from __future__ import annotations

import struct
import zlib
from uuid import UUID

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap, BitMap64

from lakeops.delta.actions import DeletionVectorDescriptor
from lakeops.errors import CorruptFile, InvalidArgument, NotFound
from lakeops.roaring import MAGIC_PORTABLE, check_positions, decode_portable, encode_portable, is_portable, positions
from lakeops.storage.base import Storage
from lakeops.storage.uri import join, normalize, unquote_utf8

__all__ = [
    "DV_FILE_FORMAT_VERSION",
    "MAGIC_LEGACY",
    "MAGIC_PORTABLE",
    "Z85_ALPHABET",
    "decode_bitmap_array",
    "dv_absolute_path",
    "dv_file_name",
    "encode_bitmap_array",
    "read_deletion_vector",
    "read_deletion_vector_rows",
    "row_indexes",
    "uuid_to_z85",
    "z85_decode",
    "z85_encode",
    "z85_to_uuid",
]

#: Magic of the older layout (big-endian) used by the protocol's inline example.
MAGIC_LEGACY = 1681511376
#: First byte of every DV file.
DV_FILE_FORMAT_VERSION = 1

#: Below this offset the version byte is fetched in the same ranged read and checked for free.
_VERSION_CHECK_SLACK = 4096
_UUID_Z85_LENGTH = 20

# ---------------------------------------------------------------------------------------------
# Z85 (ZeroMQ RFC 32)
# ---------------------------------------------------------------------------------------------

Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {char: index for index, char in enumerate(Z85_ALPHABET)}
_Z85_POWERS = (85**4, 85**3, 85**2, 85, 1)


def z85_encode(data: bytes) -> str:
    """Z85 text of ``data``, zero-padded to a multiple of 4 bytes first (as Delta's codec does).

    The decoder needs the original length (``sizeInBytes``) to drop the padding again.
    """
    padded = data + b"\x00" * (-len(data) % 4)
    chars: list[str] = []
    for (word,) in struct.iter_unpack(">I", padded):
        chars.extend(Z85_ALPHABET[(word // power) % 85] for power in _Z85_POWERS)
    return "".join(chars)


def z85_decode(text: str, size: int | None = None) -> bytes:
    """The bytes of Z85 ``text``, truncated to ``size`` (the unpadded length) when given.

    Writers end an inline DV whose length is not a multiple of 4 in one of two ways, and both are read:

    * zero-padded to a whole group (Delta's ``Base85Codec.encodeBytes``), the padding dropped by
      ``size``; Spark's ``decodeBlocks`` keeps each group's low 32 bits, so a last group above
      2**32 - 1 is read modulo 2**32 as Spark reads it;
    * a short last group, as the Rust ``z85`` crate that delta-kernel and delta-rs decode with writes
      it: ``k`` leading ``#`` (84, which no 32-bit group starts with) say the group holds ``4 - k``
      bytes, the remaining ``5 - k`` characters their big-endian value. ``##093`` is the two bytes
      ``03 00`` (issue 38: read as ``08 6e``, the rows were wrong).

    Raises :class:`~lakeops.errors.InvalidArgument` for a length that is not a multiple of 5, a
    character outside the alphabet, a group other than the last above 2**32-1, a short group whose
    value does not fit its bytes, or a ``size`` the text cannot hold.
    """
    if len(text) % 5:
        raise InvalidArgument(f"Z85 text of length {len(text)} is not a multiple of 5")
    last_group = len(text) - 5
    short = len(text[last_group:]) - len(text[last_group:].lstrip("#"))
    if short > 3:
        raise InvalidArgument(f"Z85 group {text[last_group:]!r} at {last_group} is all padding")
    decoded_length = len(text) // 5 * 4 - short
    low = decoded_length if short else decoded_length - 3
    if size is not None and not low <= size <= decoded_length:
        raise InvalidArgument(f"Z85 text decodes to {decoded_length} bytes, which cannot hold {size} bytes")
    out = bytearray()
    for start in range(0, len(text), 5):
        group = text[start : start + 5]
        if start == last_group and short:
            group = group[short:]
        word = 0
        for char in group:
            value = _Z85_VALUE.get(char)
            if value is None:
                raise InvalidArgument(f"character {char!r} at {start} is not Z85")
            word = word * 85 + value
        if start == last_group and short:
            if word >= 256 ** (4 - short):
                raise InvalidArgument(f"Z85 group {text[start : start + 5]!r} at {start} exceeds {4 - short} bytes")
            out += word.to_bytes(4 - short, "big")
            continue
        if word > 0xFFFFFFFF and start != last_group:
            raise InvalidArgument(f"Z85 group {group!r} at {start} exceeds 32 bits")
        out += (word & 0xFFFFFFFF).to_bytes(4, "big")
    return bytes(out if size is None else out[:size])


def uuid_to_z85(value: UUID) -> str:
    """The 20-character Z85 form of a UUID (its 16 big-endian bytes), as ``u`` descriptors store it."""
    return z85_encode(value.bytes)


def z85_to_uuid(text: str) -> UUID:
    """The UUID encoded by 20 Z85 characters."""
    if len(text) != _UUID_Z85_LENGTH:
        raise InvalidArgument(f"Z85 UUID {text!r} must be {_UUID_Z85_LENGTH} characters, not {len(text)}")
    return UUID(bytes=z85_decode(text))


# ---------------------------------------------------------------------------------------------
# RoaringBitmapArray (bitmap bytes with magic)
# ---------------------------------------------------------------------------------------------


def encode_bitmap_array(bitmap: BitMap64) -> bytes:
    """Bitmap bytes in the current layout: magic 1681511377 (LE) + portable 64-bit Roaring."""
    return encode_portable(bitmap)


def decode_bitmap_array(data: bytes, source: str) -> BitMap64:
    """Decode bitmap bytes of either layout; ``source`` names the file/DV in error messages.

    Raises :class:`~lakeops.errors.CorruptFile` for an unknown magic or undecodable bytes.
    """
    if len(data) < 4:
        raise CorruptFile(f"{source}: deletion vector has {len(data)} bytes, too short for its magic number")
    if is_portable(data):
        return decode_portable(data, source)
    if struct.unpack_from(">I", data)[0] != MAGIC_LEGACY:
        raise CorruptFile(
            f"{source}: deletion vector starts with {data[:4].hex()}, not a known magic number "
            f"({MAGIC_PORTABLE} little-endian or {MAGIC_LEGACY} big-endian)"
        )
    return check_positions(_decode_legacy(data, source), source)


def _decode_legacy(data: bytes, source: str) -> BitMap64:
    """The older big-endian array of 32-bit bitmaps, re-framed as portable bytes for one parse."""
    try:
        (count,) = struct.unpack_from(">i", data, 4)
        if count < 0:
            raise CorruptFile(f"{source}: legacy deletion vector has a negative bitmap count {count}")
        pos = 8
        buckets: list[bytes] = []
        for key in range(count):
            (size,) = struct.unpack_from(">i", data, pos)
            pos += 4
            chunk = data[pos : pos + size]
            if size < 0 or len(chunk) != size:
                raise CorruptFile(f"{source}: legacy deletion vector bitmap {key} is truncated")
            pos += size
            bucket = BitMap.deserialize(chunk)
            if len(bucket):
                buckets.append(struct.pack("<I", key) + bucket.serialize())
    except (struct.error, ValueError, IndexError) as exc:
        raise CorruptFile(f"{source}: legacy (magic {MAGIC_LEGACY}) deletion vector is not decodable") from exc
    if pos != len(data):
        raise CorruptFile(f"{source}: legacy deletion vector has {len(data) - pos} unexpected trailing bytes")
    return BitMap64.deserialize(struct.pack("<Q", len(buckets)) + b"".join(buckets))


def row_indexes(bitmap: BitMap64) -> npt.NDArray[np.uint64]:
    """The deleted row indexes as a sorted ``uint64`` array (for masking Arrow batches)."""
    return positions(bitmap)


# ---------------------------------------------------------------------------------------------
# Descriptors and DV files
# ---------------------------------------------------------------------------------------------


def dv_file_name(value: UUID) -> str:
    """``deletion_vector_<uuid>.bin`` — the file name a ``u`` descriptor derives from its UUID."""
    return f"deletion_vector_{value}.bin"


def dv_absolute_path(descriptor: DeletionVectorDescriptor, table_root: str) -> str:
    """The derived field ``absolutePath``: where the DV file of ``u`` and ``p`` descriptors lives.

    ``u``: ``<table root>/<random prefix>/deletion_vector_<uuid>.bin`` (the last 20 characters are
    the Z85 UUID). ``p``: the URI-encoded absolute path, decoded and normalised. ``i`` has no file.
    """
    text = descriptor.path_or_inline_dv
    if descriptor.storage_type == "u":
        if len(text) < _UUID_Z85_LENGTH:
            raise CorruptFile(f"deletion vector {descriptor.unique_id}: 'u' path is shorter than a Z85 UUID")
        try:
            value = z85_to_uuid(text[-_UUID_Z85_LENGTH:])
        except InvalidArgument as exc:
            raise CorruptFile(f"deletion vector {descriptor.unique_id}: bad Z85 UUID ({exc})") from exc
        prefix = text[:-_UUID_Z85_LENGTH]
        return join(table_root, prefix, dv_file_name(value))  # join skips an empty prefix
    if descriptor.storage_type == "p":
        # file: URIs are percent-decoded by normalize itself; decoding twice would corrupt "%25".
        if text[:5].lower() == "file:":
            return normalize(text)
        return normalize(unquote_utf8(text, f"{table_root}: deletion vector {descriptor.unique_id}: path {text!r}"))
    raise InvalidArgument(f"deletion vector {descriptor.unique_id}: inline ('i') deletion vectors have no file")


def read_deletion_vector(
    descriptor: DeletionVectorDescriptor,
    storage: Storage,
    table_root: str,
    *,
    data_file: str | None = None,
) -> BitMap64:
    """The deleted rows of one DV, fully verified.

    For DV files: ``dataSize == sizeInBytes``, the CRC-32, the magic, and (always) the cardinality
    against the descriptor. Any mismatch raises :class:`~lakeops.errors.CorruptFile` naming the DV
    file and, when given, the ``data_file`` it belongs to — a silently wrong DV resurrects or hides rows.
    """
    owner = f" (deletion vector of {data_file})" if data_file else ""
    if descriptor.storage_type == "i":
        source = f"inline deletion vector {descriptor.path_or_inline_dv[:16]}...{owner}"
        try:
            raw = z85_decode(descriptor.path_or_inline_dv, descriptor.size_in_bytes)
        except InvalidArgument as exc:
            raise CorruptFile(f"{source}: {exc}") from exc
        bitmap = decode_bitmap_array(raw, source)
    else:
        path = dv_absolute_path(descriptor, table_root)
        offset = 1 if descriptor.offset is None else descriptor.offset
        source = f"{path} at offset {offset}{owner}"
        bitmap = _read_framed(storage, path, offset, descriptor.size_in_bytes, source)
    if len(bitmap) != descriptor.cardinality:
        raise CorruptFile(
            f"{source}: deletion vector holds {len(bitmap)} rows but its descriptor says "
            f"cardinality {descriptor.cardinality}"
        )
    return bitmap


def read_deletion_vector_rows(
    descriptor: DeletionVectorDescriptor,
    storage: Storage,
    table_root: str,
    *,
    data_file: str | None = None,
) -> npt.NDArray[np.uint64]:
    """:func:`read_deletion_vector` as a sorted ``uint64`` array of row indexes."""
    return row_indexes(read_deletion_vector(descriptor, storage, table_root, data_file=data_file))


#: The largest value of the descriptor's ``Int`` fields (offset, sizeInBytes).
_INT_MAX = 2**31 - 1


def _read_framed(storage: Storage, path: str, offset: int, size: int, source: str) -> BitMap64:
    if not (1 <= offset <= _INT_MAX and 4 <= size <= _INT_MAX):  # both are an Int in the descriptor
        raise CorruptFile(f"{source}: descriptor has impossible offset {offset} / sizeInBytes {size}")
    start = 0 if offset <= _VERSION_CHECK_SLACK else offset
    length = offset - start + 4 + size + 4
    try:
        chunk = storage.read_range(path, start, length)
    except NotFound as exc:
        raise NotFound(f"{source}: deletion vector file does not exist") from exc
    if len(chunk) != length:
        raise CorruptFile(f"{source}: file ends after {start + len(chunk)} bytes, the DV needs {start + length}")
    if start == 0 and chunk[0] != DV_FILE_FORMAT_VERSION:
        raise CorruptFile(f"{source}: DV file format version is {chunk[0]}, expected {DV_FILE_FORMAT_VERSION}")
    pos = offset - start
    (data_size,) = struct.unpack_from(">I", chunk, pos)
    if data_size != size:
        raise CorruptFile(f"{source}: stored dataSize {data_size} differs from the descriptor's sizeInBytes {size}")
    payload = chunk[pos + 4 : pos + 4 + size]
    (stored_crc,) = struct.unpack_from(">I", chunk, pos + 4 + size)
    actual_crc = zlib.crc32(payload)
    if stored_crc != actual_crc:
        raise CorruptFile(f"{source}: CRC-32 mismatch (stored {stored_crc:08x}, computed {actual_crc:08x})")
    return decode_bitmap_array(payload, source)
