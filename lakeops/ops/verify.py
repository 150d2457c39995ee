"""Post-operation verification: independent re-reads proving an operation did what it claims, for the
blocking checks the orchestrator runs after each maintenance operation. Checks read, never write.

Why each property holds, per format:

* **Compaction keeps the rows.** Delta ("Add File and Remove File"): an ``OPTIMIZE`` commit
  (``dataChange=false``) removes and adds files holding the same live rows once deletion vectors
  ("Deletion Vectors") are applied. Iceberg ("Snapshots", "Scan Planning"): a ``replace`` snapshot
  changes where rows live, never which rows a scan returns, so each of our ``replace`` snapshots
  reads the live row count of its parent (position and equality deletes applied); counting by
  reading proves every data file decodes. Comparing each replace with its own parent, not the plan's
  snapshot with the last one, keeps a concurrent append between partial-progress commits from
  looking like a loss. Icechunk ("Chunk Manifest Files"): packing moves chunk bytes into shared
  files, so every array of the new snapshot reads back byte-identical to its parent.
* **A checkpoint matches the log.** Delta ("Checkpoints"): the checkpoint at a version holds the
  protocol, metadata and live files that replaying the JSON commits gives; tombstones and
  transactions may be fewer (expired ones are dropped). Iceberg (a manifest rewrite, "Manifests",
  "Sequence Numbers"): the new snapshot has exactly its parent's live data and delete files with the
  same data and file sequence numbers, or deletes would apply differently. Icechunk has none.
* **Retained files exist** after expiry and orphan removal. Delta ("Data Files", "Deletion Vector
  Files"): every data and deletion-vector file of every version still inside the time-travel window
  (reconstructable from the log, and not older than a remove past ``delta.deletedFileRetentionDuration``
  — the files ``VACUUM`` may legitimately delete). Iceberg: every manifest list, manifest,
  data/delete file and statistics file reachable from every snapshot in the current metadata
  (:mod:`lakeops.iceberg.reachability`). Icechunk ("File Layout"): every snapshot, manifest,
  attribute and chunk object of every retained head's ancestry (heads: every branch ref file, every tag).
* **A change feed has no duplicates**: an output of ``lakeops cdc`` holds each (source commit —
  ``_commit_version`` for Delta sources, ``_commit_snapshot_id`` for Iceberg —, ``_change_type``, key)
  once.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Iterable

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from lakeops.change_columns import (
    CHANGE_TYPE,
    COMMIT_SNAPSHOT_ID,
    COMMIT_VERSION,
    DELTA_CHANGE_COLUMNS,
    ICEBERG_CHANGE_COLUMNS,
)
from lakeops.delta.actions import Add
from lakeops.delta.commit_file import parse_commit
from lakeops.delta.deletion_vectors import dv_absolute_path
from lakeops.delta.log_segment import list_log, read_log_file
from lakeops.delta.properties import DELETED_FILE_RETENTION_DURATION
from lakeops.delta.retention import DEFAULT_DELETED_FILE_RETENTION, table_retention
from lakeops.delta.scan import read_logical_file, read_snapshot
from lakeops.delta.schema import column_mapping_mode, parse_schema
from lakeops.delta.snapshot import DeltaSnapshot, load_snapshot
from lakeops.errors import NotATable, NotFound, UnsupportedFeature, VersionNotFound
from lakeops.iceberg.data_reader import read_parquet
from lakeops.iceberg.deletes import (
    apply_equality_deletes,
    apply_position_deletes,
    read_equality_deletes,
    read_position_deletes,
)
from lakeops.iceberg.manifest import FileContent
from lakeops.iceberg.metadata import Snapshot, TableMetadata
from lakeops.iceberg.properties import DEFAULT_NAME_MAPPING
from lakeops.iceberg.reachability import reachable_files, snapshot_manifests
from lakeops.iceberg.scan import FileScanTask, plan_scan
from lakeops.iceberg.table import TableRef, load_table
from lakeops.icechunk.binary import HEADER_SIZE, spec_version_of
from lakeops.icechunk.manifest import ChunkPayload, ChunkRef, InlineChunk
from lakeops.icechunk.objects import ChunkRef as VersionedChunkRef
from lakeops.icechunk.repository import CHUNKS_DIR, MANIFESTS_DIR, SNAPSHOTS_DIR, Repository
from lakeops.icechunk.snapshot import ArrayData
from lakeops.icechunk.versioned import VersionedRepository, format_version
from lakeops.ops.checkpoint import CheckpointReport
from lakeops.ops.compaction import CompactionReport
from lakeops.ops.icechunk.compaction import IcechunkCompactionReport
from lakeops.ops.report import Report
from lakeops.ops.target import DeltaTarget, IcebergTarget, IcechunkTarget, Target
from lakeops.storage import Storage, StorageOptions, join, open_storage
from lakeops.storage.uri import normalize
from lakeops.units import cutoff_ms

__all__ = [
    "Verification",
    "change_feed_unique",
    "checkpoint_matches_log",
    "compaction_kept_rows",
    "retained_files_exist",
]

#: The change-feed columns lakeops adds to a source's columns (Delta CDF and the Iceberg changelog).
_CHANGE_COLUMNS = frozenset({*DELTA_CHANGE_COLUMNS, *ICEBERG_CHANGE_COLUMNS})
#: Missing files named in a summary; the count says how many more.
_SHOWN = 5


class Verification(BaseModel):
    """Whether the property holds, one sentence naming the table and the numbers, and the numbers."""

    model_config = ConfigDict(frozen=True)

    passed: bool
    summary: str
    details: dict[str, int | str] = {}


def _nothing_committed(target: Target, report: Report) -> Verification | None:
    if report.dry_run or report.committed_version is None:
        what = "a dry run" if report.dry_run else "the run committed nothing"
        return Verification(passed=True, summary=f"{target}: {what}; nothing committed, nothing to verify")
    return None


# --- compaction ------------------------------------------------------------------------------------


def compaction_kept_rows(target: Target, report: Report, storage_options: StorageOptions | None = None) -> Verification:
    """The compaction's commit(s) kept every live row, and what it wrote reads back (module docs)."""
    skipped = _nothing_committed(target, report)
    if skipped is not None:
        return skipped
    options = storage_options or StorageOptions()
    match target, report:
        case DeltaTarget(location=location), CompactionReport(committed_version=int(version)):
            return _delta_compaction(location, version, options)
        case IcebergTarget(ref=ref), CompactionReport():
            return _iceberg_compaction(ref, report, options)
        case IcechunkTarget(location=location), IcechunkCompactionReport():
            return _icechunk_compaction(location, report, options)
    raise UnsupportedFeature(
        f"{target}: cannot verify a {report.format} {report.operation} report on a {target.format} table"
    )


