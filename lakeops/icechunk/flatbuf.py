"""Reading FlatBuffers tables, the payload encoding of Icechunk format 1 and 2 metadata files.

https://github.com/earth-mover/icechunk/blob/main/docs/docs/spec.md#file-formats says each metadata
file is a flatbuffers payload; the wire layout is FlatBuffers' own
(https://flatbuffers.dev/internals/): a root ``uoffset``, tables found through a ``soffset`` to their
vtable of ``u16`` field offsets (0 = field absent), references as ``uoffset`` relative to where they
are stored, vectors and strings as a ``u32`` length then the elements. Reading is done here, by field
index, with every offset bounds-checked so a damaged file fails as :class:`~lakeops.errors.CorruptFile`
naming the file (the ``flatbuffers`` package's generated readers would raise ``IndexError`` or read
garbage); writing uses that package's ``Builder`` (:mod:`lakeops.icechunk.flatbuf_codec`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TypeVar

from lakeops.errors import CorruptFile

__all__ = ["Table"]

_T = TypeVar("_T")


class Table:
    """One flatbuffers table at ``pos`` of ``buf``; fields are read by their index in the schema."""

    __slots__ = ("buf", "path", "pos", "_vtable", "_vtable_size")

    def __init__(self, buf: bytes, pos: int, path: str) -> None:
        self.buf = buf
        self.path = path
        self.pos = pos
        self._vtable = pos - self._unpack("<i", pos)
        self._vtable_size = self._unpack("<H", self._vtable)

    @classmethod
    def root(cls, buf: bytes, path: str) -> Table:
        probe = cls.__new__(cls)
        probe.buf, probe.path = buf, path
        return cls(buf, probe._unpack("<I", 0), path)

    def _unpack(self, fmt: str, at: int) -> int:
        size = struct.calcsize(fmt)
        if at < 0 or at + size > len(self.buf):
            raise CorruptFile(f"{self.path}: flatbuffers offset {at} is outside the {len(self.buf)}-byte payload")
        value: int = struct.unpack_from(fmt, self.buf, at)[0]
        return value

    def _field(self, index: int) -> int | None:
        """Absolute position of field ``index``, None when absent."""
        slot = 4 + 2 * index
        if slot + 2 > self._vtable_size:
            return None
        offset = self._unpack("<H", self._vtable + slot)
        return self.pos + offset if offset else None

    def _deref(self, at: int) -> int:
        return at + self._unpack("<I", at)

    @property
    def field_slots(self) -> int:
        """How many field slots the table's vtable has (fields past them are absent)."""
        return (self._vtable_size - 4) // 2

    def has(self, index: int) -> bool:
        return self._field(index) is not None

    def scalar(self, index: int, fmt: str, default: int = 0) -> int:
        at = self._field(index)
        return default if at is None else self._unpack("<" + fmt, at)

    def inline_bytes(self, index: int, size: int) -> bytes | None:
        """A fixed-size struct stored in the table (``ObjectId12``, ``ObjectId8``)."""
        at = self._field(index)
        if at is None:
            return None
        if at + size > len(self.buf):
            raise CorruptFile(f"{self.path}: flatbuffers struct at {at} runs past the payload")
        return self.buf[at : at + size]

    def table(self, index: int) -> Table | None:
        at = self._field(index)
        return None if at is None else Table(self.buf, self._deref(at), self.path)

    def _vector(self, index: int) -> tuple[int, int] | None:
        """Start of the elements and their count."""
        at = self._field(index)
        if at is None:
            return None
        start = self._deref(at)
        return start + 4, self._unpack("<I", start)

    def byte_vector(self, index: int) -> bytes | None:
        """A ``[uint8]`` vector or a ``string``'s bytes."""
        vector = self._vector(index)
        if vector is None:
            return None
        start, length = vector
        if start + length > len(self.buf):
            raise CorruptFile(f"{self.path}: flatbuffers vector at {start} runs past the payload")
        return self.buf[start : start + length]

    def string(self, index: int) -> str | None:
        raw = self.byte_vector(index)
        return None if raw is None else self._text(raw)

    def _text(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptFile(f"{self.path}: a flatbuffers string is not UTF-8 ({exc})") from exc

    def tables(self, index: int) -> list[Table]:
        """A vector of tables (each element a ``uoffset`` to its table)."""
        return self._elements(index, 4, lambda at: Table(self.buf, self._deref(at), self.path))

    def strings(self, index: int) -> list[str]:
        """A vector of strings (each element a ``uoffset`` to a length-prefixed string)."""
        return self._elements(index, 4, self._string_at)

    def _string_at(self, at: int) -> str:
        start = self._deref(at)
        length = self._unpack("<I", start)
        if start + 4 + length > len(self.buf):
            raise CorruptFile(f"{self.path}: flatbuffers string at {start} runs past the payload")
        return self._text(self.buf[start + 4 : start + 4 + length])

    def structs(self, index: int, size: int) -> list[bytes]:
        """A vector of fixed-size structs, each returned as its bytes."""
        return self._elements(index, size, lambda at: self.buf[at : at + size])

    def scalars(self, index: int, fmt: str) -> list[int]:
        return self._elements(index, struct.calcsize(fmt), lambda at: self._unpack("<" + fmt, at))

    def _elements(self, index: int, stride: int, read: Callable[[int], _T]) -> list[_T]:
        vector = self._vector(index)
        if vector is None:
            return []
        start, count = vector
        if start + count * stride > len(self.buf):
            raise CorruptFile(f"{self.path}: flatbuffers vector of {count} at {start} runs past the payload")
        return [read(start + i * stride) for i in range(count)]
