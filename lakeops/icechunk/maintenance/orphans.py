"""Icechunk garbage collection: delete objects no retained snapshot reaches.

Spec basis: "Deletes - Delete files that are no longer used (via a garbage-collection operation)"
("Storage Operations"); objects live in ``snapshots/``, ``manifests/``, ``attributes/`` and
``chunks/`` ("File Layout"); a snapshot names its manifests and attribute files, a manifest its
native chunks ("Snapshot Files", "Chunk Manifest Files"); virtual chunks live outside the
repository and are never touched.

**Retained snapshots** (the roots), with ``cutoff = now - retention`` (:mod:`.retention`):

1. the snapshot every branch sequence file names — every file still present, not only the tips:
   nothing a ref file points to is ever deleted (expiry removes the files, :mod:`.expiry`);
2. the snapshot every tag names;
3. every snapshot file younger than the cutoff: it may be a concurrent writer's, not committed yet
   (these are the snapshots "not yet expired" by age).

**Reachable** from the roots (:meth:`Repository.reachable`): the root snapshot files themselves, the
manifests their ``manifest_files`` and array nodes name, the attribute files they name, every native
chunk object (``ChunkRef.id``) in those manifests.

**Deleted**: every object under the four object directories whose name is an object id, that is not
reachable, and whose modification time is older than the cutoff (the age floor: a writer's fresh
chunks and manifests are younger than its snapshot). Also lakeops' own abandoned temporary files
(``.<name>.<random>.lakeops-tmp``, :func:`lakeops.storage.local.is_abandoned_temp`) in those
directories and in ``refs/`` once past the same floor, reported as kind ``temp``: a local write killed
before its rename or link leaves one, no ref or snapshot can name it, and nothing else removes it.
Anything else — ref files, files whose names are not ids, other directories — is never listed for
deletion.

Plan and reachability run on the driver and fail (nothing deleted) on any ref or reachable file
that cannot be read or decoded. Just before deleting, :func:`recheck` recomputes the roots from the
refs and young snapshots as they are then and drops every candidate that became reachable (a branch
reset to an old snapshot, a commit that landed meanwhile). The deletions run as
:mod:`lakeops.deletion` batches (on the caller's executor: threads, or one Spark task each) that
refuse anything outside the root or under ``refs/`` (:meth:`GcPlan.collect_garbage`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from lakeops.deletion import BatchResult, Candidate, DeleteBatch, make_batches
from lakeops.errors import InvalidArgument
from lakeops.icechunk import refs
from lakeops.icechunk.ids import validate_id
from lakeops.icechunk.maintenance.expiry import require_repository
from lakeops.icechunk.maintenance.retention import resolve_retention
from lakeops.icechunk.repository import (
    ATTRIBUTES_DIR,
    CHUNKS_DIR,
    MANIFESTS_DIR,
    SNAPSHOTS_DIR,
    Reachable,
    Repository,
)
from lakeops.storage import FileInfo, Storage, StorageOptions, join, open_storage
from lakeops.storage.local import is_abandoned_temp
from lakeops.units import cutoff_ms as compute_cutoff

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "CollectionPlan",
    "Tally",
    "collection_window",
    "TEMP_KIND",
    "Delete",
    "GcPlan",
    "ObjectKind",
    "list_kind",
    "list_objects",
    "scan_directory",
    "plan_gc",
    "recheck",
]

#: Paths per Spark task: S3's DeleteObjects limit, so one task is one request.
DEFAULT_BATCH_SIZE = 1000

ObjectKind = Literal["snapshot", "manifest", "attributes", "chunk"]
OBJECT_DIRS: dict[ObjectKind, str] = {
    "snapshot": SNAPSHOTS_DIR,
    "manifest": MANIFESTS_DIR,
    "attributes": ATTRIBUTES_DIR,
    "chunk": CHUNKS_DIR,
}
#: The candidate kind of an abandoned lakeops temporary file.
TEMP_KIND = "temp"
#: Deletes batches and returns one result a batch: an executor's ``delete``, which moves the files into
#: a trash run instead when the caller quarantines.
Delete = Callable[[Sequence[DeleteBatch]], list[BatchResult]]


@dataclass
class Tally:
    """One listing sorted into reachable, too recent (modified at or after ``cutoff``) and candidates."""

    cutoff: int
    scanned: int = 0
    reachable: int = 0
    too_recent: int = 0
    candidates: list[Candidate] = field(default_factory=list)

    def add(self, info: FileInfo, kind: str, *, reachable: bool) -> None:
        self.scanned += 1
        if reachable:
            self.reachable += 1
        elif info.mtime_ms >= self.cutoff:
            self.too_recent += 1
        else:
            self.candidates.append(Candidate(path=info.path, size=info.size, kind=kind))

    def figures(self) -> dict[str, int]:
        """The counts, named as :class:`CollectionPlan`'s fields."""
        return {
            "objects_scanned": self.scanned,
            "objects_reachable": self.reachable,
            "objects_too_recent": self.too_recent,
        }


