"""Orphan-file removal for Iceberg tables: delete files under the table location that no metadata
reaches ("Table Metadata Fields": ``metadata-log``, ``snapshots``, ``refs``, ``statistics``,
``partition-statistics``; "Snapshots", "Manifest Lists", "Manifests"; "File System Tables").

Why: failed writes, aborted compactions and crashed commits leave files behind that no snapshot
names; nothing else ever removes them. The spec defines what a table references, so "orphan" is
computed as *listed minus referenced*, never guessed:

* **Referenced** (:func:`referenced_files`): the current metadata file, every file of its
  ``metadata-log`` (still the table's history, readable by time travel on metadata), and of the
  current metadata *and* every log file that still exists: every snapshot's manifest list, manifests,
  every file their entries name (``DELETED`` entries too: a file some metadata names is not an
  orphan, whatever its status), and every statistics and partition-statistics file. Plus
  ``metadata/version-hint.text`` ("File System Tables"). A snapshot only older metadata files name
  was expired: the manifest list and manifests an expiry deleted are skipped (gone, they protect
  nothing); the current metadata's snapshots must be readable whole, or the run stops.
* **Listed**: everything under the table location, nothing outside it. Large trees are listed as
  Spark tasks, one per second-level directory (``data/<partition>``), see :mod:`lakeops.listing`.
* **Compared normalised** (:func:`lakeops.storage.uri.normalize`: ``s3a``/``s3n`` are ``s3``,
  trailing slashes, ``file:`` spellings), and literally: Iceberg paths are strings, never
  percent-decoded (PyIceberg's directory for ``a%20b`` is ``s=a%2520b``; decoding it made live files
  look unreferenced, issue 19). A referenced path whose scheme or authority differs from
  the location's but whose path equals a listed file's is ambiguous (a bucket alias? another
  store?): by default the run stops naming it; ``ignore`` keeps such files, ``delete`` treats them
  as unreferenced (the reference implementation's ``prefix_mismatch_mode``).
* **Age floor** (docs/architecture.md, "Safety rules"): a file not older than ``older_than`` (default 3 days) is
  kept whatever the metadata says: it may belong to a commit in flight. A shorter floor needs
  ``force_short_retention``.
* **Deleting** goes through :mod:`lakeops.deletion` batches that refuse anything outside the
  location, the current metadata file and ``version-hint.text``. :func:`recheck` runs just before:
  if the table moved on, the valid set is recomputed and files it now references are dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import ClassVar
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from lakeops.arrays import lookup_array
from lakeops.deletion import Candidate, DeleteBatch, deleted_by_kind, make_batches
from lakeops.errors import InvalidArgument, NotFound, UnsafeOperation
from lakeops.iceberg.catalog import METADATA_DIR, VERSION_HINT
from lakeops.iceberg.maintenance.defaults import DEFAULT_OLDER_THAN, PrefixMismatchMode
from lakeops.iceberg.manifest import manifests_of, read_manifest
from lakeops.iceberg.manifest_list import ManifestFile
from lakeops.iceberg.metadata import Snapshot, TableMetadata, parse_metadata
from lakeops.iceberg.reachability import MANIFEST_READ_THREADS, content_paths, snapshot_manifests, statistics_files
from lakeops.iceberg.table import IcebergTable, TableRef, load_table
from lakeops.listing import (
    DEFAULT_LISTING_THRESHOLD,
    ListedFile,
    ListingUnit,
    UnitListing,
    as_listed,
    list_tree,
    list_unit,
)
from lakeops.storage import Storage, StorageOptions
from lakeops.storage.uri import is_within, join, normalize, require_within, scheme
from lakeops.units import format_duration

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_LISTING_THRESHOLD",
    "DEFAULT_OLDER_THAN",
    "Listing",
    "ListingUnit",
    "OrphanOptions",
    "OrphanPlan",
    "PrefixMismatchMode",
    "ReferencedFiles",
    "UnitListing",
    "check_older_than",
    "list_unit",
    "plan_listing",
    "plan_orphans",
    "recheck",
    "referenced_files",
]

#: Paths per Spark delete task (S3's DeleteObjects limit).
DEFAULT_BATCH_SIZE = 1000

#: Candidate kinds, as reports count them.
DATA = "data"
METADATA = "metadata"
OTHER = "other"


class OrphanOptions(BaseModel):
    """``older_than``: the age floor; ``force_short_retention`` allows one below 3 days;
    ``listing_threshold``: second-level directories listed on the driver before listing goes to Spark."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    older_than: timedelta = DEFAULT_OLDER_THAN
    force_short_retention: bool = False
    prefix_mismatch_mode: PrefixMismatchMode = PrefixMismatchMode.ERROR
    listing_threshold: int = Field(default=DEFAULT_LISTING_THRESHOLD, ge=0)
    batch_size: int = Field(default=DEFAULT_BATCH_SIZE, ge=1)


