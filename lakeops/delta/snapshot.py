"""A Delta table's state at one version ("Delta Table Specification", "Action Reconciliation").

Replay applies the newest complete checkpoint, then each commit in order. Logical files are keyed by
``(path, deletionVector.uniqueId)``: within a version removes are applied before adds, which is
equivalent to "keep the newest reference" because one version never holds an add and a remove of
the same key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from lakeops.delta.actions import Add, DomainMetadata, Metadata, Protocol, Remove, Txn, bulk_load
from lakeops.delta.checkpoint_files import read_checkpoint_file
from lakeops.delta.checkpoint_reader import AddColumn
from lakeops.delta.commit_columns import parse_commit_columnar
from lakeops.delta.commit_file import CommitActions
from lakeops.delta.commit_time import CommitClock, ict_enablement_version, next_in_commit_timestamp
from lakeops.delta.features import check_readable
from lakeops.delta.live_files import ColumnReplay, FileKey, LiveFiles
from lakeops.delta.log_compaction import read_replay_file
from lakeops.delta.log_segment import (
    LOG_DIR,
    LogListing,
    LogSegment,
    list_log,
    segment_for_version,
)
from lakeops.delta.schema import parse_schema
from lakeops.delta.type_widening import TYPE_CHANGES_KEY, check_type_changes
from lakeops.errors import CorruptFile, InvalidArgument, ProtocolError
from lakeops.integer_types import BOUNDS
from lakeops.storage import Storage
from lakeops.storage.uri import join, normalize, resolve

__all__ = ["DeltaSnapshot", "FileKey", "Replay", "load_snapshot"]


@dataclass
class DeltaSnapshot:
    """Protocol, metadata, live files, tombstones and app transactions at ``version``.

    ``files`` is read-only: a :class:`~lakeops.delta.live_files.LiveFiles` keeps a checkpoint's adds
    as Arrow rows and builds ``Add`` objects as they are read.
    """

    table_root: str
    version: int
    timestamp_ms: int
    protocol: Protocol
    metadata: Metadata
    files: Mapping[FileKey, Add]
    tombstones: dict[FileKey, Remove]
    txns: dict[str, Txn]
    segment: LogSegment
    listing: LogListing = field(repr=False)
    #: Live metadata domains by name, tombstones left out
    #: (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#domain-metadata).
    domains: dict[str, DomainMetadata] = field(default_factory=dict)

    @property
    def partition_columns(self) -> list[str]:
        return self.metadata.partition_columns

    def file_location(self, path: str) -> str:
        """Absolute location of a file an action names. Action paths are URIs: relative ones are
        percent-decoded and joined to the root; absolute ones are decoded exactly once."""
        return resolve(self.table_root, path)

    def clock(self, storage: Storage) -> CommitClock:
        """Commit times of the listed versions, by this version's in-commit timestamp settings."""
        return CommitClock(storage, self.listing, ict_enablement_version(self.protocol, self.metadata))

    def require_next_commit(self) -> None:
        """Refuse, before a writer produces any file, a table no commit can follow: its version is the
        largest long (the next would be no version, "Delta Log Entries"), or its in-commit timestamp is
        (:func:`~lakeops.delta.commit_time.next_in_commit_timestamp`); the commit checks the timestamp
        again against versions that land meanwhile."""
        if self.version >= BOUNDS["long"][1]:
            raise ProtocolError(
                f"{self.table_root}: version {self.version} is the largest long: no later version can be committed"
            )
        info = self.listing.commits.get(self.version)
        if info is not None and ict_enablement_version(self.protocol, self.metadata) is not None:
            next_in_commit_timestamp(self.timestamp_ms, self.timestamp_ms, info.path)

    @property
    def commits_since_checkpoint(self) -> int:
        checkpoint = self.segment.checkpoint_version
        return self.version - checkpoint if checkpoint is not None else self.version + 1


class Replay:
    """The state a replay of log actions builds ("Action Reconciliation"): protocol, metadata, live
    files, tombstones, transactions. A checkpoint part replays into one too."""

    def __init__(self, table_root: str, *, row_counts_only: bool = False) -> None:
        self.table_root = table_root
        #: Arrow rows keep only ``numRecords`` of their stats (:meth:`AddColumn.with_row_counts_only`).
        self.row_counts_only = row_counts_only
        self.protocol: Protocol | None = None
        self.metadata: Metadata | None = None
        self.files: dict[FileKey, Add] = {}
        self.tombstones: dict[FileKey, Remove] = {}
        self.txns: dict[str, Txn] = {}
        self.domains: dict[str, DomainMetadata] = {}
        #: Adds kept as Arrow (checkpoint and large commits), and what commits said of their paths.
        self.columns = ColumnReplay()

    def apply_checkpoint(self, actions: Iterable[object]) -> None:
        files = self.files
        for action in actions:
            match action:
                case AddColumn():  # read with its stats already cut when the replay keeps row counts only
                    self.columns.add(action)
                case Add():
                    files[action.key] = action
                case Remove():
                    self.tombstones[action.key] = action
                case Txn():
                    self.txns[action.app_id] = action
                case DomainMetadata():
                    self.apply_domain(action)
                case Protocol():
                    self.protocol = action
                case Metadata():
                    self.metadata = action

    def _kept(self, column: AddColumn) -> AddColumn:
        return column.with_row_counts_only() if self.row_counts_only else column

    def apply_domain(self, action: DomainMetadata) -> None:
        """The latest action of a domain wins; a tombstone (``removed``) drops it from the state."""
        if action.removed:
            self.domains.pop(action.domain, None)
        else:
            self.domains[action.domain] = action

    def columns_are_keys(self) -> bool:
        """Whether the Arrow rows hold each key once and none the objects hold (so reading them as
        columns gives what applying them one by one would); false for a checkpoint that repeats a file."""
        return self.columns.are_keys(self.files)

    def live_files(self) -> LiveFiles:
        return LiveFiles(self.columns.live(), self.files)

    def apply_commit(self, commit: CommitActions, column: AddColumn | None = None) -> None:
        """One version: its removes, then its adds (``column``: its adds kept as Arrow, if any)."""
        if commit.protocol is not None:
            self.protocol = commit.protocol
        if commit.metadata is not None:
            self.metadata = commit.metadata
        for txn in commit.txns:
            self.txns[txn.app_id] = txn
        for domain in commit.domains:
            self.apply_domain(domain)
        files, tombstones = self.files, self.tombstones
        self.columns.next_version()
        self.columns.touch(commit.removes)
        self.columns.touch(commit.adds)
        for remove in commit.removes:
            key = remove.key
            files.pop(key, None)
            tombstones[key] = remove
        for add in commit.adds:
            key = add.key
            if tombstones:
                tombstones.pop(key, None)
            files[key] = add
        if column is not None:
            for key in self.columns.add(self._kept(column), files, tombstones):
                files.pop(key, None)
                tombstones.pop(key, None)


