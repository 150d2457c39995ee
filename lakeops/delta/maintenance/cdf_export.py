"""Exporting a Delta table's change data feed into a Delta table of change rows (``lakeops cdc``).

plan (driver) → :func:`extract_unit` per batch of change files (Spark task) → :func:`commit_export`.

The reading rules are :mod:`lakeops.delta.cdf` ("Add CDC File", "Reader Requirements for
AddCDCFile", "Deletion Vectors", "Column Mapping"); the output is written by
:mod:`lakeops.delta.writer`. The output table is unpartitioned and holds the source's logical
columns plus ``_change_type``, ``_commit_version`` and ``_commit_timestamp``.

Idempotency ("Transaction Identifiers"): every commit to the output carries
``txn(appId = source metaData.id, version = last source version extracted)``, and the output's
``metaData.configuration`` records the source (``lakeops.cdc.sourceId``, ``lakeops.cdc.source``)
and the first source version it holds (``lakeops.cdc.firstVersion``). The output therefore always
holds exactly the changes of source versions ``firstVersion..txn.version``, each once:

* a range already inside it is reported and nothing is written;
* a range overlapping its end is extracted from ``txn.version + 1`` only (no duplicate rows);
* a range that starts before ``firstVersion``, or after ``txn.version + 1`` (a gap), is refused —
  either would break "contiguous, each version once" and with it every later idempotency answer.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import cast

from pydantic import BaseModel, ConfigDict, Field

from lakeops.delta.actions import Metadata, Txn
from lakeops.delta.cdf import (
    ChangeFeed,
    ChangeFile,
    change_feed_schema,
    load_feed_end,
    plan_change_feed,
    read_change_rows,
    require_files_present,
    rows_by_change_type,
)
from lakeops.delta.commit import CommitResult
from lakeops.delta.schema import ColumnMappingMode, parse_schema
from lakeops.delta.snapshot import DeltaSnapshot
from lakeops.delta.writer import (
    DataFileWriter,
    TargetTable,
    WrittenFile,
    append_files,
    new_table_metadata,
    read_target,
)
from lakeops.errors import InvalidArgument
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import is_within, normalize

SOURCE_ID_KEY = "lakeops.cdc.sourceId"
SOURCE_KEY = "lakeops.cdc.source"
FIRST_VERSION_KEY = "lakeops.cdc.firstVersion"
#: Input bytes one task reads (and writes as one output file) at most, unless a single file is bigger.
DEFAULT_UNIT_BYTES = 128 * 1024 * 1024
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


class ExportResult(BaseModel):
    unit_id: int
    written: list[WrittenFile]
    rows_by_change_type: dict[str, int]
    files_read: int
    bytes_read: int
    seconds: float


class ExportPlan(BaseModel):
    """Immutable, printable plan: source versions ``from_version..to_version`` into the output table
    as it was at ``output_version`` (None: the first commit creates it with ``output_metadata``)."""

    model_config = ConfigDict(frozen=True)

    table_root: str
    output_root: str
    source_id: str
    requested_from: int
    from_version: int
    to_version: int
    output_version: int | None
    output_metadata: Metadata
    extracted_through: int | None
    already_extracted: bool
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
    """The output's metadata (existing, or new for ``requested_from``) and the last source version it
    holds; refuses an output that holds another table's changes or is not a change feed table."""
    source_id = end.metadata.id
    schema = change_feed_schema(parse_schema(end.metadata.schema_string))
    if not target.exists:
        configuration = {SOURCE_ID_KEY: source_id, SOURCE_KEY: end.table_root, FIRST_VERSION_KEY: str(requested_from)}
        return new_table_metadata(schema, configuration=configuration), None
    metadata = target.metadata
    assert metadata is not None
    held = metadata.configuration.get(SOURCE_ID_KEY)
    through = target.txn_version(source_id)
    if held is not None and held != source_id:
        raise InvalidArgument(
            f"{target.root}: holds the changes of table {metadata.configuration.get(SOURCE_KEY)} (id {held}), "
            f"not of {end.table_root} (id {source_id}); choose another --output location"
        )
    if held is None or through is None or FIRST_VERSION_KEY not in metadata.configuration:
        raise InvalidArgument(
            f"{target.root}: not a change feed table written by lakeops cdc (no {SOURCE_ID_KEY}, "
            f"{FIRST_VERSION_KEY} or transaction of source {source_id}); choose a new --output location"
        )
    if parse_schema(metadata.schema_string) != schema:
        raise InvalidArgument(
            f"{target.root}: its schema differs from the change rows of {end.table_root} at version {end.version} "
            f"(the source schema changed?); export the new versions into a new --output location"
        )
    return metadata, through


