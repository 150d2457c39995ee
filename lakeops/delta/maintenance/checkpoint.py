"""Writing a Delta checkpoint: plan, part tasks, and the ``_last_checkpoint`` pointer written last.

Implements "Checkpoints" (content, single and multi-part file names, "readers must only use a
complete checkpoint"), "V1 Spec", "Last Checkpoint File" and "JSON checksum", and the
writer requirement under "Checkpoints" that multi-part rows be clustered by ``path`` so every
attempt writes the same bytes into the same part.

Content: the state at one version after reconciliation — one ``protocol``, one ``metaData``, every
``txn`` (those older than ``delta.setTransactionRetentionDuration`` dropped, only when that property
is set), every live ``add`` and every ``remove`` tombstone that has not expired. A tombstone expires
when ``deletionTimestamp + delta.deletedFileRetentionDuration`` (default one week) is before now; a
tombstone without a timestamp counts as deleted at the epoch, as Delta Spark treats it.

Layout: ``protocol``, ``metaData`` and ``txn`` rows first, then the file actions sorted by path.
When there are more actions than ``part_size``, the sorted paths are cut into contiguous ranges (a
path never straddles two parts, so its ``add`` and tombstones stay together); part 1 also holds
the non-file actions ("or null otherwise"). The plan carries only the range bounds: a Spark task
re-reads the log segment, keeps the actions of its range (memory bounded by the part, not the
table), checks it found exactly the count the driver planned, and writes its part. When one part
suffices the driver writes it from the snapshot it already holds.

Two passes (a snapshot loaded ``keys_only``, as ``lakeops checkpoint`` loads it): the checkpoint's add
rows are replayed as keys and row numbers only, and the driver writes each part from the winning rows
read again from their files a row group at a time (:mod:`lakeops.delta.checkpoint_stream`), so it
never holds every file's statistics. Both routes write the same bytes; rows whose fields the schema
has no place for, or a table writing typed statistics, take the whole-table route.

V2 checkpoints (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#v2-checkpoint-table-feature):
on a table whose protocol enables ``v2Checkpoint``, the checkpoint is one UUID-named parquet file
(``n.checkpoint.<uuid>.parquet``, "UUID-named checkpoint") following the "V2 Spec": its first row
is the ``checkpointMetadata`` action, and the file actions are embedded (sidecars are optional), so
it is never split into parts (multi-part checkpoints are forbidden there) and never classic-named
(lakeops writes one kind of checkpoint per table). Live ``domainMetadata`` actions ("Domain Metadata",
tombstones left out as "Checkpoints" asks) follow the transactions in every checkpoint.

Atomicity: each part is one atomic object write. ``_last_checkpoint`` is written only after every
part exists, never moved back to an older version, and only replaced as this run read it (a compare-
and-swap: a pointer another writer moved meanwhile is read again). An interrupted run leaves at most an
incomplete part set, which readers skip; a rerun rewrites the same names with the same content.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import ClassVar, cast

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from lakeops.delta.actions import Add, CheckpointMetadata, DomainMetadata, Metadata, Protocol, Remove, Txn, bulk_load
from lakeops.delta.checkpoint_files import is_uuid_named, read_checkpoint_file
from lakeops.delta.checkpoint_reader import AddColumn
from lakeops.delta.checkpoint_rows import CheckpointRows, cast_add_rows, cast_add_struct
from lakeops.delta.checkpoint_stream import StreamedRows, part_rows
from lakeops.delta.checkpoint_writer import (
    CheckpointAction,
    checkpoint_bytes,
    checkpoint_schema,
    encode_actions,
    schema_from_text,
    schema_to_text,
    writes_stats_as_struct,
)
from lakeops.delta.commit_file import parse_commit
from lakeops.delta.features import check_writable, enabled_features
from lakeops.delta.last_checkpoint import LastCheckpoint, parse_last_checkpoint, render_last_checkpoint
from lakeops.delta.live_files import LiveFiles
from lakeops.delta.log_compaction import read_replay_file
from lakeops.delta.log_segment import (
    LAST_CHECKPOINT,
    LOG_DIR,
    LogListing,
    LogSegment,
    checkpoint_file_names,
    list_log,
    segment_for_version,
)
from lakeops.delta.maintenance.defaults import DEFAULT_PART_SIZE
from lakeops.delta.properties import DELETED_FILE_RETENTION_DURATION, SET_TRANSACTION_RETENTION_DURATION
from lakeops.delta.retention import DEFAULT_DELETED_FILE_RETENTION, table_retention
from lakeops.delta.snapshot import DeltaSnapshot, Replay, load_snapshot
from lakeops.errors import (
    AlreadyExists,
    CommitConflict,
    CorruptFile,
    InvalidArgument,
    NotFound,
    ProtocolError,
    Superseded,
    VersionNotFound,
)
from lakeops.plan import CommitOutcome, MaintenancePlan
from lakeops.storage import Storage, StorageOptions, open_storage
from lakeops.storage.uri import join
from lakeops.units import cutoff_ms

__all__ = [
    "DEFAULT_PART_SIZE",
    "CheckpointOptions",
    "CheckpointPart",
    "CheckpointPlan",
    "PartWritten",
    "finalize_checkpoint",
    "plan_checkpoint",
    "select_actions",
    "two_passes",
    "write_part",
    "write_parts_on_driver",
]


class CheckpointOptions(BaseModel):
    """What the user asked for: a version (default the latest), the part size, and whether to
    rewrite a checkpoint that already exists."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int | None = Field(default=None, ge=0)
    part_size: int = Field(default=DEFAULT_PART_SIZE, gt=0)
    force: bool = False