def _delta_rows(storage: Storage, snapshot: DeltaSnapshot, adds: Iterable[Add]) -> int:
    schema = parse_schema(snapshot.metadata.schema_string)
    mode = column_mapping_mode(snapshot.metadata, snapshot.protocol)
    return sum(
        read_logical_file(
            storage, snapshot.table_root, snapshot.file_location(a.path), a, schema, mode, snapshot.partition_columns
        ).num_rows
        for a in adds
    )


def _delta_compaction(location: str, version: int, options: StorageOptions) -> Verification:
    storage = open_storage(location, options)
    listing = list_log(storage, location)
    before = load_snapshot(storage, location, version=version - 1, listing=listing)
    after = load_snapshot(storage, location, version=version, listing=listing)
    removed = [a for k, a in before.files.items() if k not in after.files]
    added = [a for k, a in after.files.items() if k not in before.files]
    rows_before, rows_after = _delta_rows(storage, before, removed), _delta_rows(storage, after, added)
    passed = rows_before == rows_after
    return Verification(
        passed=passed,
        summary=f"{location}: version {version} replaced {len(removed)} files holding {rows_before} live rows by "
        f"{len(added)} files that read back {rows_after} rows" + ("" if passed else ": the row count changed"),
        details={
            "version": version,
            "files_removed": len(removed),
            "files_added": len(added),
            "rows_before": rows_before,
            "rows_after": rows_after,
        },
    )


