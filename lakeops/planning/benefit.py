"""What each maintenance action would gain, in units an operator recognises, from a table's
observation (its ``inspect`` numbers and the operations' dry-run plans; nothing is executed).

To rank different operations against each other the gains are summed into *points* at fixed
exchange rates (:data:`RATES`); one point is one file a full scan of the table no longer opens,
the cost every reader pays on every query until compaction runs. The other rates say how much an
operator values the other gains against that: a log file a reader no longer replays costs a reader
as much as a data file open (both are one object GET before the first row), a GiB of storage
reclaimed is worth 16 points, a version expired a tenth of a point (metadata every listing pages
through), a commit the CDC consumer has not extracted yet 2 points (freshness is what its users
wait for).

What a retention floor or a consumer watermark keeps is never counted: the observation's
``expirable_*`` and ``reclaimable_*`` numbers are past the table's retention already, and what a
consumer still needs (``*_held``) is subtracted; an action left with nothing is *blocked*, with the
reason, and never chosen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from lakeops.planning.models import Action, Benefit, CompactionWork, TableObservation, metric_sum
from lakeops.units import format_size

__all__ = ["RATES", "Candidate", "candidates", "compaction_candidate", "realised_points"]

_GIB = 1024**3

#: Points per unit of each gain (see the module docstring for why).
RATES: dict[str, float] = {
    "read_amplification_avoided": 1.0,
    "log_files_saved": 1.0,
    "gib_reclaimed": 16.0,
    "versions_removed": 0.1,
    "cdc_versions_closed": 2.0,
}


@dataclass(frozen=True)
class Candidate:
    """An action with its benefit and the work its plan does (bytes and files, for the cost model);
    ``blocked``: why a floor or watermark forbids it (never chosen); ``compaction``: what a compaction
    rewrites (what :mod:`lakeops.planning.split` cuts into pieces)."""

    action: Action
    benefit: Benefit
    work_bytes: int
    work_files: int
    blocked: str | None = None
    compaction: CompactionWork | None = None


def _reclaimed_points(nbytes: int) -> float:
    return RATES["gib_reclaimed"] * nbytes / _GIB


def compaction_candidate(table: str, work: CompactionWork, *, max_bytes: int | None = None) -> Candidate | None:
    """Compaction of ``work`` on ``table`` (``max_bytes``: a piece of a larger one); None: it gains nothing."""
    avoided = max(work.files_removed - work.files_added, 0)
    if avoided == 0:
        return None
    where = f"partition {work.partition}" if work.partition is not None else "the table"
    benefit = Benefit(
        files_removed=work.files_removed,
        read_amplification_avoided=avoided,
        points=RATES["read_amplification_avoided"] * avoided,
        why=f"{work.files_removed} small files in {where} merge into {work.files_added}: "
        f"a full scan opens {avoided} fewer files",
    )
    action = Action(table=table, operation="compaction", partition=work.partition, max_bytes=max_bytes)
    # Read every input once and write it once.
    return Candidate(action, benefit, 2 * work.bytes_removed, work.files_removed + work.files_added, compaction=work)


def _compaction(obs: TableObservation) -> list[Candidate]:
    return [c for c in (compaction_candidate(obs.table, work) for work in obs.compaction) if c is not None]


def _checkpoint(obs: TableObservation) -> list[Candidate]:
    if obs.checkpoint_lag <= 1:
        return []
    saved = obs.checkpoint_lag - 1  # the checkpoint itself is read instead
    benefit = Benefit(
        log_files_saved=saved,
        points=RATES["log_files_saved"] * saved,
        why=f"{obs.checkpoint_lag} log files replayed by every reader fold into one",
    )
    action = Action(table=obs.table, operation="checkpoint")
    return [Candidate(action, benefit, obs.checkpoint_bytes, obs.checkpoint_lag + 1)]


def _expiry(obs: TableObservation) -> list[Candidate]:
    if obs.expirable_versions == 0:
        return []
    action = Action(table=obs.table, operation="expiry")
    allowed = max(obs.expirable_versions - obs.expirable_versions_held, 0)
    if allowed == 0:
        reason = (
            f"consumer watermark: the CDC output still needs all {obs.expirable_versions} versions past the "
            "retention floor"
        )
        return [Candidate(action, Benefit(why="nothing the consumer has extracted"), 0, 0, blocked=reason)]
    share = allowed / obs.expirable_versions
    nbytes, files = int(obs.expirable_bytes * share), round(obs.expirable_files * share)
    held = f" ({obs.expirable_versions_held} kept for the CDC consumer)" if obs.expirable_versions_held else ""
    benefit = Benefit(
        versions_removed=allowed,
        bytes_reclaimed=nbytes,
        points=RATES["versions_removed"] * allowed + _reclaimed_points(nbytes),
        why=f"{allowed} versions past retention{held}, {format_size(nbytes)} freed",
    )
    return [Candidate(action, benefit, 0, files)]


def _orphans(obs: TableObservation) -> list[Candidate]:
    if obs.reclaimable_bytes == 0 and obs.reclaimable_files == 0:
        return []
    action = Action(table=obs.table, operation="orphans")
    allowed = max(obs.reclaimable_bytes - obs.reclaimable_bytes_held, 0)
    if allowed == 0 and obs.reclaimable_bytes_held:
        reason = "consumer watermark: every reclaimable file is still needed by the CDC output's next extraction"
        return [Candidate(action, Benefit(why="nothing the consumer has extracted"), 0, 0, blocked=reason)]
    benefit = Benefit(
        bytes_reclaimed=allowed,
        points=_reclaimed_points(allowed),
        why=f"{obs.reclaimable_files} files past retention, {format_size(allowed)} freed",
    )
    # Listing every file is the work, whatever is deleted.
    return [Candidate(action, benefit, 0, obs.listed_files + obs.reclaimable_files)]


def _cdc(obs: TableObservation) -> list[Candidate]:
    if obs.cdc_lag_versions == 0:
        return []
    benefit = Benefit(
        cdc_versions_closed=obs.cdc_lag_versions,
        points=RATES["cdc_versions_closed"] * obs.cdc_lag_versions,
        why=f"{obs.cdc_lag_versions} commits the CDC output does not hold yet",
    )
    action = Action(table=obs.table, operation="cdc")
    return [Candidate(action, benefit, 2 * obs.cdc_bytes, obs.cdc_lag_versions)]


def candidates(obs: TableObservation) -> list[Candidate]:
    """Every action with a gain on the observed table (and those a floor blocks, with why)."""
    return [*_compaction(obs), *_checkpoint(obs), *_expiry(obs), *_orphans(obs), *_cdc(obs)]


def realised_points(operation: str, metrics: Mapping[str, Any]) -> float:
    """The points a finished run of ``operation`` captured, from its report's metrics, at the same
    rates as its plan was valued (what the plan's review compares with the prediction)."""

    get = partial(metric_sum, metrics)

    if operation == "compaction":
        return RATES["read_amplification_avoided"] * max(get("files_removed") - get("files_added"), 0)
    if operation == "checkpoint":
        if "manifests_replaced" in metrics:
            folded = get("manifests_replaced") - get("manifests_created")
        else:
            folded = get("version") - get("previous_checkpoint_version") - ("previous_checkpoint_version" in metrics)
        return RATES["log_files_saved"] * max(folded, 0)
    if operation == "expiry":
        versions = get("deleted_commits") + get("snapshots_expired")
        return RATES["versions_removed"] * versions + _reclaimed_points(get("deleted_bytes"))
    if operation == "orphans":
        return _reclaimed_points(get("deleted_bytes"))
    if operation == "cdc":
        return RATES["cdc_versions_closed"] * get("versions_extracted")
    raise ValueError(f"no such planned operation: {operation}")