def check_older_than(options: OrphanOptions, table: str) -> None:
    """Refuse a negative floor, and one under :data:`DEFAULT_OLDER_THAN` without the override."""
    if options.older_than < timedelta(0):
        raise InvalidArgument(f"{table}: --older-than {format_duration(options.older_than)} is negative")
    if options.older_than < DEFAULT_OLDER_THAN and not options.force_short_retention:
        raise UnsafeOperation(
            f"{table}: --older-than {format_duration(options.older_than)} is shorter than the "
            f"{format_duration(DEFAULT_OLDER_THAN)} floor for Iceberg orphan files; files of commits still in "
            "flight could be deleted. Pass --force-short-retention only if nothing writes the table meanwhile"
        )


# --- referenced files ------------------------------------------------------------------------------


def _split(location: str) -> tuple[str, str, str]:
    """(scheme, authority, path without leading slash) of a location, for any scheme."""
    try:
        canonical = normalize(location, literal=True)
    except InvalidArgument:  # schemes lakeops cannot open, remote file:// hosts: still comparable
        parts = urlsplit(location)
        return scheme(location), parts.netloc, parts.path.strip("/")
    if canonical.startswith("s3://"):
        bucket, _, key = canonical[5:].partition("/")
        return "s3", bucket, key
    return "file", "", canonical.lstrip("/")


#: A relative path that is not spelled as its normalised form: empty, absolute, an empty, ``.`` or
#: ``..`` segment, or a trailing slash.
_NOT_PLAIN = r"^$|^/|//|/$|(^|/)\.\.?(/|$)"


def _plain_below(prefixes: Sequence[str], paths: pa.Array) -> tuple[pa.Array, list[str]]:
    """``paths`` split into those spelled as one of ``prefixes`` (each ending in ``/`` and normalising
    to the table location plus a slash) and a plain relative path, given as that relative path (it
    normalises to the location, a slash and itself), and the others as written. Per manifest, in
    Arrow: the relative paths of a 10-million-entry table are half the bytes of the full ones, and no
    path needs a Python normalisation unless it is spelled unusually."""
    below = []
    for prefix in prefixes:
        rest = pc.utf8_slice_codeunits(paths, len(prefix))
        plain = pc.fill_null(
            pc.and_(pc.starts_with(paths, prefix), pc.invert(pc.match_substring_regex(rest, _NOT_PLAIN))), False
        )
        below.append(rest.filter(plain))
        paths = paths.filter(pc.invert(plain))
    return pa.concat_arrays(below), paths.to_pylist()


