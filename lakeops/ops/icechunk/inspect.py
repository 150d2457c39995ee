"""Icechunk inspection (``lakeops inspect REPO``): the repository's refs, objects and what maintenance
would reclaim (:mod:`lakeops.icechunk.maintenance.summary`: the seed format, Icechunk format 1 and 2)."""

from __future__ import annotations

import time

from lakeops.icechunk.maintenance.summary import RepositorySummary, summarize, summarize_versioned
from lakeops.icechunk.versioned import format_version
from lakeops.ops.report import InspectionReport, TableState
from lakeops.storage import Storage

__all__ = ["IcechunkInspectReport", "inspect_repository"]


class IcechunkInspectReport(RepositorySummary, InspectionReport):
    """:class:`RepositorySummary` as a report; the human table names the branches and tags too."""

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
        return [*super().summary_lines()[:4], *refs, *super().summary_lines()[4:]]


def inspect_repository(location: str, storage: Storage, started: float) -> IcechunkInspectReport:
    now_ms = int(time.time() * 1000)
    versioned = format_version(storage, location) is not None
    summary = (summarize_versioned if versioned else summarize)(storage, location, now_ms=now_ms)
    return IcechunkInspectReport(
        format="icechunk", table=location, duration_s=time.monotonic() - started, **summary.model_dump()
    )