class CheckpointPart(BaseModel):
    """One part file and the path range it holds: the unit a Spark task writes."""

    model_config = ConfigDict(frozen=True)

    table_root: str
    storage: StorageOptions
    version: int
    part: int
    parts: int
    location: str
    #: Inclusive lower bound of the paths in this part; None for part 1, which also holds the
    #: protocol, metadata and transaction rows.
    first_path: str | None
    #: Exclusive upper bound; None for the last part.
    end_path: str | None
    actions: int
    add_files: int
    remove_tombstones: int
    tombstone_cutoff_ms: int
    txn_cutoff_ms: int | None
    arrow_schema: str

    def holds(self, path: str) -> bool:
        return (self.first_path is None or path >= self.first_path) and (self.end_path is None or path < self.end_path)


class PartWritten(BaseModel):
    """What a part task wrote."""

    part: int
    location: str
    actions: int
    add_files: int
    bytes: int
    seconds: float


class CheckpointPlan(BaseModel, MaintenancePlan[CheckpointPart, PartWritten]):
    """Immutable, printable plan: the version, what the checkpoint will hold and its parts. Its commit
    is the ``_last_checkpoint`` pointer: the parts are invisible to readers until they are complete."""

    model_config = ConfigDict(frozen=True)
    format: ClassVar[str] = "delta"
    #: The report's status once written.
    done_status: ClassVar[str] = "written"
    unit_noun: ClassVar[str] = "parts"

    table_root: str
    version: int
    latest_version: int
    #: A complete checkpoint of ``version`` exists already (nothing is planned unless forced).
    already_checkpointed: bool
    previous_checkpoint_version: int | None
    last_checkpoint_version: int | None
    part_size: int
    actions: int
    add_files: int
    remove_tombstones: int
    expired_tombstones: int
    txns: int
    expired_txns: int
    tombstone_cutoff_ms: int
    txn_cutoff_ms: int | None
    parts: list[CheckpointPart]
    #: The snapshot planned from, on the driver only (never serialised): lets the driver write a part
    #: without replaying the log again.
    _snapshot: DeltaSnapshot | None = PrivateAttr(default=None)
    #: The rows as selected and ordered while planning (driver only): writing on the driver reuses them.
    _rows: CheckpointRows | None = PrivateAttr(default=None)
    #: A large table's plan (driver only): what the second pass reads instead of ``_rows``.
    _stream: StreamedRows | None = PrivateAttr(default=None)

    @property
    def two_pass(self) -> bool:
        """Whether the parts are written from the rows read again from their sources (planned from
        keys: :mod:`lakeops.delta.checkpoint_stream`), not from rows the plan holds."""
        return self._stream is not None

    @property
    def has_work(self) -> bool:
        return bool(self.parts)

    @property
    def idle_status(self) -> str:
        """The report's status when nothing is written: a dry run's, or why there is nothing to do."""
        return "planned" if self.parts else "already checkpointed"

    def describe(self) -> str:
        return (
            f"version {self.version}: {self.actions} actions ({self.add_files} files, {self.remove_tombstones} "
            f"tombstones, {self.expired_tombstones} expired) in {len(self.parts)} part(s)"
        )

    def describe_commit(self, outcome: CommitOutcome) -> str:
        return f"wrote checkpoint of version {self.version} ({len(self.parts)} part(s))"

    def report_fields(self) -> dict[str, int | None]:
        """The plan's figures, named as the checkpoint report's fields."""
        return {
            "read_version": self.version,
            "version": self.version,
            "latest_version": self.latest_version,
            "previous_checkpoint_version": self.previous_checkpoint_version,
            "parts": len(self.parts),
            "actions": self.actions,
            "add_files": self.add_files,
            "remove_tombstones": self.remove_tombstones,
            "expired_tombstones": self.expired_tombstones,
            "txns": self.txns,
            "expired_txns": self.expired_txns,
        }

    def table_label(self) -> str:
        return self.table_root

    def work_units(self) -> list[CheckpointPart]:
        return self.parts

    def task(self) -> Callable[[CheckpointPart], PartWritten]:
        return write_part

    def result_type(self) -> type[PartWritten]:
        return PartWritten

    def results_in_process(self, driver: bool) -> list[PartWritten] | None:
        """One part, or parts the executor would write in this process anyway, are written from the
        snapshot the plan holds: each part task would replay the whole log again."""
        return write_parts_on_driver(self) if driver or len(self.parts) <= 1 else None

    def commit(
        self,
        units: Sequence[CheckpointPart],
        results: Sequence[PartWritten],
        storage_options: StorageOptions,
        *,
        final: bool,
    ) -> CommitOutcome:
        """Point ``_last_checkpoint`` at the parts (not when it names a newer version already)."""
        pointer = finalize_checkpoint(self, list(results), storage_options)
        return CommitOutcome(
            attempts=1,
            metrics={"bytes": sum(w.bytes for w in results), "last_checkpoint_updated": pointer is not None},
        )

    def discard(self, results: Sequence[PartWritten], storage_options: StorageOptions) -> int:
        """Parts are kept: an incomplete set is invisible to readers, a rerun rewrites the same names with
        the same content, and deleting them could break an identical set a concurrent run has just completed."""
        return 0


