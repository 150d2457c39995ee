"""Which kind of Icechunk repository a run meets, and what each kind allows.

lakeops reads and writes the seed format itself. Icechunk format 1 and 2
(:func:`~lakeops.icechunk.versioned.format_version`) it reads natively, so ``inspect``, garbage
collection (which only deletes) and change capture (which writes only its Delta output) work on both;
snapshot expiry rewrites their histories itself (:mod:`lakeops.icechunk.maintenance.versioned_expiry`).
Compaction, which would write their manifests and snapshots, is refused, naming the operation and
the format.
"""

from __future__ import annotations

import time
from typing import Any

from lakeops.errors import UnsupportedFeature
from lakeops.icechunk.maintenance.expiry import IcechunkExpiryPlan
from lakeops.icechunk.maintenance.gc import GcPlan
from lakeops.icechunk.maintenance.versioned_expiry import VersionedExpiryPlan
from lakeops.icechunk.maintenance.versioned_gc import VersionedGcPlan
from lakeops.icechunk.versioned import format_version
from lakeops.storage import Storage
from lakeops.units import format_duration, instant

__all__ = [
    "COMPACT_REFUSED",
    "RemovalPlan",
    "refuse_package_format",
    "refused_operations",
    "removal_fields",
]


COMPACT_REFUSED = "lakeops reads that format but does not write its manifests and snapshots"


def refused_operations(version: int | None) -> dict[str, str]:
    """What lakeops cannot do yet on a repository of Icechunk format ``version`` (None: the seed
    format, where every operation runs), and why: what ``inspect`` reports."""
    if version is None:
        return {}
    return {"compact": COMPACT_REFUSED}


def refuse_package_format(storage: Storage, location: str, operation: str, reason: str) -> None:
    """Refuse ``operation`` on a format 1 or 2 repository, for ``reason``."""
    version = format_version(storage, location)
    if version is not None:
        raise UnsupportedFeature(
            f"{location}: {operation} of Icechunk format {version} repositories is not available: {reason}"
        )


#: An expiry or garbage-collection plan, of either kind of repository.
RemovalPlan = IcechunkExpiryPlan | VersionedExpiryPlan | GcPlan | VersionedGcPlan


def removal_fields(plan: RemovalPlan, started: float, *, dry_run: bool, quarantine_run: str | None) -> dict[str, Any]:
    """The fields expiry and garbage-collection reports share, at the end of the run."""
    return {
        "format": plan.format,
        "table": plan.table_root,
        "dry_run": dry_run,
        "retention": format_duration(plan.retention),
        "cutoff": instant(plan.cutoff_ms).isoformat(timespec="seconds"),
        "quarantine_run": None if dry_run else quarantine_run,
        "duration_s": time.monotonic() - started,
    }
