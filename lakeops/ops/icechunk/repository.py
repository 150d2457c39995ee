"""Which kind of Icechunk repository a run meets, and what each kind allows.

lakeops reads and writes the seed format itself. Icechunk format 1 and 2
(:func:`~lakeops.icechunk.versioned.format_version`) it reads natively, so ``inspect``, garbage
collection (which only deletes) and change capture (which writes only its Delta output) work on both,
and compaction writes both formats' manifests, snapshots and refs itself
(:mod:`lakeops.icechunk.maintenance.versioned_packing`). Format 1 has its expiry planned for the
``icechunk`` package, which then rewrites and deletes the files itself (no ``--quarantine``); expiry
of format 2 is refused, naming the operation and the format.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from lakeops.errors import UnsupportedFeature, UsageError
from lakeops.icechunk.maintenance import delegated
from lakeops.icechunk.maintenance.delegated import DelegatedPlan
from lakeops.icechunk.maintenance.expiry import IcechunkExpiryPlan
from lakeops.icechunk.maintenance.gc import GcPlan
from lakeops.icechunk.maintenance.versioned_gc import VersionedGcPlan
from lakeops.icechunk.versioned import format_version
from lakeops.storage import Storage, StorageOptions
from lakeops.units import format_duration, instant

__all__ = [
    "RemovalPlan",
    "delegated_plan",
    "refuse_quarantine",
    "refused_operations",
    "removal_fields",
]


#: The format the icechunk 1.x package, lakeops' delegate, reads and writes.
_PACKAGE_FORMAT = 1

EXPIRE_REFUSED = (
    "lakeops does not write the repo object yet, and the icechunk package it delegates to reads format "
    f"{_PACKAGE_FORMAT} only"
)


def refused_operations(version: int | None) -> dict[str, str]:
    """What lakeops cannot do yet on a repository of Icechunk format ``version`` (None: the seed
    format, where every operation runs), and why: what ``inspect`` reports."""
    if version is None:
        return {}
    return {"expire": EXPIRE_REFUSED} if version > _PACKAGE_FORMAT else {}


def delegated_plan(
    storage: Storage,
    location: str,
    storage_options: StorageOptions,
    *,
    retention: timedelta | None,
    force: bool,
    now_ms: int,
) -> DelegatedPlan | None:
    """The plan handing expiry to the icechunk package when ``location`` is in format 1; None for a
    seed-format repository, which lakeops plans itself. Format 2 is refused: expiry rewrites the repo
    object, which lakeops does not write yet and the package does not read."""
    version = format_version(storage, location)
    if version is None and not delegated.is_package_format(storage, location):
        return None
    if version is not None and version > _PACKAGE_FORMAT:
        raise UnsupportedFeature(
            f"{location}: expire of Icechunk format {version} repositories is not available: {EXPIRE_REFUSED}"
        )
    return delegated.plan_delegated(storage, location, storage_options, retention=retention, force=force, now_ms=now_ms)


#: An expiry or garbage-collection plan, of either kind of repository.
RemovalPlan = IcechunkExpiryPlan | GcPlan | VersionedGcPlan | DelegatedPlan


def refuse_quarantine(plan: RemovalPlan, quarantine_run: str | None, *, dry_run: bool) -> None:
    """Refuse ``quarantine_run`` for a plan whose files the icechunk package deletes: it cannot move
    them into a trash run."""
    if quarantine_run is not None and not dry_run and not plan.can_quarantine:
        raise UsageError(
            f"{plan.table_root}: --quarantine is not available for repositories in the Icechunk package's "
            "format: the icechunk package deletes the files itself"
        )


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