def _positions(
    storage: Storage, task: FileScanTask, cache: dict[tuple[str, int | None], dict[str, pa.Array]]
) -> pa.Array | None:
    found = []
    for delete in task.deletes:
        if delete.content == FileContent.POSITION_DELETES:
            key = delete.entry.data_file.key  # one Puffin file holds many DVs
            if key not in cache:
                cache[key] = read_position_deletes(
                    storage, delete.path, deletion_vector=delete.entry.data_file.deletion_vector()
                )
            if task.file.path in cache[key]:
                found.append(cache[key][task.file.path].to_numpy(zero_copy_only=False))
    return pa.array(np.unique(np.concatenate(found)).astype(np.int64)) if found else None


def _iceberg_live_rows(storage: Storage, metadata: TableMetadata, snapshot: Snapshot) -> tuple[int, int]:
    """(data files, live rows) of ``snapshot``: every data file read whole, its deletes applied."""
    schema = metadata.schema_by_id(snapshot.schema_id) if snapshot.schema_id is not None else metadata.current_schema()
    scan = plan_scan(storage, metadata, snapshot)
    positions: dict[tuple[str, int | None], dict[str, pa.Array]] = {}
    equality: dict[str, pa.Table] = {}
    rows = 0
    name_mapping = metadata.properties.get(DEFAULT_NAME_MAPPING)  # ids for imported files' columns
    for task in scan.tasks:
        table = read_parquet(storage, task.file.path, schema, name_mapping=name_mapping)
        merged = _positions(storage, task, positions)
        if merged is not None:
            table = apply_position_deletes(table, 0, merged)
        eq = []
        for delete in task.deletes:
            if delete.content == FileContent.EQUALITY_DELETES:
                ids = list(delete.entry.data_file.equality_ids or [])
                if delete.path not in equality:
                    equality[delete.path] = read_equality_deletes(storage, delete.path, ids, schema)
                eq.append((ids, equality[delete.path]))
        rows += apply_equality_deletes(table, eq, schema).num_rows if eq else table.num_rows
    return len(scan.tasks), rows


def _iceberg_compaction(ref: TableRef, report: CompactionReport, options: StorageOptions) -> Verification:
    assert report.snapshot_id is not None
    table = load_table(ref, options)
    metadata, storage = table.metadata, table.storage
    chain: list[Snapshot] = []
    for snapshot in metadata.ancestors(report.snapshot_id):
        if snapshot.snapshot_id == report.base_snapshot_id:
            break
        chain.append(snapshot)
    else:
        raise VersionNotFound(
            f"{table.name}: the snapshot compaction read ({report.base_snapshot_id}) is not an ancestor of "
            f"snapshot {report.snapshot_id} still in the metadata; cannot verify the compaction"
        )
    counted: dict[int, tuple[int, int]] = {}

    def live(snapshot: Snapshot) -> tuple[int, int]:
        if snapshot.snapshot_id not in counted:
            counted[snapshot.snapshot_id] = _iceberg_live_rows(storage, metadata, snapshot)
        return counted[snapshot.snapshot_id]

    changed = []
    replaces = [s for s in chain if s.operation == "replace"]
    for snapshot in replaces:
        assert snapshot.parent_snapshot_id is not None  # the chain ends at the plan's snapshot
        before = live(metadata.snapshot_by_id(snapshot.parent_snapshot_id))[1]
        if live(snapshot)[1] != before:
            changed.append(f"snapshot {snapshot.snapshot_id} reads {live(snapshot)[1]} rows, its parent {before}")
    base_files, base_rows = (
        live(metadata.snapshot_by_id(report.base_snapshot_id)) if report.base_snapshot_id else (0, 0)
    )
    files, rows = live(metadata.snapshot_by_id(report.snapshot_id))
    return Verification(
        passed=not changed,
        summary=f"{table.name}: {len(replaces)} replace snapshot(s) up to {report.snapshot_id}: "
        + (
            f"rows changed ({'; '.join(changed)})"
            if changed
            else f"each reads its parent's live rows "
            f"({base_rows} rows in {base_files} files before, {rows} rows in {files} files after)"
        ),
        details={
            "snapshot_id": report.snapshot_id,
            "replace_snapshots": len(replaces),
            "rows_before": base_rows,
            "rows_after": rows,
            "files_before": base_files,
            "files_after": files,
        },
    )


