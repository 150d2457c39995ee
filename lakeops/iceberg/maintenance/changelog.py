"""Iceberg changelog: the rows each snapshot inserted or deleted, exported to a Delta table (``lakeops cdc``).

plan (driver) → :func:`extract_unit` per group of changed data files of one snapshot (Spark task) →
:func:`commit_changelog`.

**Which rows changed** ("Snapshots", "Scan Planning", "Sequence Numbers", "Delete Formats"). The
changes of snapshot S with parent P are what a scan of S reads differently from a scan of P, file by
file: a data file's live rows in a snapshot are its rows minus those the snapshot's delete files
remove from it, with the scan planner's rules (:class:`~lakeops.iceberg.scan.DeleteIndex`: position
deletes apply to data of a sequence number <= theirs, equality deletes to data of a lower one, in
the same partition or globally). For every data file live in P or S whose applicable delete files
differ between the two, rows live in S but not in P are ``insert`` and rows live in P but not in S are
``delete``. This gives the issue's rules exactly, and counts each row once:

* a data file added by S: its rows minus what S's deletes remove (a position delete committed in
  the same snapshot has the same sequence number, so it applies);
* a data file removed by S: its rows as they were live in P (P's deletes applied);
* a delete file added by S: the rows it newly removes from files that stay live (rows older delete
  files already removed were not live in P; files removed by S are counted by the rule above);
* ``replace`` snapshots (compaction, manifest rewrites) change no rows and produce nothing.

Rows are read by field id in the schema of the ``--to`` snapshot ("Column Projection"): columns
added later are null in older rows. Iceberg ``timestamp`` values are written as Delta ``timestamp``
(UTC), since a plain Delta table has no ``timestamp_ntz`` without a table feature.

**Output** (:mod:`lakeops.changefeed.table`): the table's columns plus
``_change_type``, ``_commit_snapshot_id``, ``_commit_sequence_number`` and ``_commit_timestamp``
(the snapshot's ``timestamp-ms``, UTC). The idempotency watermark (``txn.version``) is the
**sequence number** of the last snapshot extracted, and ``txn.appId`` is ``iceberg:<table-uuid>``.
Sequence numbers are stored in each snapshot and grow strictly along every ancestry, so they stay
valid when older snapshots expire; a position in the ancestry would shift with every expiry, and
snapshot ids are random. Format version 1 has no sequence numbers (all read as 0) and is refused.
One output follows one line of history: an output whose last extracted snapshot is not on the
requested ancestry is refused. A range whose snapshots (or the ``--from`` snapshot) expired cannot be
replayed and is refused, naming the missing snapshot (or, where a writer cleared the parent id of its
child, as PyIceberg does, the snapshot whose parent is gone).

**From the table's creation** (``--from 0``): ``--from`` is exclusive, so a snapshot id alone could
never reach the rows of a table's first snapshot. ``0`` names the state before sequence number 1, the
empty table ("Sequence Numbers": a v2 table's first snapshot has sequence number 1; snapshot ids are
never 0, so ``0`` is unambiguous). The range is then every ancestor of ``--to`` from its root, the root
compared with the empty state, and the first position requested is sequence number 1. The creation
can only be replayed from a root that is the table's first snapshot: a root still naming a parent, or
(parent id cleared) with a sequence number above 1, has lost its ancestors to expiry and is refused,
naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from lakeops.change_columns import (
    CHANGE_TYPE,
    COMMIT_SEQUENCE_NUMBER,
    COMMIT_SNAPSHOT_ID,
    COMMIT_TIMESTAMP,
    ICEBERG_CHANGE_COLUMNS,
)
from lakeops.changefeed.table import (
    DEFAULT_UNIT_BYTES,
    ChangePlan,
    ExtractResult,
    commit_changes,
    open_output,
    output_state,
    start_position,
    write_changes,
)
from lakeops.delta.commit import CommitResult
from lakeops.delta.schema import LONG, STRING, TIMESTAMP, StructField, from_arrow_type, parse_schema, to_arrow_schema
from lakeops.delta.schema import StructType as DeltaStruct
from lakeops.errors import InvalidArgument, NotFound, UnsupportedFeature, VersionNotFound
from lakeops.iceberg.arrow_schema import to_arrow_schema as iceberg_arrow_schema
from lakeops.iceberg.data_reader import iter_parquet
from lakeops.iceberg.deletes import apply_equality_deletes, read_equality_deletes
from lakeops.iceberg.maintenance.compaction import DeleteRef, extra_read_fields
from lakeops.iceberg.manifest import FileContent, manifests_of
from lakeops.iceberg.metadata import Snapshot, TableMetadata
from lakeops.iceberg.properties import DEFAULT_NAME_MAPPING
from lakeops.iceberg.scan import DeleteIndex, LiveFile, read_live_files
from lakeops.iceberg.table import IcebergTable, TableRef
from lakeops.iceberg.types import NestedField, Schema, StructType
from lakeops.packing import first_fit_decreasing
from lakeops.plan import CommitOutcome, MaintenancePlan
from lakeops.storage import Storage, StorageOptions, open_storage
from lakeops.storage.uri import normalize

__all__ = [
    "FROM_CREATION",
    "ChangeUnit",
    "ChangelogOptions",
    "ChangelogPlan",
    "FileChange",
    "SnapshotChanges",
    "change_rows",
    "change_schema",
    "commit_changelog",
    "extract_unit",
    "plan_changelog",
    "resolve_snapshot",
]

#: Rows read at a time: a task's memory is bounded by this, not by its files.
READ_BATCH_ROWS = 131_072
_ROW = "_lakeops_row_index"
#: ``--from`` value meaning "from the table's creation" (the empty state before sequence number 1).
FROM_CREATION = 0


class ChangelogOptions(BaseModel):
    """The changes after snapshot ``from_snapshot`` up to ``to_snapshot`` (default: the current one);
    each is a snapshot id, or a branch or tag name; ``from_snapshot`` ``0`` is the table's creation
    (no snapshot id is 0)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    from_snapshot: str
    to_snapshot: str | None = None
    output: str
    unit_bytes: int = Field(default=DEFAULT_UNIT_BYTES, gt=0)


