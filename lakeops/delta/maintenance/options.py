"""The options of Delta's maintenance (compaction, ``OPTIMIZE``; checkpoint; log expiry; ``VACUUM``), in a
module without the format's dependencies so that the command line and :mod:`lakeops.ops.options` build
on it without importing the format's code. The shared fields are :mod:`lakeops.compaction_options`' and
:mod:`lakeops.retention_options`'."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from lakeops.compaction_options import CommitRetries, FileRewrites, Sizing
from lakeops.delta.maintenance.defaults import DEFAULT_DV_PURGE_RATIO, DEFAULT_PART_SIZE
from lakeops.option_fields import Columns, PositiveCount
from lakeops.retention_options import FileRetention, VersionRetention

__all__ = ["DeltaCheckpointOptions", "DeltaCompactionOptions", "DeltaLogExpiryOptions", "DeltaVacuumOptions"]


class DeltaCompactionOptions(Sizing, CommitRetries, FileRewrites):
    """What the user asked of a Delta compaction; ``None`` means "table property, else default"."""

    dv_purge_ratio: float = Field(
        default=DEFAULT_DV_PURGE_RATIO,
        ge=0.0,
        le=1.0,
        description="rewrite files whose deletion vector hides more than this share of rows",
        json_schema_extra={"metavar": "RATIO"},
    )
    zorder_by: Columns | None = Field(
        default=None,
        description="rewrite every file of each partition in Z-order of these columns (comma-separated), so "
        "files prune on each of them, as OPTIMIZE ZORDER BY",
    )
    sort_by: Columns | None = Field(
        default=None, description="rewrite every file of each partition sorted by these columns (comma-separated)"
    )


class DeltaCheckpointOptions(BaseModel):
    """Which version a Delta checkpoint is of, how it is split, and whether an existing one is rewritten."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int | None = Field(default=None, ge=0, description="checkpoint this version (default: the latest)")
    part_size: PositiveCount = Field(
        default=DEFAULT_PART_SIZE,
        description="most actions per part file; more actions make a multi-part checkpoint "
        f"(default {DEFAULT_PART_SIZE})",
    )
    force: bool = Field(default=False, description="rewrite a checkpoint that already exists")


class DeltaLogExpiryOptions(VersionRetention):
    """Delta's log expiry: every field is shared with Iceberg's snapshot expiry (:mod:`lakeops.retention_options`)."""


class DeltaVacuumOptions(FileRetention):
    """Delta's ``VACUUM``: the shared fields, and the files a change-feed consumer still needs."""

    keep_from_version: int | None = Field(
        default=None,
        ge=0,
        description="keep every file needed to read versions V and later and their changes (e.g. for a change-feed "
        "consumer that has extracted through V)",
        json_schema_extra={"metavar": "V"},
    )