@dataclass(frozen=True)
class ReferencedFiles:
    """What the table's metadata reaches. ``paths``: normalised locations sharing the table location's
    scheme and authority; ``below``: more of them, the data and delete files the manifests name below
    the location, as Arrow arrays of paths relative to it (see :func:`_plain_below`); ``foreign``:
    path (without scheme and authority) -> the reference spelled with another scheme or authority."""

    table: str
    location: str
    metadata_location: str
    paths: frozenset[str]
    foreign: dict[str, str]
    metadata_files: int
    missing_metadata_files: int
    snapshots: int
    below: pa.ChunkedArray = field(default_factory=lambda: pa.chunked_array([], pa.string()))

    @classmethod
    def of(
        cls,
        table: str,
        location: str,
        metadata_location: str,
        referenced: Iterable[str],
        *,
        below: Sequence[pa.Array] = (),
        metadata_files: int = 1,
        missing_metadata_files: int = 0,
        snapshots: int = 0,
    ) -> ReferencedFiles:
        """Sort ``referenced`` by whether it shares ``location``'s scheme and authority."""
        home = _split(location)[:2]
        paths: set[str] = set()
        foreign: dict[str, str] = {}
        for path in referenced:
            kind, authority, key = _split(path)
            if (kind, authority) == home:
                paths.add(normalize(path, literal=True))
            else:
                foreign.setdefault(key, path)
        return cls(
            table,
            normalize(location, literal=True),
            metadata_location,
            frozenset(paths),
            foreign,
            metadata_files,
            missing_metadata_files,
            snapshots,
            pa.chunked_array(below, pa.string()),
        )

    @property
    def _prefix(self) -> str:
        return f"{self.location.rstrip('/')}/"

    def _below(self, normalized: Sequence[str]) -> list[bool]:
        """Whether each normalised path is one of :attr:`below`; the hash table is built over the
        paths asked about, never over the millions referenced."""
        if not normalized or not self.below.num_chunks:
            return [False] * len(normalized)
        prefix = self._prefix
        # A name that is not UTF-8 is a null there: no manifest's path (Avro strings are UTF-8).
        asked = lookup_array([p[len(prefix) :] if p.startswith(prefix) else None for p in normalized])
        hits = [chunk.filter(pc.is_in(chunk, value_set=asked)) for chunk in self.below.chunks]
        found = pa.concat_arrays(hits) if hits else pa.array([], pa.string())
        flags: list[bool] = pc.fill_null(pc.is_in(asked, value_set=found), False).to_pylist()
        return flags

    def count(self) -> int:
        """How many distinct files are referenced."""
        prefix = self._prefix
        if not self.below.num_chunks:
            return len(self.paths) + len(self.foreign)
        relative = lookup_array([p[len(prefix) :] for p in self.paths if p.startswith(prefix)])
        shared = pa.chunked_array([c.filter(pc.is_in(c, value_set=relative)) for c in self.below.chunks], pa.string())
        overlap: int = pc.count_distinct(shared).as_py()  # files also referenced in another spelling
        below: int = pc.count_distinct(self.below).as_py()
        return len(self.paths) + len(self.foreign) + below - overlap

    def references(self, paths: Sequence[str]) -> list[bool]:
        """Whether each listed path is referenced by its own scheme and authority."""
        normalized = [normalize(p, literal=True) for p in paths]
        below = self._below(normalized)
        return [hit or path in self.paths for path, hit in zip(normalized, below, strict=True)]

    def keeps_foreign(self, path: str, mode: PrefixMismatchMode) -> bool:
        """Whether the listed file at ``path``, not referenced as such, is kept because a reference with
        another scheme or authority names the same path (see the module docstring for ``mode``)."""
        reference = self.foreign.get(_split(path)[2])
        if reference is None or mode is PrefixMismatchMode.DELETE:
            return False
        if mode is PrefixMismatchMode.IGNORE:
            return True
        raise UnsafeOperation(
            f"{self.table}: {path} is referenced as {reference}, whose scheme or authority differs from the "
            f"table location {self.location}; refusing to guess whether they are the same file. Pass "
            "--prefix-mismatch-mode ignore to keep such files or delete to treat them as unreferenced"
        )

    def keeps_all(self, paths: Sequence[str], mode: PrefixMismatchMode) -> list[bool]:
        """Whether each listed file is referenced, directly or (by ``mode``) through another spelling."""
        return [hit or self.keeps_foreign(p, mode) for p, hit in zip(paths, self.references(paths), strict=True)]

    def keeps(self, path: str, mode: PrefixMismatchMode) -> bool:
        """:meth:`keeps_all` of one path."""
        return self.keeps_all([path], mode)[0]


def _read_log(storage: Storage, metadata: TableMetadata) -> list[TableMetadata | None]:
    """The metadata files of the log, None for those that no longer exist."""

    def read(location: str) -> TableMetadata | None:
        try:
            return parse_metadata(storage.read(normalize(location, literal=True)), location)
        except NotFound:
            return None

    locations = [entry.metadata_file for entry in metadata.metadata_log]
    if not locations:
        return []
    with ThreadPoolExecutor(max_workers=min(MANIFEST_READ_THREADS, len(locations))) as pool:
        return list(pool.map(read, locations))


def _expired_snapshot_files(storage: Storage, snapshots: Sequence[Snapshot], *, known_manifests: set[str]) -> set[str]:
    """Manifest lists, manifests and the files their entries name of ``snapshots`` (named only by
    older metadata files), skipping the manifest lists and manifests an expiry already deleted."""

    def manifests(snapshot: Snapshot) -> list[ManifestFile]:
        try:
            return manifests_of(storage, snapshot)
        except NotFound:
            return []

    def entries(manifest: ManifestFile) -> list[str]:
        try:
            return [e.data_file.file_path for e in read_manifest(storage, manifest, include_deleted=True)]
        except NotFound:
            return []

    found = {s.manifest_list for s in snapshots if s.manifest_list}
    if not snapshots:
        return found
    with ThreadPoolExecutor(max_workers=MANIFEST_READ_THREADS, thread_name_prefix="expired-manifests") as pool:
        listed = {m.manifest_path: m for ms in pool.map(manifests, snapshots) for m in ms}
        unread = [m for path, m in sorted(listed.items()) if path not in known_manifests]
        found |= set(listed) | {p for paths in pool.map(entries, unread) for p in paths}
    return found