class CollectionPlan(BaseModel):
    """What every Icechunk garbage-collection plan holds and does: one listing's figures, the deletion
    batches, a re-check just before deleting, and the report's fields. Subclasses name their roots
    (``retained_snapshots``), re-check them (``rechecked``) and count deletions by kind."""

    model_config = ConfigDict(frozen=True)

    format: ClassVar[str] = "icechunk"

    table_root: str
    retention: timedelta
    cutoff_ms: int
    storage: StorageOptions
    batch_size: int = Field(ge=1)
    objects_scanned: int
    objects_reachable: int
    objects_too_recent: int
    unrecognised_files: int
    batches: list[DeleteBatch]

    @property
    def candidates(self) -> list[Candidate]:
        return [c for b in self.batches for c in b.files]

    @property
    @abstractmethod
    def retained_snapshots(self) -> int:
        """Snapshots the roots keep (the report's ``retained_snapshots``)."""

    @abstractmethod
    def rechecked(self, storage: Storage) -> Self:
        """The plan again from a new listing, dropping what became reachable or young since."""

    @abstractmethod
    def deleted_by_kind(self, kinds: Counter[str]) -> dict[str, int]:
        """The report's ``deleted_*`` fields of each kind, from the candidates counted by kind."""

    def collect_garbage(
        self, storage_options: StorageOptions, delete: Delete, *, dry_run: bool, note: Callable[[str], None]
    ) -> dict[str, Any]:
        """Unless ``dry_run``: re-check the plan, tell ``note`` what it will delete, and ``delete`` its
        batches. The report's figures, named as its fields (those of the re-checked plan)."""
        if dry_run:
            return self.report_fields(dry_run=True)
        plan = self.rechecked(open_storage(self.table_root, storage_options))
        note(
            f"{plan.objects_scanned} objects scanned, {plan.objects_reachable} reachable; "
            f"{len(plan.candidates)} unreachable objects older than the floor to delete"
        )
        results = delete(plan.batches)
        if sorted(r.batch_id for r in results) != [b.batch_id for b in plan.batches]:
            raise InvalidArgument(f"{plan.table_root}: delete results do not match the plan's batches")
        return plan.report_fields(dry_run=False)

    def report_fields(self, *, dry_run: bool) -> dict[str, Any]:
        """What the plan deletes by kind and what its listing saw, named as the report's fields (the
        paths listed in a dry run)."""
        return {
            "retained_snapshots": self.retained_snapshots,
            "objects_scanned": self.objects_scanned,
            "objects_reachable": self.objects_reachable,
            "files_too_recent": self.objects_too_recent,
            "unrecognised_files": self.unrecognised_files,
            "batches": len(self.batches),
            **self.deleted_by_kind(Counter(c.kind for c in self.candidates)),
            "deleted_files": len(self.candidates),
            "deleted_bytes": sum(c.size for c in self.candidates),
            "paths": [c.path for c in self.candidates] if dry_run else [],
        }