class FileChange(BaseModel):
    """A data file whose live rows differ between a snapshot and its parent. ``before``/``after``
    index the unit's delete files that apply to it in the parent / the snapshot; None: not live there."""

    model_config = ConfigDict(frozen=True)

    path: str
    size: int
    before: tuple[int, ...] | None
    after: tuple[int, ...] | None


class ChangeUnit(BaseModel):
    """One task: changed data files of one snapshot, read and written as one output data file."""

    model_config = ConfigDict(frozen=True)

    unit_id: int
    table_root: str
    output_root: str
    storage: StorageOptions
    snapshot_id: int
    sequence_number: int
    timestamp_ms: int
    table_schema: dict[str, Any]
    #: Columns read besides the schema's: equality-delete columns the schema dropped since.
    extra_read_fields: list[dict[str, Any]] = []
    output_schema: str
    deletes: list[DeleteRef]
    files: list[FileChange]
    #: The table's name mapping (JSON text): ids for the columns of imported files that carry none.
    name_mapping: str | None = None

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


class SnapshotChanges(BaseModel):
    """What the plan found in one snapshot of the range."""

    model_config = ConfigDict(frozen=True)

    snapshot_id: int
    sequence_number: int
    timestamp_ms: int
    operation: str | None
    data_files_added: int
    data_files_removed: int
    delete_files_added: int
    files_to_read: int


class ChangelogPlan(ChangePlan, MaintenancePlan[ChangeUnit, ExtractResult]):
    """Immutable, printable plan: the snapshots after ``from_snapshot_id`` (None: from the table's
    creation) on ``to_snapshot_id``'s ancestry whose sequence numbers are ``from_version..to_version``
    (positions are sequence numbers)."""

    table: TableRef
    table_name: str
    from_snapshot_id: int | None
    to_snapshot_id: int
    snapshots: list[SnapshotChanges]
    units: list[ChangeUnit]
    format: ClassVar[str] = "iceberg"

    @property
    def source_files(self) -> int:
        return sum(len(u.files) for u in self.units)

    @property
    def source_bytes(self) -> int:
        return sum(u.bytes for u in self.units)

    @property
    def from_creation(self) -> bool:
        return self.from_snapshot_id is None

    @property
    def versions_extracted(self) -> int:
        return len(self.snapshots)

    @property
    def versions_from_change_files(self) -> int:
        """Iceberg has no change files: every snapshot's changes come from its data and delete files."""
        return 0

    @property
    def versions_from_file_actions(self) -> int:
        return 0

    def table_label(self) -> str:
        return self.table_name

    def work_units(self) -> list[ChangeUnit]:
        return self.units

    def task(self) -> Callable[[ChangeUnit], ExtractResult]:
        return extract_unit

    def commit(
        self,
        units: Sequence[ChangeUnit],
        results: Sequence[ExtractResult],
        storage_options: StorageOptions,
        *,
        final: bool,
    ) -> CommitOutcome:
        return self.outcome(commit_changelog(self, list(results), storage_options))