def _effective_from(target: TargetTable, metadata: Metadata, through: int | None, requested: int, end: int) -> int:
    """The first version still to extract; ``end + 1`` when the output already holds the range."""
    if through is None:
        return requested
    first = int(metadata.configuration[FIRST_VERSION_KEY])
    if requested < first:
        raise InvalidArgument(
            f"{target.root}: holds source versions {first}..{through} only; versions before {first} cannot be "
            f"added to it (extract {requested}..{end} into a new --output location)"
        )
    if end <= through:
        return end + 1
    if requested > through + 1:
        raise InvalidArgument(
            f"{target.root}: holds source versions {first}..{through}; starting at {requested} would leave "
            f"versions {through + 1}..{requested - 1} out; use --from {through + 1} or lower"
        )
    return through + 1


def plan_export(location: str, options: ExportOptions, storage_options: StorageOptions) -> ExportPlan:
    """Plan the extraction: which source versions are still missing from the output, which files hold
    their changes (all present, or :class:`~lakeops.errors.VersionNotFound`), and how they are batched."""
    source_root, output_root = normalize(location), normalize(options.output)
    if is_within(source_root, output_root) or is_within(output_root, source_root):
        raise InvalidArgument(
            f"{source_root}: the output {output_root} must lie outside the source table (and not contain it)"
        )
    storage = open_storage(source_root, storage_options)
    end = load_feed_end(storage, source_root, options.to_version)
    if end.version < options.from_version:
        raise InvalidArgument(
            f"{source_root}: the range {options.from_version}..{end.version} is empty (it ends before it starts)"
        )
    output_storage = open_storage(output_root, storage_options)
    target = read_target(output_storage, output_root)
    if not target.exists and next(iter(output_storage.list(output_root)), None) is not None:
        raise InvalidArgument(
            f"{output_root}: holds files but no Delta table; choose an empty or new --output location"
        )
    metadata, through = _output_state(target, end, options.from_version)
    start = _effective_from(target, metadata, through, options.from_version, end.version)
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
    started = time.monotonic()
    storage = open_storage(unit.table_root, unit.storage)
    schema = parse_schema(unit.schema_string)
    mode = cast(ColumnMappingMode, unit.column_mapping_mode)
    writer = DataFileWriter(change_feed_schema(schema))
    counts: Counter[str] = Counter()
    for change in unit.changes:
        rows = read_change_rows(storage, unit.table_root, change, schema, mode, unit.partition_columns)
        counts.update(rows_by_change_type(rows))
        writer.write(rows)
    written = writer.finish(open_storage(unit.output_root, unit.storage), unit.output_root)
    return ExportResult(
        unit_id=unit.unit_id,
        written=[written] if written is not None else [],
        rows_by_change_type=dict(counts),
        files_read=len(unit.changes),
        bytes_read=unit.bytes,
        seconds=time.monotonic() - started,
    )


# --- commit: driver --------------------------------------------------------------------------------


def commit_export(
    plan: ExportPlan, results: list[ExportResult], storage_options: StorageOptions
) -> CommitResult | None:
    """Append the written files and the source's progress marker as one output version (creating
    the output on its first run); None when the output already held the range.

    A range without row changes (only OPTIMIZE, say) still commits its marker, so it is not planned again.
    """
    if plan.already_extracted:
        return None
    if {r.unit_id for r in results} != {u.unit_id for u in plan.units}:
        raise InvalidArgument(f"{plan.table_root}: extraction results do not match the plan's units")
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
            "sourceVersions": f"{plan.from_version}..{plan.to_version}",
        },
    )


def written_locations(results: list[ExportResult]) -> list[str]:
    """Every file this attempt wrote: the only files an abort may delete."""
    return [w.location for r in results for w in r.written]