def referenced_files(table: IcebergTable) -> ReferencedFiles:
    """Every file the current metadata and the metadata files of its log reach."""
    storage = table.storage
    metadata = table.metadata
    logged = _read_log(storage, metadata)
    found = [metadata, *(m for m in logged if m is not None)]
    snapshots: dict[int, Snapshot] = {}
    for version in found:  # the current metadata first: its copy of a shared snapshot wins
        for snapshot in version.snapshots:
            snapshots.setdefault(snapshot.snapshot_id, snapshot)
    current = {s.snapshot_id for s in metadata.snapshots}
    manifests = snapshot_manifests(storage, metadata.snapshots)
    prefixes = list(
        dict.fromkeys(
            [f"{normalize(metadata.location, literal=True).rstrip('/')}/", f"{metadata.location.rstrip('/')}/"]
        )
    )
    split = content_paths(
        storage,
        [m for _, m in sorted(manifests.items())],
        live_only=False,
        keep=lambda paths: _plain_below(prefixes, paths),
    )
    expired = _expired_snapshot_files(
        storage, [s for i, s in snapshots.items() if i not in current], known_manifests=set(manifests)
    )
    statistics = {s.statistics_path for m in found for s in m.statistics} | {
        s.statistics_path for m in found for s in m.partition_statistics
    }
    referenced = {
        table.metadata_location,
        join(normalize(metadata.location, literal=True), METADATA_DIR, VERSION_HINT),
        *(entry.metadata_file for entry in metadata.metadata_log),
        *(s.manifest_list for s in metadata.snapshots if s.manifest_list),
        *manifests,
        *(path for _, others in split for path in others),
        *statistics_files(metadata, current),
        *expired,
        *statistics,
    }
    return ReferencedFiles.of(
        table.name,
        metadata.location,
        table.metadata_location,
        referenced,
        below=[below for below, _ in split],
        metadata_files=len(found),
        missing_metadata_files=logged.count(None),
        snapshots=len(snapshots),
    )


# --- listing ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Listing:
    """The table pinned for planning, the files the driver listed, and the prefixes left to Spark."""

    table: IcebergTable
    files: list[ListedFile]
    directories: int
    units: list[ListingUnit]


def plan_listing(table: IcebergTable, options: OrphanOptions) -> Listing:
    """List the location two levels deep on the driver (``data/``, ``metadata/``, then partitions);
    the second-level directories are listed recursively on the driver when at most
    ``listing_threshold``, else they become Spark tasks (:func:`~lakeops.listing.list_unit`)."""
    check_older_than(options, table.name)
    table.metadata.check_writable("orphans")  # deleting acts as a writer: only format versions whose layout is known
    location = normalize(table.metadata.location, literal=True)
    tree = list_tree(table.storage, location, table.storage_options, threshold=options.listing_threshold)
    return Listing(table, as_listed(tree.files), tree.directories, tree.units)


# --- plan and recheck ------------------------------------------------------------------------------


class OrphanPlan(BaseModel):
    """Immutable, printable plan pinned to one metadata file and one listing. Its figures shared with
    Delta's VACUUM plan have the same names (:mod:`lakeops.ops.orphans` reads them); the others are in
    :meth:`report_fields`."""

    model_config = ConfigDict(frozen=True)
    format: ClassVar[str] = "iceberg"

    table: TableRef
    table_name: str
    table_uuid: str | None
    table_location: str
    metadata_location: str
    sequence_number: int
    older_than: timedelta
    cutoff_ms: int
    prefix_mismatch_mode: PrefixMismatchMode
    metadata_files: int
    missing_metadata_files: int
    snapshots: int
    referenced_files: int
    files_scanned: int
    directories_scanned: int
    listing_tasks: int
    files_too_recent: int
    files_still_needed: int = 0
    prefix_mismatches_kept: int = 0
    storage: StorageOptions
    batch_size: int
    batches: list[DeleteBatch]

    @property
    def candidates(self) -> list[Candidate]:
        return [c for b in self.batches for c in b.files]

    @property
    def retention(self) -> timedelta:
        """The age floor, as Delta's VACUUM names its own."""
        return self.older_than

    def table_label(self) -> str:
        return self.table_name

    def describe(self) -> str:
        return (
            f"{self.metadata_location.rsplit('/', 1)[-1]}: {self.files_scanned} files scanned, {self.referenced_files} "
            f"referenced by {self.metadata_files} metadata files and {self.snapshots} snapshots"
        )

    def rechecked(self) -> OrphanPlan:
        """:func:`recheck`: the plan against the table's current metadata."""
        return recheck(self)

    def report_fields(self) -> dict[str, int]:
        """Iceberg's own figures, named as its orphans report's fields."""
        return {
            "read_version": self.sequence_number,
            "metadata_files": self.metadata_files,
            "missing_metadata_files": self.missing_metadata_files,
            "snapshots": self.snapshots,
            "referenced_files": self.referenced_files,
            "listing_tasks": self.listing_tasks,
            "prefix_mismatches_kept": self.prefix_mismatches_kept,
            **deleted_by_kind(self.candidates, (DATA, METADATA, OTHER)),
        }


