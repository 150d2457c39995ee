"""The options of Delta's compaction (``OPTIMIZE``), in a module without the format's dependencies so
that the command line and :class:`lakeops.ops.options.CompactionOptions` build on it without importing
the format's code. The shared fields are :mod:`lakeops.compaction_options`'."""

from __future__ import annotations

from pydantic import Field

from lakeops.compaction_options import CommitRetries, FileRewrites, Sizing
from lakeops.delta.maintenance.defaults import DEFAULT_DV_PURGE_RATIO
from lakeops.option_fields import Columns

__all__ = ["DeltaCompactionOptions"]


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
