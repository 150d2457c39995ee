"""Which kind of Icechunk repository a run meets, and what each kind allows.

lakeops reads and writes the seed format itself. Icechunk format 1 and 2
(:func:`~lakeops.icechunk.versioned.format_version`) it reads natively, so ``inspect``, garbage
collection (which only deletes) and change capture (which writes only its Delta output) work on both;
snapshot expiry rewrites their histories (:mod:`lakeops.icechunk.maintenance.versioned_expiry`) and
compaction writes their manifests, snapshots and refs (:mod:`lakeops.icechunk.maintenance.versioned_packing`),
each in the repository's own spec version. What the expiry and garbage-collection plans of every
kind share is here.
"""

from __future__ import annotations

import time
from typing import Any

from lakeops.icechunk.maintenance.expiry import IcechunkExpiryPlan
from lakeops.icechunk.maintenance.orphans import GcPlan
from lakeops.icechunk.maintenance.versioned_expiry import VersionedExpiryPlan
from lakeops.icechunk.maintenance.versioned_orphans import VersionedGcPlan
from lakeops.units import format_duration, instant

__all__ = ["RemovalPlan", "removal_fields"]


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
