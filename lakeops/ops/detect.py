"""Which table format lives at a location, decided from the files each format's spec requires."""

from __future__ import annotations

from typing import Literal

from lakeops.errors import NotATable
from lakeops.storage import Storage
from lakeops.storage.uri import join

TableFormat = Literal["delta", "iceberg", "icechunk"]


def _has_any(storage: Storage, prefix: str, suffix: str = "") -> bool:
    return any(info.path.endswith(suffix) for info in storage.list(prefix))


def detect_format(storage: Storage, location: str) -> TableFormat:
    """``delta`` if there is a ``_delta_log``, ``iceberg`` if ``metadata/*.metadata.json`` exists,
    ``icechunk`` if ``snapshots/`` exists beside ``refs/`` (the seed format and Icechunk format 1) or
    beside the ``repo`` object (format 2,
    https://github.com/earth-mover/icechunk/blob/main/docs/docs/spec.md#file-layout); otherwise
    :class:`NotATable`."""
    if _has_any(storage, join(location, "_delta_log"), ".json") or _has_any(
        storage, join(location, "_delta_log"), ".parquet"
    ):
        return "delta"
    if _has_any(storage, join(location, "metadata"), ".metadata.json"):
        return "iceberg"
    has_refs = storage.exists(join(location, "repo")) or _has_any(storage, join(location, "refs"))
    if has_refs and _has_any(storage, join(location, "snapshots")):
        return "icechunk"
    raise NotATable(
        f"{location}: not a Delta, Iceberg or Icechunk table (no _delta_log/, metadata/*.metadata.json, "
        "or snapshots/ beside refs/ or a repo object found)"
    )
