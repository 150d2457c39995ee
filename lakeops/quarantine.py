"""Recoverable deletes: move files into a trash prefix under the table root, restore them, purge them.

Issue 10: a destructive operation run with ``--quarantine`` moves each file it would delete to
``<root>/_lakeops_trash/<run_id>/<path relative to root>`` instead of deleting it, and records every
move in a JSON-lines manifest, so ``lakeops restore TABLE RUN_ID`` can put the table back exactly as it
was and ``lakeops purge-trash`` can free the space once the retention has passed.

Why the layout is what it is:

* The run id starts with a UTC timestamp (``20261123T115549Z-3f9a1c``), so runs sort by time and a
  purge can judge a run's age from its name alone, without trusting object mtimes (an S3 copy gets a
  new mtime; a local rename keeps the old one).
* One manifest *per deletion batch* (``_manifest-<batch>.jsonl``): batches run concurrently (driver
  threads or Spark tasks) and object stores cannot append, so each batch writes its own file with
  put-if-absent. Restore reads them all. The manifest is written *before* any file moves, so a run that
  dies half-way still leaves a manifest naming every file it may have moved.
* A move is copy-then-delete on S3 (it has no rename; the copy is server-side and refuses an existing
  target, :meth:`~lakeops.storage.base.Storage.copy_if_absent`) and a rename on local disk.
* The trash and audit prefixes start with ``_``: Delta VACUUM never lists ``_``-prefixed top-level
  directories (Delta's ``isHiddenDirectory``), Icechunk GC lists only its object directories, and
  Iceberg orphans skips them explicitly (:func:`is_reserved`). :func:`lakeops.deletion.delete_batch`
  refuses to delete inside them whatever a plan says.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict

from lakeops.errors import AlreadyExists, CorruptFile, InvalidArgument, NotFound, StorageError
from lakeops.storage import Storage, StorageOptions, open_storage
from lakeops.storage.uri import LOCAL, is_within, join, normalize, relative_to, require_within, scheme

__all__ = [
    "AUDIT_DIR",
    "DEFAULT_PURGE_AFTER",
    "TRASH_DIR",
    "ManifestEntry",
    "PurgeResult",
    "RestoreResult",
    "is_reserved",
    "new_run_id",
    "purge",
    "quarantine_files",
    "read_manifest",
    "remove",
    "reserved_dirs",
    "restore",
    "run_time",
    "trash_runs",
]

TRASH_DIR = "_lakeops_trash"
AUDIT_DIR = "_lakeops_audit"
DEFAULT_PURGE_AFTER = timedelta(days=7)
_STAMP = "%Y%m%dT%H%M%SZ"
_MANIFEST_PREFIX = "_manifest"


class ManifestEntry(BaseModel):
    """One moved file: its path relative to the table root, why it was garbage, and which run moved it."""

    model_config = ConfigDict(frozen=True)

    path: str
    size: int
    kind: str
    moved_at: str
    run_id: str
    operation: str


class RestoreResult(BaseModel):
    run_id: str
    files: int
    bytes: int
    #: Entries whose file was already back in place (a restore that was interrupted and rerun).
    already_restored: int


class PurgeResult(BaseModel):
    runs: list[str]
    files: int
    bytes: int


def new_run_id(now: datetime | None = None) -> str:
    """A sortable run id: UTC second + 6 random hex digits (two runs in one second still differ)."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{moment.strftime(_STAMP)}-{secrets.token_hex(3)}"


def run_time(run_id: str) -> datetime:
    """When ``run_id`` started; InvalidArgument for a name that is not a run id."""
    try:
        return datetime.strptime(run_id.split("-", 1)[0], _STAMP).replace(tzinfo=UTC)
    except ValueError:
        raise InvalidArgument(f"{run_id!r} is not a lakeops run id (expected e.g. 20261123T115549Z-3f9a1c)") from None


def reserved_dirs(root: str) -> list[str]:
    """The directories lakeops itself keeps under a table root; never orphans, never deleted by a plan."""
    return [join(root, TRASH_DIR), join(root, AUDIT_DIR)]


def is_reserved(root: str, path: str) -> bool:
    return any(is_within(d, path) for d in reserved_dirs(root))


