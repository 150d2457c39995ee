"""The options of each operation, every format's in one model per operation (compaction's built from
each format's own model, every field declared once).

They live apart from the operations so that the command line (which builds its parser from them) and
the Python API import pydantic and the options' defaults only, not the formats' code: ``lakeops
--help`` and a command on a Delta table then import neither Iceberg's nor Icechunk's modules.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from lakeops.changefeed.defaults import DEFAULT_UNIT_BYTES
from lakeops.compaction_options import RewritePiece
from lakeops.delta.maintenance.options import (
    DeltaCheckpointOptions,
    DeltaCompactionOptions,
    DeltaLogExpiryOptions,
    DeltaVacuumOptions,
)
from lakeops.errors import UsageError
from lakeops.iceberg.maintenance.options import (
    IcebergCompactionOptions,
    IcebergManifestOptions,
    IcebergOrphanOptions,
    IcebergSnapshotExpiryOptions,
)
from lakeops.icechunk.maintenance.options import IcechunkExpiryOptions, IcechunkGcOptions, IcechunkPackingOptions
from lakeops.ops.target import CatalogOptions, refuse_options
from lakeops.option_fields import Location, Retention, RunId
from lakeops.quarantine import DEFAULT_PURGE_AFTER

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


class _ByFormat(BaseModel):
    """An operation's options built from each format's own model (:attr:`formats`): :meth:`for_format`
    gives a format's code its model, refusing any other format's option that is set, since ignored it
    would silently do nothing. Fields no format's model has (a bounded piece, the catalog) every format takes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Each format's own options model, whose fields this model is built from.
    formats: ClassVar[tuple[type[BaseModel], ...]] = ()

    def for_format(self, model: type[FormatOptionsT], table: str) -> FormatOptionsT:
        """The options of ``model`` (a format's), after refusing every other format's option that is set."""
        self.refuse_foreign(table, keep=model.model_fields)
        return model.model_validate({name: getattr(self, name) for name in model.model_fields})

    def refuse_foreign(self, table: str, *, keep: Collection[str] = ()) -> None:
        """Refuse (:class:`~lakeops.errors.UsageError`, naming ``table`` and the flags) each set option
        of a format's model but ``keep``: for a format with no options of this operation, every one."""
        foreign = {name: None for model in self.formats for name in model.model_fields if name not in keep}
        refuse_options(table, self, *foreign)


class CompactionOptions(
    DeltaCompactionOptions, IcebergCompactionOptions, IcechunkPackingOptions, RewritePiece, CatalogOptions, _ByFormat
):
    """Every format's compaction options, each field declared once: the shared ones
    (:mod:`lakeops.compaction_options`: ``target_file_size``, ``min_input_files``, ``where``,
    ``partial_progress``, ``commit_retries``, ``commit_timeout``, ``max_rewrite_bytes``) and each
    format's (:class:`~lakeops.delta.maintenance.options.DeltaCompactionOptions`,
    :class:`~lakeops.iceberg.maintenance.options.IcebergCompactionOptions`,
    :class:`~lakeops.icechunk.maintenance.options.IcechunkPackingOptions`)."""

    formats = (DeltaCompactionOptions, IcebergCompactionOptions, IcechunkPackingOptions)


class CheckpointOptions(DeltaCheckpointOptions, IcebergManifestOptions, CatalogOptions, _ByFormat):
    """Every format's checkpoint options: Delta's
    (:class:`~lakeops.delta.maintenance.options.DeltaCheckpointOptions`: ``version``, ``part_size``,
    ``force``) and Iceberg's manifest rewrite's
    (:class:`~lakeops.iceberg.maintenance.options.IcebergManifestOptions`: ``target_manifest_size``,
    ``rewrite_all``); an Icechunk repository has no checkpoint, and takes none of them."""

    formats = (DeltaCheckpointOptions, IcebergManifestOptions)


class ExpiryOptions(
    DeltaLogExpiryOptions, IcebergSnapshotExpiryOptions, IcechunkExpiryOptions, CatalogOptions, _ByFormat
):
    """Every format's expiry options (:mod:`lakeops.retention_options` for the shared ones).

    ``older_than`` as the command line writes it (``30d``; None: the table's own policy); ``force``
    allows a retention shorter than the table's. Delta: ``keep_from_version`` V keeps version V
    readable and every commit from V on, ``retain_last`` N the newest N versions. Iceberg:
    ``retain_last`` and ``older_than`` override every branch's policy, ``snapshot_id`` names
    snapshots to expire as well, and ``keep_from_version`` is a sequence number from which every
    snapshot stays (a changelog consumer's watermark). Icechunk: ``older_than`` and ``force`` only.
    """

    formats = (DeltaLogExpiryOptions, IcebergSnapshotExpiryOptions, IcechunkExpiryOptions)


class OrphansOptions(DeltaVacuumOptions, IcebergOrphanOptions, IcechunkGcOptions, CatalogOptions, _ByFormat):
    """Every format's orphan-removal options (:mod:`lakeops.retention_options` for the shared ones).

    ``older_than`` as the command line writes it (``7d``; None: Delta's
    ``delta.deletedFileRetentionDuration``, else 7 days; Iceberg 3 days); ``force_short_retention``
    allows less than that. Delta: ``keep_from_version`` V lengthens the retention until every file a
    reader of versions V.. needs is kept (:func:`lakeops.ops.consumers.vacuum_retention`). Iceberg:
    ``prefix_mismatch_mode`` (None: ``error``). Both: ``listing_threshold``, second-level directories
    listed on the driver before they are listed by the executor (None: 100). Icechunk: the age only.
    """

    formats = (DeltaVacuumOptions, IcebergOrphanOptions, IcechunkGcOptions)


class CdcOptions(CatalogOptions):
    """The range as given: ``from_version``/``to_version`` are versions (integers) of a Delta table,
    snapshot ids, branch or tag names of an Iceberg table (``--to`` default: the current snapshot;
    ``--from 0``: from the table's creation);
    the ``catalog_*`` options find an Iceberg table in a SQL or REST catalog."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    from_version: int | str = Field(
        description="Delta: the first version to extract (0: from the table's creation); Iceberg: the snapshot (id, "
        "branch or tag) the changes follow, or 0 (no snapshot id is 0) for every change since the table's "
        "creation; Icechunk: the snapshot the changes follow",
        json_schema_extra={"flag": "--from", "metavar": "V"},
    )
    to_version: int | str | None = Field(
        default=None,
        description="the last version / snapshot, branch or tag to extract (default: the latest version / the "
        "current snapshot / main)",
        json_schema_extra={"flag": "--to", "metavar": "W"},
    )
    output: Location = Field(
        description="Delta table the change rows are appended to (created if absent): a location, or the name of a "
        "registry table",
        json_schema_extra={"metavar": "OUT"},
    )
    #: Not on the command line: the size of the change files one task reads.
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

    run_id: RunId = Field(
        description="the run to restore (quarantine_run in its report)", json_schema_extra={"flag": "run_id"}
    )


class PurgeOptions(CatalogOptions):
    """``older_than`` as the command line writes it (``7d``; None: 7 days)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    older_than: Retention | None = Field(
        default=None,
        description=f"purge runs quarantined longer ago than this (default {DEFAULT_PURGE_AFTER.days}d)",
    )
