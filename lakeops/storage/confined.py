"""Root confinement: the one check every delete, move and write of lakeops passes (docs/architecture.md,
"Storage" and "Safety rules"; issue 19).

Why a storage wrapper and not a check in each caller: lakeops deletes in a dozen places (VACUUM and
orphan batches, log and snapshot expiry, Icechunk refs and garbage collection, trash purge and
restore, the files an aborted commit wrote, trimmed metadata logs) and writes in more (commits,
checkpoints, data files, manifests, chunks, trash manifests, audit records). A check each caller must
remember was forgotten in most of them. :func:`lakeops.storage.open_storage` is the only way library
code gets a storage, and it returns a :class:`ConfinedStorage` bound to the location it was opened for
(a table's root): its ``write``, ``put_if_absent``, ``copy_if_absent``, ``move_if_absent``,
``delete_many`` and ``prune`` refuse any path outside that root before touching anything, whatever the
caller checked or forgot. Functions handed a storage and a root by their caller (quarantine's
``remove``, the Delta data file writer, an Icechunk commit's cleanup) bind it to that root again with
``ConfinedStorage(storage, root)``, so even a bare storage is confined there. Reads are not confined:
a table may legitimately read files elsewhere.
Consequence for callers: open a table's storage at the table root (or, for an Iceberg table, also at
the data and metadata paths its properties name), never at a subdirectory or a file, since a link at
the opened location itself is indistinguishable from a table reached through a symlink.

What the check is, for a path inside a root:

* lexical: the normalised path lies below the normalised root (:func:`lakeops.storage.uri.is_within`);
  a path equal to the root is refused too (a root is a directory, not an object);
* on local storage also resolved: the path's directory, with every symlink on the way resolved
  (``os.path.realpath``), must lie below the resolved root. That catches a top-level directory
  (``_delta_log``, ``refs``, ``metadata``, ``_lakeops_trash``, ``_lakeops_audit``) or a partition
  directory that is a link to elsewhere, while a root reached through a link (``/tmp`` on macOS, a
  symlinked warehouse) is fine because the root is resolved too. The last component is not resolved:
  deleting, replacing or moving a symlinked *file* acts on the link, never on its target.
  Directories are resolved once per call, so a 100,000-file VACUUM batch resolves each partition
  directory once, not every file; nothing is cached between calls, so a link that appears later is
  seen by the next call. S3 has no links: lexical only.

Every path of a call is checked before the first one is touched, so a refused batch deletes nothing.
A refusal is :class:`~lakeops.errors.OutsideRoot` naming the table, the path, and the link with where it
points. Not defended: a link swapped in between the check and the operation by a concurrent process
(that needs ``openat``-style walks the storage protocol does not have).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from lakeops.errors import OutsideRoot
from lakeops.storage.base import FileInfo, Storage
from lakeops.storage.uri import LOCAL, is_within, is_within_normalized, normalize, relative_to, scheme, storage_location

__all__ = ["ConfinedStorage"]


class _Check:
    """One call's confinement check: the roots, and the resolved directories seen so far."""

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = roots
        self._resolved: dict[str, str] = {}

    def _real(self, directory: str) -> str:
        real = self._resolved.get(directory)
        if real is None:
            real = self._resolved[directory] = os.path.realpath(directory)
        return real

    def __call__(self, path: str, verb: str, *, directory: bool = False) -> str:
        """The normalised ``path``, or OutsideRoot if ``verb``-ing it would act outside the roots.

        ``directory``: ``path`` is a directory the operation walks into, so it is resolved itself."""
        location = storage_location(path)
        table = self.roots[0]
        containing = [r for r in self.roots if r != location and is_within_normalized(r, location)]
        if not containing:
            where = " or ".join(self.roots)
            raise OutsideRoot(f"{table}: refusing to {verb} {location}: it is not inside the table root {where}")
        if scheme(location) != LOCAL:
            return location
        parent = location if directory else os.path.dirname(location)
        for root in containing:  # nested roots (an Iceberg data path inside the location) must all hold
            if not is_within_normalized(self._real(root), self._real(parent)):
                raise OutsideRoot(f"{table}: refusing to {verb} {location}: {self._escape(root, parent)}")
        return location

    def _escape(self, root: str, directory: str) -> str:
        """Which directory below ``root`` leads out of it, and where it points."""
        real_root = self._real(root)
        current = root
        for part in relative_to(root, directory).split("/"):
            current = f"{current}/{part}"
            real = os.path.realpath(current)
            if not is_within(real_root, real):
                target = os.readlink(current) if os.path.islink(current) else real
                resolved = "" if target == real else f" (resolving to {real})"
                return f"{current} is a symlink to {target}{resolved}, outside the table root {root}"
        return f"{directory} resolves to {self._real(directory)}, outside the table root {root}"