class GcPlan(CollectionPlan):
    """Immutable, printable plan computed from one listing of a seed-format repository."""

    #: Ref file path -> snapshot id, and the young snapshot files, the roots were computed from.
    ref_files: dict[str, str]
    young_snapshots: list[str]

    @property
    def roots(self) -> set[str]:
        return set(self.ref_files.values()) | set(self.young_snapshots)

    @property
    def retained_snapshots(self) -> int:
        return len(self.roots)

    def rechecked(self, storage: Storage) -> GcPlan:
        return recheck(self, storage)

    def deleted_by_kind(self, kinds: Counter[str]) -> dict[str, int]:
        return {
            "deleted_snapshots": kinds["snapshot"],
            "deleted_manifests": kinds["manifest"],
            "deleted_attribute_files": kinds["attributes"],
            "deleted_chunks": kinds["chunk"],
            "deleted_temp_files": kinds[TEMP_KIND],
        }


def list_objects(storage: Storage, root: str) -> tuple[dict[ObjectKind, dict[str, FileInfo]], int]:
    """Every object by kind and id, and the number of files in those directories whose names are
    not object ids (never deleted: they are not ours to judge)."""
    found: dict[ObjectKind, dict[str, FileInfo]] = {}
    unrecognised = 0
    for kind in OBJECT_DIRS:
        found[kind], skipped = list_kind(storage, root, kind)
        unrecognised += skipped
    return found, unrecognised


def list_kind(storage: Storage, root: str, kind: ObjectKind) -> tuple[dict[str, FileInfo], int]:
    found, temps, others = scan_directory(storage, join(root, OBJECT_DIRS[kind]))
    return found, len(temps) + others


def scan_directory(storage: Storage, prefix: str) -> tuple[dict[str, FileInfo], list[FileInfo], int]:
    """Objects under ``prefix`` by id, lakeops temporary files, and how many other files there are."""
    found: dict[str, FileInfo] = {}
    temps: list[FileInfo] = []
    others = 0
    for info in storage.list(prefix):
        name = info.path[len(prefix) + 1 :]
        if is_abandoned_temp(name):
            temps.append(info)
            continue
        try:
            found[validate_id(name)] = info
        except InvalidArgument:
            others += 1
    return found, temps, others


def _ref_snapshots(storage: Storage, root: str) -> dict[str, str]:
    """Every branch sequence file and tag file -> the snapshot id it names (CorruptFile on a bad one)."""
    named: dict[str, str] = {}
    for branch in refs.list_branches(storage, root):
        named.update((v.path, v.snapshot_id) for v in refs.branch_history(storage, root, branch))
    for name in refs.list_tags(storage, root):
        tag = refs.read_tag(storage, root, name)
        named[tag.path] = tag.snapshot_id
    return named


def retained_roots(
    storage: Storage, root: str, snapshots: dict[str, FileInfo], cutoff: int
) -> tuple[dict[str, str], list[str]]:
    """The roots (module docs): ref file -> snapshot id, and the snapshot files younger than ``cutoff``."""
    young = sorted(sid for sid, info in snapshots.items() if info.mtime_ms >= cutoff)
    return _ref_snapshots(storage, root), young


def _reachable(repo: Repository, ref_files: dict[str, str], young: list[str]) -> Reachable:
    return repo.reachable(sorted(set(ref_files.values()) | set(young)))


def _is_reachable(kind: str, object_id: str, live: Reachable) -> bool:
    if kind == TEMP_KIND:
        return False  # no ref, snapshot or manifest ever names a temporary file
    held = {"snapshot": live.snapshots, "manifest": live.manifests, "attributes": live.attribute_files}
    return object_id in (live.chunks if kind == "chunk" else held[kind])


