"""The version of a table's data: the latest commit that changed what readers see, passing over
commits that only rewrote it.

Maintenance commits move a table's version without changing its rows: Delta compaction adds and
removes files with ``dataChange: false`` (Delta protocol, "Add File and Remove File"); Iceberg
compaction and manifest rewrites commit ``replace`` snapshots ("data and delete files were added and
removed without changing table data", spec "Snapshots"); lakeops' Icechunk compaction commits
snapshots marked ``lakeops.operation: compact`` whose chunks hold the same bytes. An orchestrator
that marks work out of date when its input changes (Dagster's data versions of the observed table)
must see new data there, not the maintenance it just ran.

Where the walk back reaches history that is gone (expired snapshots, cleaned-up log files), the
oldest commit still known stands for the data version.
"""

from __future__ import annotations

from lakeops.delta.commit_file import CommitActions, parse_commit
from lakeops.delta.log_segment import read_log_file
from lakeops.errors import NotATable, VersionNotFound
from lakeops.icechunk.maintenance.packing import COMPACT, OPERATION_PROPERTY
from lakeops.icechunk.maintenance.versioned_packing import is_lakeops_compaction
from lakeops.icechunk.versioned import VersionedRepository
from lakeops.ops.table import Table, handle_of
from lakeops.ops.target import DeltaTarget, IcebergTarget, IcechunkTarget, Target
from lakeops.storage import StorageOptions

__all__ = ["data_version"]

#: The Iceberg snapshot operation that changes no table data.
_ICEBERG_REWRITE = "replace"


def _delta_changes_data(commit: CommitActions) -> bool:
    """A new schema or table metadata, change data files, or a file added or removed as a data change."""
    changed = any(a.data_change for a in commit.adds) or any(r.data_change for r in commit.removes)
    return changed or commit.metadata is not None or bool(commit.cdcs)


def _delta(location: str, table: Table) -> str:
    storage = table.storage()
    commits = table.delta_listing().commits
    if not commits:
        raise NotATable(f"{location}: no Delta commit files in _delta_log")
    versions = sorted(commits, reverse=True)
    for version in versions:
        if _delta_changes_data(parse_commit(read_log_file(storage, commits[version]), version, location)):
            return str(version)
    return str(versions[-1])


def _iceberg(table: Table) -> str:
    metadata = table.iceberg_table().metadata
    head = metadata.current_snapshot()
    if head is None:
        return "empty"
    oldest = head
    for snapshot in metadata.ancestors(head.snapshot_id):
        if snapshot.operation != _ICEBERG_REWRITE:
            return str(snapshot.snapshot_id)
        oldest = snapshot
    # Only rewrites as far back as the metadata goes: their expired parent, known by its id alone.
    return str(oldest.parent_snapshot_id if oldest.parent_snapshot_id is not None else oldest.snapshot_id)


def _icechunk(handle: Table) -> str:
    """The seed format: the ancestors of ``main``'s tip (through the handle's reader)."""
    state = handle.icechunk_state()
    if state.format_version is not None:
        return _versioned_icechunk(state.versioned)
    repo = state.seed
    snapshot = repo.read_snapshot(repo.resolve("main"))
    while snapshot.properties.get(OPERATION_PROPERTY) == COMPACT and (parent := snapshot.parent_id) is not None:
        try:
            snapshot = repo.read_snapshot(parent)
        except VersionNotFound:  # expired: its id is all that is known of it
            return parent
    return snapshot.id


def _versioned_icechunk(repo: VersionedRepository) -> str:
    """Icechunk format 1 and 2: the parents come from the repository's refs (format 2: the repo object)."""
    info = repo.info
    line = info.ancestry(info.branches["main"])
    for entry in line:
        if not is_lakeops_compaction(repo.snapshot(entry.id)):
            return entry.id
    return line[-1].id


def data_version(table: Table | Target, storage_options: StorageOptions | None = None) -> str:
    """The id of the latest commit of ``table`` that changed its data (Delta version, Iceberg
    snapshot id, Icechunk snapshot id of ``main``), as text; a handle's listing or metadata is reused."""
    handle = handle_of(table, storage_options or StorageOptions())
    match handle.target:
        case IcebergTarget():
            return _iceberg(handle)
        case IcechunkTarget():
            return _icechunk(handle)
        case DeltaTarget(location=location):
            return _delta(location, handle)
