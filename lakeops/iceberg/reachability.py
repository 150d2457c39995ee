"""Which files snapshots reach: manifest lists, manifests, data and delete files, statistics files
("Snapshots", "Manifest Lists", "Manifests", "Table Statistics").

Expiry and orphan removal both decide what may be deleted by subtracting what must stay, and both
compute "what must stay" here, the same way: every live entry (added or existing) of every manifest
of every retained snapshot, plus the manifest lists and manifests themselves and the statistics files
of those snapshots. ``DELETED`` entries are informational ("not used in scans") and keep nothing
alive. Each manifest is read once however many snapshots share it, and manifests are read
concurrently: on object storage that is what planning costs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import pyarrow as pa

from lakeops.iceberg.manifest import manifests_of
from lakeops.iceberg.manifest_list import ManifestFile, manifest_paths_of
from lakeops.iceberg.metadata import Snapshot, TableMetadata
from lakeops.storage import Storage

__all__ = [
    "MANIFEST_READ_THREADS",
    "Reachable",
    "content_paths",
    "reachable_files",
    "snapshot_manifest_paths",
    "snapshot_manifests",
    "statistics_files",
]

MANIFEST_READ_THREADS = 16

T = TypeVar("T")


def _as_is(paths: pa.Array) -> pa.Array:
    return paths


@dataclass
class Reachable:
    """Files by kind (locations exactly as the metadata spells them)."""

    manifest_lists: set[str] = field(default_factory=set)
    manifests: set[str] = field(default_factory=set)
    content_files: set[str] = field(default_factory=set)
    statistics_files: set[str] = field(default_factory=set)

    def all(self) -> set[str]:
        return self.manifest_lists | self.manifests | self.content_files | self.statistics_files

    def update(self, other: Reachable) -> None:
        self.manifest_lists |= other.manifest_lists
        self.manifests |= other.manifests
        self.content_files |= other.content_files
        self.statistics_files |= other.statistics_files


def statistics_files(metadata: TableMetadata, snapshot_ids: set[int]) -> set[str]:
    """Statistics and partition-statistics files that belong to the given snapshots."""
    return {s.statistics_path for s in metadata.statistics if s.snapshot_id in snapshot_ids} | {
        s.statistics_path for s in metadata.partition_statistics if s.snapshot_id in snapshot_ids
    }


def snapshot_manifests(
    storage: Storage, snapshots: Iterable[Snapshot], *, threads: int = MANIFEST_READ_THREADS
) -> dict[str, ManifestFile]:
    """Every manifest of the snapshots, by path (manifest lists read concurrently)."""
    listed = [s for s in snapshots]
    found: dict[str, ManifestFile] = {}
    if not listed:
        return found
    with ThreadPoolExecutor(max_workers=min(threads, len(listed)), thread_name_prefix="manifest-list") as pool:
        for manifests in pool.map(lambda s: manifests_of(storage, s), listed):
            for manifest in manifests:
                found.setdefault(manifest.manifest_path, manifest)
    return found


def snapshot_manifest_paths(
    storage: Storage, snapshots: Sequence[Snapshot], *, threads: int = MANIFEST_READ_THREADS
) -> list[list[str]]:
    """Each snapshot's manifest paths, in order (manifest lists read concurrently, paths only)."""
    if not snapshots:
        return []
    with ThreadPoolExecutor(max_workers=min(threads, len(snapshots)), thread_name_prefix="manifest-list") as pool:
        return list(pool.map(lambda s: manifest_paths_of(storage, s), snapshots))


def content_paths(
    storage: Storage,
    manifests: Sequence[ManifestFile],
    *,
    live_only: bool = True,
    threads: int = MANIFEST_READ_THREADS,
    keep: Callable[[pa.Array], T],
) -> list[T]:
    """The data and delete file paths the manifests' entries name (``DELETED`` ones too unless
    ``live_only``), one Arrow array per manifest in manifest order, each passed through ``keep``
    (to shorten them, say) as soon as its manifest is read: no Python object per entry outlives
    its manifest, which is what lets a 10-million-entry table be planned on a bounded driver."""

    from lakeops.iceberg.manifest_columns import PATHS, read_planning_columns  # pyarrow.compute only when read

    def paths(manifest: ManifestFile) -> T:
        return keep(read_planning_columns(storage, manifest, include_deleted=not live_only, columns=PATHS).column(0))

    if not manifests:
        return []
    with ThreadPoolExecutor(max_workers=min(threads, len(manifests)), thread_name_prefix="manifest") as pool:
        return list(pool.map(paths, manifests))


def _content_files(storage: Storage, manifests: Sequence[ManifestFile], *, live_only: bool, threads: int) -> set[str]:
    paths: set[str] = set()
    for found in content_paths(storage, manifests, live_only=live_only, threads=threads, keep=_as_is):
        paths.update(found.to_pylist())
    return paths


def reachable_files(
    storage: Storage,
    metadata: TableMetadata,
    snapshots: Iterable[Snapshot],
    *,
    live_only: bool = True,
    skip_manifests: set[str] | None = None,
    read_content: bool = True,
    threads: int = MANIFEST_READ_THREADS,
) -> Reachable:
    """The files ``snapshots`` reach. ``live_only=False`` also counts ``DELETED`` entries (what an
    expired snapshot's manifests name, as deletion candidates); manifests in ``skip_manifests`` are
    still counted as manifests but their entries are not read (their files are known elsewhere).
    ``read_content=False`` reads only the manifest lists' paths and leaves ``content_files`` empty,
    for a caller that has nothing to check against them."""
    snapshots = list(snapshots)
    if read_content:
        manifests = snapshot_manifests(storage, snapshots, threads=threads)
        to_read = [m for path, m in sorted(manifests.items()) if not skip_manifests or path not in skip_manifests]
        paths, content = set(manifests), _content_files(storage, to_read, live_only=live_only, threads=threads)
    else:
        paths = {p for listed in snapshot_manifest_paths(storage, snapshots, threads=threads) for p in listed}
        content = set()
    return Reachable(
        manifest_lists={s.manifest_list for s in snapshots if s.manifest_list},
        manifests=paths,
        content_files=content,
        statistics_files=statistics_files(metadata, {s.snapshot_id for s in snapshots}),
    )