def select_actions(
    protocol: Protocol,
    metadata: Metadata,
    txns: dict[str, Txn],
    files: Mapping[tuple[str, str | None], Add],
    tombstones: dict[tuple[str, str | None], Remove],
    *,
    with_table_actions: bool,
    tombstone_cutoff_ms: int,
    txn_cutoff_ms: int | None,
    domains: Mapping[str, DomainMetadata] | None = None,
    v2_version: int | None = None,
) -> list[CheckpointAction]:
    """The checkpoint rows of a reconciled state, in checkpoint order: ``checkpointMetadata`` (a V2
    checkpoint of ``v2_version``), ``protocol``, ``metaData``, unexpired ``txn`` and live
    ``domainMetadata`` (when ``with_table_actions``), then live adds and unexpired tombstones by path."""
    head: list[CheckpointAction] = []
    if with_table_actions:
        if v2_version is not None:
            head.append(CheckpointMetadata(version=v2_version))
        head += [protocol, metadata]
        head += [
            t
            for _, t in sorted(txns.items())
            if txn_cutoff_ms is None or t.last_updated is None or t.last_updated >= txn_cutoff_ms
        ]
        head += [d for _, d in sorted((domains or {}).items()) if not d.removed]
    # Sort keys from the dicts' own keys (path, DV id): no property call per action.
    body: list[tuple[str, int, str, Add | Remove]] = [(path, 0, dv or "", a) for (path, dv), a in files.items()]
    body += [
        (path, 1, dv or "", r)
        for (path, dv), r in tombstones.items()
        if (r.deletion_timestamp or 0) >= tombstone_cutoff_ms
    ]
    body.sort(key=_sort_key)
    return head + [row[3] for row in body]