def _run_dir(root: str, run_id: str) -> str:
    run_time(run_id)  # a run id with ``/`` or ``..`` never reaches a path
    if "/" in run_id or run_id.startswith("."):
        raise InvalidArgument(f"{run_id!r} is not a lakeops run id")
    return join(root, TRASH_DIR, run_id)


def _move(storage: Storage, source: str, target: str) -> None:
    """Move one file; never overwrites ``target`` (AlreadyExists naming it)."""
    if scheme(source) == LOCAL:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            os.link(source, target)  # fails if target exists: no silent overwrite
        except FileExistsError:
            raise AlreadyExists(f"{target} already exists") from None
        except FileNotFoundError:
            raise NotFound(f"{source} does not exist") from None
        except OSError:  # a file system without hard links: check, then rename (a tiny race, no copy)
            if os.path.lexists(target):
                raise AlreadyExists(f"{target} already exists") from None
            try:
                os.rename(source, target)
            except FileNotFoundError:
                raise NotFound(f"{source} does not exist") from None
            except OSError as exc:
                raise StorageError(f"cannot move {source} to {target}: {exc}") from exc
            return
        os.unlink(source)
        return
    storage.copy_if_absent(source, target)  # server-side: a 1 GB file never passes through this process
    storage.delete_many([source])


def remove(
    storage: Storage,
    root: str,
    files: Sequence[tuple[str, int, str]],
    *,
    quarantine_run: str | None,
    operation: str,
    batch_id: int = 0,
) -> None:
    """Delete ``files`` ((absolute path, size, kind), already checked), or with ``quarantine_run`` move
    them into that run's trash: the one switch every destructive operation goes through."""
    if quarantine_run is None:
        storage.delete_many([path for path, _, _ in files])
    elif files:
        quarantine_files(root, storage, files, run_id=quarantine_run, operation=operation, batch_id=batch_id)


def _prune(directory: str) -> None:
    """Remove the empty directories a run leaves behind on local disk (object stores have none)."""
    if scheme(directory) != LOCAL or not os.path.isdir(directory):
        return
    for current, _, _ in sorted(os.walk(directory), key=lambda w: -len(w[0])):
        with contextlib.suppress(OSError):  # not empty: something that is not ours is in it; leave it
            os.rmdir(current)


def quarantine_files(
    root: str,
    storage: Storage,
    files: Sequence[tuple[str, int, str]],
    *,
    run_id: str,
    operation: str,
    batch_id: int,
) -> None:
    """Move ``files`` ((absolute path, size, kind), already checked against the root) into the run's trash.

    The batch's manifest is written first (put-if-absent: a batch id is moved once per run), then each
    file moves. A file already gone is an error: the plan said it existed, so something else is acting
    on the table."""
    root = normalize(root)
    run_dir = _run_dir(root, run_id)
    moved_at = datetime.now(UTC).isoformat()
    entries = [
        ManifestEntry(
            path=relative_to(root, path), size=size, kind=kind, moved_at=moved_at, run_id=run_id, operation=operation
        )
        for path, size, kind in files
    ]
    manifest = "".join(e.model_dump_json() + "\n" for e in entries).encode()
    name = join(run_dir, f"{_MANIFEST_PREFIX}-{batch_id:05d}.jsonl")
    retry = False
    try:
        storage.put_if_absent(name, manifest)
    except AlreadyExists:
        # A retried Spark task: the same batch of the same run wrote its manifest and may have moved
        # some files already. Go on only if it is the same list of files.
        earlier = [json.loads(line)["path"] for line in storage.read(name).decode().splitlines() if line.strip()]
        if earlier != [e.path for e in entries]:
            raise StorageError(
                f"{root}: {name} already lists other files; refusing to quarantine batch {batch_id}"
            ) from None
        retry = True
    for entry in entries:
        source, target = join(root, entry.path), join(run_dir, entry.path)
        if retry and not storage.exists(source) and storage.exists(target):
            continue  # moved by the earlier attempt
        try:
            _move(storage, source, target)
        except (NotFound, AlreadyExists) as exc:
            raise StorageError(f"{root}: cannot quarantine {entry.path} in run {run_id}: {exc}") from exc


def _manifests(storage: Storage, run_dir: str) -> Iterator[str]:
    for info in storage.list(run_dir):
        name = info.path[len(run_dir) + 1 :]
        if "/" not in name and name.startswith(_MANIFEST_PREFIX) and name.endswith(".jsonl"):
            yield info.path