# --- planning (driver) ------------------------------------------------------------------------------


def _from_creation(text: str) -> bool:
    return text.isdigit() and int(text) == FROM_CREATION


def resolve_snapshot(metadata: TableMetadata, text: str, flag: str) -> Snapshot:
    """A snapshot by id, or the snapshot a branch or tag points at."""
    if text.lstrip("-").isdigit():
        return metadata.snapshot_by_id(int(text))
    snapshot = metadata.snapshot_for_ref(text)
    if snapshot is None:
        raise InvalidArgument(f"{metadata.location}: {flag} {text!r} names no snapshot (the table is empty)")
    return snapshot


def _delta_arrow_type(type_: pa.DataType) -> pa.DataType:
    """The Arrow type a value has in the output: timestamps in UTC (a plain Delta table has no
    ``timestamp_ntz``), nested types alike."""
    if pa.types.is_timestamp(type_):
        return pa.timestamp("us", tz="UTC")
    if pa.types.is_struct(type_):
        return pa.struct([f.with_type(_delta_arrow_type(f.type)) for f in type_])
    if pa.types.is_list(type_):
        return pa.list_(type_.value_field.with_type(_delta_arrow_type(type_.value_type)))
    if pa.types.is_map(type_):
        key, item = type_.key_field, type_.item_field
        return pa.map_(key.with_type(_delta_arrow_type(key.type)), item.with_type(_delta_arrow_type(item.type)))
    return type_


def change_schema(schema: Schema, table: str) -> DeltaStruct:
    """The output's schema: the table's columns (as Delta types, nullable) plus the four change columns."""
    clash = [f.name for f in schema.fields if f.name.lower() in ICEBERG_CHANGE_COLUMNS]
    if clash:
        raise UnsupportedFeature(f"{table}: column {clash[0]!r} clashes with a changelog column")
    fields = []
    for f in iceberg_arrow_schema(schema):
        try:
            dtype = from_arrow_type(_delta_arrow_type(f.type), f.name)
        except UnsupportedFeature as exc:
            raise UnsupportedFeature(f"{table}: the changelog cannot hold column {f.name}: {exc}") from exc
        fields.append(StructField(f.name, dtype, True))
    return DeltaStruct(
        (
            *fields,
            StructField(CHANGE_TYPE, STRING, False),
            StructField(COMMIT_SNAPSHOT_ID, LONG, False),
            StructField(COMMIT_SEQUENCE_NUMBER, LONG, False),
            StructField(COMMIT_TIMESTAMP, TIMESTAMP, False),
        )
    )


@dataclass(frozen=True)
class _State:
    """A snapshot's live data files by path, their delete index and its live delete files by
    :attr:`~lakeops.iceberg.manifest.DataFile.key` (a Puffin file holds many deletion vectors)."""

    data: dict[str, LiveFile]
    index: DeleteIndex
    deletes: dict[tuple[str, int | None], LiveFile]


