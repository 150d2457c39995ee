"""Deleting files in batches, one Spark task per batch, for every format's cleanup operation.

A batch carries its own safety rules so a task can enforce them without the plan: no path may be
under a protected prefix (Delta's ``_delta_log``) or be a protected file (Iceberg's current metadata
file, ``version-hint.text``), and lakeops's own trash and audit directories
(:func:`lakeops.quarantine.reserved_dirs`) are protected in every batch. Every path must also be inside
the table root once symlinks are resolved (docs/architecture.md, "Safety rules"); the storage the batch deletes
through enforces that (:mod:`lakeops.storage.confined`). A violation of either stops the task before it
deletes anything. A batch with ``quarantine_run`` set moves its files into that run's trash instead of
deleting them (:mod:`lakeops.quarantine`), after the same checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel, ConfigDict, field_validator

from lakeops.errors import InvalidArgument, UnsafeOperation
from lakeops.quarantine import remove, reserved_dirs
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import is_within, is_within_normalized, normalize, relative_to, storage_location

__all__ = [
    "DRIVER_DELETE_THREADS",
    "BatchResult",
    "Candidate",
    "DeleteBatch",
    "delete_batch",
    "delete_in_threads",
    "deleted_by_kind",
    "for_run",
    "make_batches",
    "require_all_deleted",
]


class Candidate(BaseModel):
    """One file to delete: where, how big, and why it is garbage (``kind``, for reports)."""

    model_config = ConfigDict(frozen=True)

    path: str
    size: int
    kind: str

    @classmethod
    def of(cls, path: str, size: int, kind: str) -> Candidate:
        """A candidate from a planner's own canonical location, built without pydantic's validation
        (a VACUUM builds one per file: a tenth of its planning); the path rule still holds."""
        return cls.model_construct(path=cls._unambiguous(path), size=size, kind=kind)

    @field_validator("path")
    @classmethod
    def _unambiguous(cls, path: str) -> str:
        """The planner names each file by the canonical location it compared, never by a ``file:`` URI
        with escapes: the task would read it again, and an Iceberg path percent-decoded there is
        another, live file (issue 19)."""
        storage_location(path)
        return path


class DeleteBatch(BaseModel):
    """One Spark task's work: delete these files of the table at ``table_root``."""

    model_config = ConfigDict(frozen=True)

    batch_id: int
    table_root: str
    storage: StorageOptions
    files: list[Candidate]
    #: Directories (or files) inside the root whose contents are never deleted by this batch.
    protected: list[str] = []
    #: Set: move the files into this run's trash (recoverable) instead of deleting them.
    quarantine_run: str | None = None
    #: The command that deletes (``orphans``, ``expire``), recorded in the quarantine manifest.
    operation: str = ""


class BatchResult(BaseModel):
    batch_id: int
    files: int
    bytes: int


def require_all_deleted(table: str, batches: Sequence[DeleteBatch], results: Sequence[BatchResult]) -> None:
    """Refuse to report a run as done unless ``results`` answer every batch, once."""
    if sorted(r.batch_id for r in results) != sorted(b.batch_id for b in batches):
        raise InvalidArgument(f"{table}: delete results do not match the batches planned")


def deleted_by_kind(candidates: Iterable[Candidate], kinds: Sequence[str]) -> dict[str, int]:
    """``deleted_<kind>_files`` and ``deleted_<kind>_bytes`` for each of ``kinds``: how cleanup reports
    count what they delete (or, in a dry run, would)."""
    listed = list(candidates)
    totals: dict[str, int] = {}
    for kind in kinds:
        sizes = [c.size for c in listed if c.kind == kind]
        totals |= {f"deleted_{kind}_files": len(sizes), f"deleted_{kind}_bytes": sum(sizes)}
    return totals


def make_batches(
    table_root: str,
    storage_options: StorageOptions,
    candidates: Iterable[Candidate],
    size: int,
    *,
    protected: Sequence[str] = (),
) -> list[DeleteBatch]:
    """Candidates in path order, ``size`` to a batch."""
    ordered = sorted(candidates, key=lambda c: c.path)
    return [
        DeleteBatch(
            batch_id=i,
            table_root=table_root,
            storage=storage_options,
            files=ordered[start : start + size],
            protected=list(protected),
        )
        for i, start in enumerate(range(0, len(ordered), size))
    ]


def delete_batch(batch: DeleteBatch) -> BatchResult:
    """Delete one batch after checking every path against the protected locations (and, through its
    confined storage, against the root)."""
    protected = [normalize(p) for p in [*batch.protected, *reserved_dirs(batch.table_root)]]
    paths = []
    for candidate in batch.files:
        location = normalize(candidate.path)
        for guarded in protected:
            if is_within_normalized(guarded, location):
                name = relative_to(batch.table_root, guarded) if is_within(batch.table_root, guarded) else guarded
                raise UnsafeOperation(f"{batch.table_root}: refusing to delete {location}: it is inside {name}")
        paths.append(location)
    remove(
        open_storage(batch.table_root, batch.storage),
        batch.table_root,
        [(path, c.size, c.kind) for path, c in zip(paths, batch.files, strict=True)],
        quarantine_run=batch.quarantine_run,
        operation=batch.operation,
        batch_id=batch.batch_id,
    )
    return BatchResult(batch_id=batch.batch_id, files=len(paths), bytes=sum(c.size for c in batch.files))


#: Threads deleting batches on the driver: each waits on storage (one S3 DeleteObjects request, or a
#: thousand unlinks), so more threads than cores pay off. Unlinking 100,000 files on 2 cores (ext4):
#: 8.5 s with one thread, 3.0 s with 8, 2.0 s with 16, no better with 32, worse with 64.
DRIVER_DELETE_THREADS = 16


def for_run(batches: Sequence[DeleteBatch], quarantine_run: str | None, operation: str) -> list[DeleteBatch]:
    """``batches`` as one run deletes them: with ``quarantine_run``, each moves its files into that run's
    trash instead (stamped here, so planners stay unaware of it)."""
    if quarantine_run is None:
        return list(batches)
    stamp = {"quarantine_run": quarantine_run, "operation": operation}
    return [b.model_copy(update=stamp) for b in batches]


def delete_in_threads(
    batches: Sequence[DeleteBatch], task: Callable[[DeleteBatch], BatchResult] = delete_batch
) -> list[BatchResult]:
    """Every batch deleted by ``task`` in threads of this process; a failed batch raises (batches
    already done stay deleted, and a rerun plans only what is left)."""
    if not batches:
        return []
    with ThreadPoolExecutor(max_workers=min(DRIVER_DELETE_THREADS, len(batches)), thread_name_prefix="delete") as pool:
        return list(pool.map(task, batches))