def _chunk_bytes(repo: Repository, payload: ChunkPayload) -> bytes | ChunkPayload:
    if isinstance(payload, InlineChunk):
        return payload.data
    if isinstance(payload, ChunkRef):
        return repo.read_native_chunk(payload)
    return payload  # virtual: lives outside the repository; the reference itself must be unchanged


#: A repository as the compaction check reads it: a snapshot's parent, its nodes (path -> is an array),
#: an array's chunks (indices -> bytes, or a virtual chunk's reference).
_ChunkView = tuple[
    Callable[[str], str | None],
    Callable[[str], dict[str, bool]],
    Callable[[str, str], dict[tuple[int, ...], object]],
]


def _seed_view(repo: Repository) -> _ChunkView:
    return (
        lambda snapshot_id: repo.read_snapshot(snapshot_id).parent_id,
        lambda snapshot_id: {n.path: isinstance(n.node_data, ArrayData) for n in repo.nodes(snapshot_id)},
        lambda snapshot_id, path: {i: _chunk_bytes(repo, p) for i, p in repo.chunk_payloads(snapshot_id, path).items()},
    )


def _versioned_view(repo: VersionedRepository) -> _ChunkView:
    """Format 1 and 2: a native chunk's bytes are its range of ``chunks/<chunk_id>``."""

    def content(ref: VersionedChunkRef) -> object:
        if ref.kind == "native":
            return repo.storage.read_range(join(repo.root, CHUNKS_DIR, str(ref.chunk_id)), ref.offset, ref.length)
        return ref.inline if ref.kind == "inline" else ref

    return (
        lambda snapshot_id: repo.info.snapshots[snapshot_id].parent_id,
        lambda snapshot_id: {n.path: n.is_array for n in repo.snapshot(snapshot_id).nodes},
        lambda snapshot_id, path: {i: content(r) for i, r in repo.chunk_refs(snapshot_id, path).items()},
    )


def _icechunk_compaction(location: str, report: IcechunkCompactionReport, options: StorageOptions) -> Verification:
    assert report.committed_snapshot is not None
    storage = open_storage(location, options)
    seed = format_version(storage, location) is None
    root = normalize(location)
    parent_of, nodes, chunks_of = (
        _seed_view(Repository.open(location, options)) if seed else _versioned_view(VersionedRepository(storage, root))
    )
    new_id = report.committed_snapshot
    parent_id = parent_of(new_id)
    if parent_id is None:
        raise VersionNotFound(f"{root}: snapshot {new_id} has no parent to compare with")
    new_nodes, old_nodes = nodes(new_id), nodes(parent_id)
    problems = [f"nodes differ ({sorted(set(new_nodes) ^ set(old_nodes))})"] if set(new_nodes) != set(old_nodes) else []
    arrays = chunks = 0
    for path, is_array in new_nodes.items():
        if not is_array or path not in old_nodes:
            continue
        arrays += 1
        new, old = chunks_of(new_id, path), chunks_of(parent_id, path)
        if set(new) != set(old):
            problems.append(f"array {path} holds chunks {len(new)} vs {len(old)}")
            continue
        chunks += len(new)
        differing = [i for i in sorted(new) if new[i] != old[i]]
        if differing:
            problems.append(f"array {path} chunk {list(differing[0])} and {len(differing) - 1} more differ")
    return Verification(
        passed=not problems,
        summary=f"{root}: snapshot {new_id} vs its parent {parent_id}: "
        + ("; ".join(problems) if problems else f"{arrays} arrays, {chunks} chunks read back byte-identical"),
        details={
            "snapshot": new_id,
            "parent": parent_id,
            "arrays": arrays,
            "chunks": chunks,
            "problems": len(problems),
        },
    )


