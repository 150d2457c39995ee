"""One measured run in a fresh process: ``python -m bench.child SPEC.json``.

A fresh process per run gives every contender the same cold start (ours pays its Spark session
start-up, as a user's ``lakeops`` command does) and its own peak-memory figure. The last line of
stdout is ``BENCH-RESULT {json}``: the timed seconds (imports excluded, the operation's own start-up
included), the driver's peak RSS (``VmHWM``), and the runner's facts.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

MARKER = "BENCH-RESULT "


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    from bench.runners import RUNNERS

    runner = RUNNERS[spec["runner"]]
    started = time.perf_counter()
    info = runner(spec["params"])
    seconds = time.perf_counter() - started
    print(MARKER + json.dumps({"seconds": seconds, "driver_peak_mb": _peak_mb(), "info": info}), flush=True)


def _peak_mb() -> float:
    """This process's peak RSS. Linux's ``VmHWM`` belongs to the process image since ``exec``;
    ``ru_maxrss`` would also carry the parent's peak from before the fork (the harness's own)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    main(sys.argv[1])