class _LiveStates:
    """Live files of snapshots, each manifest read once for the whole range (manifests are immutable
    and consecutive snapshots share most of them)."""

    def __init__(self, storage: Storage, metadata: TableMetadata, table: str) -> None:
        self.storage = storage
        self.table = table
        self.unpartitioned = {s.spec_id for s in metadata.partition_specs if s.is_unpartitioned}
        self._manifests: dict[str, list[LiveFile]] = {}

    def of(self, snapshot: Snapshot | None) -> _State:
        """The live files of ``snapshot``; None: the empty table before the first snapshot."""
        if snapshot is None:
            return _State({}, DeleteIndex((), self.unpartitioned), {})
        try:
            manifests = manifests_of(self.storage, snapshot)
            missing = [m for m in manifests if m.manifest_path not in self._manifests]
            for m in missing:
                self._manifests[m.manifest_path] = []
            for live in read_live_files(self.storage, missing):
                self._manifests[live.manifest_path].append(live)
        except NotFound as exc:
            raise VersionNotFound(
                f"{self.table}: snapshot {snapshot.snapshot_id} can no longer be read ({exc})"
            ) from exc
        files = [f for m in manifests for f in self._manifests[m.manifest_path]]
        deletes = {f.entry.data_file.key: f for f in files if f.content is not FileContent.DATA}
        return _State(
            {f.path: f for f in files if f.content is FileContent.DATA},
            DeleteIndex(deletes.values(), self.unpartitioned),
            deletes,
        )


@dataclass(frozen=True)
class _Changed:
    """A data file whose live rows differ, with the delete files applying to it before and after
    (None: not live there)."""

    file: LiveFile
    before: tuple[LiveFile, ...] | None
    after: tuple[LiveFile, ...] | None


def _require_parquet(file: LiveFile, table: str) -> None:
    """Data and delete files are read as Parquet, deletion vectors from their Puffin blob."""
    if file.entry.data_file.file_format.lower() != "parquet" and file.entry.data_file.deletion_vector() is None:
        raise UnsupportedFeature(
            f"{table}: {file.path} is a {file.entry.data_file.file_format} file; the changelog reads Parquet only"
        )


def snapshot_changes(before: _State, after: _State, snapshot: Snapshot, table: str) -> list[_Changed]:
    """The data files whose live rows differ between the parent's state ``before`` and the
    snapshot's ``after`` (module docs); none for a ``replace`` snapshot."""
    if snapshot.operation == "replace":
        return []
    changed = []
    for path in sorted(before.data.keys() | after.data.keys()):
        old = before.index.for_data_file(before.data[path]) if path in before.data else None
        new = after.index.for_data_file(after.data[path]) if path in after.data else None
        if (
            old is not None
            and new is not None
            and {d.entry.data_file.key for d in old} == {d.entry.data_file.key for d in new}
        ):
            continue
        change = _Changed(after.data.get(path) or before.data[path], old, new)
        for f in (change.file, *(old or ()), *(new or ())):
            _require_parquet(f, table)
        changed.append(change)
    return changed


def _summary(before: _State, after: _State, snapshot: Snapshot, files_to_read: int) -> SnapshotChanges:
    return SnapshotChanges(
        snapshot_id=snapshot.snapshot_id,
        sequence_number=snapshot.sequence_number,
        timestamp_ms=snapshot.timestamp_ms,
        operation=snapshot.operation,
        data_files_added=len(after.data.keys() - before.data.keys()),
        data_files_removed=len(before.data.keys() - after.data.keys()),
        delete_files_added=len(after.deletes.keys() - before.deletes.keys()),
        files_to_read=files_to_read,
    )


def _range(metadata: TableMetadata, start: Snapshot | None, end: Snapshot, table: str) -> list[Snapshot]:
    """``end`` and its ancestors down to ``start`` (included; None: down to the table's first
    snapshot), oldest first; refuses a ``start`` that is not an ancestor and an ancestry broken by an
    expired snapshot (naming it)."""
    chain: list[Snapshot] = []
    for snapshot in metadata.ancestors(end.snapshot_id):
        chain.append(snapshot)
        if start is not None and snapshot.snapshot_id == start.snapshot_id:
            return chain[::-1]
    oldest = chain[-1]
    if start is None and oldest.parent_snapshot_id is None and oldest.sequence_number <= 1:
        return chain[::-1]
    if start is None or start.sequence_number < oldest.sequence_number:
        # Ancestors have lower sequence numbers: ``start`` may lie behind the break, so the break refuses.
        if oldest.parent_snapshot_id is not None:
            missing = f"snapshot {oldest.parent_snapshot_id} (parent of {oldest.snapshot_id}) has expired"
        else:
            # Some writers (PyIceberg) clear the parent id of a snapshot whose parent they expire.
            missing = (
                f"the ancestry of {end.snapshot_id} ends at snapshot {oldest.snapshot_id} (sequence number "
                f"{oldest.sequence_number}), whose parent has expired or was never recorded"
            )
        since = "the table's creation" if start is None else start.snapshot_id
        raise VersionNotFound(
            f"{table}: {missing}; the changes between {since} and {end.snapshot_id} can no longer be extracted"
        )
    raise InvalidArgument(
        f"{table}: --from snapshot {start.snapshot_id} is not an ancestor of --to snapshot {end.snapshot_id}"
    )


