"""The Delta table that ``lakeops cdc`` appends change rows to, whatever the source's format.

Delta change feeds (:mod:`lakeops.changefeed.cdf_export`) and Iceberg changelogs
(:mod:`lakeops.iceberg.maintenance.changelog`) are exported the same way: Spark tasks write Parquet
files with :class:`~lakeops.delta.writer.DataFileWriter`, and the driver commits them in one output
version (:func:`commit_changes`, over :func:`~lakeops.delta.writer.append_files`).

Idempotency is Delta's "Transaction Identifiers": every commit carries ``txn(appId = source id,
version = the source position extracted last)``, and the output's ``metaData.configuration``
records the source (``lakeops.cdc.sourceId``, ``lakeops.cdc.source``) and the first position it
holds (``lakeops.cdc.firstVersion``). A *position* is any number that grows strictly along the
source's history (a Delta version, an Iceberg sequence number). The output therefore holds the
changes of positions ``firstVersion..txn.version``, each once:

* a range already inside it is reported and nothing is written;
* a range overlapping its end is extracted from after ``txn.version`` only (no duplicate rows);
* a range that starts before ``firstVersion``, or after ``txn.version`` (a gap), is refused —
  either would break "contiguous, each change once" and with it every later idempotency answer.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from lakeops.changefeed.defaults import DEFAULT_UNIT_BYTES
from lakeops.delta.actions import Metadata, Txn
from lakeops.delta.cdf import rows_by_change_type
from lakeops.delta.commit import CommitResult
from lakeops.delta.schema import StructType, parse_schema
from lakeops.delta.writer import (
    DataFileWriter,
    TargetTable,
    WrittenFile,
    append_files,
    new_table_metadata,
    read_target,
)
from lakeops.errors import InvalidArgument
from lakeops.plan import CommitOutcome
from lakeops.quarantine import AUDIT_DIR
from lakeops.storage import Storage, StorageOptions, open_storage
from lakeops.storage.local import is_abandoned_temp
from lakeops.storage.uri import is_within, join, normalize, relative_to

__all__ = [
    "DEFAULT_UNIT_BYTES",
    "FIRST_VERSION_KEY",
    "SOURCE_ID_KEY",
    "SOURCE_KEY",
    "ChangePlan",
    "ExtractResult",
    "commit_changes",
    "open_output",
    "require_empty_or_abandoned",
    "output_state",
    "start_position",
    "write_changes",
    "written_locations",
]

SOURCE_ID_KEY = "lakeops.cdc.sourceId"
SOURCE_KEY = "lakeops.cdc.source"
FIRST_VERSION_KEY = "lakeops.cdc.firstVersion"


class ExtractResult(BaseModel):
    """What one extraction task wrote (one output data file at most) and read."""

    unit_id: int
    written: list[WrittenFile]
    rows_by_change_type: dict[str, int]
    files_read: int
    bytes_read: int
    seconds: float


class ChangePlan(BaseModel):
    """What every change export plans: source positions ``from_version..to_version`` (``requested_from``
    as asked) into the output as it was at ``output_version`` (None: the first commit creates it with
    ``output_metadata``), which already held positions through ``extracted_through``."""

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

    # What every change export's MaintenancePlan shares (its units and commit are the format's).

    def result_type(self) -> type[ExtractResult]:
        return ExtractResult

    def work_bytes(self, units: Sequence[_SizedUnit]) -> int:
        return sum(u.bytes for u in units)

    def outcome(self, committed: CommitResult | None) -> CommitOutcome:
        """The output's commit as a :class:`~lakeops.plan.CommitOutcome` (None: the output already held the range)."""
        return (
            CommitOutcome()
            if committed is None
            else CommitOutcome(version=committed.version, attempts=committed.attempts, warnings=committed.warnings)
        )

    def discard(self, results: Sequence[ExtractResult], storage_options: StorageOptions) -> int:
        """Delete the files ``results`` wrote into the output (never anything else)."""
        paths = written_locations(results)
        return open_storage(self.output_root, storage_options).delete_many(paths) if paths else 0


class _SizedUnit(Protocol):
    @property
    def bytes(self) -> int: ...


def open_output(source_root: str, output: str, storage_options: StorageOptions) -> TargetTable:
    """The output table's state; refuses an output inside the source (or containing it) and a
    non-empty location that holds no Delta table."""
    output_root = normalize(output)
    if is_within(source_root, output_root) or is_within(output_root, source_root):
        raise InvalidArgument(
            f"{source_root}: the output {output_root} must lie outside the source table (and not contain it)"
        )
    output_storage = open_storage(output_root, storage_options)
    target = read_target(output_storage, output_root)
    if not target.exists:
        require_empty_or_abandoned(output_storage, output_root)
    return target


def _abandoned(relative: str) -> bool:
    """A file an export writes before its first commit: a data file (``<prefix>-<uuid>.zstd.parquet``
    at the top level) or a temporary file of a write that never finished."""
    top_level_data = "/" not in relative and relative.endswith(".zstd.parquet")
    return top_level_data or is_abandoned_temp(relative)


