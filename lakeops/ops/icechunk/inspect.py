"""Icechunk inspection (``lakeops inspect REPO``): the repository's refs, objects and what maintenance
would reclaim (:mod:`lakeops.icechunk.maintenance.summary`: the seed format, Icechunk format 1 and 2)."""

from __future__ import annotations

import time

from lakeops.icechunk.maintenance.summary import RepositorySummary, summarize, summarize_versioned
from lakeops.ops.report import InspectionReport, TableState
from lakeops.ops.table import Table

__all__ = ["OPERATIONS", "IcechunkInspectReport", "inspect_repository"]

#: What lakeops does to an Icechunk repository (checkpoints do not apply to Icechunk).
OPERATIONS = ("read", "compact", "expire", "orphans", "cdc")


class IcechunkInspectReport(RepositorySummary, InspectionReport):
    """:class:`RepositorySummary` as a report; the human table names the branches and tags too.
    ``format_version``: the Icechunk format (None: the seed format); ``supported_operations`` and
    ``refused_operations`` (with why) say what lakeops runs on a repository of that format: every
    operation on each format it knows, so nothing is refused today, but the fields keep the shape the
    other formats' reports have."""

    format_version: int | None = None
    supported_operations: list[str] = []
    refused_operations: dict[str, str] = {}

    @property
    def state_version(self) -> str:
        """The snapshot id at the tip of ``branch``."""
        return self.snapshot

    def table_state(self) -> TableState:
        """Chunk objects stand for files: packing merges them as compaction merges small files."""
        return TableState(
            format="icechunk",
            small_files=self.packable_chunk_objects,
            live_files=self.chunk_objects,
            snapshots=self.snapshots,
            oldest_snapshot_age_s=self.oldest_snapshot_age_s,
            reclaimable_bytes=self.reclaimable_bytes,
        )

    def summary_lines(self) -> list[tuple[str, str]]:
        refs = [("branches", ", ".join(self.branches)), ("tags", ", ".join(self.tags) or "-")]
        operations = [("supported operations", ", ".join(self.supported_operations))]
        operations += [(f"refused {op}", why) for op, why in self.refused_operations.items()]
        return [*super().summary_lines()[:4], *refs, *super().summary_lines()[4:], *operations]


def inspect_repository(handle: Table, started: float) -> IcechunkInspectReport:
    """The handle's repository summarised from its state (one reader for every figure)."""
    now_ms = int(time.time() * 1000)
    location, storage, state = handle.root, handle.storage(), handle.icechunk_state()
    version = state.format_version
    if version is None:
        summary = summarize(storage, location, now_ms=now_ms, repo=state.seed)
    else:
        summary = summarize_versioned(storage, location, now_ms=now_ms, repo=state.versioned)
    return IcechunkInspectReport(
        format="icechunk",
        table=location,
        duration_s=time.monotonic() - started,
        format_version=version,
        supported_operations=list(OPERATIONS),
        **summary.model_dump(),
    )
