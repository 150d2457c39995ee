"""The benchmark cases of issue 9: a workload generator, its sizes per tier, and the contenders.

Each case's ``sizes`` gives the generator's keyword arguments per tier; ``scaled`` names the one
multiplied by 1x/4x/16x in ``full``, whose base is a sixteenth of the issue's size so that 16x is the
issue's scale (2,000 files / 2 GB, 1,000,000 actions, 100,000 tombstones, 10,000,000 change rows).
A case without a peer (Iceberg compaction, Icechunk GC) is compared with the limit only; one without
a limit (Iceberg expiry: metadata only) with the peer only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.workloads import delta_log, delta_tables, iceberg_tables, icechunk_repo
from bench.workloads.model import Workload

Generator = Callable[..., Workload]


@dataclass(frozen=True)
class Case:
    name: str
    title: str
    generate: Generator
    sizes: dict[str, dict[str, int]]
    scaled: str
    ours: str
    peer: str | None = None
    limit: str | None = None
    #: Target ratios the README reports against (goals, never tests).
    targets: tuple[tuple[str, float], ...] = (("ours_over_peer", 1.0),)
    note: str = ""

    def workload(self, root: Path, tier: str, scale: int) -> Workload:
        kwargs: dict[str, Any] = dict(self.sizes[tier])
        kwargs[self.scaled] *= scale
        return self.generate(root, **kwargs)

    def contenders(self) -> dict[str, str]:
        named = {"ours": self.ours, "peer": self.peer, "limit": self.limit}
        return {role: runner for role, runner in named.items() if runner is not None}


def _checkpointed_log(root: Path, **kwargs: int) -> Workload:
    """The checkpoint workload with a checkpoint already written (by delta-rs, read by both)."""
    from deltalake import DeltaTable

    workload = delta_log.add_log(root, **kwargs)
    DeltaTable(str(root)).create_checkpoint()
    return workload


#: Issue 24's goals: compaction ahead of delta-rs by a tenth and within 1.3x the limit.
_COMPACTION_TARGETS = (("ours_over_peer", 0.9), ("ours_over_limit", 1.3))

CASES: tuple[Case, ...] = (
    Case(
        name="delta_compaction",
        title="Delta compaction (small files by day)",
        generate=delta_tables.small_files,
        sizes={
            "tiny": {"files": 10, "rows_per_file": 2_000, "days": 2},
            "quick": {"files": 200, "rows_per_file": 10_000, "days": 10},
            "full": {"files": 125, "rows_per_file": 26_000, "days": 20},  # 16x: 2,000 files, ~2 GB
        },
        scaled="files",
        ours="ours.compact",
        peer="peer.compact",
        limit="limit.rewrite",
        targets=_COMPACTION_TARGETS,
    ),
    Case(
        name="delta_checkpoint",
        title="Delta checkpoint (log-only adds)",
        generate=delta_log.add_log,
        sizes={"tiny": {"actions": 2_000}, "quick": {"actions": 100_000}, "full": {"actions": 62_500}},
        scaled="actions",
        ours="ours.checkpoint",
        peer="peer.checkpoint",
        limit="limit.log_to_parquet",
    ),
    Case(
        name="delta_snapshot_load",
        title="Delta snapshot from its checkpoint",
        generate=_checkpointed_log,
        sizes={"tiny": {"actions": 2_000}, "quick": {"actions": 100_000}, "full": {"actions": 62_500}},
        scaled="actions",
        ours="ours.snapshot",
        peer="peer.snapshot",
        limit="limit.read_checkpoint",
        note="library only (no Spark): the planning every operation starts with",
    ),
    Case(
        name="delta_vacuum",
        title="Delta vacuum (tombstoned files)",
        generate=delta_log.tombstones,
        sizes={"tiny": {"files": 200}, "quick": {"files": 10_000}, "full": {"files": 6_250}},
        scaled="files",
        ours="ours.vacuum",
        peer="peer.vacuum",
        limit="limit.delete",
        note="delta-rs with full=True (untracked files too, as ours)",
    ),
    Case(
        name="delta_cdc",
        title="Delta change data feed",
        generate=delta_tables.change_feed,
        sizes={"tiny": {"rows": 10_000}, "quick": {"rows": 1_000_000}, "full": {"rows": 481_250}},  # 1.3 changes a row
        scaled="rows",
        ours="ours.cdc",
        peer="peer.cdf_write",
        limit="limit.rewrite",
        targets=(("ours_over_peer", 1.0), ("ours_over_limit", 1.1)),
        note="like for like: delta-rs load_cdf, then write_deltalake of the changes (same codec and level as ours)",
    ),
    Case(
        name="iceberg_compaction",
        title="Iceberg compaction (PyIceberg small files)",
        generate=iceberg_tables.small_files,
        sizes={
            "tiny": {"files": 10, "rows_per_file": 2_000, "days": 2},
            "quick": {"files": 200, "rows_per_file": 10_000, "days": 10},
            "full": {"files": 125, "rows_per_file": 26_000, "days": 20},
        },
        scaled="files",
        ours="ours.compact",
        limit="limit.rewrite",
        targets=(("ours_over_limit", 1.3),),
        note="no peer compacts Iceberg from Python; compare with the limit and the Delta figure",
    ),
    Case(
        name="iceberg_expiry",
        title="Iceberg snapshot expiry",
        generate=iceberg_tables.many_snapshots,
        sizes={"tiny": {"snapshots": 5}, "quick": {"snapshots": 100}, "full": {"snapshots": 125}},
        scaled="snapshots",
        ours="ours.expire",
        peer="peer.expire",
        targets=(("ours_over_peer", 2.0),),
        note="PyIceberg expires metadata only; ours also deletes the expired manifest lists",
    ),
    Case(
        name="icechunk_gc",
        title="Icechunk garbage collection",
        generate=icechunk_repo.chunk_objects,
        sizes={"tiny": {"objects": 200}, "quick": {"objects": 10_000}, "full": {"objects": 6_250}},
        scaled="objects",
        ours="ours.gc",
        limit="limit.delete",
        targets=(("ours_over_limit", 2.0),),
        note="no peer runs on this Icechunk format; the limit lists and deletes the known garbage",
    ),
)

BY_NAME = {case.name: case for case in CASES}
