"""A Delta log read and written as plain JSON, independently of lakeops: the tests that build tables
"by the specification" add commits by hand and replay the live ``add`` actions themselves
("Action Reconciliation" over JSON commits; the tables they build have no checkpoint)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def log_commits(location: str) -> list[tuple[int, list[dict[str, Any]]]]:
    """Every commit of the log, as (version, actions)."""
    log = Path(location) / "_delta_log"
    return [
        (int(p.name[:20]), [json.loads(line) for line in p.read_text().splitlines() if line.strip()])
        for p in sorted(log.glob("*.json"))
    ]


def live_adds(location: str) -> dict[str, dict[str, Any]]:
    """The live ``add`` actions by path, in the order they were committed."""
    live: dict[str, dict[str, Any]] = {}
    for _, actions in log_commits(location):
        for action in actions:
            if "add" in action:
                live[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return live


def commit_next(location: str, *actions: dict[str, Any]) -> int:
    """Another writer's commit of ``actions`` at the next version; returns that version."""
    version = log_commits(location)[-1][0] + 1
    lines = [{"commitInfo": {"operation": "TEST", "txnId": f"test-{version}"}}, *actions]
    path = Path(location) / "_delta_log" / f"{version:020d}.json"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return version
