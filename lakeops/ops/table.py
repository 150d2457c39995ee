"""A table handle: one table found, its format detected and its state read once, for every
operation, audit record and observation that a call (or a planner pass, or a sensor tick) makes of it.

:func:`open_table` (``lakeops.open``) turns a registry name into its entry's address
(:func:`~lakeops.ops.target.lookup_name`), and the :class:`Table` it returns detects the format
(:attr:`Table.target`), knows its root (:attr:`Table.root`) and reads the table's latest state
(Delta: the log replayed into a snapshot; Iceberg: the metadata its catalog points at) on first use,
each once, as pyiceberg's ``Table`` holds its loaded metadata and delta-rs's builders take an
already-loaded snapshot. Operations *plan* from that state; their *commits* read the table again,
as the commit rule asks (a commit's outcome and its conflicts are read from the table, never from a
cached state). An Icechunk repository's state is its format and refs, read once with one reader that
keeps the snapshots and manifests the planners decode
(:class:`~lakeops.icechunk.versioned.RepositoryState`).

The cached state is the table as it was when first read: :meth:`Table.refresh` forgets it, which
:mod:`lakeops.api` does after every run that may have changed the table (not after a dry run or an
``inspect``).
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Literal

from lakeops.ops.target import (
    CatalogOptions,
    IcebergTarget,
    ResolvedName,
    Target,
    lookup_name,
    require_declared,
    resolve_target,
    table_root,
)
from lakeops.storage import Storage, StorageOptions, open_storage
from lakeops.storage.uri import normalize

if TYPE_CHECKING:
    from datetime import datetime

    from lakeops.delta.log_segment import LogListing
    from lakeops.delta.snapshot import DeltaSnapshot
    from lakeops.iceberg.table import IcebergTable
    from lakeops.icechunk.versioned import RepositoryState

__all__ = ["Table", "as_table", "handle_of", "open_table"]

#: How much of each Delta file a snapshot keeps: everything, ``numRecords`` of the stats only
#: (planners that read no other statistic), or keys only (a large checkpoint's first pass).
Cut = Literal["full", "row_counts", "keys"]


class Table:
    """One table (an address: a location, or an Iceberg catalog identifier with ``catalog``), found
    and read at most once. ``loads`` counts the reads of its latest state made through it."""

    def __init__(self, name: ResolvedName, storage_options: StorageOptions, *, target: Target | None = None) -> None:
        self._name = name
        self.address = name.address
        self.catalog = CatalogOptions.model_validate(name.catalog.catalog_fields())
        self.storage_options = storage_options
        self.loads = 0
        self._target = target
        self._snapshots: dict[Cut, DeltaSnapshot] = {}
        self._listing: LogListing | None = None
        self._iceberg: IcebergTable | None = None
        self._icechunk: RepositoryState | None = None

    def __repr__(self) -> str:
        return f"Table({self.address!r})"

    def __str__(self) -> str:
        return self.address

    @property
    def target(self) -> Target:
        """Where the table is and which format it has (the format detected on first use, once)."""
        if self._target is None:
            target = resolve_target(self.address, self.catalog, self.storage_options)
            require_declared(self._name, target.format)
            self._target = target
        return self._target

    @cached_property
    def root(self) -> str:
        """The table's normalised root (a catalog table's metadata ``location``, read from its loaded
        state), where lakeops keeps its trash and audit records."""
        target = self.target
        if isinstance(target, IcebergTarget) and target.ref.location is None:
            # A catalog table's metadata location, from the state loaded for the operations.
            return normalize(self.iceberg_table().metadata.location, literal=True)
        return table_root(target, self.storage_options)

    def storage(self) -> Storage:
        """The storage of a Delta table or Icechunk repository, confined to its root."""
        return open_storage(self.root, self.storage_options)

    @property
    def holds_state(self) -> bool:
        """Whether the table's latest state has been read (and is held) already."""
        return self._iceberg is not None or self._icechunk is not None or "full" in self._snapshots

    def refresh(self) -> None:
        """Forget the state read so far: the next plan reads the table again."""
        self._snapshots.clear()
        self._listing = None
        self._iceberg = None
        self._icechunk = None

    def icechunk_state(self) -> RepositoryState:
        """The Icechunk repository's format, refs and reader, read on first use (planners only: a
        commit reads the repository again)."""
        from lakeops.icechunk.versioned import load_repository_state

        self.target.require("icechunk", operation="reading an Icechunk repository")
        if self._icechunk is None:
            self._icechunk = load_repository_state(self.storage(), self.root)
            self.loads += 1
        return self._icechunk

    def iceberg_table(self) -> IcebergTable:
        """The Iceberg table's metadata as its catalog points at it, loaded on first use."""
        from lakeops.iceberg.table import load_table

        target = self.target
        target.require("iceberg", operation="reading Iceberg metadata")
        assert isinstance(target, IcebergTarget)
        if self._iceberg is None:
            self._iceberg = load_table(target.ref, self.storage_options)
            self.loads += 1
        return self._iceberg

    def delta_listing(self) -> LogListing:
        """The Delta log's listing, the one the cached snapshot was replayed from."""
        from lakeops.delta.log_segment import list_log

        if self._snapshots:
            return next(iter(self._snapshots.values())).listing
        if self._listing is None:
            self._listing = list_log(self.storage(), self.root)
        return self._listing

    def delta_snapshot(self, cut: Cut = "full") -> DeltaSnapshot:
        """The Delta table at its latest version, replayed on first use. A full snapshot serves every
        request; a cut one (``row_counts``, ``keys``: :func:`lakeops.delta.snapshot.load_snapshot`)
        only requests for the same cut, so no file is written back from stats it lacks."""
        from lakeops.delta.snapshot import load_snapshot

        self.target.require("delta", operation="reading the Delta log")
        cached = self._snapshots.get("full") or self._snapshots.get(cut)
        if cached is None:
            cached = self._snapshots[cut] = load_snapshot(
                self.storage(),
                self.root,
                listing=self.delta_listing(),
                row_counts_only=cut == "row_counts",
                keys_only=cut == "keys",
            )
            self.loads += 1
        return cached

    def delta_snapshot_at(self, *, version: int | None, timestamp: datetime | None = None) -> DeltaSnapshot:
        """The Delta table at ``version`` or as of ``timestamp`` (both None: the latest, cached); a
        past version is read from the cached listing and not kept."""
        from lakeops.delta.snapshot import load_snapshot

        if version is None and timestamp is None:
            return self.delta_snapshot()
        self.target.require("delta", operation="reading the Delta log")
        return load_snapshot(
            self.storage(), self.root, version=version, timestamp=timestamp, listing=self.delta_listing()
        )