def _require_same_line(metadata: TableMetadata, chain: list[Snapshot], through: int, output: str) -> None:
    """The output's last extracted snapshot (when still known) must lie on the requested ancestry."""
    held = next((s for s in metadata.snapshots if s.sequence_number == through), None)
    if held is None:
        return
    end = chain[-1]
    if through >= end.sequence_number:
        on_line = any(s.snapshot_id == end.snapshot_id for s in metadata.ancestors(held.snapshot_id))
    else:
        on_line = through < chain[0].sequence_number or any(s.snapshot_id == held.snapshot_id for s in chain)
    if not on_line:
        raise InvalidArgument(
            f"{output}: holds the changes up to snapshot {held.snapshot_id}, which is not on the ancestry of "
            f"{end.snapshot_id} (another branch); extract each branch into its own --output location"
        )


def _unit_files(changed: list[_Changed]) -> tuple[list[DeleteRef], list[FileChange]]:
    """The unit's delete files (each once) and its files, whose ``before``/``after`` index them."""
    refs: list[DeleteRef] = []
    index: dict[tuple[str, int | None], int] = {}

    def indexes(deletes: tuple[LiveFile, ...] | None) -> tuple[int, ...] | None:
        if deletes is None:
            return None
        for d in deletes:
            if d.entry.data_file.key not in index:
                index[d.entry.data_file.key] = len(refs)
                refs.append(DeleteRef.of(d))
        return tuple(index[d.entry.data_file.key] for d in deletes)

    files = [
        FileChange(path=c.file.path, size=c.file.file_size, before=indexes(c.before), after=indexes(c.after))
        for c in changed
    ]
    return refs, files


