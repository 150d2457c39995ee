"""The binary file format of Icechunk format 1 and 2 metadata files: header, then the payload.

https://github.com/earth-mover/icechunk/blob/main/docs/docs/spec.md#binary-file-format: 12 magic bytes
``ICE🧊CHUNK``, the writer's name (24 bytes, space padded), the spec version byte (1 or 2; spec 2.1
files say 2), the file type byte and the compression byte (0 none, 1 zstd), then the flatbuffers
payload. :func:`read_payload` checks all of it against what the caller expects, so a manifest read
where a snapshot belongs, or a version lakeops does not read, is refused naming the file.
"""

from __future__ import annotations

from enum import IntEnum

import zstandard

from lakeops.errors import CorruptFile, UnsupportedFeature
from lakeops.icechunk.encoding import MAGIC_1X
from lakeops.icechunk.flatbuf import Table

__all__ = ["HEADER_SIZE", "SPEC_VERSIONS", "WRITER_NAME", "FileType", "file_bytes", "read_payload", "spec_version_of"]

_NAME_SIZE = 24
_VERSION_AT = len(MAGIC_1X) + _NAME_SIZE
HEADER_SIZE = _VERSION_AT + 3
#: Spec versions whose files lakeops reads (the header says 2 for spec 2 and 2.1).
SPEC_VERSIONS = (1, 2)
#: The implementation name lakeops writes in the header (at most 24 bytes, padded with spaces).
WRITER_NAME = "lakeops"
#: Largest decompressed payload accepted (a metadata file; far beyond any real one).
_MAX_PAYLOAD = 1 << 30


class FileType(IntEnum):
    """The header's file-type byte."""

    SNAPSHOT = 1
    MANIFEST = 2
    TRANSACTION_LOG = 4
    REPO_INFO = 6


def spec_version_of(header: bytes) -> int | None:
    """The spec version of a file starting with ``header``; None for a file without the magic bytes."""
    if len(header) <= _VERSION_AT or not header.startswith(MAGIC_1X):
        return None
    return header[_VERSION_AT]


def _decompress(body: bytes, path: str) -> bytes:
    """The zstd frame ``body`` decompressed, streamed: writers do not record the content size, and a
    payload past :data:`_MAX_PAYLOAD` is refused rather than held."""
    parts: list[bytes] = []
    total = 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(body) as reader:
            while part := reader.read(1 << 20):
                total += len(part)
                if total > _MAX_PAYLOAD:
                    raise CorruptFile(f"{path}: the zstd payload decompresses past {_MAX_PAYLOAD} bytes")
                parts.append(part)
    except zstandard.ZstdError as exc:
        raise CorruptFile(f"{path}: the zstd payload cannot be decompressed ({exc})") from exc
    return b"".join(parts)


def read_payload(data: bytes, path: str, expected: FileType) -> tuple[int, Table]:
    """The spec version and the root table of the file ``path`` holding ``data``."""
    version = spec_version_of(data)
    if version is None or len(data) < HEADER_SIZE:
        raise CorruptFile(f"{path}: no Icechunk binary header (expected the magic bytes ICE🧊CHUNK)")
    if version not in SPEC_VERSIONS:
        raise UnsupportedFeature(f"{path}: Icechunk spec version {version} is not supported (lakeops reads 1 and 2)")
    file_type, compression = data[_VERSION_AT + 1], data[_VERSION_AT + 2]
    if file_type != expected:
        raise CorruptFile(f"{path}: file type {file_type} in the header, expected {expected.value} ({expected.name})")
    body = data[HEADER_SIZE:]
    if compression == 1:
        body = _decompress(body, path)
    elif compression != 0:
        raise UnsupportedFeature(f"{path}: compression algorithm {compression} is not supported (0 none, 1 zstd)")
    return version, Table.root(body, path)


def file_bytes(payload: bytes, file_type: FileType, spec_version: int) -> bytes:
    """A metadata file of ``spec_version`` holding the flatbuffers ``payload``, zstd-compressed."""
    if spec_version not in SPEC_VERSIONS:
        raise UnsupportedFeature(f"Icechunk spec version {spec_version} is not written (lakeops writes 1 and 2)")
    name = WRITER_NAME.encode().ljust(_NAME_SIZE, b" ")
    header = MAGIC_1X + name + bytes((spec_version, file_type, 1))
    return header + zstandard.ZstdCompressor().compress(payload)