def open_table(
    address: str, catalog: CatalogOptions | None = None, *, storage_options: StorageOptions | None = None
) -> Table:
    """A handle on ``address``: a location, a registry name (its entry's address and catalog), or with
    ``catalog`` an Iceberg catalog identifier. Nothing is read until the handle is used, but a bare
    name neither in the registry nor a path here is refused now, and a registry entry that declares
    its format is detected now and checked (:func:`~lakeops.ops.target.lookup_name`)."""
    name = lookup_name(address, catalog or CatalogOptions())
    table = Table(name, storage_options or StorageOptions())
    if name.declared is not None:
        _ = table.target  # a registry entry's declared format is checked now, against the one detected
    return table


def as_table(table: Table | str, catalog: CatalogOptions, storage_options: StorageOptions) -> Table:
    """``table`` itself, or a handle on the address ``table`` (already resolved: no registry lookup)
    for the operations' own callers that pass a string."""
    return table if isinstance(table, Table) else Table(ResolvedName(table, catalog), storage_options)


def handle_of(source: Table | Target, storage_options: StorageOptions) -> Table:
    """``source`` itself, or a handle on a target already resolved (nothing detected again)."""
    if isinstance(source, Table):
        return source
    return Table(ResolvedName(str(source), CatalogOptions()), storage_options, target=source)
