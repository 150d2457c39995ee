"""The expiry and orphan-removal options more than one format shares, each declared once.

Each format's expiry and orphan-removal models (``lakeops/<format>/maintenance/options.py``) are built
from the groups here, the API's :class:`lakeops.ops.options.ExpiryOptions` and
:class:`~lakeops.ops.options.OrphansOptions` from those models, and the registry's ``expiry`` and
``orphans`` policies (:mod:`lakeops.registry`) from the groups a policy sets, as compaction's are
(:mod:`lakeops.compaction_options`). A module of pydantic and the unit parsers only.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from lakeops.option_fields import Retention

__all__ = [
    "ExpiryAge",
    "ExpiryFloor",
    "ExpiryForce",
    "FileRetention",
    "ListingThreshold",
    "OrphansAge",
    "RetainLast",
    "ShortRetention",
    "VersionRetention",
]


class _Options(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ExpiryAge(_Options):
    """How old a version or snapshot must be to expire: every format's expiry and the registry's policy."""

    older_than: Retention | None = Field(
        default=None,
        description="retention, e.g. 30d (default: Delta delta.logRetentionDuration, else 30 days; Iceberg each "
        "branch's max-snapshot-age-ms, else history.expire.max-snapshot-age-ms, else 5 days); "
        "negative values: --older-than=-1d is refused",
    )


class ExpiryForce(_Options):
    """Expiry past the table's own safety settings: every format."""

    force: bool = Field(
        default=False,
        description="allow a retention shorter than the table's own (Delta delta.logRetentionDuration, Iceberg "
        "history.expire.* and each branch's settings), a Delta table with delta.enableExpiredLogCleanup=false, "
        "or an Iceberg --snapshot-id younger than the retention",
    )


class RetainLast(_Options):
    """The newest versions kept whatever their age: Delta's and Iceberg's expiry, and the registry's policy."""

    retain_last: int | None = Field(
        default=None,
        ge=1,
        description="keep the newest N versions readable (Delta); keep at least N snapshots of every branch (Iceberg)",
        json_schema_extra={"metavar": "N"},
    )


class ExpiryFloor(_Options):
    """A change-feed consumer's watermark, below which nothing it still reads expires: Delta and Iceberg."""

    keep_from_version: int | None = Field(
        default=None,
        ge=0,
        description="keep version V readable and every commit from V on (e.g. what a change-feed consumer has not "
        "extracted yet); Iceberg: keep every snapshot whose sequence number is V or more (lakeops cdc's watermark)",
        json_schema_extra={"metavar": "V"},
    )


class OrphansAge(_Options):
    """How old an unreferenced file must be to go: every format's orphan removal and the registry's policy."""

    older_than: Retention | None = Field(
        default=None,
        description="retention, e.g. 7d (default: Delta delta.deletedFileRetentionDuration, else 7 days; Iceberg "
        "3 days); nothing newer than this is deleted",
    )


class ShortRetention(_Options):
    """Orphan removal with less than the table's retention: every format."""

    force_short_retention: bool = Field(
        default=False,
        description="allow a retention shorter than the table's delta.deletedFileRetentionDuration (Iceberg: "
        "than 3 days), only when nothing reads or writes the table from before that horizon",
    )


class ListingThreshold(_Options):
    """When a table's tree is listed on the executor rather than the driver: Delta and Iceberg."""

    listing_threshold: int | None = Field(
        default=None,
        ge=0,
        description="list the table on Spark, one task per second-level directory (e.g. data/<partition>, or a "
        "Delta table's <column>=<value>/<column>=<value>), when there are more than N of them (default 100)",
        json_schema_extra={"metavar": "N"},
    )


class VersionRetention(ExpiryAge, ExpiryForce, RetainLast, ExpiryFloor):
    """The expiry options Delta's log expiry and Iceberg's snapshot expiry share."""


class FileRetention(OrphansAge, ShortRetention, ListingThreshold):
    """The orphan-removal options Delta's ``VACUUM`` and Iceberg's orphan removal share."""