def read_manifest(root: str, run_id: str, storage_options: StorageOptions | None = None) -> list[ManifestEntry]:
    """Every entry of the run's manifests, in path order; NotFound if the table has no such run."""
    root = normalize(root)
    storage = open_storage(root, storage_options)
    run_dir = _run_dir(root, run_id)
    entries: list[ManifestEntry] = []
    names = list(_manifests(storage, run_dir))
    if not names:
        raise NotFound(f"{root}: no quarantine run {run_id} (no manifest under {run_dir})")
    for name in names:
        for number, line in enumerate(storage.read(name).decode().splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = ManifestEntry.model_validate(json.loads(line))
            except ValueError as exc:
                raise CorruptFile(f"{root}: {name} line {number} is not a manifest entry: {exc}") from None
            require_within(root, join(root, entry.path))  # a doctored manifest cannot restore outside the root
            entries.append(entry)
    return sorted(entries, key=lambda e: e.path)


def restore(root: str, run_id: str, storage_options: StorageOptions | None = None) -> RestoreResult:
    """Move every file of the run back to where it was, then remove the run's trash.

    Refuses (before moving anything) when a file to restore exists again at its original path while
    its trash copy is still there: the table has moved on and overwriting would lose data. A rerun
    after an interrupted restore skips the files already back."""
    root = normalize(root)
    storage = open_storage(root, storage_options)
    run_dir = _run_dir(root, run_id)
    entries = read_manifest(root, run_id, storage_options)
    pending: list[ManifestEntry] = []
    done = 0
    for entry in entries:
        original, trashed = join(root, entry.path), join(run_dir, entry.path)
        in_trash, in_place = storage.exists(trashed), storage.exists(original)
        if in_trash and in_place:
            raise AlreadyExists(
                f"{root}: cannot restore run {run_id}: {entry.path} exists again at its original path; "
                "nothing was restored"
            )
        if in_trash:
            pending.append(entry)
        elif in_place:
            done += 1
        else:
            raise NotFound(
                f"{root}: cannot restore {entry.path} of run {run_id}: it is neither in the trash nor in place"
            )
    for entry in pending:
        _move(storage, join(run_dir, entry.path), join(root, entry.path))
    storage.delete_many([info.path for info in storage.list(run_dir)])
    _prune(run_dir)
    return RestoreResult(run_id=run_id, files=len(pending), bytes=sum(e.size for e in pending), already_restored=done)


def trash_runs(root: str, storage_options: StorageOptions | None = None) -> dict[str, list[tuple[str, int]]]:
    """Run id -> its objects (path, size), for every run in the table's trash."""
    root = normalize(root)
    trash = join(root, TRASH_DIR)
    runs: dict[str, list[tuple[str, int]]] = {}
    for info in open_storage(root, storage_options).list(trash):
        run_id = info.path[len(trash) + 1 :].split("/", 1)[0]
        runs.setdefault(run_id, []).append((info.path, info.size))
    return runs


def purge(
    root: str,
    older_than: timedelta = DEFAULT_PURGE_AFTER,
    storage_options: StorageOptions | None = None,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
) -> PurgeResult:
    """Delete every trash run that started more than ``older_than`` ago (by its run id's timestamp).

    A directory in the trash whose name is not a run id is left alone: lakeops did not write it."""
    if older_than < timedelta(0):
        raise InvalidArgument(f"{root}: purge retention {older_than} is negative")
    root = normalize(root)
    cutoff = (now or datetime.now(UTC)) - older_than
    chosen: list[str] = []
    paths: list[str] = []
    size = 0
    for run_id, objects in sorted(trash_runs(root, storage_options).items()):
        try:
            started = run_time(run_id)
        except InvalidArgument:
            continue
        if started < cutoff:
            chosen.append(run_id)
            paths += [require_within(join(root, TRASH_DIR), p) for p, _ in objects]
            size += sum(s for _, s in objects)
    if paths and not dry_run:
        open_storage(root, storage_options).delete_many(paths)
        for run_id in chosen:
            _prune(join(root, TRASH_DIR, run_id))
    return PurgeResult(runs=chosen, files=len(paths), bytes=size)