# --- checkpoint ------------------------------------------------------------------------------------


def checkpoint_matches_log(
    target: Target, report: Report, storage_options: StorageOptions | None = None
) -> Verification:
    """The checkpoint (Delta) or rewritten manifests (Iceberg) hold the state they replace (module docs)."""
    if isinstance(target, IcechunkTarget):
        return Verification(passed=True, summary=f"{target}: Icechunk has no checkpoints; not applicable")
    if not isinstance(report, CheckpointReport):
        raise UnsupportedFeature(f"{target}: cannot verify a checkpoint from a {report.operation} report")
    options = storage_options or StorageOptions()
    if isinstance(target, IcebergTarget):
        skipped = _nothing_committed(target, report)
        return skipped or _iceberg_manifests(target.ref, report, options)
    if report.dry_run or report.version is None or report.status not in ("written", "already checkpointed"):
        return Verification(
            passed=True, summary=f"{target}: no checkpoint written ({report.status}); nothing to verify"
        )
    return _delta_checkpoint(target.location, report.version, options)


def _file_state(add: Add) -> tuple[object, ...]:
    """What a reader takes from a live file (statistics may be re-encoded by a checkpoint)."""
    return add.size, sorted(add.partition_values.items()), add.deletion_vector


def _delta_checkpoint(location: str, version: int, options: StorageOptions) -> Verification:
    storage = open_storage(location, options)
    listing = list_log(storage, location)
    if version not in listing.checkpoints:
        return Verification(passed=False, summary=f"{location}: no complete checkpoint at version {version}")
    from_checkpoint = load_snapshot(storage, location, version=version, listing=listing)
    without = dataclasses.replace(listing, checkpoints={v: c for v, c in listing.checkpoints.items() if v < version})
    try:
        from_log = load_snapshot(storage, location, version=version, listing=without)
    except VersionNotFound:
        return Verification(
            passed=True,
            summary=f"{location}: version {version} cannot be replayed without its checkpoint (older commits "
            f"expired); the checkpoint reads back whole with {len(from_checkpoint.files)} live files",
            details={"version": version, "files": len(from_checkpoint.files)},
        )
    problems = []
    if from_checkpoint.protocol != from_log.protocol:
        problems.append("protocol differs")
    if from_checkpoint.metadata != from_log.metadata:
        problems.append("metaData differs")
    missing = set(from_log.files) - set(from_checkpoint.files)
    extra = set(from_checkpoint.files) - set(from_log.files)
    if missing or extra:
        shown = sorted(str(k[0]) for k in missing | extra)[:_SHOWN]
        problems.append(f"live files differ ({len(missing)} missing, {len(extra)} extra: {', '.join(shown)})")
    elif any(_file_state(from_checkpoint.files[k]) != _file_state(a) for k, a in from_log.files.items()):
        problems.append("live files' sizes, partition values or deletion vectors differ")
    if not set(from_checkpoint.tombstones) <= set(from_log.tombstones):
        problems.append("tombstones the log does not have")
    if not set(from_checkpoint.txns.items()) <= set(from_log.txns.items()):
        problems.append("transactions the log does not have")
    if from_checkpoint.domains != from_log.domains:
        problems.append("metadata domains differ")  # "Checkpoints" keep every live domain
    return Verification(
        passed=not problems,
        summary=f"{location}: the checkpoint of version {version} "
        + (
            "differs from the log: " + "; ".join(problems)
            if problems
            else f"reconstructs the log's protocol, metadata and {len(from_log.files)} live files"
        ),
        details={"version": version, "files": len(from_checkpoint.files), "log_files": len(from_log.files)},
    )


