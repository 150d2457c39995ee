"""Exporting a Delta table's change data feed into a Delta table of change rows (``lakeops cdc``).

plan (driver) → :func:`extract_unit` per batch of change files (Spark task) → :func:`commit_export`.

The reading rules are :mod:`lakeops.delta.cdf` ("Add CDC File", "Reader Requirements for
AddCDCFile", "Deletion Vectors", "Column Mapping"); the output is written by
:mod:`lakeops.delta.writer`. The output table is unpartitioned and holds the source's logical
columns plus ``_change_type``, ``_commit_version`` and ``_commit_timestamp``.

Idempotency ("Transaction Identifiers") is :mod:`lakeops.changefeed.table`'s: every
commit to the output carries ``txn(appId = source metaData.id, version = last source version
extracted)``, so the output holds the changes of source versions ``firstVersion..txn.version``, each
once; a range already held writes nothing, an overlapping one is extracted from ``txn.version + 1``,
an earlier start or a gap is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict, Field

from lakeops.changefeed.table import (
    DEFAULT_UNIT_BYTES,
    FIRST_VERSION_KEY,
    SOURCE_ID_KEY,
    SOURCE_KEY,
    ChangePlan,
    ExtractResult,
    commit_changes,
    open_output,
    output_state,
    start_position,
    write_changes,
    written_locations,
)
from lakeops.delta.actions import Metadata
from lakeops.delta.cdf import (
    ChangeFeed,
    ChangeFile,
    change_feed_schema,
    load_feed_end,
    plan_change_feed,
    read_change_rows,
    require_files_present,
)
from lakeops.delta.commit import CommitResult
from lakeops.delta.schema import ColumnMappingMode, parse_schema
from lakeops.delta.snapshot import DeltaSnapshot
from lakeops.delta.writer import TargetTable
from lakeops.errors import InvalidArgument
from lakeops.plan import CommitOutcome, MaintenancePlan
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize

#: One task's outcome: the shared shape of every change export.
ExportResult = ExtractResult

__all__ = [
    "FIRST_VERSION_KEY",
    "SOURCE_ID_KEY",
    "SOURCE_KEY",
    "ExportOptions",
    "ExportPlan",
    "ExportResult",
    "ExportUnit",
    "commit_export",
    "extract_unit",
    "plan_export",
    "written_locations",
]
#: Files one task reads at most: bounds a unit when the log does not record sizes (old removes).
MAX_FILES_PER_UNIT = 256


class ExportOptions(BaseModel):
    """What the user asked for: source versions ``from_version..to_version`` (default: latest) into ``output``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    from_version: int = Field(ge=0)
    to_version: int | None = Field(default=None, ge=0)
    output: str
    unit_bytes: int = Field(default=DEFAULT_UNIT_BYTES, gt=0)


class ExportUnit(BaseModel):
    """One task: change files read in order and written as one output data file."""

    model_config = ConfigDict(frozen=True)

    unit_id: int
    table_root: str
    output_root: str
    storage: StorageOptions
    schema_string: str
    partition_columns: list[str]
    column_mapping_mode: str
    changes: list[ChangeFile]

    @property
    def bytes(self) -> int:
        return sum(c.size or 0 for c in self.changes)


class ExportPlan(ChangePlan, MaintenancePlan[ExportUnit, ExtractResult]):
    """Immutable, printable plan: source versions ``from_version..to_version`` (positions are versions)."""

    format: ClassVar[str] = "delta"

    versions_from_change_files: int
    versions_from_file_actions: int
    units: list[ExportUnit]

    @property
    def versions(self) -> int:
        return 0 if self.already_extracted else self.to_version - self.from_version + 1

    @property
    def source_files(self) -> int:
        return sum(len(u.changes) for u in self.units)

    @property
    def source_bytes(self) -> int:
        return sum(u.bytes for u in self.units)

    @property
    def from_creation(self) -> bool:
        return self.requested_from == 0

    @property
    def versions_extracted(self) -> int:
        return self.versions

    @property
    def from_snapshot_id(self) -> None:
        """Delta versions have no snapshot ids (an Iceberg changelog's plan has)."""
        return None

    @property
    def to_snapshot_id(self) -> None:
        return None

    @property
    def snapshots(self) -> list[Any]:
        """Delta has no snapshots to summarise (an Iceberg changelog's plan lists them)."""
        return []

    def table_label(self) -> str:
        return self.table_root

    def work_units(self) -> list[ExportUnit]:
        return self.units

    def task(self) -> Callable[[ExportUnit], ExtractResult]:
        return extract_unit

    def commit(
        self,
        units: Sequence[ExportUnit],
        results: Sequence[ExtractResult],
        storage_options: StorageOptions,
        *,
        final: bool,
    ) -> CommitOutcome:
        return self.outcome(commit_export(self, list(results), storage_options))