def _kind(location: str, path: str) -> str:
    for directory in (DATA, METADATA):
        if is_within(join(location, directory), path):
            return directory
    return OTHER


def _batches(
    location: str, storage_options: StorageOptions, candidates: list[Candidate], size: int, protected: Sequence[str]
) -> list[DeleteBatch]:
    guarded = [*(normalize(p, literal=True) for p in protected), join(location, METADATA_DIR, VERSION_HINT)]
    return make_batches(location, storage_options, candidates, size, protected=guarded)


def plan_orphans(
    listing: Listing, unit_listings: Sequence[UnitListing], options: OrphanOptions, *, now_ms: int
) -> OrphanPlan:
    """Choose the files to delete among the driver's and the Spark tasks' listings."""
    if sorted(u.unit_id for u in unit_listings) != [u.unit_id for u in listing.units]:
        raise InvalidArgument(f"{listing.table.name}: listing results do not match the planned listing tasks")
    table = listing.table
    location = normalize(table.metadata.location, literal=True)
    referenced = referenced_files(table)
    cutoff_ms = now_ms - int(options.older_than.total_seconds() * 1000)
    listed = [*listing.files, *(f for u in unit_listings for f in u.files)]
    too_recent = mismatched = 0
    candidates: list[Candidate] = []
    paths = [require_within(location, file.path) for file in listed]
    for file, path, hit in zip(listed, paths, referenced.references(paths), strict=True):
        if hit:
            continue
        if referenced.keeps_foreign(path, options.prefix_mismatch_mode):
            mismatched += 1
            continue
        if file.mtime_ms >= cutoff_ms:
            too_recent += 1
            continue
        candidates.append(Candidate(path=path, size=file.size, kind=_kind(location, path)))
    return OrphanPlan(
        table=table.ref,
        table_name=table.name,
        table_uuid=str(table.metadata.table_uuid) if table.metadata.table_uuid else None,
        table_location=location,
        metadata_location=table.metadata_location,
        sequence_number=table.metadata.last_sequence_number,
        older_than=options.older_than,
        cutoff_ms=cutoff_ms,
        prefix_mismatch_mode=options.prefix_mismatch_mode,
        metadata_files=referenced.metadata_files,
        missing_metadata_files=referenced.missing_metadata_files,
        snapshots=referenced.snapshots,
        referenced_files=referenced.count(),
        files_scanned=len(listed),
        directories_scanned=listing.directories,
        listing_tasks=len(listing.units),
        files_too_recent=too_recent,
        prefix_mismatches_kept=mismatched,
        storage=table.storage_options,
        batch_size=options.batch_size,
        batches=_batches(location, table.storage_options, candidates, options.batch_size, [table.metadata_location]),
    )


def recheck(plan: OrphanPlan) -> OrphanPlan:
    """The plan re-validated just before deleting: if the table's current metadata moved since
    planning, the referenced files are recomputed and candidates they now include are dropped
    (a concurrent commit may have added an old file, e.g. one imported or restored)."""
    table = load_table(plan.table, plan.storage)
    if table.metadata_location == plan.metadata_location:
        return plan
    uuid = str(table.metadata.table_uuid) if table.metadata.table_uuid else None
    if uuid != plan.table_uuid or normalize(table.metadata.location, literal=True) != plan.table_location:
        raise UnsafeOperation(
            f"{plan.table_name}: the table was replaced since planning (table-uuid {plan.table_uuid} -> {uuid}, "
            f"location {plan.table_location} -> {table.metadata.location}); nothing deleted, run again"
        )
    referenced = referenced_files(table)
    candidates = plan.candidates
    keeps = referenced.keeps_all([c.path for c in candidates], plan.prefix_mismatch_mode)
    kept = [c for c, keep in zip(candidates, keeps, strict=True) if not keep]
    protected = [plan.metadata_location, table.metadata_location]
    return plan.model_copy(
        update={
            "metadata_location": table.metadata_location,
            "sequence_number": table.metadata.last_sequence_number,
            "files_still_needed": plan.files_still_needed + len(plan.candidates) - len(kept),
            "batches": _batches(plan.table_location, plan.storage, kept, plan.batch_size, protected),
        }
    )
