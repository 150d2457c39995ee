"""Run one runner in a child process (:mod:`bench.child`) and measure it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.child import MARKER
from bench.memory import TreeSampler

PROJECT = Path(__file__).resolve().parent.parent


class RunFailed(RuntimeError):
    """A contender's run exited non-zero or printed no result."""


@dataclass(frozen=True)
class Measurement:
    seconds: float
    process_s: float  # the whole child, interpreter and imports included
    driver_peak_mb: float
    jvm_peak_mb: float
    worker_peak_mb: float
    tree_peak_mb: float
    info: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def measure(runner: str, params: dict[str, Any], spec_dir: Path) -> Measurement:
    spec = spec_dir / "spec.json"
    spec.write_text(json.dumps({"runner": runner, "params": params}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.child", str(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=PROJECT,
    )
    sampler = TreeSampler(proc.pid).start()
    stdout, stderr = proc.communicate()
    peaks = sampler.stop()
    process_s = time.perf_counter() - started
    lines = [line for line in stdout.splitlines() if line.startswith(MARKER)]
    if proc.returncode != 0 or not lines:
        raise RunFailed(f"{runner} exited {proc.returncode}:\n{stderr[-3000:]}")
    result = json.loads(lines[-1][len(MARKER) :])
    return Measurement(
        seconds=result["seconds"],
        process_s=process_s,
        driver_peak_mb=result["driver_peak_mb"],
        jvm_peak_mb=peaks.jvm_mb,
        worker_peak_mb=peaks.worker_mb,
        tree_peak_mb=peaks.tree_mb,
        info=result["info"],
    )