def plan_changelog(table: IcebergTable, options: ChangelogOptions, storage_options: StorageOptions) -> ChangelogPlan:
    """Plan the export (module docs): resolve and check the range, compare it with what the output
    holds, and find the changed data files of every snapshot still to extract."""
    metadata = table.metadata
    name = table.name
    metadata.check_writable("cdc")  # names a column type the change rows cannot hold
    if metadata.format_version < 2:
        raise UnsupportedFeature(
            f"{name}: format-version 1 tables have no sequence numbers, which order the changelog's progress marker"
        )
    if metadata.table_uuid is None:
        raise UnsupportedFeature(f"{name}: the table has no table-uuid to identify it in the changelog output")
    end = (
        resolve_snapshot(metadata, options.to_snapshot, "--to")
        if options.to_snapshot is not None
        else metadata.current_snapshot()
    )
    if end is None:
        raise InvalidArgument(f"{name}: the table has no snapshot; there are no changes to extract")
    start = (
        None if _from_creation(options.from_snapshot) else resolve_snapshot(metadata, options.from_snapshot, "--from")
    )
    if start is not None and start.snapshot_id == end.snapshot_id:
        raise InvalidArgument(f"{name}: the range {start.snapshot_id}..{end.snapshot_id} is empty (the same snapshot)")
    chain = _range(metadata, start, end, name)
    # The snapshots extracted, each with the state it is compared with (None: the empty table).
    extracted = chain if start is None else chain[1:]
    parents: list[Snapshot | None] = [None, *chain[:-1]] if start is None else [*chain[:-1]]
    unordered = next((s for s in extracted if s.sequence_number < 1), None)
    if unordered is not None:
        raise UnsupportedFeature(
            f"{name}: snapshot {unordered.snapshot_id} was written before the table's upgrade to format-version 2 "
            f"(sequence number 0), so the changelog cannot order its changes; use a later --from snapshot"
        )
    source_root = normalize(metadata.location, literal=True)  # an Iceberg path: literal
    target = open_output(source_root, options.output, storage_options)
    schema = metadata.schema_by_id(end.schema_id) if end.schema_id is not None else metadata.current_schema()
    source_id = f"iceberg:{metadata.table_uuid}"
    requested = 1 if start is None else start.sequence_number + 1
    out_metadata, through = output_state(
        target,
        schema=change_schema(schema, name),
        source_id=source_id,
        source=name,
        first=requested,
        at=f"at snapshot {end.snapshot_id}",
    )
    by_sequence = {s.sequence_number: s for s in metadata.ancestors(end.snapshot_id)}

    def resume(held: int) -> str:
        snapshot = by_sequence.get(held)
        return f"--from {snapshot.snapshot_id} or an older snapshot" if snapshot else "an older --from snapshot"

    first = start_position(
        target.root, out_metadata, through, requested, end.sequence_number, kind="sequence numbers", resume=resume
    )
    if through is not None:
        _require_same_line(metadata, chain, through, target.root)
    already = first > end.sequence_number
    states = _LiveStates(table.storage, metadata, name)
    summaries: list[SnapshotChanges] = []
    units: list[ChangeUnit] = []
    pending = [(p, s) for p, s in zip(parents, extracted, strict=True) if not already and s.sequence_number >= first]
    after = states.of(pending[0][0]) if pending else None
    for _, snapshot in pending:
        assert after is not None
        before, after = after, states.of(snapshot)
        changed = snapshot_changes(before, after, snapshot, name)
        summaries.append(_summary(before, after, snapshot, len(changed)))
        for group in first_fit_decreasing(
            changed, lambda c: c.file.file_size, lambda c: c.file.path, options.unit_bytes
        ):
            refs, files = _unit_files(group)
            units.append(
                ChangeUnit(
                    unit_id=len(units),
                    table_root=source_root,
                    output_root=target.root,
                    storage=storage_options,
                    snapshot_id=snapshot.snapshot_id,
                    sequence_number=snapshot.sequence_number,
                    timestamp_ms=snapshot.timestamp_ms,
                    table_schema=schema.to_json(),
                    output_schema=out_metadata.schema_string,
                    deletes=refs,
                    files=files,
                    name_mapping=metadata.properties.get(DEFAULT_NAME_MAPPING),
                )
            )
    equality_ids = {i for u in units for d in u.deletes for i in d.equality_ids}
    if equality_ids - set(schema.fields_by_id()):
        extra = [
            f.model_dump(mode="json", by_alias=True, exclude_none=True)
            for f in extra_read_fields(metadata, equality_ids - set(schema.fields_by_id()))
        ]
        units = [u.model_copy(update={"extra_read_fields": extra}) for u in units]
    return ChangelogPlan(
        table_root=source_root,
        output_root=target.root,
        source_id=source_id,
        requested_from=requested,
        from_version=requested if already else first,
        to_version=end.sequence_number,
        output_version=target.version,
        output_metadata=out_metadata,
        extracted_through=through,
        already_extracted=already,
        table=table.ref,
        table_name=name,
        from_snapshot_id=None if start is None else start.snapshot_id,
        to_snapshot_id=end.snapshot_id,
        snapshots=summaries,
        units=units,
    )


# --- execute: runs inside a Spark task -------------------------------------------------------------


