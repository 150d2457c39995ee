"""The options of Icechunk's maintenance (packing small chunk objects into shared chunk files, snapshot
expiry, garbage collection), in a module without the format's dependencies; the shared fields are
:mod:`lakeops.compaction_options`' and :mod:`lakeops.retention_options`'. A checkpoint has none."""

from __future__ import annotations

from pydantic import Field

from lakeops.compaction_options import Sizing
from lakeops.retention_options import ExpiryAge, ExpiryForce, OrphansAge, ShortRetention

__all__ = ["IcechunkExpiryOptions", "IcechunkGcOptions", "IcechunkPackingOptions"]


class IcechunkPackingOptions(Sizing):
    """Which branch's tip is packed, into files of ``target_file_size``."""

    branch: str = Field(
        default="main", description="branch whose tip is packed", json_schema_extra={"metavar": "BRANCH"}
    )


class IcechunkExpiryOptions(ExpiryAge, ExpiryForce):
    """Snapshot expiry by age alone: no version floor, no snapshots named."""


class IcechunkGcOptions(OrphansAge, ShortRetention):
    """Garbage collection by age alone, listed on the driver."""
