"""The options of Icechunk's packing (small chunk objects into shared chunk files), in a module
without the format's dependencies; the shared fields are :mod:`lakeops.compaction_options`'."""

from __future__ import annotations

from pydantic import Field

from lakeops.compaction_options import Sizing

__all__ = ["IcechunkPackingOptions"]


class IcechunkPackingOptions(Sizing):
    """Which branch's tip is packed, into files of ``target_file_size``."""

    branch: str = Field(
        default="main", description="branch whose tip is packed", json_schema_extra={"metavar": "BRANCH"}
    )