def _units(feed: ChangeFeed, output_root: str, storage_options: StorageOptions, unit_bytes: int) -> list[ExportUnit]:
    """Consecutive change files (version order) packed up to ``unit_bytes`` / MAX_FILES_PER_UNIT."""
    batches: list[list[ChangeFile]] = []
    used = 0
    for change in feed.files:
        size = change.size or 0
        if not batches or used + size > unit_bytes or len(batches[-1]) >= MAX_FILES_PER_UNIT:
            batches.append([])
            used = 0
        batches[-1].append(change)
        used += size
    return [
        ExportUnit(
            unit_id=i,
            table_root=feed.table_root,
            output_root=output_root,
            storage=storage_options,
            schema_string=feed.snapshot.metadata.schema_string,
            partition_columns=feed.snapshot.partition_columns,
            column_mapping_mode=feed.column_mapping_mode,
            changes=batch,
        )
        for i, batch in enumerate(batches)
    ]


def _output_state(target: TargetTable, end: DeltaSnapshot, requested_from: int) -> tuple[Metadata, int | None]:
    """The output's metadata (existing, or new for ``requested_from``) and the last source version it holds."""
    return output_state(
        target,
        schema=change_feed_schema(parse_schema(end.metadata.schema_string)),
        source_id=end.metadata.id,
        source=end.table_root,
        first=requested_from,
        at=f"at version {end.version}",
    )


def plan_export(
    location: str, options: ExportOptions, storage_options: StorageOptions, *, latest: DeltaSnapshot | None = None
) -> ExportPlan:
    """Plan the extraction: which source versions are still missing from the output, which files hold
    their changes (all present, or :class:`~lakeops.errors.VersionNotFound`), and how they are batched.
    ``latest``: the source's latest snapshot, when the caller has read it (not read again)."""
    source_root = normalize(location)
    target = open_output(source_root, options.output, storage_options)
    output_root = target.root
    storage = open_storage(source_root, storage_options)
    end = load_feed_end(storage, source_root, options.to_version, latest=latest)
    if end.version < options.from_version:
        raise InvalidArgument(
            f"{source_root}: the range {options.from_version}..{end.version} is empty (it ends before it starts)"
        )
    metadata, through = _output_state(target, end, options.from_version)
    start = start_position(
        output_root,
        metadata,
        through,
        options.from_version,
        end.version,
        kind="versions",
        resume=lambda held: f"--from {held + 1} or lower",
    )
    already = start > end.version
    units: list[ExportUnit] = []
    from_cdc = from_actions = 0
    if not already:
        feed = plan_change_feed(storage, end, start)
        require_files_present(storage, feed)
        units = _units(feed, output_root, storage_options, options.unit_bytes)
        from_cdc = sum(1 for v in feed.versions if v.from_change_files)
        from_actions = len(feed.versions) - from_cdc
    return ExportPlan(
        table_root=source_root,
        output_root=output_root,
        source_id=end.metadata.id,
        requested_from=options.from_version,
        from_version=options.from_version if already else start,
        to_version=end.version,
        output_version=target.version,
        output_metadata=metadata,
        extracted_through=through,
        already_extracted=already,
        versions_from_change_files=from_cdc,
        versions_from_file_actions=from_actions,
        units=units,
    )


# --- execute: runs inside a Spark task -------------------------------------------------------------


def extract_unit(unit: ExportUnit) -> ExportResult:
    """Read the unit's change files and write their change rows as one output data file."""
    storage = open_storage(unit.table_root, unit.storage)
    schema = parse_schema(unit.schema_string)
    mode = cast(ColumnMappingMode, unit.column_mapping_mode)
    rows = (
        read_change_rows(storage, unit.table_root, change, schema, mode, unit.partition_columns)
        for change in unit.changes
    )
    return write_changes(
        unit.unit_id,
        rows,
        change_feed_schema(schema),
        unit.output_root,
        unit.storage,
        files_read=len(unit.changes),
        bytes_read=unit.bytes,
    )


# --- commit: driver --------------------------------------------------------------------------------


def commit_export(
    plan: ExportPlan, results: list[ExportResult], storage_options: StorageOptions
) -> CommitResult | None:
    """Append the written files and the source's progress marker as one output version (creating
    the output on its first run); None when the output already held the range.

    A range without row changes (only OPTIMIZE, say) still commits its marker, so it is not planned again.
    """
    return commit_changes(
        plan,
        (u.unit_id for u in plan.units),
        results,
        storage_options,
        {"source": plan.table_root, "sourceVersions": f"{plan.from_version}..{plan.to_version}"},
    )
