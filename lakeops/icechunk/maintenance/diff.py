"""Icechunk change capture: structural diffs between consecutive snapshots, exported to a Delta table.

Spec basis: a snapshot holds every node (group or array) with its metadata, and an array's chunks
are found through its manifests ("Snapshot Files", "Chunk Manifest Files"); a snapshot's parent is
the newest entry of its embedded history (``short_term_history``, see :mod:`lakeops.icechunk.snapshot`).

**Rows** of one snapshot S against its parent P, nodes matched by path:

* a node only in S: ``added`` (chunk index null), and one ``added`` row per chunk of an array;
* a node only in P: ``removed``, and one ``removed`` row per chunk it had;
* a node whose kind changed (group ⇄ array): removed, then added, as above;
* a node in both whose user attributes or Zarr metadata differ: ``metadata-changed``;
* an array's chunk only in S: ``added``; only in P: ``removed``; in both with another payload
  (inline bytes, virtual or native reference): ``modified``. Snapshots written by ``lakeops
  compact`` (property ``lakeops.operation = compact``) move native chunks without changing their
  bytes: a native reference replaced by one of the same length is not a change there, as Delta's
  ``dataChange=false`` rewrites are not.

Each row carries the path, node type (``group``/``array``), chunk index (``"i/j/k"``), change, the
snapshot id, its parent's id, its depth (``total_parents``, the number of ancestors) and its
``written_at``.

**Export** (``lakeops cdc REPO --from F --to T``): the changes of every snapshot after F up to T on
T's ancestry (F must be an ancestor of T), in depth order, written by an executor's tasks
(:func:`extract_unit`, a few consecutive snapshots per task) as Parquet files of a Delta table and
committed once with :mod:`lakeops.delta.writer` (:class:`DiffPlan` is a
:class:`~lakeops.plan.MaintenancePlan`, which :mod:`lakeops.ops.batches` drives). Idempotency follows
:mod:`lakeops.changefeed.cdf_export` ("Transaction Identifiers"): ``txn.appId`` is
``icechunk:<id of the repository's initial snapshot>`` (the root of every ancestry, so stable for
the repository), ``txn.version`` the depth of the last snapshot extracted, and the output records
the first depth it holds; a range already held is not written again, an overlapping one is extracted
from the next depth, a gap or an earlier start is refused. One output follows one line of history:
depths of snapshots on diverging branches coincide, so extract each branch into its own output. A
snapshot whose file expired cannot be diffed: such a range is refused (the CDC horizon).

**Icechunk formats 1 and 2** (read natively, :mod:`lakeops.icechunk.versioned`;
https://github.com/earth-mover/icechunk/blob/main/docs/docs/spec.md#snapshot-files and
#repo-info-file): the same rows, nodes compared by kind and Zarr metadata (``NodeSnapshot.user_data``,
the node's ``zarr.json``) and chunks by their ``ChunkRef``; ``timestamp`` is the snapshot's
``flushed_at``, ``snapshot_depth`` its number of ancestors when extracted. The watermark is not the
depth, which expiry shortens, but ``flushed_at`` (microseconds): strictly increasing along an ancestry
(checked) and kept by expiry, which rewrites a retained snapshot's parent but never its id or
``flushed_at``. ``txn.version`` and the first version the output records are such instants; the rules
above apply to them, plus one: the next snapshot to extract must have the last one extracted as its
parent, else (that one expired, so expiry re-parented its child; or another branch) the range is
refused rather than diffed against the wrong parent. The initial snapshot (the ``appId``) is never
expired. A snapshot of ``lakeops compact`` (:mod:`.versioned_packing`: metadata item
``lakeops.operation = compact``) yields no chunk rows for the chunks it moved, as in the seed format.
"""

from __future__ import annotations

