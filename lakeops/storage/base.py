"""The storage boundary: one narrow protocol every table format reads and writes through.

Paths are absolute locations in the storage's own scheme: plain absolute paths for the local
file system, ``s3://bucket/key`` for S3. Callers normalise user input with
:func:`lakeops.storage.uri.normalize` first.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One object: its absolute location, size in bytes, and modification time (ms since epoch, UTC)."""

    path: str
    size: int
    mtime_ms: int


@runtime_checkable
class Storage(Protocol):
    """Object storage as the table formats need it.

    Every method is safe to call from several threads and processes at once.
    """

    def list(self, prefix: str) -> Iterator[FileInfo]:
        """Every object under ``prefix`` (a directory-like location), recursively, sorted by path.

        A missing prefix lists nothing (no error). Directories themselves are not listed.
        """
        ...

    def read(self, path: str) -> bytes:
        """The whole object. Raises :class:`~lakeops.errors.NotFound` if it does not exist."""
        ...

    def read_range(self, path: str, start: int, length: int) -> bytes:
        """``length`` bytes from offset ``start``; fewer only if the object ends first."""
        ...

    def write(self, path: str, data: bytes) -> None:
        """Create or replace the object atomically: readers see the old bytes or the new, never a part."""
        ...

    def put_if_absent(self, path: str, data: bytes) -> None:
        """Create the object only if nothing exists at ``path``.

        Of several concurrent callers exactly one succeeds; the others get
        :class:`~lakeops.errors.AlreadyExists`. A successful call leaves the complete bytes visible.
        """
        ...

    def put_if_absent_stream(self, path: str, chunks: Iterable[bytes]) -> None:
        """:meth:`put_if_absent` of the concatenated ``chunks``, consumed one at a time, so an object
        larger than memory (a Delta commit of millions of actions) is never held whole; the same
        guarantees: exactly one concurrent creator wins, and no reader ever sees a part."""
        ...

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        """The whole object and an opaque token naming this version of it, for :meth:`replace_if_match`."""
        ...

    def replace_if_match(self, path: str, data: bytes, token: str) -> None:
        """Replace the object only if it is still the version ``token`` names (compare-and-swap).

        Of several callers holding the same token exactly one succeeds; the others get
        :class:`~lakeops.errors.Superseded`, as does a caller whose object was replaced or deleted
        since. No other version is ever replaced, whoever wrote it, writers outside lakeops included;
        but one of them may replace the new version at once, so a commit reads its outcome back. Any
        other :class:`~lakeops.errors.StorageError` leaves the outcome unknown.
        """
        ...

    def copy_if_absent(self, source: str, target: str) -> None:
        """Copy the object at ``source`` to ``target`` only if nothing exists at ``target``, without
        holding the object in memory (the store copies it itself where it can).

        :class:`~lakeops.errors.NotFound` if ``source`` does not exist, :class:`~lakeops.errors.AlreadyExists`
        if ``target`` does; a successful call leaves the complete bytes visible at ``target``. Any other
        :class:`~lakeops.errors.StorageError` leaves the outcome unknown.
        """
        ...

    def move_if_absent(self, source: str, target: str) -> None:
        """Move the object at ``source`` to ``target`` only if nothing exists at ``target``.

        :class:`~lakeops.errors.NotFound` if ``source`` does not exist, :class:`~lakeops.errors.AlreadyExists`
        if ``target`` does (``source`` is then left in place). Not atomic on every store: an interruption
        may leave the object at both locations, never at neither.
        """
        ...

    def delete_many(self, paths: Iterable[str]) -> int:
        """Delete the objects, batching requests; missing objects are not an error (idempotent).

        Returns the number of paths submitted. Raises :class:`~lakeops.errors.StorageError` naming the
        first path that could not be deleted.
        """
        ...

    def prune(self, prefix: str) -> None:
        """Remove the empty directories at and below ``prefix`` (object stores have none: a no-op).

        A directory that is not empty stays; so does a symlink, which is never followed.
        """
        ...

    def stat(self, path: str) -> FileInfo:
        """Size and modification time. Raises :class:`~lakeops.errors.NotFound` if absent."""
        ...

    def exists(self, path: str) -> bool:
        """Whether an object exists at ``path``."""
        ...
