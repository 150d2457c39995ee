"""The reliability suite's session summary: which phase of its run each SIGKILL hit (issue 19)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from reliability.crashing import PHASES, PHASES_HIT


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not PHASES_HIT:
        return
    terminalreporter.section("kills by phase")
    counts = Counter(phase for _, phase in PHASES_HIT)
    terminalreporter.write_line(", ".join(f"{phase}: {counts[phase]}" for phase in PHASES if counts[phase]))
    for what, _ in PHASES_HIT:
        terminalreporter.write_line(f"  {what}")