def _sort_key(row: tuple[str, int, str, Add | Remove]) -> tuple[str, int, str]:
    return row[0], row[1], row[2]


def _file_path(action: CheckpointAction) -> str | None:
    return action.path if isinstance(action, Add | Remove) else None


#: A checkpoint replacing one of more actions than this is written in two passes (the snapshot loaded
#: ``keys_only``): below it one replay holding every row is faster (about 1.5x at 1 M actions, level
#: at 3 M) and fits well within the driver (under 1 GB at 1 M).
TWO_PASS_ABOVE_ACTIONS = 2_000_000
#: Bytes of checkpoint per action assumed when ``_last_checkpoint`` does not give the count: the most
#: compressible checkpoints seen (log-only adds with stats, 20 B each), so a guess errs towards two passes.
_CHECKPOINT_BYTES_PER_ACTION = 20


def two_passes(listing: LogListing, table_root: str, version: int | None) -> bool:
    """Whether the checkpoint of ``version`` (None: the latest) is written in two passes: the actions
    of the checkpoint it starts from (``_last_checkpoint``'s ``size`` when it describes that one, else
    estimated from its bytes) exceed :data:`TWO_PASS_ABOVE_ACTIONS`."""
    previous = segment_for_version(listing, table_root, version).checkpoint
    if previous is None:
        return False
    last = listing.last_checkpoint
    if last is not None and last.version == previous.version:
        actions = last.size
    else:
        actions = sum(info.size for info in previous.files) // _CHECKPOINT_BYTES_PER_ACTION
    return actions > TWO_PASS_ABOVE_ACTIONS