def require_empty_or_abandoned(storage: Storage, output_root: str) -> None:
    """Refuse a new output location holding anything but what a first export killed before its commit
    leaves behind, or the audit records of runs that failed before it (:mod:`lakeops.audit` records a
    cdc run under its output): a rerun must be able to create the table there (the leftovers stay
    unreferenced and VACUUM removes them once past the age floor), yet no other data is ever written over."""
    audit = join(output_root, AUDIT_DIR)
    for info in storage.list(output_root):
        relative = relative_to(output_root, info.path)
        if not _abandoned(relative) and not is_within(audit, info.path):
            raise InvalidArgument(
                f"{output_root}: holds files but no Delta table ({relative}); choose an empty or new --output location"
            )


def output_state(
    target: TargetTable, *, schema: StructType, source_id: str, source: str, first: int, at: str
) -> tuple[Metadata, int | None]:
    """The output's metadata (existing, or new for a range starting at position ``first``) and the
    last position it holds; refuses an output that holds another source's changes, is not a change
    table, or has another schema than ``schema`` (the change rows of ``source`` ``at`` its end)."""
    if not target.exists:
        configuration = {SOURCE_ID_KEY: source_id, SOURCE_KEY: source, FIRST_VERSION_KEY: str(first)}
        return new_table_metadata(schema, configuration=configuration), None
    metadata = target.metadata
    assert metadata is not None
    held = metadata.configuration.get(SOURCE_ID_KEY)
    through = target.txn_version(source_id)
    if held is not None and held != source_id:
        raise InvalidArgument(
            f"{target.root}: holds the changes of table {metadata.configuration.get(SOURCE_KEY)} (id {held}), "
            f"not of {source} (id {source_id}); choose another --output location"
        )
    if held is None or through is None or FIRST_VERSION_KEY not in metadata.configuration:
        raise InvalidArgument(
            f"{target.root}: not a change feed table written by lakeops cdc (no {SOURCE_ID_KEY}, "
            f"{FIRST_VERSION_KEY} or transaction of source {source_id}); choose a new --output location"
        )
    if parse_schema(metadata.schema_string) != schema:
        raise InvalidArgument(
            f"{target.root}: its schema differs from the change rows of {source} {at} "
            f"(the source schema changed?); export the later changes into a new --output location"
        )
    return metadata, through


def start_position(
    output_root: str,
    metadata: Metadata,
    through: int | None,
    requested: int,
    end: int,
    *,
    kind: str,
    resume: Callable[[int], str],
) -> int:
    """The first position still to extract; ``end + 1`` when the output already holds the range.
    ``kind`` names positions in messages ("versions"); ``resume(through)`` says which ``--from``
    continues the output without a gap."""
    if through is None:
        return requested
    first = int(metadata.configuration[FIRST_VERSION_KEY])
    if requested < first:
        raise InvalidArgument(
            f"{output_root}: holds source {kind} {first}..{through} only; {kind} before {first} cannot be "
            f"added to it (extract {requested}..{end} into a new --output location)"
        )
    if end <= through:
        return end + 1
    if requested > through + 1:
        raise InvalidArgument(
            f"{output_root}: holds source {kind} {first}..{through}; starting at {requested} would leave "
            f"{kind} {through + 1}..{requested - 1} out; use {resume(through)}"
        )
    return through + 1


def commit_changes(
    plan: ChangePlan,
    unit_ids: Iterable[int],
    results: Iterable[ExtractResult],
    storage_options: StorageOptions,
    parameters: dict[str, object],
) -> CommitResult | None:
    """Append the files the units wrote and the source's progress marker (``txn``) as one output
    version, creating the output on its first run; None when the output already held the range.
    A range without row changes still commits its marker, so it is not planned again."""
    if plan.already_extracted:
        return None
    ordered = sorted(results, key=lambda r: r.unit_id)
    if {r.unit_id for r in ordered} != set(unit_ids):
        raise InvalidArgument(f"{plan.table_root}: extraction results do not match the plan's units")
    txn = Txn(appId=plan.source_id, version=plan.to_version, lastUpdated=int(time.time() * 1000))
    return append_files(
        open_storage(plan.output_root, storage_options),
        TargetTable(plan.output_root, plan.output_version, plan.output_metadata),
        metadata=plan.output_metadata,
        files=[w for r in ordered for w in r.written],
        txn=txn,
        operation_parameters=parameters,
    )


def write_changes(
    unit_id: int,
    rows: Iterable[pa.Table],
    schema: StructType,
    output_root: str,
    storage_options: StorageOptions,
    *,
    files_read: int,
    bytes_read: int,
) -> ExtractResult:
    """Write one unit's change rows (in the output's ``schema``, with a ``_change_type`` column) as
    one output data file, counting them by change type; ``rows`` may read the source lazily."""
    started = time.monotonic()
    writer = DataFileWriter(schema)
    counts: Counter[str] = Counter()
    for table in rows:
        counts.update(rows_by_change_type(table))
        writer.write(table)
    written = writer.finish(open_storage(output_root, storage_options), output_root)
    return ExtractResult(
        unit_id=unit_id,
        written=[written] if written is not None else [],
        rows_by_change_type=dict(counts),
        files_read=files_read,
        bytes_read=bytes_read,
        seconds=time.monotonic() - started,
    )


def written_locations(results: Iterable[ExtractResult]) -> list[str]:
    """Every file these results wrote: the only files an abort may delete."""
    return [w.location for r in results for w in r.written]
