"""Reading Icechunk format 1 and 2 repositories natively (the seed format is :mod:`.repository`).

https://github.com/earth-mover/icechunk/blob/main/docs/docs/spec.md#read-from-repository: refs
(:mod:`.repo_info`) name snapshots, a snapshot's array nodes name manifests, a manifest's chunk refs
name chunk objects. Snapshot and manifest files never change once written, so each is decoded once.
:class:`RepositoryState` is a repository of any kind as planners read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakeops.errors import NotFound, VersionNotFound
from lakeops.icechunk.binary import spec_version_of
from lakeops.icechunk.objects import ChunkRef, Manifest, Snapshot, decode_manifest, decode_snapshot
from lakeops.icechunk.refs import BRANCH_PREFIX, REFS_DIR, TAG_FILE
from lakeops.icechunk.repo_info import REPO_OBJECT, RepoInfo, read_repo_info
from lakeops.icechunk.repository import MANIFESTS_DIR, SNAPSHOTS_DIR, Repository
from lakeops.storage import Storage, join, normalize, relative_to

__all__ = [
    "TRANSACTIONS_DIR",
    "Reached",
    "RepositoryState",
    "VersionedRepository",
    "format_version",
    "load_repository_state",
]

TRANSACTIONS_DIR = "transactions"
_HEADER_PROBE = 40


def format_version(storage: Storage, root: str) -> int | None:
    """1 or 2 for a repository in Icechunk format 1 or 2, None otherwise (the seed format, or nothing).

    A ``repo`` object means format 2 (its header says which spec version); a branch kept in one
    ``refs/branch.NAME/ref.json`` means format 1 (the seed format writes one file per branch version).
    """
    repo = join(root, REPO_OBJECT)
    if storage.exists(repo):
        return spec_version_of(storage.read_range(repo, 0, _HEADER_PROBE)) or 2
    refs_dir = join(root, REFS_DIR)
    for info in storage.list(refs_dir):
        directory, _, name = relative_to(refs_dir, info.path).partition("/")
        if directory.startswith(BRANCH_PREFIX) and name == TAG_FILE:
            return 1
    return None


@dataclass
class Reached:
    """Object ids (per directory) that the given snapshots reach."""

    snapshots: set[str] = field(default_factory=set)
    manifests: set[str] = field(default_factory=set)
    chunks: set[str] = field(default_factory=set)
    #: Each snapshot's own log, and (spec 2.1) the logs of its expired ancestors.
    transaction_logs: set[str] = field(default_factory=set)


class VersionedRepository:
    """A format 1 or 2 repository at ``root``; refs are read once, on first use."""

    def __init__(self, storage: Storage, root: str) -> None:
        self.storage = storage
        self.root = normalize(root)
        self._snapshots: dict[str, Snapshot] = {}
        self._manifests: dict[str, Manifest] = {}
        self._info: RepoInfo | None = None

    @property
    def info(self) -> RepoInfo:
        if self._info is None:
            self._info = read_repo_info(self.storage, self.root, self.snapshot)
        return self._info

    def snapshot(self, snapshot_id: str) -> Snapshot:
        if snapshot_id not in self._snapshots:
            path = join(self.root, SNAPSHOTS_DIR, snapshot_id)
            try:
                data = self.storage.read(path)
            except NotFound as exc:
                raise VersionNotFound(f"{self.root}: snapshot {snapshot_id} has no file {path}") from exc
            self._snapshots[snapshot_id] = decode_snapshot(data, path)
        return self._snapshots[snapshot_id]

    def manifest(self, manifest_id: str) -> Manifest:
        if manifest_id not in self._manifests:
            path = join(self.root, MANIFESTS_DIR, manifest_id)
            self._manifests[manifest_id] = decode_manifest(self.storage.read(path), path)
        return self._manifests[manifest_id]

    def manifest_ids(self, snapshot_id: str) -> set[str]:
        """Every manifest the snapshot names, in its manifest list or on its array nodes."""
        snapshot = self.snapshot(snapshot_id)
        named = {info.id for info in snapshot.manifest_files}
        for node in snapshot.nodes:
            if node.node_data is not None:
                named.update(ref.object_id for ref in node.node_data.manifests)
        return named

    def chunk_refs(self, snapshot_id: str, path: str) -> dict[tuple[int, ...], ChunkRef]:
        """Every written chunk of the array at ``path``: indices -> reference. Manifests are read in the
        node's order and the first holding an index wins, as Icechunk's reader does."""
        node = next((n for n in self.snapshot(snapshot_id).nodes if n.path == path and n.node_data), None)
        if node is None or node.node_data is None:
            raise VersionNotFound(f"{self.root}: snapshot {snapshot_id} has no array {path}")
        refs: dict[tuple[int, ...], ChunkRef] = {}
        for manifest in node.node_data.manifests:
            for array in self.manifest(manifest.object_id).arrays:
                if array.node_id == node.id:
                    for ref in array.refs:
                        refs.setdefault(tuple(ref.index), ref)
        return refs

    def reached(self, snapshot_ids: set[str]) -> Reached:
        """The snapshots themselves, their transaction logs, their manifests and the native chunks those
        manifests name."""
        reached = Reached(snapshots=set(snapshot_ids), transaction_logs=set(snapshot_ids))
        for snapshot_id in snapshot_ids:
            reached.manifests |= self.manifest_ids(snapshot_id)
            listed = self.info.snapshots.get(snapshot_id)
            if listed is not None:
                reached.transaction_logs.update(listed.pruned_ancestor_tx_logs)
        for manifest_id in reached.manifests:
            for array in self.manifest(manifest_id).arrays:
                reached.chunks.update(ref.chunk_id for ref in array.refs if ref.chunk_id is not None)
        return reached


@dataclass(frozen=True)
class RepositoryState:
    """A repository as its planners read it, once per table handle
    (:meth:`lakeops.ops.table.Table.icechunk_state`): its format (``format_version`` None: the seed
    format) and the one reader every planner of a call goes through, which keeps what it decoded
    (formats 1 and 2: the refs, from the repo object or the ``ref.json`` files, and snapshots and
    manifests; the seed format: snapshots and manifests, its branch files still listed by each planner
    today). Commits and the re-checks before a delete open readers of their own: they read the
    repository again (the commit rule)."""

    format_version: int | None
    reader: Repository | VersionedRepository

    @property
    def seed(self) -> Repository:
        """The reader of a seed-format repository."""
        assert isinstance(self.reader, Repository), "a seed-format reader of a format 1 or 2 repository"
        return self.reader

    @property
    def versioned(self) -> VersionedRepository:
        """The reader of a format 1 or 2 repository."""
        assert isinstance(self.reader, VersionedRepository), "a format 1 or 2 reader of a seed-format repository"
        return self.reader


def load_repository_state(storage: Storage, root: str) -> RepositoryState:
    """The repository at ``root``: its format probed and, in formats 1 and 2, its refs read."""
    version = format_version(storage, root)
    if version is None:
        return RepositoryState(None, Repository(storage, root))
    reader = VersionedRepository(storage, root)
    _ = reader.info
    return RepositoryState(version, reader)
