"""A Delta table of two partitions of six small files each (written by delta-rs), and the OPTIMIZE
commits lakeops made of it: for tests of compaction committed in batches (partial progress)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakeops.delta.maintenance import compaction


def two_partitions(root: Path) -> str:
    """Ids 0-59 in twelve files, six per partition ``day`` of ``x`` and ``y``."""
    location = str(root)
    for i in range(6):
        batch = pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "day": pa.array(["x", "y"] * 5)})
        write_deltalake(location, batch, mode="append", partition_by=["day"])
    return location


def optimize_commits(location: str) -> list[list[str]]:
    """The removed paths of each OPTIMIZE commit, in version order."""
    commits = []
    for path in sorted(Path(location, "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in path.read_text().splitlines() if line]
        if any(a.get("commitInfo", {}).get("operation") == "OPTIMIZE" for a in actions):
            commits.append(sorted(a["remove"]["path"] for a in actions if "remove" in a))
    return commits


def fail_second_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rewrite of group 1 fails (``OSError: disk full``); the others run as they are."""
    rewrite = compaction.rewrite_group

    def second_fails(group: compaction.RewriteGroup) -> compaction.RewriteResult:
        if group.group_id == 1:
            raise OSError("disk full")
        return rewrite(group)

    monkeypatch.setattr(compaction, "rewrite_group", second_fails)