def plan_checkpoint(
    snapshot: DeltaSnapshot,
    options: CheckpointOptions,
    storage_options: StorageOptions,
    *,
    now_ms: int | None = None,
) -> CheckpointPlan:
    """Decide what the checkpoint of ``snapshot`` holds and how it is split into parts.

    Raises :class:`~lakeops.errors.UnsupportedFeature` for a table with a writer feature lakeops
    does not implement: a checkpoint must carry every action such a feature defines.
    """
    table = snapshot.table_root
    if options.version is not None and options.version != snapshot.version:
        raise InvalidArgument(
            f"{table}: asked to checkpoint version {options.version} of a snapshot at {snapshot.version}"
        )
    check_writable(snapshot.protocol, table, "checkpoint")
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    metadata = snapshot.metadata
    config = metadata.configuration
    tombstone_retention = table_retention(
        snapshot.metadata, table, DELETED_FILE_RETENTION_DURATION, DEFAULT_DELETED_FILE_RETENTION
    )
    tombstone_cutoff = cutoff_ms(tombstone_retention, now_ms)
    txn_cutoff = (
        cutoff_ms(table_retention(snapshot.metadata, table, SET_TRANSACTION_RETENTION_DURATION, ""), now_ms)
        if SET_TRANSACTION_RETENTION_DURATION in config
        else None
    )
    files = snapshot.files
    keyed = _keyed(snapshot)
    if keyed and writes_stats_as_struct(metadata):  # typed stats are derived per object: from full rows
        return _plan_whole(snapshot, options, storage_options, now_ms)
    columns = files.columns if isinstance(files, LiveFiles) and not writes_stats_as_struct(metadata) else []
    v2 = "v2Checkpoint" in enabled_features(snapshot.protocol)

    def select(live: Mapping[tuple[str, str | None], Add]) -> list[CheckpointAction]:
        with bulk_load():  # a tuple per action to sort: no collector pass over the snapshot meanwhile
            return select_actions(
                snapshot.protocol,
                metadata,
                snapshot.txns,
                live,
                snapshot.tombstones,
                with_table_actions=True,
                tombstone_cutoff_ms=tombstone_cutoff,
                txn_cutoff_ms=txn_cutoff,
                domains=snapshot.domains,
                v2_version=snapshot.version if v2 else None,
            )

    actions = select(files.objects if columns else files)  # type: ignore[attr-defined]
    kinds = Counter(map(type, actions))
    head = len(actions) - kinds[Add] - kinds[Remove]  # the table's actions lead, file actions after
    kept_txns = [a for a in actions[:head] if isinstance(a, Txn)]
    kept_domains = [a for a in actions[:head] if isinstance(a, DomainMetadata)]
    kept_removes = [a for a in actions if type(a) is Remove] if kinds[Remove] else []
    listing = snapshot.listing
    already = snapshot.version in listing.checkpoints
    parts: list[CheckpointPart] = []
    rows: CheckpointRows | None = None
    part_size = options.part_size
    if not already or options.force:

        def schema_of(selected: list[CheckpointAction]) -> pa.Schema:
            adds = [a for a in selected if type(a) is Add]  # the selected objects: not built twice
            return checkpoint_schema(
                snapshot.protocol,
                metadata,
                txns=kept_txns,
                adds=adds,
                removes=kept_removes,
                domains=kept_domains,
                v2=v2,
            )

        arrow_schema = schema_of(actions)
        if keyed and not _schema_holds(arrow_schema, columns):
            return _plan_whole(snapshot, options, storage_options, now_ms)
        column_rows = (
            [pa.StructArray.from_arrays([c.paths], names=["path"]) for c in columns]  # order and parts: paths suffice
            if keyed
            else cast_add_rows(columns, arrow_schema.field("add").type)
            if columns
            else None
        )
        if columns and column_rows is None:  # rows the schema cannot take as they are: all as objects
            actions = select(files)
            arrow_schema = schema_of(actions)
        schema = schema_to_text(arrow_schema)
        rows = CheckpointRows(actions[:head], cast(list[Add | Remove], actions[head:]), column_rows)
        if v2:  # a V2 checkpoint is one file
            part_size = max(len(rows), 1)
        ranges = rows.ranges(part_size)
        names = (
            [f"{snapshot.version:020d}.checkpoint.{uuid.uuid4()}.parquet"]
            if v2
            else checkpoint_file_names(snapshot.version, len(ranges))
        )
        for index, ((start, end), name) in enumerate(zip(ranges, names, strict=True)):
            adds, removes = rows.counts(start, end)
            parts.append(
                CheckpointPart(
                    table_root=table,
                    storage=storage_options,
                    version=snapshot.version,
                    part=index + 1,
                    parts=len(ranges),
                    location=join(table, LOG_DIR, name),
                    first_path=None if index == 0 else rows.path(start),
                    end_path=rows.path(end) if end < len(rows) else None,
                    actions=end - start,
                    add_files=adds,
                    remove_tombstones=removes,
                    tombstone_cutoff_ms=tombstone_cutoff,
                    txn_cutoff_ms=txn_cutoff,
                    arrow_schema=schema,
                )
            )
    plan = CheckpointPlan(
        table_root=table,
        version=snapshot.version,
        latest_version=listing.latest_version if listing.latest_version is not None else snapshot.version,
        already_checkpointed=already,
        previous_checkpoint_version=max((v for v in listing.checkpoints if v < snapshot.version), default=None),
        last_checkpoint_version=listing.last_checkpoint.version if listing.last_checkpoint else None,
        part_size=part_size,
        actions=len(rows) if rows is not None else len(actions) + sum(len(c) for c in columns),
        add_files=len(snapshot.files),
        remove_tombstones=len(kept_removes),
        expired_tombstones=len(snapshot.tombstones) - len(kept_removes),
        txns=len(kept_txns),
        expired_txns=len(snapshot.txns) - len(kept_txns),
        tombstone_cutoff_ms=tombstone_cutoff,
        txn_cutoff_ms=txn_cutoff,
        parts=parts,
    )
    if keyed and rows is not None:  # the second pass reads the winners' rows again: no snapshot kept
        plan._stream = StreamedRows.of(rows.head, rows.objects, columns)
    else:
        plan._snapshot = snapshot
        plan._rows = rows
    return plan