def _live_entries(
    storage: Storage, metadata: TableMetadata, snapshot: Snapshot
) -> dict[str, tuple[int, int, int | None, int | None]]:
    """Live files by path (a DV: ``path@offset``, one Puffin file holds many) with their content,
    sequence numbers and (v3) first row id."""
    scan = plan_scan(storage, metadata, snapshot)
    return {
        f.path if f.entry.data_file.content_offset is None else f"{f.path}@{f.entry.data_file.content_offset}": (
            int(f.content),
            f.data_sequence_number,
            f.entry.file_sequence_number,
            f.entry.data_file.first_row_id,
        )
        for f in [*scan.data_files, *scan.delete_files]
    }


def _renumbered(new: tuple[int, int, int | None, int | None], old: tuple[int, int, int | None, int | None]) -> bool:
    """Whether a rewrite changed a file's content or numbers; a row id may only be assigned where
    there was none ("Row Lineage for Upgraded Tables")."""
    return new[:3] != old[:3] or (old[3] is not None and new[3] != old[3])


def _iceberg_manifests(ref: TableRef, report: CheckpointReport, options: StorageOptions) -> Verification:
    assert report.snapshot_id is not None
    table = load_table(ref, options)
    snapshot = table.metadata.snapshot_by_id(report.snapshot_id)
    if snapshot.parent_snapshot_id is None:
        raise VersionNotFound(f"{table.name}: snapshot {snapshot.snapshot_id} has no parent to compare with")
    parent = table.metadata.snapshot_by_id(snapshot.parent_snapshot_id)
    new, old = (_live_entries(table.storage, table.metadata, s) for s in (snapshot, parent))
    missing, extra = sorted(set(old) - set(new)), sorted(set(new) - set(old))
    renumbered = sorted(p for p in set(new) & set(old) if _renumbered(new[p], old[p]))
    problems = [
        f"{label}: {', '.join(paths[:_SHOWN])}" + (f" and {len(paths) - _SHOWN} more" if len(paths) > _SHOWN else "")
        for label, paths in (
            ("lost", missing),
            ("gained", extra),
            ("content, sequence numbers or row ids changed", renumbered),
        )
        if paths
    ]
    return Verification(
        passed=not problems,
        summary=f"{table.name}: snapshot {snapshot.snapshot_id} vs its parent {parent.snapshot_id}: "
        + (
            "; ".join(problems)
            if problems
            else f"the same {len(new)} live data and delete files with the same sequence numbers"
        ),
        details={
            "snapshot_id": snapshot.snapshot_id,
            "files": len(new),
            "parent_files": len(old),
            "missing": len(missing),
            "extra": len(extra),
            "renumbered": len(renumbered),
        },
    )


# --- retained files --------------------------------------------------------------------------------


def retained_files_exist(target: Target, storage_options: StorageOptions | None = None) -> Verification:
    """Every file a retained version references is still in storage (module docs)."""
    options = storage_options or StorageOptions()
    missing: set[str] = set()
    match target:
        case IcebergTarget(ref=ref):
            table = load_table(ref, options)
            name, storage, root = table.name, table.storage, normalize(table.metadata.location, literal=True)
            referenced, missing, versions = _iceberg_referenced(storage, table.metadata)
        case DeltaTarget(location=root):
            name, storage = root, open_storage(root, options)
            referenced, versions = _delta_referenced(storage, root)
        case IcechunkTarget(location=root):
            name, storage = root, open_storage(root, options)
            referenced, versions = _icechunk_referenced(storage, root)
    present = {normalize(info.path) for info in storage.list(root)}
    missing |= {p for p in referenced if normalize(p) not in present and not storage.exists(p)}
    shown = ", ".join(sorted(missing)[:_SHOWN]) + (
        f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
    )
    return Verification(
        passed=not missing,
        summary=f"{name}: {versions} retained versions reference {len(referenced | missing)} files; "
        + (f"{len(missing)} missing: {shown}" if missing else "all exist"),
        details={
            "retained_versions": versions,
            "referenced_files": len(referenced | missing),
            "missing_files": len(missing),
        },
    )


