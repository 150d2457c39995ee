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
  target) and a link-then-unlink on local disk (:meth:`~lakeops.storage.base.Storage.move_if_absent`).
* Every move, purge and restore goes through a storage confined to the table root
  (:mod:`lakeops.storage.confined`): a trash, a run or a restored path that is a symlink out of the
  table is refused, and the whole run is checked before its first file moves.
* The trash and audit prefixes start with ``_``: Delta VACUUM never lists ``_``-prefixed top-level
  directories (Delta's ``isHiddenDirectory``), Icechunk GC lists only its object directories, and
  Iceberg orphans skips them explicitly (:func:`is_reserved`). :func:`lakeops.deletion.delete_batch`
  refuses to delete inside them whatever a plan says.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict

from lakeops.errors import AlreadyExists, CorruptFile, InvalidArgument, NotFound, StorageError
from lakeops.jsontext import dumps
from lakeops.storage import ConfinedStorage, Storage, StorageOptions, open_storage
from lakeops.storage.uri import is_within, join, normalize, relative_to

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
    "require_run_id",
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


def require_run_id(run_id: str) -> str:
    """``run_id`` if it is a run id (InvalidArgument if not): one with ``/`` or ``..`` never reaches a path."""
    run_time(run_id)
    if "/" in run_id or run_id.startswith("."):
        raise InvalidArgument(f"{run_id!r} is not a lakeops run id")
    return run_id


def _run_dir(root: str, run_id: str) -> str:
    return join(root, TRASH_DIR, require_run_id(run_id))


def remove(
    storage: Storage,
    root: str,
    files: Sequence[tuple[str, int, str]],
    *,
    quarantine_run: str | None,
    operation: str,
    batch_id: int = 0,
) -> None:
    """Delete ``files`` ((absolute path, size, kind)), or with ``quarantine_run`` move them into that run's
    trash: the one switch every destructive operation goes through. Whatever storage the caller holds,
    it acts confined to ``root``, every path checked before the first is touched."""
    if quarantine_run is None:
        ConfinedStorage(storage, root).delete_many([path for path, _, _ in files])
    elif files:
        quarantine_files(root, storage, files, run_id=quarantine_run, operation=operation, batch_id=batch_id)


def quarantine_files(
    root: str,
    storage: Storage,
    files: Sequence[tuple[str, int, str]],
    *,
    run_id: str,
    operation: str,
    batch_id: int,
) -> None:
    """Move ``files`` ((absolute path, size, kind)) into the run's trash.

    Every source is checked against the root first, then the batch's manifest is written (put-if-absent:
    a batch id is moved once per run), then each file moves. A file already gone is an error: the plan
    said it existed, so something else is acting on the table."""
    root = normalize(root)
    confined = ConfinedStorage(storage, root)
    confined.confine([path for path, _, _ in files], "move")
    run_dir = _run_dir(root, run_id)
    moved_at = datetime.now(UTC).isoformat()
    entries = [
        ManifestEntry(
            path=relative_to(root, path), size=size, kind=kind, moved_at=moved_at, run_id=run_id, operation=operation
        )
        for path, size, kind in files
    ]
    manifest = "".join(dumps(e.model_dump(mode="json")) + "\n" for e in entries).encode()  # non-UTF-8 names too
    name = join(run_dir, f"{_MANIFEST_PREFIX}-{batch_id:05d}.jsonl")
    retry = False
    try:
        confined.put_if_absent(name, manifest)
    except AlreadyExists:
        # A retried Spark task: the same batch of the same run wrote its manifest and may have moved
        # some files already. Go on only if it is the same list of files.
        earlier = [json.loads(line)["path"] for line in confined.read(name).decode().splitlines() if line.strip()]
        if earlier != [e.path for e in entries]:
            raise StorageError(
                f"{root}: {name} already lists other files; refusing to quarantine batch {batch_id}"
            ) from None
        retry = True
    for entry in entries:
        source, target = join(root, entry.path), join(run_dir, entry.path)
        if retry and not confined.exists(source) and confined.exists(target):
            continue  # moved by the earlier attempt
        try:
            confined.move_if_absent(source, target)
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
    moves = [(join(run_dir, entry.path), join(root, entry.path)) for entry in pending]
    # A doctored run (its directory, or an entry's, a symlink out of the table) is refused before any move.
    storage.confine([source for source, _ in moves], "move")
    storage.confine([target for _, target in moves], "move into")
    for source, target in moves:
        storage.move_if_absent(source, target)
    storage.delete_many([info.path for info in storage.list(run_dir)])
    storage.prune(run_dir)
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
    try:
        cutoff = (now or datetime.now(UTC)) - older_than
    except OverflowError:  # a retention reaching before year 1 (--older-than 800000d): no run is that old
        cutoff = datetime.min.replace(tzinfo=UTC)
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
            paths += [p for p, _ in objects]
            size += sum(s for _, s in objects)
    if paths and not dry_run:
        storage = open_storage(root, storage_options)
        storage.delete_many(paths)
        for run_id in chosen:
            storage.prune(join(root, TRASH_DIR, run_id))
    return PurgeResult(runs=chosen, files=len(paths), bytes=size)