def _keyed(snapshot: DeltaSnapshot) -> bool:
    """Whether some of the snapshot's files are cut to keys (loaded ``keys_only``)."""
    files = snapshot.files
    return isinstance(files, LiveFiles) and any(c.source is not None for c in files.columns)


def _schema_holds(schema: pa.Schema, columns: list[AddColumn]) -> bool:
    """Whether the checkpoint schema's ``add`` has a place for every field the Arrow rows set (keyed
    rows: the fields their file's rows set; others: cast now): where it has not, the whole-table
    route writes them as objects in a widened schema, and the two-pass route must not differ."""
    add_type = schema.field("add").type
    names = set(add_type.names) | {"stats"}  # rows' stats go when the table writes none
    return all(
        c.source.fields <= names if c.source is not None else cast_add_struct(c.struct, add_type) is not None
        for c in columns
    )


def _plan_whole(
    snapshot: DeltaSnapshot, options: CheckpointOptions, storage_options: StorageOptions, now_ms: int | None
) -> CheckpointPlan:
    """The plan from the full rows: for keyed rows the two-pass route cannot write as the whole-table
    route would."""
    table = snapshot.table_root
    full = load_snapshot(
        open_storage(table, storage_options), table, version=snapshot.version, listing=snapshot.listing
    )
    return plan_checkpoint(full, options, storage_options, now_ms=now_ms)


# --- execute: a part, on a Spark task or on the driver ---------------------------------------------


def _write(storage: Storage, part: CheckpointPart, actions: list[CheckpointAction], started: float) -> PartWritten:
    """Encode and store one part; refuses to write a part whose content differs from the plan's count."""
    counts = Counter(map(type, actions))
    encoded = _encoded(part, lambda: checkpoint_bytes(encode_actions(actions, schema_from_text(part.arrow_schema))))
    return _store(storage, part, encoded, len(actions), counts[Add], counts[Remove], started)


def _encoded(part: CheckpointPart, encode: Callable[[], bytes]) -> bytes:
    """``encode()``, the part's bytes; an action its schema cannot hold (a field outside its type, such
    as a ``long`` past 2^63-1 another writer recorded) is refused naming the part's file."""
    try:
        with bulk_load():
            return encode()
    except ProtocolError as exc:
        raise ProtocolError(f"{part.location}: {exc}") from exc