def _delta_referenced(storage: Storage, location: str) -> tuple[set[str], int]:
    """Data and deletion-vector files of the versions in the time-travel window (module docs), and how
    many versions that is: the window's first version's live files plus everything later commits add."""
    listing = list_log(storage, location)
    latest = load_snapshot(storage, location, listing=listing)
    retention = table_retention(
        latest.metadata, location, DELETED_FILE_RETENTION_DURATION, DEFAULT_DELETED_FILE_RETENTION
    )
    cutoff = cutoff_ms(retention, int(time.time() * 1000))
    first = 0 if 0 in listing.commits else min(listing.checkpoints, default=latest.version)
    commits = {}
    for version in sorted(v for v in listing.commits if v > first):
        info = listing.commits[version]
        commits[version] = actions = parse_commit(read_log_file(storage, info), version, info.path)
        if any((r.deletion_timestamp or info.mtime_ms) < cutoff for r in actions.removes):
            first = version  # older versions lost files VACUUM may delete: outside the window
    snapshot = load_snapshot(storage, location, version=first, listing=listing)
    adds = [*snapshot.files.values(), *(a for v, c in commits.items() if v > first for a in c.adds)]
    paths = {snapshot.file_location(a.path) for a in adds}
    paths |= {
        dv_absolute_path(a.deletion_vector, location)
        for a in adds
        if a.deletion_vector is not None and a.deletion_vector.storage_type != "i"
    }
    return paths, latest.version - first + 1


def _iceberg_referenced(storage: Storage, metadata: TableMetadata) -> tuple[set[str], set[str], int]:
    """(files reachable from every snapshot, those already known missing, snapshots), as canonical
    locations (Iceberg paths are literal). A missing manifest list or manifest is reported, and its
    entries cannot be read (the rest still are)."""

    def gone(path: str) -> bool:
        return not storage.exists(normalize(path, literal=True))

    missing = {s.manifest_list for s in metadata.snapshots if s.manifest_list and gone(s.manifest_list)}
    readable = [s for s in metadata.snapshots if s.manifest_list not in missing]
    manifests = snapshot_manifests(storage, readable)
    missing |= {path for path in manifests if gone(path)}
    reach = reachable_files(storage, metadata, readable, skip_manifests=missing)
    found = {normalize(p, literal=True) for p in reach.all() - missing}
    return found, {normalize(p, literal=True) for p in missing}, len(metadata.snapshots)


def _binary_snapshots(storage: Storage, location: str) -> bool:
    """Whether the snapshots are format 1/2 files (the ``ICE🧊CHUNK`` header) though no ref says so."""
    first = next(iter(storage.list(join(location, SNAPSHOTS_DIR))), None)
    return first is not None and spec_version_of(storage.read_range(first.path, 0, HEADER_SIZE)) is not None


def _icechunk_referenced(storage: Storage, location: str) -> tuple[set[str], int]:
    """Snapshot, manifest, attribute and chunk objects of every retained head's ancestry (snapshots
    whose files are gone, known from a descendant's embedded history, reference nothing)."""
    if format_version(storage, location) is not None:
        return _versioned_referenced(storage, location)
    if _binary_snapshots(storage, location):
        raise UnsupportedFeature(
            f"{location}: verifying an Icechunk format 1/2 repository without ref files or a repo object "
            "is not available"
        )
    repo = Repository(storage, location)
    heads = {v.snapshot_id for b in repo.branches() for v in repo.branch_history(b)}
    heads |= {repo.resolve(t, "tag") for t in repo.tags()}
    paths: set[str] = set()
    retained: set[str] = set()
    for head in heads:
        try:
            retained |= {e.file_id for e in repo.ancestry(head) if e.file_id is not None}
        except (NotFound, VersionNotFound):
            paths.add(repo.snapshot_path(head))  # a ref names a snapshot whose file is gone
    try:
        reach = repo.reachable(retained)
    except NotFound as exc:  # a manifest is gone: name it, its chunks cannot be listed
        raise NotFound(f"{location}: a retained snapshot's manifest is missing ({exc})") from exc
    paths |= {repo.snapshot_path(s) for s in reach.snapshots}
    paths |= {repo.manifest_path(m) for m in reach.manifests}
    paths |= {repo.attributes_path(a) for a in reach.attribute_files}
    paths |= {repo.chunk_path(c) for c in reach.chunks}
    return paths, len(retained)