class _Deletes:
    """The unit's delete files, read once: positions by data file, equality rows with their ids."""

    def __init__(self, storage: Storage, refs: list[DeleteRef], projection: StructType) -> None:
        self.projection = projection
        self.positions: dict[int, dict[str, pa.Array]] = {}
        self.equality: dict[int, tuple[list[int], pa.Table]] = {}
        for i, ref in enumerate(refs):
            if ref.content == FileContent.POSITION_DELETES:
                self.positions[i] = ref.read_positions(storage)
            else:
                ids = list(ref.equality_ids)
                self.equality[i] = (ids, read_equality_deletes(storage, ref.path, ids, projection))

    def deleted_positions(self, path: str, refs: tuple[int, ...] | None) -> np.ndarray:
        """The positions of ``path`` the position delete files ``refs`` delete."""
        arrays = [self.positions[i][path] for i in refs or () if i in self.positions and path in self.positions[i]]
        if not arrays:
            return np.array([], dtype=np.int64)
        return np.concatenate([np.asarray(a.to_numpy(zero_copy_only=False), dtype=np.int64) for a in arrays])

    def live(
        self, rows: pa.RecordBatch, positions: np.ndarray, deleted: np.ndarray, refs: tuple[int, ...] | None
    ) -> np.ndarray:
        """Which ``rows`` (at file ``positions``) are live under the delete files ``refs`` (None: the
        file is not live); ``deleted`` are the positions those refs delete."""
        if refs is None:
            return np.zeros(rows.num_rows, dtype=bool)
        alive = ~np.isin(positions, deleted)
        equality = [self.equality[i] for i in refs if i in self.equality]
        if equality:
            indexed = pa.Table.from_batches([rows]).append_column(_ROW, pa.array(np.arange(rows.num_rows)))
            survivors = apply_equality_deletes(indexed, equality, self.projection).column(_ROW).to_numpy()
            kept = np.zeros(rows.num_rows, dtype=bool)
            kept[survivors] = True
            alive &= kept
        return alive


def change_rows(unit: ChangeUnit) -> Iterator[pa.Table]:
    """The unit's change rows, batch by batch, in the output's Arrow schema: rows live after the
    snapshot but not before are ``insert``, rows live before but not after are ``delete``."""
    storage = open_storage(unit.table_root, unit.storage)
    schema = Schema.model_validate(unit.table_schema)
    projection = StructType(fields=(*schema.fields, *(NestedField.model_validate(f) for f in unit.extra_read_fields)))
    out_schema = to_arrow_schema(parse_schema(unit.output_schema), include_metadata=False)
    names = [f.name for f in schema.fields]
    deletes = _Deletes(storage, unit.deletes, projection)
    for file in unit.files:
        deleted_before = deletes.deleted_positions(file.path, file.before)
        deleted_after = deletes.deleted_positions(file.path, file.after)
        start = 0
        batches = iter_parquet(
            storage, file.path, projection, name_mapping=unit.name_mapping, batch_rows=READ_BATCH_ROWS
        )
        for batch in batches:
            positions = np.arange(start, start + batch.num_rows, dtype=np.int64)
            start += batch.num_rows
            before = deletes.live(batch, positions, deleted_before, file.before)
            after = deletes.live(batch, positions, deleted_after, file.after)
            for kind, mask in (("delete", before & ~after), ("insert", after & ~before)):
                if mask.any():
                    yield _output_rows(batch.filter(pa.array(mask)).select(names), kind, unit, out_schema)


def _output_rows(rows: pa.RecordBatch, kind: str, unit: ChangeUnit, out_schema: pa.Schema) -> pa.Table:
    n = rows.num_rows
    columns = [
        *(rows.column(i) for i in range(rows.num_columns)),
        pa.array([kind] * n, pa.string()),
        pa.array([unit.snapshot_id] * n, pa.int64()),
        pa.array([unit.sequence_number] * n, pa.int64()),
        pa.array([unit.timestamp_ms * 1000] * n, pa.timestamp("us", tz="UTC")),
    ]
    return pa.table([c.cast(f.type) for c, f in zip(columns, out_schema, strict=True)], schema=out_schema)


def extract_unit(unit: ChangeUnit) -> ExtractResult:
    """Read the unit's changed files and write their change rows as one output data file."""
    return write_changes(
        unit.unit_id,
        change_rows(unit),
        parse_schema(unit.output_schema),
        unit.output_root,
        unit.storage,
        files_read=len(unit.files),
        bytes_read=unit.bytes,
    )


# --- commit: driver --------------------------------------------------------------------------------


def commit_changelog(
    plan: ChangelogPlan, results: list[ExtractResult], storage_options: StorageOptions
) -> CommitResult | None:
    """Append the written files and the source's progress marker (the last sequence number) as one
    output version; None when the output already held the range."""
    return commit_changes(
        plan,
        (u.unit_id for u in plan.units),
        results,
        storage_options,
        {
            "source": plan.table_name,
            "sourceSnapshots": f"{'creation' if plan.from_snapshot_id is None else plan.from_snapshot_id}.."
            f"{plan.to_snapshot_id}",
            "sourceSequenceNumbers": f"{plan.from_version}..{plan.to_version}",
        },
    )
