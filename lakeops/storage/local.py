"""Local file system implementation of the :class:`~lakeops.storage.base.Storage` protocol.

It mirrors S3 semantics so the same table code and tests run on both (docs/architecture.md, "Storage"):
directories are not objects (reading one is :class:`~lakeops.errors.NotFound`), listing is a
flat, recursive, path-sorted stream, and writes are all-or-nothing. Atomicity comes from the
POSIX primitives: ``os.replace`` for :meth:`LocalStorage.write` and ``os.link`` (which fails if
the target exists) for :meth:`LocalStorage.put_if_absent`.

A file system has no compare-and-swap, and the other writers of a table take no lock (the icechunk
package replaces ``ref.json`` by renaming a staged file over it), so :meth:`LocalStorage.replace_if_match`
never writes over a name at all: it moves the current version aside, compares it, and links the new one
in only where nothing is (its docstring says why that holds). While it compares, for microseconds, the
name is absent; a process killed then leaves the version at the claim name (``.<name>.lakeops-claim``),
and the next lakeops access to the file or its directory puts it back (:meth:`LocalStorage._restore`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from stat import S_ISREG
from typing import BinaryIO, TypeVar

from lakeops.errors import AlreadyExists, InvalidArgument, NotFound, StorageError, Superseded
from lakeops.storage import uri
from lakeops.storage.base import FileInfo

__all__ = ["CLAIM_SUFFIX", "TMP_SUFFIX", "LocalStorage", "is_abandoned_temp"]

#: Suffix of the hidden temporary file a write is staged in (``.<name>.<random>.lakeops-tmp``).
TMP_SUFFIX = ".lakeops-tmp"
#: Suffix of the name a compare-and-swap holds the version it replaces under (``.<name>.lakeops-claim``).
CLAIM_SUFFIX = ".lakeops-claim"
_COPY_BUFFER = 1 << 20  # bytes a local copy holds in memory at a time
_T = TypeVar("_T")


def is_abandoned_temp(path: str) -> bool:
    """Whether ``path`` (absolute or relative) names the staging file of a lakeops write.

    A process killed mid-write leaves one behind and no table format ever names it, so cleanup
    operations delete it once it is older than their age floor (a younger one may be a live write's).
    """
    name = path.rsplit("/", 1)[-1]
    return name.startswith(".") and name.endswith(TMP_SUFFIX)


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def _local(path: str) -> str:
    """The normalised absolute path, refusing locations of other schemes and ``file:`` URIs whose
    percent signs only the table format knows how to read (:func:`lakeops.storage.uri.storage_location`)."""
    if uri.scheme(path) != uri.LOCAL:
        raise InvalidArgument(f"local storage cannot handle {path!r}: not a local path or file:// URI")
    local = uri.storage_location(path)
    if "\x00" in local:  # a bare ValueError from every os call otherwise
        raise InvalidArgument(f"{path!r}: a file name cannot hold a NUL character")
    return local


def _claim(local: str) -> str:
    directory, name = os.path.split(local)
    return os.path.join(directory, f".{name}{CLAIM_SUFFIX}")


def _claimed(name: str) -> str | None:
    """The file name whose claim ``name`` is, else None."""
    if name.startswith(".") and name.endswith(CLAIM_SUFFIX) and len(name) > len(CLAIM_SUFFIX) + 1:
        return name[1 : -len(CLAIM_SUFFIX)]
    return None


@contextlib.contextmanager
def _swapping(directory: str) -> Iterator[None]:
    """An exclusive ``flock`` of ``directory``: one lakeops compare-and-swap or restore in it at a time.
    The kernel drops the lock with its holder, so a claim found under it belongs to a killed swap."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError as exc:
        raise NotFound(f"cannot lock directory {directory!r}: no such directory") from exc
    except OSError as exc:
        raise StorageError(f"cannot lock directory {directory!r}: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _put_back(claim: str, local: str) -> None:
    """Link the version at ``claim`` back to ``local``, and drop the claim name. ``link`` fails if a
    writer created ``local`` meanwhile: that version stands (it was staged from a read made before the
    claim was taken, so it builds on the claimed one, or raced it anyway), and the claimed one is kept
    as an abandoned temporary file, which cleanup removes past its age floor."""
    try:
        os.link(claim, local)
    except FileExistsError:
        directory, name = os.path.split(local)
        os.rename(claim, os.path.join(directory, f".{name}.{os.urandom(6).hex()}{TMP_SUFFIX}"))
    else:
        os.unlink(claim)


def _hashes_to(path: str, token: str) -> bool:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest() == token
    except OSError as exc:
        raise StorageError(f"cannot read {path!r}: {exc.strerror or exc}") from exc


def _linked(source: str, target: str) -> bool:
    """``os.link``; False if something is at ``target``."""
    try:
        os.link(source, target)
    except FileExistsError:
        return False
    except OSError as exc:
        raise StorageError(
            f"cannot create {target!r}: {exc.strerror or exc} (compare-and-swap needs hard-link support)"
        ) from exc
    return True


def _fsync_dir(directory: str) -> None:
    """Persist a rename/link in ``directory`` (best effort: not every file system allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class LocalStorage:
    """Objects as regular files under absolute paths. Stateless, so one instance serves all threads."""

    def list(self, prefix: str) -> Iterator[FileInfo]:
        """Regular files below ``prefix``, sorted by path; lazily, one directory in memory at a time.

        Symlinked directories are not followed: a link could lead outside a table root that a
        later delete trusts the listing to respect.
        """
        root = _local(prefix)
        if not os.path.isdir(root):
            return iter(())
        return self._walk(root)

    def _entries(self, directory: str) -> Sequence[os.DirEntry[str]]:
        """The directory's entries. Where a swap holds a file at its claim name, they are read again
        once the swap is over (under its lock, so no other swap is half done), a killed swap's file
        put back first."""
        with os.scandir(directory) as it:
            entries = list(it)
        claimed = [name for name in map(_claimed, (entry.name for entry in entries)) if name is not None]
        if not claimed:
            return entries
        with _swapping(directory):
            for name in claimed:
                self._restore(os.path.join(directory, name))
            with os.scandir(directory) as it:
                return list(it)

    def _walk(self, directory: str) -> Iterator[FileInfo]:
        try:
            entries = self._entries(directory)
        except FileNotFoundError:
            return  # removed while listing, as an S3 prefix can empty concurrently
        except OSError as exc:
            raise StorageError(f"cannot list directory {directory!r}: {exc.strerror or exc}") from exc
        # A directory sorts as "name/" so that a depth-first walk yields globally sorted paths,
        # the order S3 returns ("a/b-c" < "a/b/x" < "a/b0").
        keyed: list[tuple[str, os.DirEntry[str], bool]] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            keyed.append((entry.name + "/" if is_dir else entry.name, entry, is_dir))
        keyed.sort(key=lambda item: item[0])
        base = directory.rstrip("/")
        for _, entry, is_dir in keyed:
            if is_dir:
                yield from self._walk(entry.path)
                continue
            try:
                if not entry.is_file():
                    continue  # sockets, fifos, dangling links
                st = entry.stat()
            except FileNotFoundError:
                continue  # deleted since scandir
            except OSError as exc:
                raise StorageError(f"cannot stat {entry.path!r}: {exc.strerror or exc}") from exc
            yield FileInfo(f"{base}/{entry.name}", st.st_size, st.st_mtime_ns // 1_000_000)

    def read(self, path: str) -> bytes:
        """The whole file; :class:`~lakeops.errors.NotFound` also for a directory (not an object)."""
        return self._again(_local(path), self._read)

    @staticmethod
    def _read(local: str) -> bytes:
        try:
            with open(local, "rb") as f:
                return f.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise NotFound(f"cannot read {local!r}: no such file") from exc
        except OSError as exc:
            raise StorageError(f"cannot read {local!r}: {exc.strerror or exc}") from exc

    def _again(self, local: str, attempt: Callable[[str], _T]) -> _T:
        """``attempt(local)``, and once more after a miss: the file may have been held aside by a swap."""
        try:
            return attempt(local)
        except NotFound:
            self._settle(local)
        return attempt(local)

    def _settle(self, local: str) -> None:
        """After ``local`` was found missing: if a swap holds it at its claim name, wait for the swap to
        end, or put back the version a killed one left there. One ``lstat`` when there is no claim."""
        if os.path.lexists(_claim(local)):
            with _swapping(os.path.dirname(local)):
                self._restore(local)

    @staticmethod
    def _restore(local: str) -> None:
        """Under :func:`_swapping`: put back the version a killed swap left at ``local``'s claim name."""
        claim = _claim(local)
        if not os.path.lexists(claim):
            return
        try:
            _put_back(claim, local)
        except OSError as exc:
            raise StorageError(
                f"cannot restore {local!r} from {claim!r}, where a killed compare-and-swap left it: "
                f"{exc.strerror or exc}"
            ) from exc
        _fsync_dir(os.path.dirname(local))

    def read_range(self, path: str, start: int, length: int) -> bytes:
        """``length`` bytes from ``start``; short (possibly empty) only at the end of the file."""
        if start < 0 or length < 0:
            raise InvalidArgument(f"cannot read {path!r}: negative range start={start} length={length}")
        return self._again(_local(path), lambda local: self._read_range(local, start, length))

    @staticmethod
    def _read_range(local: str, start: int, length: int) -> bytes:
        try:
            with open(local, "rb") as f:
                f.seek(start)
                chunks: list[bytes] = []
                # Never ask for more than the file holds: read(n) allocates n bytes up front, and a
                # hostile length (a DV descriptor's sizeInBytes) would otherwise raise MemoryError.
                remaining = max(0, min(length, os.fstat(f.fileno()).st_size - start))
                while remaining > 0:  # a plain read may return less than asked on some file systems
                    chunk = f.read(remaining)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    remaining -= len(chunk)
                return b"".join(chunks)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise NotFound(f"cannot read {local!r}: no such file") from exc
        except OSError as exc:
            raise StorageError(f"cannot read {local!r}: {exc.strerror or exc}") from exc

    def _write_temp(self, target: str, data: bytes) -> str:
        """A fully written, fsynced temporary file next to ``target`` (same file system)."""
        return self._stage(target, lambda f: f.write(data))

    def _stage(self, target: str, fill: Callable[[BinaryIO], object]) -> str:
        """A temporary file next to ``target`` (same file system), written by ``fill`` and fsynced."""
        directory, name = os.path.split(target)
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=TMP_SUFFIX, dir=directory)
        except OSError as exc:
            raise StorageError(f"cannot write {target!r}: {exc.strerror or exc}") from exc
        try:
            # mkstemp creates 0600; a table file must get the ordinary permissions (0666 less umask)
            # so other readers of the table (Spark, delta-rs, PyIceberg under other users) can open it.
            os.fchmod(fd, 0o666 & ~_UMASK)
            with os.fdopen(fd, "wb") as f:
                fill(f)
                f.flush()
                os.fsync(f.fileno())
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise StorageError(f"cannot write {target!r}: {exc.strerror or exc}") from exc
            raise
        return tmp

    def write(self, path: str, data: bytes) -> None:
        """Write a temporary file beside the target, then ``os.replace`` it in (atomic on POSIX)."""
        local = _local(path)
        tmp = self._write_temp(local, data)
        try:
            os.replace(tmp, local)
        except OSError as exc:
            raise StorageError(f"cannot write {local!r}: {exc.strerror or exc}") from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        _fsync_dir(os.path.dirname(local))

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        """The bytes and their SHA-256: the file's version is its content."""
        data = self.read(path)
        return data, hashlib.sha256(data).hexdigest()

    def replace_if_match(self, path: str, data: bytes, token: str) -> None:
        """Replace the file only if it still hashes to ``token``, without ever writing over a version
        this call did not compare, even against writers that take no lock and rename over the file.

        Under :func:`_swapping` (one lakeops swap per directory): stage the new bytes; ``rename`` the
        current file to its claim name, which takes exactly the version there at that instant out of
        every other writer's reach; compare it with ``token``; on a match ``link`` the staged file to the
        name, which fails if another writer created the name since (its rename into the absent name,
        from a read it made before the claim), and that version then stands. On a mismatch or a failed
        link the claimed version goes back by ``link`` too (:func:`_put_back`), and the caller gets
        :class:`~lakeops.errors.Superseded`. A writer can still rename over the new version once it is
        in, from a read it made before: that overwrites lakeops' write, not the reverse, and the caller
        reads the outcome back. Readers other than lakeops see the name absent for the few
        microseconds between the claim and the link (the icechunk package then fails that read, or that
        commit with a conflict); lakeops' own readers wait for the swap, and the next lakeops access
        undoes a killed one (:meth:`_restore`)."""
        local = _local(path)
        staged = self._write_temp(local, data)
        try:
            with _swapping(os.path.dirname(local)):
                self._restore(local)
                placed = self._swap(local, staged, token)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(staged)
        _fsync_dir(os.path.dirname(local))
        if not placed:
            raise Superseded(f"cannot replace {local!r}: it changed since it was read")

    @staticmethod
    def _swap(local: str, staged: str, token: str) -> bool:
        """The claim, compare and link of :meth:`replace_if_match`: whether ``staged`` is now at ``local``."""
        claim = _claim(local)
        try:
            os.rename(local, claim)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            raise StorageError(f"cannot replace {local!r}: {exc.strerror or exc}") from exc
        placed = False
        try:
            placed = _hashes_to(claim, token) and _linked(staged, local)
        finally:
            try:
                if placed:
                    os.unlink(claim)
                else:
                    _put_back(claim, local)
            except OSError as exc:
                raise StorageError(
                    f"cannot finish replacing {local!r}: {exc.strerror or exc}; the version it held is at "
                    f"{claim!r}, which the next lakeops access puts back unless a newer version is there"
                ) from exc
        return placed

    def put_if_absent(self, path: str, data: bytes) -> None:
        """Hard-link a complete temporary file to the target; ``link`` refuses an existing target.

        Unlike ``O_CREAT|O_EXCL`` followed by writing, no reader can ever see a partial file.
        """
        local = _local(path)
        self._link_new(local, self._write_temp(local, data))

    def put_if_absent_stream(self, path: str, chunks: Iterable[bytes]) -> None:
        """The chunks written one by one into a temporary file, then linked in as :meth:`put_if_absent`."""
        local = _local(path)
        self._link_new(local, self._stage(local, lambda f: f.writelines(chunks)))

    def copy_if_absent(self, source: str, target: str) -> None:
        """Stream ``source`` into a temporary file beside ``target`` (never whole in memory), then
        hard-link it in as :meth:`put_if_absent` does."""
        origin, local = _local(source), _local(target)
        if os.path.lexists(local):
            raise AlreadyExists(f"cannot copy to {local!r}: it already exists")
        try:
            reader = open(origin, "rb")  # noqa: SIM115 -- closed below, after the copy
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise NotFound(f"cannot copy {origin!r}: no such file") from exc
        except OSError as exc:
            raise StorageError(f"cannot copy {origin!r}: {exc.strerror or exc}") from exc
        with reader:
            tmp = self._stage(local, lambda f: shutil.copyfileobj(reader, f, _COPY_BUFFER))
        self._link_new(local, tmp)

    def _link_new(self, local: str, tmp: str) -> None:
        """Hard-link the complete temporary file ``tmp`` to ``local``; ``link`` refuses an existing target."""
        try:
            os.link(tmp, local)
        except FileExistsError as exc:
            raise AlreadyExists(f"cannot create {local!r}: it already exists") from exc
        except OSError as exc:
            raise StorageError(
                f"cannot create {local!r}: {exc.strerror or exc} (put-if-absent needs hard-link support)"
            ) from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        _fsync_dir(os.path.dirname(local))

    def move_if_absent(self, source: str, target: str) -> None:
        """Hard-link ``source`` to ``target`` (``link`` refuses an existing target), then unlink
        ``source``; on a file system without hard links, check then rename (a tiny race, no copy)."""
        origin, local = _local(source), _local(target)
        try:
            os.makedirs(os.path.dirname(local), exist_ok=True)
            os.link(origin, local)
        except FileExistsError:
            raise AlreadyExists(f"cannot move {origin!r} to {local!r}: the target already exists") from None
        except FileNotFoundError:
            raise NotFound(f"cannot move {origin!r}: no such file") from None
        except OSError:
            if os.path.lexists(local):
                raise AlreadyExists(f"cannot move {origin!r} to {local!r}: the target already exists") from None
            try:
                os.rename(origin, local)
            except FileNotFoundError:
                raise NotFound(f"cannot move {origin!r}: no such file") from None
            except OSError as exc:
                raise StorageError(f"cannot move {origin!r} to {local!r}: {exc.strerror or exc}") from exc
            return
        try:
            os.unlink(origin)
        except FileNotFoundError:
            pass  # a concurrent mover unlinked it: the file is at the target either way
        except OSError as exc:
            raise StorageError(f"cannot unlink {origin!r} once linked to {local!r}: {exc.strerror or exc}") from exc

    def prune(self, prefix: str) -> None:
        """Remove empty directories at and below ``prefix``, deepest first; links are never followed."""
        directory = _local(prefix)
        if os.path.islink(directory) or not os.path.isdir(directory):
            return
        for current, _, _ in sorted(os.walk(directory), key=lambda walked: -len(walked[0])):
            with contextlib.suppress(OSError):  # not empty: something that is not ours is in it; leave it
                os.rmdir(current)

    def delete_many(self, paths: Iterable[str]) -> int:
        """Unlink each path in order; a missing one is fine. Stops at the first real failure."""
        count = 0
        for path in paths:
            count += 1
            local = _local(path)
            try:
                os.unlink(local)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StorageError(f"cannot delete {local!r}: {exc.strerror or exc}") from exc
        return count

    def stat(self, path: str) -> FileInfo:
        """Size and mtime of a regular file; :class:`~lakeops.errors.NotFound` for anything else."""
        return self._again(_local(path), self._stat)

    @staticmethod
    def _stat(local: str) -> FileInfo:
        try:
            st = os.stat(local)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise NotFound(f"cannot stat {local!r}: no such file") from exc
        except OSError as exc:
            raise StorageError(f"cannot stat {local!r}: {exc.strerror or exc}") from exc
        if not S_ISREG(st.st_mode):
            raise NotFound(f"cannot stat {local!r}: not a file")
        return FileInfo(local, st.st_size, st.st_mtime_ns // 1_000_000)

    def exists(self, path: str) -> bool:
        """Whether a regular file is at ``path`` (directories do not count, as on S3)."""
        local = _local(path)
        if os.path.isfile(local):
            return True
        self._settle(local)
        return os.path.isfile(local)