def load_snapshot(
    storage: Storage,
    table_root: str,
    *,
    version: int | None = None,
    timestamp: datetime | None = None,
    listing: LogListing | None = None,
    row_counts_only: bool = False,
    keys_only: bool = False,
) -> DeltaSnapshot:
    """Reconstruct the table at the latest version, at ``version``, or as of ``timestamp``.

    ``row_counts_only``: for planners that read no statistic but ``numRecords`` (compaction, VACUUM):
    files kept as Arrow rows hold their stats cut to it, a tenth of the memory; never for a snapshot
    whose files are written back (a checkpoint). ``keys_only``: a checkpoint's first pass: the
    checkpoint's Arrow rows hold only their path and row number (``AddColumn.source`` names their
    file), so no ``Add`` can be built of them; the checkpoint reads their full rows again.

    Raises :class:`~lakeops.errors.NotATable`, :class:`~lakeops.errors.VersionNotFound`,
    :class:`~lakeops.errors.CorruptFile` or :class:`~lakeops.errors.UnsupportedFeature` (a reader
    feature lakeops does not implement) — never returns a partial state.
    """
    if version is not None and timestamp is not None:
        raise InvalidArgument(f"{table_root}: give a version or a timestamp, not both")
    table_root = normalize(table_root)
    listing = listing or list_log(storage, table_root)
    if timestamp is not None:
        # Whether versions are dated by in-commit timestamps is the latest version's property.
        latest = load_snapshot(storage, table_root, listing=listing)
        version = latest.clock(storage).version_at(table_root, timestamp)
    segment = segment_for_version(listing, table_root, version)

    with bulk_load():
        protocol, metadata, replay = _replay(storage, table_root, segment, row_counts_only, keys_only)
    ts = (
        CommitClock(storage, listing, ict_enablement_version(protocol, metadata)).timestamp(segment.version)
        if segment.version in listing.commits
        else None
    )
    if ts is None and segment.checkpoint is not None:
        ts = segment.checkpoint.files[0].mtime_ms
    return DeltaSnapshot(
        table_root=table_root,
        version=segment.version,
        timestamp_ms=ts or 0,
        protocol=protocol,
        metadata=metadata,
        files=replay.live_files(),
        tombstones=replay.tombstones,
        txns=replay.txns,
        segment=segment,
        listing=listing,
        domains=replay.domains,
    )


def _replay(
    storage: Storage, table_root: str, segment: LogSegment, row_counts_only: bool, keys_only: bool
) -> tuple[Protocol, Metadata, Replay]:
    """The checkpoint then each commit of ``segment``, applied in order; refuses a state without a
    protocol or metadata, or with a reader feature lakeops does not implement."""
    replay = Replay(table_root, row_counts_only=row_counts_only)
    log_dir = join(table_root, LOG_DIR)
    if segment.checkpoint is not None:
        for part in segment.checkpoint.files:
            replay.apply_checkpoint(
                read_checkpoint_file(
                    storage, log_dir, part.path, columnar=True, counts_only=row_counts_only, keys_only=keys_only
                )
            )
        if not replay.columns_are_keys():
            replay = Replay(table_root, row_counts_only=row_counts_only)
            for part in segment.checkpoint.files:
                replay.apply_checkpoint(read_checkpoint_file(storage, log_dir, part.path))
        if replay.protocol is None or replay.metadata is None:
            raise CorruptFile(
                f"{segment.checkpoint.files[0].path}: checkpoint of version {segment.checkpoint.version} "
                "lacks a protocol or metaData action"
            )
        # Check the protocol as soon as it is known: an unknown reader feature may change what the
        # remaining files mean.
        check_readable(replay.protocol, table_root)
    for commit_version, info in segment.replay_files():
        partition_columns = replay.metadata.partition_columns if replay.metadata is not None else []
        commit, column = parse_commit_columnar(
            read_replay_file(storage, info), commit_version, info.path, partition_columns
        )
        if commit.protocol is not None:
            check_readable(commit.protocol, table_root)
        replay.apply_commit(commit, column)

    if replay.protocol is None or replay.metadata is None:
        raise ProtocolError(
            f"{table_root}: version {segment.version} has no {'protocol' if replay.protocol is None else 'metaData'} "
            "action (the first commit must contain both)"
        )
    check_readable(replay.protocol, table_root)
    if TYPE_CHANGES_KEY in replay.metadata.schema_string:  # parse the schema only when a change is recorded
        check_type_changes(parse_schema(replay.metadata), table_root)
    return replay.protocol, replay.metadata, replay