def _batches(root: str, options: StorageOptions, candidates: list[Candidate], size: int) -> list[DeleteBatch]:
    """Batches that refuse anything under ``refs/`` -- but for temporary files (some live there),
    which get batches of their own."""
    objects = [c for c in candidates if c.kind != TEMP_KIND]
    temps = [c for c in candidates if c.kind == TEMP_KIND]
    batches = make_batches(root, options, objects, size, protected=[join(root, refs.REFS_DIR)])
    extra = make_batches(root, options, temps, size)
    return batches + [b.model_copy(update={"batch_id": len(batches) + b.batch_id}) for b in extra]


def collection_window(root: str, retention: timedelta | None, *, force: bool, now_ms: int) -> tuple[timedelta, int]:
    """The retention (:mod:`.retention`; shorter than the default only with ``--force-short-retention``)
    and the cutoff it puts on modification times."""
    window = resolve_retention(root, retention, override=force, override_flag="--force-short-retention")
    return window, compute_cutoff(window, now_ms)


def plan_gc(
    storage: Storage,
    root: str,
    storage_options: StorageOptions,
    *,
    retention: timedelta | None,
    force: bool,
    now_ms: int,
    batch_size: int = DEFAULT_BATCH_SIZE,
    repo: Repository | None = None,
) -> GcPlan:
    """List the repository once and choose the objects to delete (rules in the module docs; ``repo``:
    the reader to plan through)."""
    repo = Repository(storage, root) if repo is None else repo
    require_repository(repo)
    window, cutoff = collection_window(repo.root, retention, force=force, now_ms=now_ms)
    objects: dict[ObjectKind, dict[str, FileInfo]] = {}
    temps: list[FileInfo] = []
    unrecognised = 0
    for kind, directory in OBJECT_DIRS.items():
        objects[kind], in_dir, others = scan_directory(storage, join(repo.root, directory))
        temps += in_dir
        unrecognised += others
    _, in_refs, _ = scan_directory(storage, join(repo.root, refs.REFS_DIR))
    temps += in_refs
    ref_files, young = retained_roots(storage, repo.root, objects["snapshot"], cutoff)
    live = _reachable(repo, ref_files, young)
    tally = Tally(cutoff)
    for info in temps:
        tally.add(info, TEMP_KIND, reachable=False)  # too recent, it may be a write in progress
    for kind, by_id in objects.items():
        for object_id, info in by_id.items():
            tally.add(info, kind, reachable=_is_reachable(kind, object_id, live))
    return GcPlan(
        table_root=repo.root,
        retention=window,
        cutoff_ms=cutoff,
        storage=storage_options,
        batch_size=batch_size,
        ref_files=ref_files,
        young_snapshots=young,
        **tally.figures(),
        unrecognised_files=unrecognised,
        batches=_batches(repo.root, storage_options, tally.candidates, batch_size),
    )


def recheck(plan: GcPlan, storage: Storage) -> GcPlan:
    """The plan re-validated just before deleting: when refs or young snapshots changed since the
    plan, reachability is recomputed from them and candidates that became reachable are kept."""
    snapshots, _ = list_kind(storage, plan.table_root, "snapshot")
    ref_files, young = retained_roots(storage, plan.table_root, snapshots, plan.cutoff_ms)
    if ref_files == plan.ref_files and young == plan.young_snapshots:
        return plan
    live = _reachable(Repository(storage, plan.table_root), ref_files, young)
    kept = [c for c in plan.candidates if not _is_reachable(c.kind, c.path.rsplit("/", 1)[1], live)]
    return plan.model_copy(
        update={
            "ref_files": ref_files,
            "young_snapshots": young,
            "objects_reachable": plan.objects_reachable + len(plan.candidates) - len(kept),
            "batches": _batches(plan.table_root, plan.storage, kept, plan.batch_size),
        }
    )