import functools
import itertools
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Literal, NamedTuple

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from lakeops.changefeed.table import FIRST_VERSION_KEY, SOURCE_ID_KEY, SOURCE_KEY, require_empty_or_abandoned
from lakeops.delta.actions import Metadata, Txn
from lakeops.delta.commit import CommitResult
from lakeops.delta.schema import LONG, STRING, TIMESTAMP, StructField, StructType, parse_schema, to_arrow_schema
from lakeops.delta.writer import DataFileWriter, TargetTable, WrittenFile, append_files, new_table_metadata, read_target
from lakeops.errors import InvalidArgument, VersionNotFound
from lakeops.icechunk.ids import validate_id
from lakeops.icechunk.maintenance.expiry import require_repository
from lakeops.icechunk.maintenance.packing import COMPACT, OPERATION_PROPERTY
from lakeops.icechunk.maintenance.versioned_packing import is_lakeops_compaction
from lakeops.icechunk.manifest import ChunkIndices, ChunkPayload, ChunkRef
from lakeops.icechunk.objects import ChunkRef as VersionedChunkRef
from lakeops.icechunk.repository import Repository
from lakeops.icechunk.snapshot import ArrayData, NodeSnapshot, Snapshot, path_sort_key
from lakeops.icechunk.versioned import RepositoryState, VersionedRepository, load_repository_state
from lakeops.plan import CommitOutcome, MaintenancePlan
from lakeops.storage import StorageOptions, is_within, normalize, open_storage

__all__ = [
    "CHANGE_SCHEMA",
    "ChangeKind",
    "ChangeRow",
    "DiffOptions",
    "DiffPlan",
    "DiffResult",
    "DiffStep",
    "DiffUnit",
    "commit_diff",
    "diff_snapshots",
    "diff_versioned",
    "extract_unit",
    "plan_diff",
    "resolve_snapshot",
    "written_locations",
]

ChangeKind = Literal["added", "removed", "modified", "metadata-changed"]
NodeType = Literal["group", "array"]
#: What orders a repository's snapshots in the output's ``txn.version``.
Watermark = Literal["depth", "flushed_at"]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The commit's ``operationParameters`` entry naming the range extracted, by watermark.
_RANGE_PARAMETER: dict[Watermark, str] = {"depth": "sourceDepths", "flushed_at": "sourceFlushedAt"}

#: Columns of the output table.
CHANGE_SCHEMA = StructType(
    (
        StructField("path", STRING, False),
        StructField("node_type", STRING, False),
        StructField("chunk_index", STRING, True),
        StructField("change", STRING, False),
        StructField("snapshot_id", STRING, False),
        StructField("parent_snapshot_id", STRING, False),
        StructField("snapshot_depth", LONG, False),
        StructField("timestamp", TIMESTAMP, False),
    )
)
#: Consecutive snapshots one Spark task diffs (and writes as one output file).
DEFAULT_STEPS_PER_UNIT = 32