def _store(
    storage: Storage, part: CheckpointPart, payload: bytes, actions: int, add_files: int, removes: int, started: float
) -> PartWritten:
    if (actions, add_files, removes) != (part.actions, part.add_files, part.remove_tombstones):
        raise ProtocolError(
            f"{part.location}: part {part.part} of {part.parts} would hold {actions} actions "
            f"({add_files} adds, {removes} tombstones) but the plan counted {part.actions} "
            f"({part.add_files} adds, {part.remove_tombstones} tombstones); the log of version {part.version} "
            "changed while checkpointing (was it expired or rewritten?)"
        )
    storage.write(part.location, payload)  # atomic per object: a reader sees all of it or nothing
    return PartWritten(
        part=part.part,
        location=part.location,
        actions=actions,
        add_files=add_files,
        bytes=len(payload),
        seconds=time.monotonic() - started,
    )


def _part_actions(
    part: CheckpointPart,
    protocol: Protocol,
    metadata: Metadata,
    txns: dict[str, Txn],
    files: dict[tuple[str, str | None], Add],
    tombstones: dict[tuple[str, str | None], Remove],
    domains: dict[str, DomainMetadata],
) -> list[CheckpointAction]:
    actions = select_actions(
        protocol,
        metadata,
        txns,
        files,
        tombstones,
        with_table_actions=part.part == 1,
        tombstone_cutoff_ms=part.tombstone_cutoff_ms,
        txn_cutoff_ms=part.txn_cutoff_ms,
        domains=domains,
        v2_version=part.version if is_uuid_named(part.location) else None,
    )
    return [a for a in actions if (path := _file_path(a)) is None or part.holds(path)]


def write_parts_on_driver(plan: CheckpointPlan) -> list[PartWritten]:
    """Write every part of ``plan`` in this process (the usual case: one part), from the snapshot it
    was planned from when the plan still holds it, streamed from the sources when it planned from
    keys (:mod:`lakeops.delta.checkpoint_stream`), else by :func:`write_part`."""
    rows = plan._rows
    if plan._stream is not None:
        return _write_streamed(plan, plan._stream)
    if plan._snapshot is None or rows is None:
        return [write_part(part) for part in plan.parts]
    return [
        _write_rows(part, rows, start, end)
        for part, (start, end) in zip(plan.parts, rows.ranges(plan.part_size), strict=True)
    ]


def _write_rows(part: CheckpointPart, rows: CheckpointRows, start: int, end: int) -> PartWritten:
    """Store positions ``[start, end)`` of ``rows`` as ``part``."""
    started = time.monotonic()
    storage = open_storage(part.table_root, part.storage)
    payload = _encoded(part, lambda: rows.parquet(start, end, schema_from_text(part.arrow_schema)))
    return _store(storage, part, payload, end - start, *rows.counts(start, end), started)


def _write_streamed(plan: CheckpointPlan, stream: StreamedRows) -> list[PartWritten]:
    """The second pass: each part from the rows it holds, read again from their sources."""
    if not plan.parts:
        return []
    storage = open_storage(plan.table_root, plan.parts[0].storage)
    add_type = schema_from_text(plan.parts[0].arrow_schema).field("add").type
    parts = part_rows(storage, stream, plan.parts, add_type)
    return [_write_rows(part, rows, 0, len(rows)) for part, rows in zip(plan.parts, parts, strict=True)]


def _segment_to_replay(listing: LogListing, part: CheckpointPart) -> LogSegment:
    """The log segment of ``part.version``, avoiding a complete checkpoint of that very version when
    the commits allow: with ``--force`` sibling tasks are replacing its parts while this one reads."""
    if part.version in listing.checkpoints:
        others = {v: c for v, c in listing.checkpoints.items() if v != part.version}
        try:
            return segment_for_version(replace(listing, checkpoints=others), part.table_root, part.version)
        except VersionNotFound:
            pass  # the commits before it are gone: that checkpoint is the only way to the version
    return segment_for_version(listing, part.table_root, part.version)


