"""Runners: one named function per contender and operation, run in a child process by
:mod:`bench.child`. Each takes the workload's parameters and returns facts about what it did
(files written, rows read) for the results, so a fast run that did nothing shows as such."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.runners import limits, ours, peers

Params = dict[str, Any]
Runner = Callable[[Params], dict[str, Any]]

RUNNERS: dict[str, Runner] = {
    **{f"ours.{name}": fn for name, fn in ours.RUNNERS.items()},
    **{f"peer.{name}": fn for name, fn in peers.RUNNERS.items()},
    **{f"limit.{name}": fn for name, fn in limits.RUNNERS.items()},
}
