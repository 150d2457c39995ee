"""A compaction cut to a bounded amount of work, so a table too large for one maintenance window is
compacted a piece per window (the planner's ``max_rewrite_bytes``; :mod:`lakeops.planning.split`).

The plan's groups are kept in the order the format planned them, while their input bytes stay
within the bound (at least one group, so every piece makes progress); the next run plans again and
starts where this one stopped, since the files it merged are no longer small.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol, Self, TypeVar

__all__ = ["first_groups"]

G = TypeVar("G")


class _GroupedPlan(Protocol[G]):
    @property
    def groups(self) -> Sequence[G]: ...

    def work_bytes(self, units: Sequence[G]) -> int | None: ...

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Self: ...


P = TypeVar("P", bound=_GroupedPlan[Any])


def first_groups(plan: P, max_rewrite_bytes: int | None, partition: Callable[[Any], Hashable] | None = None) -> P:
    """``plan`` with only its first groups whose input bytes fit ``max_rewrite_bytes`` (None: all);
    ``partition``: a group's partition, to count the plan's ``partitions_compacted`` again."""
    if max_rewrite_bytes is None:
        return plan
    kept: list[Any] = []
    total = 0
    for group in plan.groups:
        size = plan.work_bytes([group]) or 0
        if kept and total + size > max_rewrite_bytes:
            break
        kept.append(group)
        total += size
    update: dict[str, Any] = {"groups": kept}
    if partition is not None:
        update["partitions_compacted"] = len({partition(group) for group in kept})
    return plan.model_copy(update=update)