def write_part(part: CheckpointPart) -> PartWritten:
    """The Spark task: replay the log segment of ``part.version`` keeping only the file actions of the
    part's path range (a path's actions all fall in one range, so reconciliation is unaffected), then
    write the part."""
    started = time.monotonic()
    storage = open_storage(part.table_root, part.storage)
    segment = _segment_to_replay(list_log(storage, part.table_root), part)
    with bulk_load():
        replay = _replay_part(storage, segment, part)
    if replay.protocol is None or replay.metadata is None:
        raise ProtocolError(f"{part.table_root}: version {part.version} has no protocol or metaData action")
    actions = _part_actions(
        part, replay.protocol, replay.metadata, replay.txns, replay.files, replay.tombstones, replay.domains
    )
    return _write(storage, part, actions, started)


def _replay_part(storage: Storage, segment: LogSegment, part: CheckpointPart) -> Replay:
    replay = Replay(part.table_root)
    log_dir = join(part.table_root, LOG_DIR)
    if segment.checkpoint is not None:
        for info in segment.checkpoint.files:
            replay.apply_checkpoint(
                a
                for a in read_checkpoint_file(storage, log_dir, info.path)
                if not isinstance(a, Add | Remove) or part.holds(a.path)
            )
    for version, info in segment.replay_files():
        commit = parse_commit(read_replay_file(storage, info), version, info.path)
        replay.apply_commit(
            replace(
                commit,
                adds=[a for a in commit.adds if part.holds(a.path)],
                removes=[r for r in commit.removes if part.holds(r.path)],
            )
        )
    return replay


# --- finalize: driver ------------------------------------------------------------------------------


#: Conditional replaces of ``_last_checkpoint`` tried while other writers keep moving it.
_POINTER_ATTEMPTS = 10


def _point(storage: Storage, location: str, pointer: LastCheckpoint) -> bool:
    """Make ``_last_checkpoint`` name ``pointer``, unless it names a newer checkpoint already (readers
    must not move backwards). Only a pointer this run read is replaced (compare-and-swap; created if
    absent), so one another writer moved meanwhile is read again first; a missing or corrupt one is
    replaced. Whether ``pointer`` was written."""
    payload = render_last_checkpoint(pointer)
    for _ in range(_POINTER_ATTEMPTS):
        try:
            raw, token = storage.read_versioned(location)
        except NotFound:
            try:
                storage.put_if_absent(location, payload)
                return True
            except AlreadyExists:
                continue  # another writer created it first: read theirs
        try:
            current: LastCheckpoint | None = parse_last_checkpoint(raw, location)
        except CorruptFile:
            current = None
        if current is not None and current.version > pointer.version:
            return False
        try:
            storage.replace_if_match(location, payload, token)
            return True
        except Superseded:
            continue
    raise CommitConflict(f"{location}: other writers kept moving it; the checkpoint's parts are complete, retry")


def finalize_checkpoint(
    plan: CheckpointPlan, written: list[PartWritten], storage_options: StorageOptions
) -> LastCheckpoint | None:
    """Check every part is in place, then point ``_last_checkpoint`` at the new checkpoint.

    Returns the pointer written, or None when the current pointer already names a newer version
    (a checkpoint of an older ``--version`` must not move readers backwards).
    """
    if sorted(w.part for w in written) != [p.part for p in plan.parts]:
        raise InvalidArgument(f"{plan.table_root}: written parts do not match the plan's {len(plan.parts)} parts")
    storage = open_storage(plan.table_root, storage_options)
    for part in plan.parts:
        if not storage.exists(part.location):
            raise NotFound(f"{part.location}: checkpoint part {part.part} of {part.parts} is missing after writing")
    pointer = LastCheckpoint(
        version=plan.version,
        size=sum(w.actions for w in written),
        parts=len(plan.parts) if len(plan.parts) > 1 else None,
        sizeInBytes=sum(w.bytes for w in written),
        numOfAddFiles=sum(w.add_files for w in written),
    )
    return pointer if _point(storage, join(plan.table_root, LOG_DIR, LAST_CHECKPOINT), pointer) else None
