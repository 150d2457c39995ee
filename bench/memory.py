"""Peak memory of a run's process tree, sampled with psutil: the driver, the Spark JVM, and the
largest single Python worker (in local mode, an executor's Python side). Sampling every 50 ms can
miss a shorter spike; the driver's own figure comes from ``getrusage`` in the child, which does not."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import psutil

INTERVAL_S = 0.05


@dataclass
class Peaks:
    jvm_mb: float = 0.0
    worker_mb: float = 0.0
    tree_mb: float = 0.0


class TreeSampler:
    """Samples the tree under ``pid`` on a thread from ``start()`` until ``stop()``."""

    def __init__(self, pid: int) -> None:
        self._root = psutil.Process(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.peaks = Peaks()

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def stop(self) -> Peaks:
        self._stop.set()
        self._thread.join()
        return self.peaks

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            try:
                self._sample()
            except psutil.Error:
                continue  # the tree changed while we walked it; the next sample sees the new one

    def _sample(self) -> None:
        total = 0.0
        for proc in [self._root, *self._root.children(recursive=True)]:
            try:
                mb = proc.memory_info().rss / 2**20
                name = proc.name()
            except psutil.Error:
                continue
            total += mb
            if proc.pid == self._root.pid:
                continue
            if "java" in name:
                self.peaks.jvm_mb = max(self.peaks.jvm_mb, mb)
            elif "python" in name:
                self.peaks.worker_mb = max(self.peaks.worker_mb, mb)
        self.peaks.tree_mb = max(self.peaks.tree_mb, total)
