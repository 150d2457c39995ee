"""The options of each operation, every format's in one model per operation (compaction's built from
each format's own model, every field declared once).

They live apart from the operations so that the command line (which builds its parser from them) and
the Python API import pydantic and the options' defaults only, not the formats' code: ``lakeops
--help`` and a command on a Delta table then import neither Iceberg's nor Icechunk's modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from lakeops.changefeed.defaults import DEFAULT_UNIT_BYTES
from lakeops.compaction_options import RewritePiece
from lakeops.delta.maintenance.defaults import DEFAULT_PART_SIZE
from lakeops.delta.maintenance.options import DeltaCompactionOptions
from lakeops.errors import UsageError
from lakeops.iceberg.maintenance.defaults import PrefixMismatchMode
from lakeops.iceberg.maintenance.options import IcebergCompactionOptions
from lakeops.icechunk.maintenance.options import IcechunkPackingOptions
from lakeops.ops.target import CatalogOptions, refuse_options

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

FormatOptionsT = TypeVar("FormatOptionsT", bound=BaseModel)


class CompactionOptions(
    DeltaCompactionOptions, IcebergCompactionOptions, IcechunkPackingOptions, RewritePiece, CatalogOptions
):
    """Every format's compaction options, each field declared once: the shared ones
    (:mod:`lakeops.compaction_options`: ``target_file_size``, ``min_input_files``, ``where``,
    ``partial_progress``, ``commit_retries``, ``commit_timeout``, ``max_rewrite_bytes``) and each
    format's (:class:`~lakeops.delta.maintenance.options.DeltaCompactionOptions`,
    :class:`~lakeops.iceberg.maintenance.options.IcebergCompactionOptions`,
    :class:`~lakeops.icechunk.maintenance.options.IcechunkPackingOptions`). :meth:`for_format` gives a
    format's planner its model, refusing an option set that the table's format does not have: ignored,
    it would silently do nothing."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def for_format(self, model: type[FormatOptionsT], table: str) -> FormatOptionsT:
        """The options of ``model`` (a format's), after refusing every other compaction option that is set."""
        own = {*model.model_fields, *RewritePiece.model_fields, *CatalogOptions.model_fields}
        refuse_options(table, self, *(name for name in CompactionOptions.model_fields if name not in own))
        return model.model_validate({name: getattr(self, name) for name in model.model_fields})


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
