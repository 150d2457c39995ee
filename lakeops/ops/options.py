"""The options of each operation, every format's in one model per operation.

They live apart from the operations so that the command line (which builds its parser from them) and
the Python API import pydantic and the options' defaults only, not the formats' code: ``lakeops
--help`` and a command on a Delta table then import neither Iceberg's nor Icechunk's modules.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lakeops.changefeed.defaults import DEFAULT_UNIT_BYTES
from lakeops.delta.maintenance.defaults import DEFAULT_DV_PURGE_RATIO, DEFAULT_PART_SIZE
from lakeops.errors import InvalidArgument, UsageError
from lakeops.iceberg.maintenance.defaults import DEFAULT_MAX_FILE_GROUP_SIZE, PrefixMismatchMode
from lakeops.ops.target import CatalogOptions
from lakeops.units import parse_duration

if TYPE_CHECKING:
    from lakeops.changefeed.cdf_export import ExportOptions
    from lakeops.iceberg.maintenance.changelog import ChangelogOptions

__all__ = [
    "CatalogOptions",
    "CdcOptions",
    "CheckpointOptions",
    "CompactionOptions",
    "ExpiryOptions",
    "OrphansOptions",
    "PurgeOptions",
    "RestoreOptions",
]


class CompactionOptions(CatalogOptions):
    """Every format's compaction options; each format reads the ones it has.

    Shared: ``target_file_size`` (None: table property, else the format's default), ``min_input_files``,
    ``where`` (a partition predicate), ``partial_progress`` (commit every that many groups),
    ``max_rewrite_bytes`` (rewrite only the first groups whose input bytes fit it: a piece of the
    compaction, the rest left for the next run; :mod:`lakeops.ops.bounded`). Delta:
    ``dv_purge_ratio``; ``zorder_by`` or ``sort_by`` (columns) rewrite every file of each partition in
    Z-order or sorted (as ``OPTIMIZE ZORDER BY``). Iceberg (names as its ``rewrite_data_files``):
    ``min_file_size``/``max_file_size`` (default 75%/180% of the target), ``delete_file_threshold``,
    ``max_file_group_size``, ``sort`` (by the table's sort order), ``remove_dangling_deletes``,
    ``manifest_threshold`` (more data manifests than this are read by the executor; None: 200). Retries of a
    commit that lost a race: ``commit_retries`` and ``commit_timeout`` (a duration such as ``"10m"``);
    None: Iceberg's ``commit.retry.num-retries`` / ``commit.retry.total-timeout-ms``, else 10 retries
    within 30 minutes (Delta). Icechunk: ``branch``, whose tip is packed (``target_file_size`` and
    ``min_input_files`` apply; the Iceberg-only options are refused).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    target_file_size: int | None = Field(default=None, gt=0)
    min_input_files: int = Field(default=5, ge=1)
    where: str | None = None
    dv_purge_ratio: float = Field(default=DEFAULT_DV_PURGE_RATIO, ge=0.0, le=1.0)
    min_file_size: int | None = Field(default=None, ge=0)
    max_file_size: int | None = Field(default=None, gt=0)
    delete_file_threshold: int | None = Field(default=None, ge=1)
    max_file_group_size: int = Field(default=DEFAULT_MAX_FILE_GROUP_SIZE, gt=0)
    sort: bool = False
    partial_progress: int | None = Field(default=None, ge=1)
    remove_dangling_deletes: bool = True
    manifest_threshold: int | None = Field(default=None, ge=0)
    commit_retries: int | None = Field(default=None, ge=0)
    commit_timeout: timedelta | None = None
    zorder_by: list[str] | None = None
    sort_by: list[str] | None = None
    branch: str = "main"
    max_rewrite_bytes: int | None = Field(default=None, gt=0)

    @field_validator("commit_timeout", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        """``"10m"`` as the CLI and the registry write durations."""
        if not isinstance(value, str):
            return value
        try:
            return parse_duration(value)
        except InvalidArgument as exc:
            raise ValueError(str(exc)) from None

    @field_validator("commit_timeout")
    @classmethod
    def _positive(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError(f"expected a positive duration, got {value}")
        return value

    def for_format(self, model: type[BaseModel]) -> Any:
        """The subset a format's planner takes."""
        return model.model_validate({k: v for k, v in self.model_dump().items() if k in model.model_fields})


class CheckpointOptions(CatalogOptions):
    """Every format's checkpoint options; each format reads its own.

    Delta: ``version`` (default the latest), ``part_size`` (most actions per part), ``force``
    (rewrite an existing checkpoint). Iceberg (names as its ``rewrite_manifests``):
    ``target_manifest_size`` (default ``commit.manifest.target-size-bytes``, else 8 MB),
    ``rewrite_all`` (manifests at or above the target too).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int | None = Field(default=None, ge=0)
    part_size: int = Field(default=DEFAULT_PART_SIZE, gt=0)
    force: bool = False
    target_manifest_size: int | None = Field(default=None, gt=0)
    rewrite_all: bool = False


class ExpiryOptions(CatalogOptions):
    """Every format's expiry options; each format reads its own.

    ``older_than`` as the command line writes it (``30d``; None: the table's own policy); ``force``
    allows a retention shorter than the table's. Delta: ``keep_from_version`` V keeps version V
    readable and every commit from V on, ``retain_last`` N the newest N versions. Iceberg:
    ``retain_last`` and ``older_than`` override every branch's policy, ``snapshot_id`` names
    snapshots to expire as well, and ``keep_from_version`` is a sequence number from which every
    snapshot stays (a changelog consumer's watermark).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    older_than: str | None = None
    force: bool = False
    keep_from_version: int | None = Field(default=None, ge=0)
    retain_last: int | None = Field(default=None, ge=1)
    snapshot_id: list[int] | None = None


class OrphansOptions(CatalogOptions):
    """Every format's orphan-removal options; each format reads its own.

    ``older_than`` as the command line writes it (``7d``; None: Delta's
    ``delta.deletedFileRetentionDuration``, else 7 days; Iceberg 3 days); ``force_short_retention``
    allows less than that. Delta: ``keep_from_version`` V lengthens the retention until every file a
    reader of versions V.. needs is kept (:func:`lakeops.ops.consumers.vacuum_retention`). Iceberg:
    ``prefix_mismatch_mode`` (None: ``error``). Both: ``listing_threshold``, second-level directories
    listed on the driver before they are listed by the executor (None: 100).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    older_than: str | None = None
    force_short_retention: bool = False
    keep_from_version: int | None = Field(default=None, ge=0)
    prefix_mismatch_mode: PrefixMismatchMode | None = None
    listing_threshold: int | None = Field(default=None, ge=0)


class CdcOptions(CatalogOptions):
    """The range as given: ``from_version``/``to_version`` are versions (integers) of a Delta table,
    snapshot ids, branch or tag names of an Iceberg table (``--to`` default: the current snapshot;
    ``--from 0``: from the table's creation);
    the ``catalog_*`` options find an Iceberg table in a SQL or REST catalog."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    from_version: int | str
    to_version: int | str | None = None
    output: str
    unit_bytes: int = Field(default=DEFAULT_UNIT_BYTES, gt=0)

    def for_delta(self, table: str) -> ExportOptions:
        """The Delta planner's options: both ends must be versions."""
        from lakeops.changefeed.cdf_export import ExportOptions

        return ExportOptions(
            from_version=_delta_version(table, "--from", self.from_version),
            to_version=None if self.to_version is None else _delta_version(table, "--to", self.to_version),
            output=self.output,
            unit_bytes=self.unit_bytes,
        )

    def for_iceberg(self) -> ChangelogOptions:
        """The Iceberg planner's options: snapshot ids, branches or tags."""
        from lakeops.iceberg.maintenance.changelog import ChangelogOptions

        return ChangelogOptions(
            from_snapshot=str(self.from_version),
            to_snapshot=None if self.to_version is None else str(self.to_version),
            output=self.output,
            unit_bytes=self.unit_bytes,
        )


def _delta_version(table: str, flag: str, value: int | str) -> int:
    if isinstance(value, int):
        return value
    if value.isdigit():
        return int(value)
    raise UsageError(f"{table}: {flag} {value!r} is not a table version (an integer >= 0) of this Delta table")


class RestoreOptions(CatalogOptions):
    """``run_id``: the quarantine run to restore (the report's ``quarantine_run``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str


class PurgeOptions(CatalogOptions):
    """``older_than`` as the command line writes it (``7d``; None: 7 days)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    older_than: str | None = None