class ChangeRow(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str
    node_type: NodeType
    chunk_index: str | None
    change: ChangeKind
    snapshot_id: str
    parent_snapshot_id: str
    snapshot_depth: int
    timestamp: datetime


def _index(indices: ChunkIndices) -> str:
    return "/".join(str(i) for i in indices)


@dataclass(frozen=True)
class _Node:
    """A node as the diff compares it, in either kind of repository: ``described`` is what
    ``metadata-changed`` compares."""

    path: str
    node_type: NodeType
    described: object


#: A change found: the node, its kind, the chunk's indices (None: the node itself).
_Change = tuple[_Node, ChangeKind, ChunkIndices | None]
#: (snapshot id, array path) -> the array's written chunks, indices -> payload.
_Chunks = Callable[[str, str], Mapping[ChunkIndices, object]]


def _never(old: object, new: object) -> bool:
    return False


def _changes(
    parent: dict[str, _Node],
    child: dict[str, _Node],
    ids: tuple[str, str],
    chunks: _Chunks,
    unchanged: Callable[[Any, Any], bool] = _never,
) -> Iterator[_Change]:
    """The changes of ``child`` against ``parent`` (module docs), in path order; ``ids`` are the parent's
    and the child's snapshot ids, ``unchanged`` tells a differing payload that is not a change."""
    parent_id, child_id = ids

    def whole(node: _Node, snapshot_id: str, change: ChangeKind) -> Iterator[_Change]:
        yield node, change, None
        if node.node_type == "array":
            for indices in sorted(chunks(snapshot_id, node.path)):
                yield node, change, indices

    for path in sorted(set(parent) | set(child), key=path_sort_key):
        old, new = parent.get(path), child.get(path)
        if old is None or new is None or old.node_type != new.node_type:
            if old is not None:
                yield from whole(old, parent_id, "removed")
            if new is not None:
                yield from whole(new, child_id, "added")
            continue
        if old.described != new.described:
            yield new, "metadata-changed", None
        if new.node_type == "group":
            continue
        before, after = chunks(parent_id, path), chunks(child_id, path)
        for indices in sorted(set(before) | set(after)):
            was, now = before.get(indices), after.get(indices)
            if was is None:
                yield new, "added", indices
            elif now is None:
                yield new, "removed", indices
            elif was != now and not unchanged(was, now):
                yield new, "modified", indices


def _rows(
    changes: Iterable[_Change], *, snapshot_id: str, parent_snapshot_id: str, depth: int, timestamp: datetime
) -> list[ChangeRow]:
    return [
        ChangeRow(
            path=node.path,
            node_type=node.node_type,
            chunk_index=None if indices is None else _index(indices),
            change=change,
            snapshot_id=snapshot_id,
            parent_snapshot_id=parent_snapshot_id,
            snapshot_depth=depth,
            timestamp=timestamp,
        )
        for node, change, indices in changes
    ]


def _described(node: NodeSnapshot) -> tuple[Any, ...]:
    """What ``metadata-changed`` compares: attributes and Zarr metadata, not node ids or manifests.
    The metadata is compared by its text form: a NaN fill value (common for floats) never equals itself."""
    meta = node.node_data.metadata if isinstance(node.node_data, ArrayData) else None
    return (node.user_attributes, repr(meta))


def _same_bytes_moved(old: ChunkPayload, new: ChunkPayload) -> bool:
    return isinstance(old, ChunkRef) and isinstance(new, ChunkRef) and old.length == new.length


def _same_native_bytes_moved(old: VersionedChunkRef, new: VersionedChunkRef) -> bool:
    return old.kind == new.kind == "native" and old.length == new.length


def diff_snapshots(repo: Repository, parent_id: str, child_id: str) -> list[ChangeRow]:
    """The rows of ``child_id`` against ``parent_id`` (snapshot file or embedded ids), in path order."""
    parent, child = repo.read_snapshot(parent_id), repo.read_snapshot(child_id)
    rewrite_only = child.properties.get(OPERATION_PROPERTY) == COMPACT

    def nodes(snapshot: Snapshot) -> dict[str, _Node]:
        return {
            path: _Node(path, "array" if node.is_array else "group", _described(node))
            for path, node in snapshot.nodes.items()
        }

    changes = _changes(
        nodes(parent),
        nodes(child),
        (parent_id, child_id),
        repo.chunk_payloads,
        _same_bytes_moved if rewrite_only else _never,
    )
    return _rows(
        changes,
        snapshot_id=repo.locate_snapshot(child_id),
        parent_snapshot_id=repo.locate_snapshot(parent_id),
        depth=child.total_parents,
        timestamp=child.metadata.written_at,
    )


def _zarr_metadata(raw: bytes) -> object:
    """A format 1/2 node's ``user_data`` (its ``zarr.json``) in a canonical text form, so that a
    re-serialised but equal document is no change (and a NaN fill value equals itself)."""
    try:
        return json.dumps(json.loads(raw), sort_keys=True)
    except ValueError:
        return raw


def _flushed(microseconds: int) -> datetime:
    return _EPOCH + timedelta(microseconds=microseconds)


def diff_versioned(repo: VersionedRepository, parent_id: str, child_id: str, depth: int) -> list[ChangeRow]:
    """The rows of snapshot ``child_id`` of a format 1 or 2 repository against ``parent_id``, in path
    order: nodes compared by kind and Zarr metadata (``NodeSnapshot.user_data``), chunks by their
    ``ChunkRef`` (inline bytes, native object and range, or virtual location), except that a native
    chunk moved to a range of the same length is no change in a snapshot of ``lakeops compact``
    (metadata ``lakeops.operation = compact``). ``depth`` is the
    child's position in the ancestry extracted (which expiry shortens, so it is not the watermark)."""

    def nodes(snapshot_id: str) -> dict[str, _Node]:
        return {
            node.path: _Node(node.path, "array" if node.is_array else "group", _zarr_metadata(node.user_data))
            for node in repo.snapshot(snapshot_id).nodes
        }

    child = repo.snapshot(child_id)
    unchanged = _same_native_bytes_moved if is_lakeops_compaction(child) else _never
    changes = _changes(nodes(parent_id), nodes(child_id), (parent_id, child_id), repo.chunk_refs, unchanged)
    flushed_at = child.flushed_at
    return _rows(
        changes, snapshot_id=child_id, parent_snapshot_id=parent_id, depth=depth, timestamp=_flushed(flushed_at)
    )


def resolve_snapshot(repo: Repository, text: str) -> str:
    """The snapshot file id ``text`` names: a snapshot id (file or embedded), else a branch or tag name."""
    try:
        return repo.locate_snapshot(validate_id(text, "snapshot id"))
    except InvalidArgument as id_problem:
        try:
            return repo.resolve(text)
        except VersionNotFound:
            raise VersionNotFound(
                f"{repo.root}: {text!r} is neither a snapshot id ({id_problem}) nor a branch or tag"
            ) from None


# --- plan ------------------------------------------------------------------------------------------


class DiffOptions(BaseModel):
    """Changes after ``from_snapshot`` up to ``to_snapshot`` (default: the ``main`` tip) into ``output``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    from_snapshot: str
    to_snapshot: str | None = None
    output: str
    steps_per_unit: int = Field(default=DEFAULT_STEPS_PER_UNIT, gt=0)


class LineEntry(NamedTuple):
    """One snapshot of the line of history extracted: ``version`` is its watermark, ``depth`` its
    number of ancestors there, ``file_id`` None when its file expired (seed format)."""

    id: str
    file_id: str | None
    version: int
    depth: int
    message: str


class DiffStep(BaseModel):
    """One snapshot (``child_id``) diffed against its parent."""

    model_config = ConfigDict(frozen=True)

    parent_id: str
    child_id: str
    depth: int


class DiffUnit(BaseModel):
    model_config = ConfigDict(frozen=True)

    unit_id: int
    table_root: str
    output_root: str
    storage: StorageOptions
    #: Icechunk format 1 or 2, None for the seed format.
    format_version: int | None = None
    steps: list[DiffStep]


class DiffResult(BaseModel):
    unit_id: int
    written: list[WrittenFile]
    rows_by_change: dict[str, int]
    snapshots: int
    seconds: float


class DiffPlan(BaseModel, MaintenancePlan[DiffUnit, DiffResult]):
    """Immutable, printable plan: ``from_version..to_version`` of ``to_snapshot``'s ancestry, in the
    ``watermark`` unit (seed format: depths; formats 1 and 2: ``flushed_at`` microseconds)."""

    model_config = ConfigDict(frozen=True)

    format: ClassVar[str] = "icechunk"

    table_root: str
    output_root: str
    source_id: str
    watermark: Watermark = "depth"
    from_snapshot: str
    to_snapshot: str
    requested_from: int
    from_version: int
    to_version: int
    output_version: int | None
    output_metadata: Metadata
    extracted_through: int | None
    already_extracted: bool
    units: list[DiffUnit]

    @property
    def snapshots(self) -> int:
        return sum(len(u.steps) for u in self.units)

    def table_label(self) -> str:
        return self.table_root

    def work_units(self) -> list[DiffUnit]:
        return self.units

    def task(self) -> Callable[[DiffUnit], DiffResult]:
        return extract_unit

    def result_type(self) -> type[DiffResult]:
        return DiffResult

    def commit(
        self, units: Sequence[DiffUnit], results: Sequence[DiffResult], storage_options: StorageOptions, *, final: bool
    ) -> CommitOutcome:
        """:func:`commit_diff`: one version of the output (nothing when it already held the range)."""
        done = commit_diff(self, list(results), storage_options)
        return CommitOutcome() if done is None else CommitOutcome(version=done.version, attempts=done.attempts)

    def discard(self, results: Sequence[DiffResult], storage_options: StorageOptions) -> int:
        """Delete the files ``results`` wrote (never anything else, never outside the output table)."""
        paths = written_locations(results)
        return open_storage(self.output_root, storage_options).delete_many(paths) if paths else 0


def _output_state(target: TargetTable, source_id: str, root: str, first: int) -> tuple[Metadata, int | None]:
    """The output's metadata (existing, or new starting at depth ``first``) and the last depth it holds."""
    if not target.exists:
        configuration = {SOURCE_ID_KEY: source_id, SOURCE_KEY: root, FIRST_VERSION_KEY: str(first)}
        return new_table_metadata(CHANGE_SCHEMA, configuration=configuration), None
    metadata = target.metadata
    assert metadata is not None
    held = metadata.configuration.get(SOURCE_ID_KEY)
    through = target.txn_version(source_id)
    if held != source_id or through is None or FIRST_VERSION_KEY not in metadata.configuration:
        raise InvalidArgument(
            f"{target.root}: not a change table of Icechunk repository {root} written by lakeops cdc (it holds "
            f"{held or 'no lakeops cdc source'}, expected {source_id}); choose another --output location"
        )
    if parse_schema(metadata.schema_string) != CHANGE_SCHEMA:
        raise InvalidArgument(f"{target.root}: its schema is not the Icechunk change schema; choose another --output")
    return metadata, through


def _point(watermark: Watermark, version: int) -> str:
    return f"depth {version}" if watermark == "depth" else f"flushed at {_flushed(version).isoformat()}"


def _span(watermark: Watermark, first: int, last: int) -> str:
    if watermark == "depth":
        return f"depths {first}..{last}"
    return f"the snapshots flushed {_flushed(first).isoformat()}..{_flushed(last).isoformat()}"


def _start_index(
    output: str, metadata: Metadata, through: int | None, line: list[LineEntry], from_index: int, watermark: Watermark
) -> int:
    """The position in ``line`` (newest first) of the first snapshot still to extract, -1 when the
    output holds the range. Refuses a range that starts before the output's first version, one that
    would leave a gap after its last, and one whose next snapshot no longer descends from the last
    snapshot extracted (expiry rewrote its parent, or another branch)."""
    requested = line[from_index - 1].version
    if through is None:
        return from_index - 1
    first = int(metadata.configuration[FIRST_VERSION_KEY])
    held = _span(watermark, first, through)
    if requested < first:
        raise InvalidArgument(
            f"{output}: holds the changes of {held} only; earlier changes cannot be added to it (extract them "
            "into a new --output location)"
        )
    if line[from_index].version > through:
        last = next((entry for entry in line if entry.version == through), None)
        hint = f"use --from {last.file_id or last.id} or an older snapshot" if last else "use an older --from"
        if watermark == "depth":
            left_out = f"starting at depth {requested} would leave depths {through + 1}..{requested - 1} out"
        else:
            left_out = f"starting after {line[from_index].id} would leave the snapshots before it out"
        raise InvalidArgument(f"{output}: holds the changes of {held}; {left_out}; {hint}")
    if line[0].version <= through:
        return -1
    start = max(i for i, entry in enumerate(line) if entry.version > through)
    if line[start + 1].version != through:  # from_index > start: its version is at most `through`
        raise VersionNotFound(
            f"{output}: the last snapshot it holds the changes of ({_point(watermark, through)}) is no longer the "
            f"parent of {line[start].id} (expired, or on another branch); its changes cannot be extracted without a "
            "gap (extract them into a new --output location)"
        )
    return start


def _seed_line(repo: Repository, to_id: str) -> list[LineEntry]:
    ancestry = repo.ancestry(to_id)
    to_depth = repo.read_snapshot(to_id).total_parents
    return [LineEntry(e.id, e.file_id, to_depth - i, to_depth - i, e.message) for i, e in enumerate(ancestry)]


def _versioned_line(repo: VersionedRepository, to_id: str) -> list[LineEntry]:
    """``to_id``'s ancestry, its watermark each snapshot's ``flushed_at``: expiry keeps a retained
    snapshot's id and ``flushed_at`` (it rewrites only its parent), so the watermark outlives it."""
    ancestry = repo.info.ancestry(to_id)
    for child, parent in itertools.pairwise(ancestry):
        if child.flushed_at <= parent.flushed_at:
            raise InvalidArgument(
                f"{repo.root}: snapshot {child.id} was flushed no later than its parent {parent.id}; its flushed_at "
                "cannot order change capture"
            )
    depth = len(ancestry) - 1
    return [LineEntry(s.id, s.id, s.flushed_at, depth - i, s.message) for i, s in enumerate(ancestry)]


def _resolve_versioned(repo: VersionedRepository, text: str) -> str:
    """The snapshot ``text`` names: a snapshot id, else a branch or tag name."""
    info = repo.info
    found = text if text in info.snapshots else info.branches.get(text, info.tags.get(text))
    if found is None:
        raise VersionNotFound(f"{repo.root}: {text!r} is neither a snapshot id nor a branch or tag")
    return found


#: ``--from`` naming the repository's creation (as for Delta and Iceberg): every snapshot on the ancestry.
FROM_CREATION = "0"


def _line(state: RepositoryState, options: DiffOptions) -> tuple[int | None, str, str, list[LineEntry]]:
    """The repository's format version, the resolved from and to snapshots, and to's ancestry. ``--from 0``
    (when no branch or tag has that name) is the first snapshot of the ancestry: everything after it."""
    version = state.format_version
    to_text = options.to_snapshot or "main"
    resolve: Callable[[str], str]
    if version is not None:
        versioned = state.versioned
        resolve = functools.partial(_resolve_versioned, versioned)
        to_id = resolve(to_text)
        line = _versioned_line(versioned, to_id)
    else:
        repo = state.seed
        require_repository(repo)
        resolve = functools.partial(resolve_snapshot, repo)
        to_id = resolve(to_text)
        line = _seed_line(repo, to_id)
    try:
        from_id = resolve(options.from_snapshot)
    except VersionNotFound:
        if options.from_snapshot != FROM_CREATION:
            raise
        from_id = line[-1].file_id or line[-1].id
    return version, from_id, to_id, line


def plan_diff(
    location: str, options: DiffOptions, storage_options: StorageOptions, *, state: RepositoryState | None = None
) -> DiffPlan:
    """Plan the export (module docs): resolve the range, check it against the output, batch the snapshots
    (``state``: the repository as already read, else read now)."""
    source_root, output_root = normalize(location), normalize(options.output)
    if is_within(source_root, output_root) or is_within(output_root, source_root):
        raise InvalidArgument(
            f"{source_root}: the output {output_root} must lie outside the repository (and not contain it)"
        )
    if state is None:
        state = load_repository_state(open_storage(source_root, storage_options), source_root)
    version, from_id, to_id, line = _line(state, options)
    watermark: Watermark = "depth" if version is None else "flushed_at"
    position = {entry.id: i for i, entry in enumerate(line)}
    position.update({entry.file_id: i for i, entry in enumerate(line) if entry.file_id})
    if from_id not in position:
        raise InvalidArgument(f"{source_root}: snapshot {from_id} is not an ancestor of {to_id}; nothing lies between")
    from_index = position[from_id]
    if from_index == 0:
        raise InvalidArgument(f"{source_root}: the range {from_id}..{to_id} is empty (the same snapshot)")
    requested = line[from_index - 1].version
    source_id = f"icechunk:{line[-1].id}"
    output_storage = open_storage(output_root, storage_options)
    target = read_target(output_storage, output_root)
    if not target.exists:
        require_empty_or_abandoned(output_storage, output_root)
    metadata, through = _output_state(target, source_id, source_root, requested)
    start = _start_index(target.root, metadata, through, line, from_index, watermark)
    steps: list[DiffStep] = []
    for i in range(start, -1, -1):
        child, parent = line[i], line[i + 1]
        if child.file_id is None or parent.file_id is None:
            gone = child if child.file_id is None else parent
            raise VersionNotFound(
                f"{source_root}: snapshot {gone.id} ({gone.message!r}) has expired; the changes of depth "
                f"{child.depth} can no longer be extracted"
            )
        steps.append(DiffStep(parent_id=parent.file_id, child_id=child.file_id, depth=child.depth))
    size = options.steps_per_unit
    units = [
        DiffUnit(
            unit_id=i,
            table_root=source_root,
            output_root=output_root,
            storage=storage_options,
            format_version=version,
            steps=steps[start_at : start_at + size],
        )
        for i, start_at in enumerate(range(0, len(steps), size))
    ]
    return DiffPlan(
        table_root=source_root,
        output_root=output_root,
        source_id=source_id,
        watermark=watermark,
        from_snapshot=from_id,
        to_snapshot=to_id,
        requested_from=requested,
        from_version=requested if start < 0 else line[start].version,
        to_version=line[0].version,
        output_version=target.version,
        output_metadata=metadata,
        extracted_through=through,
        already_extracted=start < 0,
        units=units,
    )


# --- execute: runs inside a Spark task -------------------------------------------------------------


def _table(rows: list[ChangeRow]) -> pa.Table:
    return pa.Table.from_pylist([r.model_dump() for r in rows], schema=to_arrow_schema(CHANGE_SCHEMA))


def extract_unit(unit: DiffUnit) -> DiffResult:
    """Diff the unit's snapshots and write their rows as one output data file."""
    started = time.monotonic()
    storage = open_storage(unit.table_root, unit.storage)
    seed = Repository(storage, unit.table_root)
    versioned = None if unit.format_version is None else VersionedRepository(storage, unit.table_root)
    writer = DataFileWriter(CHANGE_SCHEMA)
    counts: Counter[str] = Counter()
    for step in unit.steps:
        rows = (
            diff_snapshots(seed, step.parent_id, step.child_id)
            if versioned is None
            else diff_versioned(versioned, step.parent_id, step.child_id, step.depth)
        )
        counts.update(r.change for r in rows)
        if rows:
            writer.write(_table(rows))
    written = writer.finish(open_storage(unit.output_root, unit.storage), unit.output_root)
    return DiffResult(
        unit_id=unit.unit_id,
        written=[written] if written is not None else [],
        rows_by_change=dict(counts),
        snapshots=len(unit.steps),
        seconds=time.monotonic() - started,
    )


# --- commit: driver --------------------------------------------------------------------------------


def commit_diff(plan: DiffPlan, results: list[DiffResult], storage_options: StorageOptions) -> CommitResult | None:
    """Append the written files and the progress marker as one output version; None when the output
    already held the range. A range without changes still commits its marker."""
    if plan.already_extracted:
        return None
    if {r.unit_id for r in results} != {u.unit_id for u in plan.units}:
        raise InvalidArgument(f"{plan.table_root}: change extraction results do not match the plan's units")
    target = TargetTable(plan.output_root, plan.output_version, plan.output_metadata)
    txn = Txn(appId=plan.source_id, version=plan.to_version, lastUpdated=int(time.time() * 1000))
    return append_files(
        open_storage(plan.output_root, storage_options),
        target,
        metadata=plan.output_metadata,
        files=[w for r in sorted(results, key=lambda r: r.unit_id) for w in r.written],
        txn=txn,
        operation_parameters={
            "source": plan.table_root,
            "sourceSnapshots": f"{plan.from_snapshot}..{plan.to_snapshot}",
            _RANGE_PARAMETER[plan.watermark]: f"{plan.from_version}..{plan.to_version}",
        },
    )


def written_locations(results: Sequence[DiffResult]) -> list[str]:
    """Every file this attempt wrote: the only files an abort may delete."""
    return [w.location for r in results for w in r.written]