class ConfinedStorage:
    """A :class:`~lakeops.storage.base.Storage` whose deletes, moves and writes cannot leave its roots.

    ``root`` is the table root (the first root names the table in messages); ``also`` adds roots a
    table's own metadata places elsewhere (Iceberg ``write.data.path`` / ``write.metadata.path``).
    Pickles with its inner storage, so a Spark task gets the same confinement.
    """

    def __init__(self, inner: Storage, root: str, *, also: Iterable[str] = ()) -> None:
        # Confining a confined storage replaces its roots rather than stacking a second check.
        self.inner: Storage = inner.inner if isinstance(inner, ConfinedStorage) else inner
        self.roots = tuple(dict.fromkeys(normalize(r) for r in (root, *also)))

    def __repr__(self) -> str:
        return f"ConfinedStorage({self.inner!r}, roots={self.roots!r})"

    def confine(self, paths: Iterable[str], verb: str) -> list[str]:
        """The normalised ``paths`` if this storage may ``verb`` every one, else :class:`OutsideRoot`.

        For callers that must know a whole multi-step operation (a restore, a quarantine) is allowed
        before its first step; the single operations check themselves."""
        check = _Check(self.roots)
        return [check(path, verb) for path in paths]

    # -- reads: not confined ---------------------------------------------------------------------------
    def list(self, prefix: str) -> Iterator[FileInfo]:
        return self.inner.list(prefix)

    def read(self, path: str) -> bytes:
        return self.inner.read(path)

    def read_range(self, path: str, start: int, length: int) -> bytes:
        return self.inner.read_range(path, start, length)

    def stat(self, path: str) -> FileInfo:
        return self.inner.stat(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    # -- changes: every path checked first -------------------------------------------------------------
    # The inner storage gets the caller's spelling of each path, not the normalised one: only the
    # inner storage knows how to read its own locations (e.g. which ``file:`` escapes it accepts).
    def write(self, path: str, data: bytes) -> None:
        _Check(self.roots)(path, "write")
        self.inner.write(path, data)

    def put_if_absent(self, path: str, data: bytes) -> None:
        _Check(self.roots)(path, "write")
        self.inner.put_if_absent(path, data)

    def put_if_absent_stream(self, path: str, chunks: Iterable[bytes]) -> None:
        _Check(self.roots)(path, "write")
        self.inner.put_if_absent_stream(path, chunks)

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        return self.inner.read_versioned(path)

    def replace_if_match(self, path: str, data: bytes, token: str) -> None:
        _Check(self.roots)(path, "write")
        self.inner.replace_if_match(path, data, token)

    def copy_if_absent(self, source: str, target: str) -> None:
        _Check(self.roots)(target, "write")
        self.inner.copy_if_absent(source, target)

    def move_if_absent(self, source: str, target: str) -> None:
        check = _Check(self.roots)
        check(source, "move")
        check(target, "move into")
        self.inner.move_if_absent(source, target)

    def delete_many(self, paths: Iterable[str]) -> int:
        batch = list(paths)
        self.confine(batch, "delete")
        return self.inner.delete_many(batch)

    def prune(self, prefix: str) -> None:
        _Check(self.roots)(prefix, "prune", directory=True)
        self.inner.prune(prefix)