def _versioned_referenced(storage: Storage, location: str) -> tuple[set[str], int]:
    """Snapshot, manifest and chunk objects of every branch's and tag's ancestry in an Icechunk format 1
    or 2 repository; a missing snapshot or manifest is referenced (so reported) but names nothing more.
    Format 1 finds parents in the snapshot files: one gone there stops the walk with NotFound."""
    repo = VersionedRepository(storage, location)
    try:
        info = repo.info
        retained = {e.id for tip in [*info.branches.values(), *info.tags.values()] for e in info.ancestry(tip)}
    except VersionNotFound as exc:
        raise NotFound(f"{location}: a retained snapshot is missing ({exc})") from exc
    paths: set[str] = set()
    for snapshot_id in retained:
        paths.add(join(repo.root, SNAPSHOTS_DIR, snapshot_id))
        try:
            manifests = repo.manifest_ids(snapshot_id)
        except VersionNotFound:
            continue
        for manifest_id in manifests:
            paths.add(join(repo.root, MANIFESTS_DIR, manifest_id))
            try:
                arrays = repo.manifest(manifest_id).arrays
            except NotFound:
                continue
            paths |= {join(repo.root, CHUNKS_DIR, r.chunk_id) for a in arrays for r in a.refs if r.chunk_id}
    return paths, len(retained)


# --- change feed -----------------------------------------------------------------------------------


def change_feed_unique(
    output: str, key_columns: list[str] | None = None, storage_options: StorageOptions | None = None
) -> Verification:
    """No (source commit, change type, key) appears twice in the change-feed table ``output``; the key
    is ``key_columns``, or else every non-nested source column. An output that does not exist yet (a
    consumer whose first runs found nothing to extract: cdc creates it with its first rows) holds none."""
    location = normalize(output)
    storage = open_storage(location, storage_options)
    try:
        snapshot = load_snapshot(storage, location)
    except NotATable:
        return Verification(
            passed=True,
            summary=f"{location}: no change table yet (nothing extracted so far), so no change twice",
            details={"rows": 0, "duplicate_keys": 0},
        )
    table = read_snapshot(snapshot, storage)
    commit = next((c for c in (COMMIT_VERSION, COMMIT_SNAPSHOT_ID) if c in table.column_names), None)
    if commit is None or CHANGE_TYPE not in table.column_names:
        raise UnsupportedFeature(
            f"{location}: not a lakeops change feed (needs {CHANGE_TYPE} and {COMMIT_VERSION} or {COMMIT_SNAPSHOT_ID})"
        )
    if key_columns:
        unknown = [c for c in key_columns if c not in table.column_names]
        if unknown:
            raise UnsupportedFeature(f"{location}: key columns {unknown} are not columns of the change feed")
        key = list(key_columns)
    else:
        key = [f.name for f in table.schema if not pa.types.is_nested(f.type) and f.name not in _CHANGE_COLUMNS]
    columns = [commit, CHANGE_TYPE, *key]
    counts = Counter(zip(*(table.column(c).to_pylist() for c in columns), strict=True)) if table.num_rows else Counter()
    duplicates = {k: n for k, n in counts.items() if n > 1}
    example = next(iter(duplicates), None)
    shown = ", ".join(f"{c}={v!r}" for c, v in zip(columns, example or (), strict=False))
    return Verification(
        passed=not duplicates,
        summary=f"{location}: {table.num_rows} change rows keyed by ({', '.join(columns)}): "
        + (f"{len(duplicates)} keys appear more than once, e.g. {shown}" if duplicates else "each key once"),
        details={"rows": table.num_rows, "duplicate_keys": len(duplicates), "key": ", ".join(columns)},
    )
