"""What a generated workload tells the runners, and what the results record about its size."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Workload:
    """A generated table under ``root``.

    ``target`` is what ``run_operation`` takes (a path, or ``namespace.table`` for a catalog table);
    ``params`` carries what runners need besides it (catalog URI, table id, the garbage list);
    ``size`` is the work in the workload's own units (files, actions, rows, objects), recorded in the
    results and used for the slope; ``bytes`` the data it holds.
    """

    root: Path
    target: str
    size: int
    unit: str
    bytes: int = 0
    params: dict[str, Any] = field(default_factory=dict)


def tree_bytes(root: Path) -> int:
    """Bytes of every file under ``root``."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
