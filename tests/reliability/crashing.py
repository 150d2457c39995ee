"""Killing a ``lakeops`` run with SIGKILL at a chosen point (issue 10, "Crashes").

This file is two things. Run as a script (``python crashing.py ARGV...``) it is a test-only wrapper
around ``spark_jobs.cli.main``: the JSON in ``$LAKEOPS_CRASH`` says which function marks the point,
and on that function's Nth matching call the process does ``os.kill(os.getpid(), SIGKILL)`` — no
``finally``, no ``atexit``, exactly what an OOM killer or a lost node does to a driver. Production
code has no hooks: the wrapper patches, in its own process only,

- ``storage``: :class:`~lakeops.storage.local.LocalStorage` ``put_if_absent``/``write`` of a path
  matching a regex, ``before`` the call, ``mid`` (the complete temporary file is on disk, the link or
  rename is not done) or ``after`` it: data and manifest writes, the Delta commit file, Iceberg
  metadata files, Icechunk branch files, ``_last_checkpoint``;
- ``units``: after :meth:`~spark_jobs.operations.SparkSettings.run_units` returned (the tasks wrote
  their files and the results reached the driver, nothing is committed yet);
- ``swap``: after the SQL catalog's pointer update (:meth:`lakeops.iceberg.catalog.SqlCatalog.swap`)
  returned;
- ``delete``: inside a deletion (a batch of :func:`lakeops.deletion.delete_batch`, Delta log expiry,
  an abandoned commit's cleanup), after part of its files are gone: ``delete_many`` of the first
  ``fraction`` of them, then the kill.

With ``record`` set instead, it runs to completion and logs every call of those functions (kind,
path), so a test draws N among the calls a clean run really makes. With ``slow_worker`` set, the
compaction task sleeps in its Spark worker after writing the worker's pid to that directory, so a
test can SIGKILL the executor's Python worker mid-task.

Imported, it gives the tests the subprocess runner (:func:`run`), the process-group cleanup, and
the budget: :data:`ROUNDS` seeds per kill point (``LAKEOPS_CRASH_ROUNDS``, 1 by default; ``make
test-reliability`` raises it).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]

#: Seeds (randomised kill points) per point; raise it with ``LAKEOPS_CRASH_ROUNDS`` for a long run.
ROUNDS = int(os.environ.get("LAKEOPS_CRASH_ROUNDS", "1"))
#: Seconds one killed or clean CLI run may take before the test fails as a hang.
RUN_LIMIT_S = 300


@dataclass(frozen=True)
class Point:
    """Where to die: ``kind`` of call (storage/units/swap/delete), ``pattern`` its path must match
    (storage), and ``when`` (before/mid/after for storage)."""

    name: str
    kind: str
    pattern: str = ""
    when: str = "after"

    def matches(self, kind: str, path: str) -> bool:
        return kind == self.kind and (not self.pattern or re.search(self.pattern, path) is not None)


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    calls: list[tuple[str, str]]

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


def run(
    argv: Sequence[str],
    *,
    kill: tuple[Point, int, float] | None = None,
    record: bool = False,
    slow_worker: Path | None = None,
    kill_after_s: float | None = None,
    while_running: Callable[[subprocess.Popen[str]], None] | None = None,
    workdir: Path,
) -> Outcome:
    """``lakeops ARGV`` in a subprocess through this wrapper, in its own process group (the driver,
    its JVM and the JVM's Python workers), which is SIGKILLed as a whole once the driver is gone so no
    orphaned JVM outlives the test. ``kill``: (point, N, fraction); ``kill_after_s``: SIGKILL the
    driver after that delay instead; ``while_running``: called with the process once started."""
    record_file = workdir / f"calls-{time.monotonic_ns()}.tsv" if record else None
    spec: dict[str, Any] = {
        "record": str(record_file) if record_file else None,
        "slow_worker": str(slow_worker) if slow_worker else None,
        "kill": None,
    }
    if kill is not None:
        point, nth, fraction = kill
        spec["kill"] = {
            "kind": point.kind,
            "pattern": point.pattern,
            "when": point.when,
            "nth": nth,
            "fraction": fraction,
        }
    env = {**os.environ, "LAKEOPS_CRASH": json.dumps(spec), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, str(HERE), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=workdir,
        start_new_session=True,  # its own process group: the JVM and the workers inherit it
    )
    timer = threading.Timer(kill_after_s, proc.send_signal, (signal.SIGKILL,)) if kill_after_s is not None else None
    try:
        if timer is not None:
            timer.start()
        if while_running is not None:
            while_running(proc)
        stdout, stderr = proc.communicate(timeout=RUN_LIMIT_S)
    finally:
        if timer is not None:
            timer.cancel()
        end_group(proc.pid)
    calls = read_calls(record_file) if record_file is not None and record_file.exists() else []
    return Outcome(proc.returncode, stdout, stderr, calls)


def read_calls(record_file: Path) -> list[tuple[str, str]]:
    """The (kind, path) calls a recorded run made."""
    return [(kind, path) for kind, _, path in (line.partition("\t") for line in record_file.read_text().splitlines())]


def end_group(pgid: int) -> None:
    """SIGKILL what is left of the process group ``pgid`` (one this module started) and wait for it."""
    import psutil

    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        alive = []
        for proc in psutil.process_iter(["pid"]):
            try:
                if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc.pid)
            except (ProcessLookupError, psutil.Error):
                continue
        if not alive:
            return
        time.sleep(0.1)


def descendants(pid: int) -> list[Any]:
    import psutil

    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.NoSuchProcess:
        return []


# ----------------------------------------------------------------------------------------------
# The wrapper (this file run as a script). Everything below runs in the killed process only.


def _die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class _Marker:
    """Counts matching calls; logs them (record mode) or dies on the Nth (kill mode)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.record = open(spec["record"], "a", encoding="utf-8") if spec.get("record") else None  # noqa: SIM115
        kill = spec.get("kill")
        self.point = Point("", kill["kind"], kill["pattern"], kill["when"]) if kill else None
        self.nth = kill["nth"] if kill else 0
        self.fraction = kill["fraction"] if kill else 0.0

    def hit(self, kind: str, path: str = "") -> str | None:
        """``when`` to die at, if this call is the chosen one; logs it in record mode."""
        with self.lock:
            if self.record is not None:
                self.record.write(f"{kind}\t{path}\n")
                self.record.flush()
            if self.point is None or not self.point.matches(kind, path):
                return None
            self.count += 1
            return self.point.when if self.count == self.nth else None


def install(spec: dict[str, Any], patch: Callable[[object, str, Any], None] = setattr) -> None:
    """Put the markers of ``spec`` in place through ``patch`` (a ``MonkeyPatch.setattr`` in a test's
    own process, for a recorded clean run; plain ``setattr`` in the wrapper)."""
    from lakeops.storage import local

    marker = _Marker(spec)
    storage_cls = local.LocalStorage

    def storage_method(name: str) -> None:
        original = getattr(storage_cls, name)

        def patched(self: Any, path: str, data: bytes) -> None:
            when = marker.hit("storage", path)
            if when == "before":
                _die()
            if when == "mid":
                self._write_temp(local._local(path), data)  # the complete temporary file, never linked
                _die()
            original(self, path, data)
            if when == "after":
                _die()

        patch(storage_cls, name, patched)

    storage_method("put_if_absent")
    storage_method("write")

    from spark_jobs.operations import SparkSettings

    run_units = SparkSettings.run_units

    def units(self: Any, *args: Any, **kwargs: Any) -> Any:
        results = run_units(self, *args, **kwargs)
        if marker.hit("units"):
            _die()
        return results

    patch(SparkSettings, "run_units", units)

    from lakeops.iceberg.catalog import SqlCatalog

    swap = SqlCatalog.swap

    def swapped(self: Any, expected: str, new: str, payload: bytes) -> None:
        swap(self, expected, new, payload)
        if marker.hit("swap", new):
            _die()

    patch(SqlCatalog, "swap", swapped)

    delete_many = storage_cls.delete_many

    def deleting(self: Any, paths: Any) -> int:
        paths = list(paths)
        if marker.hit("delete", paths[0] if paths else ""):
            delete_many(self, paths[: int(len(paths) * marker.fraction)])
            _die()
        return delete_many(self, paths)

    patch(storage_cls, "delete_many", deleting)

    if spec.get("slow_worker"):
        _slow_compaction(spec["slow_worker"])


def _slow_compaction(pid_dir: str) -> None:
    """Compaction tasks that first announce their worker's pid and wait to be killed."""
    import functools

    from lakeops.ops import compaction

    task_for = compaction.task_for

    def slow_task_for(plan: Any) -> Any:
        return functools.partial(_slow_task, task_for(plan), pid_dir)

    compaction.task_for = slow_task_for


def _slow_task(task: Callable[[Any], Any], pid_dir: str, unit: Any) -> Any:
    # Runs in the Spark worker; a function of ``__main__``, so cloudpickle ships it by value.
    import os as _os
    import time as _time

    with open(_os.path.join(pid_dir, f"{_os.getpid()}.pid"), "w") as f:
        f.write(str(_os.getpid()))
    _time.sleep(120)
    return task(unit)


if __name__ == "__main__":
    install(json.loads(os.environ["LAKEOPS_CRASH"]))
    from spark_jobs.cli import main

    sys.exit(main(sys.argv[1:]))
