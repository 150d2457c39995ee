"""Which kind of Icechunk repository a run meets, and what each kind allows.

A repository in the ``icechunk`` package's format (:func:`~lakeops.icechunk.maintenance.delegated.is_package_format`)
has its expiry and garbage collection planned for that package, which then deletes the files itself
(no ``--quarantine``); compaction, change capture and inspection refuse it.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from lakeops.errors import UnsupportedFeature, UsageError
from lakeops.icechunk.maintenance import delegated
from lakeops.icechunk.maintenance.delegated import DelegatedPlan, Operation
from lakeops.icechunk.maintenance.expiry import IcechunkExpiryPlan
from lakeops.icechunk.maintenance.gc import GcPlan
from lakeops.storage import Storage, StorageOptions
from lakeops.units import format_duration, instant

__all__ = ["RemovalPlan", "delegated_plan", "refuse_package_format", "refuse_quarantine", "removal_fields"]


def refuse_package_format(storage: Storage, location: str, operation: str) -> None:
    if delegated.is_package_format(storage, location):
        raise UnsupportedFeature(
            f"{location}: {operation} of repositories in the Icechunk 1.x/2.x format is not available; lakeops "
            "delegates only expire and orphans to the icechunk package for them"
        )


def delegated_plan(
    storage: Storage,
    location: str,
    storage_options: StorageOptions,
    *,
    operation: Operation,
    retention: timedelta | None,
    force: bool,
    now_ms: int,
) -> DelegatedPlan | None:
    """The plan handing ``operation`` to the icechunk package when ``location`` is in its format; None
    for a seed-format repository, which lakeops plans itself."""
    if not delegated.is_package_format(storage, location):
        return None
    return delegated.plan_delegated(
        storage, location, storage_options, operation=operation, retention=retention, force=force, now_ms=now_ms
    )


#: An expiry or garbage-collection plan, of either kind of repository.
RemovalPlan = IcechunkExpiryPlan | GcPlan | DelegatedPlan


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
