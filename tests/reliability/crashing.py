"""Killing a ``lakeops`` run with SIGKILL at a chosen point (issue 10, "Crashes").

This file is two things. Run as a script (``python crashing.py ARGV...``) it is a test-only wrapper
around ``spark_jobs.cli.main``: the JSON in ``$LAKEOPS_CRASH`` says which function marks the point,
and on that function's Nth matching call the process does ``os.kill(os.getpid(), SIGKILL)`` — no
``finally``, no ``atexit``, exactly what an OOM killer or a lost node does to a driver. Production
code has no hooks: the wrapper patches, in its own process only,

- ``storage``: :class:`~lakeops.storage.local.LocalStorage` ``put_if_absent``/``write``/
  ``replace_if_match`` of a path matching a regex, ``before`` the call, ``mid`` (the complete
  temporary file is on disk, the link or rename is not done) or ``after`` it: data and manifest
  writes, the Delta commit file, Iceberg metadata files, Icechunk branch files, ``_last_checkpoint``;
- ``units``: after :meth:`~spark_jobs.spark_settings.SparkSettings.run_units` returned (the tasks wrote
  their files and the results reached the driver, nothing is committed yet);
- ``swap``: after the SQL catalog's pointer update (:meth:`lakeops.iceberg.sql_catalog.SqlCatalog.swap`)
  returned;
- ``delete``: inside a deletion (a batch of :func:`lakeops.deletion.delete_batch`, Delta log expiry,
  an abandoned commit's cleanup), after part of its files are gone: ``delete_many`` of the first
  ``fraction`` of them, then the kill;
- ``phase``: before the Nth call of any of those, or of a storage read (``io``: ``read``,
  ``read_range``, ``list``, ``stat``, ``exists``), made in a named phase of the run (:data:`PHASES`:
  ``planning``, ``tasks``, ``committing``, ...).

The wrapper follows the run's phase from the calls it sees and journals every change with its time,
so a test says which phase each kill hit, and a kill "after a delay" counts from ``planning``, not
from the interpreter's start (whose seconds of imports used to take most random kills). With
``record`` set, it runs to completion and logs every call (kind, phase, path), so a test draws N
among the calls a clean run really makes. With ``slow_worker`` set, the
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
#: (what was killed where, the phase it was in) for every kill of the session, for its summary.
PHASES_HIT: list[tuple[str, str]] = []


#: The phases of a run, in order, as the wrapper's journal names them: ``start-up`` (the interpreter and
#: imports, before ``main``), ``planning`` (reading the table), ``tasks`` (plan units running, on the
#: driver or on Spark), ``files-written`` (every unit's files written, nothing committed), ``committing``
#: (commit files, manifests, metadata being written), ``before-pointer`` (the new metadata or checkpoint
#: is complete but the pointer readers follow — the SQL catalog row, ``_last_checkpoint`` — is not yet
#: updated), ``committed``, ``deleting`` (removing what the commit made garbage), ``audit`` (the run's
#: record), ``done``.
PHASES = (
    "start-up",
    "planning",
    "tasks",
    "files-written",
    "committing",
    "before-pointer",
    "committed",
    "deleting",
    "audit",
    "done",
)
#: Writes that complete a commit whose pointer is updated afterwards (Iceberg metadata in a catalog,
#: Delta checkpoint parts) and writes that are the pointer or the commit itself.
_BEFORE_POINTER = re.compile(r"\.metadata\.json$|\.checkpoint(\.\d{10}\.\d{10})?\.parquet$")
_POINTER = re.compile(r"_delta_log/\d{20}\.json$|_last_checkpoint$|/refs/[^/]+$")
#: lakeops's probe that a new output location is writable.
_PROBE = "/.lakeops-write-check-"


@dataclass(frozen=True)
class Call:
    """One observed call: ``kind`` (storage write, io read, units, swap, delete), the phase it ran in,
    and its path."""

    kind: str
    phase: str
    path: str = ""


@dataclass(frozen=True)
class Point:
    """Where to die: ``kind`` of call (storage/units/swap/delete) and ``pattern`` its path must match
    (storage), with ``when`` (before/mid/after for storage); or ``kind="phase"`` and ``pattern`` a
    phase of :data:`PHASES`: before the Nth call of any kind made in that phase."""

    name: str
    kind: str
    pattern: str = ""
    when: str = "after"

    def matches(self, call: Call) -> bool:
        if self.kind == "phase":
            return call.phase == self.pattern
        return call.kind == self.kind and (not self.pattern or re.search(self.pattern, call.path) is not None)


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    calls: list[Call]
    #: The phases the run entered, in order, with their monotonic start times (the wrapper's journal).
    journal: list[tuple[float, str]]

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL

    @property
    def phase(self) -> str:
        """The phase the run was in when it ended: where a kill landed."""
        return self.journal[-1][1] if self.journal else "start-up"


def run(
    argv: Sequence[str],
    *,
    kill: tuple[Point, int, float] | None = None,
    record: bool = False,
    slow_worker: Path | None = None,
    kill_in: tuple[str, float] | None = None,
    while_running: Callable[[subprocess.Popen[str]], None] | None = None,
    workdir: Path,
) -> Outcome:
    """``lakeops ARGV`` in a subprocess through this wrapper, in its own process group (the driver,
    its JVM and the JVM's Python workers), which is SIGKILLed as a whole once the driver is gone so no
    orphaned JVM outlives the test. ``kill``: (point, N, fraction); ``kill_in``: (phase, seconds):
    SIGKILL the driver that long after its journal shows it entered that phase (not at all if it ends
    first); ``while_running``: called with the process once started."""
    stamp = time.monotonic_ns()
    record_file = workdir / f"calls-{stamp}.tsv" if record else None
    journal_file = workdir / f"phases-{stamp}.tsv"
    spec: dict[str, Any] = {
        "record": str(record_file) if record_file else None,
        "journal": str(journal_file),
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
    try:
        if kill_in is not None:
            _kill_in_phase(proc, journal_file, *kill_in)
        if while_running is not None:
            while_running(proc)
        stdout, stderr = proc.communicate(timeout=RUN_LIMIT_S)
    finally:
        end_group(proc.pid)
    calls = read_calls(record_file) if record_file is not None and record_file.exists() else []
    return Outcome(proc.returncode, stdout, stderr, calls, read_journal(journal_file))


def _kill_in_phase(proc: subprocess.Popen[str], journal: Path, phase: str, delay: float) -> None:
    """SIGKILL ``proc`` ``delay`` seconds after its journal shows ``phase`` (not at all if it ends first).
    Polled every few milliseconds: a shorter phase may be over when the kill lands."""
    deadline = time.monotonic() + RUN_LIMIT_S
    while proc.poll() is None and time.monotonic() < deadline:
        if any(entered == phase for _, entered in read_journal(journal)):
            try:
                proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
            return
        time.sleep(0.002)


def read_calls(record_file: Path) -> list[Call]:
    """The calls a recorded run made."""
    return [Call(*line.split("\t", 2)) for line in record_file.read_text().splitlines()]


def read_journal(journal: Path) -> list[tuple[float, str]]:
    """(monotonic time, phase) of every phase a run entered, in order."""
    if not journal.exists():
        return []
    entries = (line.split("\t") for line in journal.read_text().splitlines())
    return [(float(at), phase) for at, phase in (e for e in entries if len(e) == 2)]


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
    """Follows the run's phase (journaled on every change), counts matching calls, logs them (record
    mode) or dies on the Nth (kill mode)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.phase = PHASES[0]
        self.record = open(spec["record"], "a", encoding="utf-8") if spec.get("record") else None  # noqa: SIM115
        self.journal = open(spec["journal"], "a", encoding="utf-8") if spec.get("journal") else None  # noqa: SIM115
        kill = spec.get("kill")
        self.point = Point("", kill["kind"], kill["pattern"], kill["when"]) if kill else None
        self.nth = kill["nth"] if kill else 0
        self.fraction = kill["fraction"] if kill else 0.0
        self._log_phase()

    def _log_phase(self) -> None:
        if self.journal is not None:
            self.journal.write(f"{time.monotonic()}\t{self.phase}\n")  # one write: a kill never halves it
            self.journal.flush()

    def enter(self, phase: str) -> None:
        with self.lock:
            self._enter(phase)

    def _enter(self, phase: str) -> None:
        if phase != self.phase:
            self.phase = phase
            self._log_phase()

    def _phase_of(self, kind: str, path: str) -> str:
        """The phase a call of ``kind`` on ``path`` puts the run in: a write outside tasks, deletions and
        a pending pointer starts the commit; a delete outside tasks starts deleting. lakeops's probe of
        a new output's writability (written and deleted while planning) changes nothing."""
        if _PROBE in path:
            return self.phase
        if kind == "storage":
            if "/_lakeops_audit/" in path:
                return "audit"
            return self.phase if self.phase in ("tasks", "deleting", "before-pointer") else "committing"
        if kind == "delete" and self.phase != "tasks":
            return "deleting"
        return self.phase

    def hit(self, kind: str, path: str = "") -> str | None:
        """``when`` to die at, if this call is the chosen one; logs it in record mode."""
        with self.lock:
            self._enter(self._phase_of(kind, path))
            call = Call(kind, self.phase, path)
            if self.record is not None:
                self.record.write(f"{call.kind}\t{call.phase}\t{call.path}\n")
                self.record.flush()
            if self.point is None or not self.point.matches(call):
                return None
            self.count += 1
            if self.count != self.nth:
                return None
            return "before" if self.point.kind == "phase" else self.point.when

    def done(self, kind: str, path: str = "") -> None:
        """After a call: a written pointer (Delta commit, ``_last_checkpoint``, a branch file) or a
        catalog swap commits; complete metadata or checkpoint parts wait for their pointer; finished
        units have written their files."""
        with self.lock:
            if kind == "swap" or (kind == "storage" and self.phase != "tasks" and _POINTER.search(path)):
                self._enter("committed")
            elif kind == "storage" and self.phase == "committing" and _BEFORE_POINTER.search(path):
                self._enter("before-pointer")
            elif kind == "units" and self.phase == "tasks":
                self._enter("files-written")


def install(spec: dict[str, Any]) -> _Marker:
    """Put the markers of ``spec`` in place (in the wrapper's process only). The caller enters
    ``planning`` on the returned marker when it calls ``main``."""
    from lakeops.storage import local

    marker = _Marker(spec)
    storage_cls = local.LocalStorage

    def storage_method(name: str) -> None:
        original = getattr(storage_cls, name)

        def patched(self: Any, path: str, data: bytes, *args: Any) -> None:
            when = marker.hit("storage", path)
            if when == "before":
                _die()
            if when == "mid":
                self._write_temp(local._local(path), data)  # the complete temporary file, never linked
                _die()
            original(self, path, data, *args)
            marker.done("storage", path)
            if when == "after":
                _die()

        setattr(storage_cls, name, patched)

    storage_method("put_if_absent")
    storage_method("write")
    storage_method("replace_if_match")

    def reading(name: str) -> None:
        original = getattr(storage_cls, name)

        def patched(self: Any, path: str, *args: Any) -> Any:
            if marker.hit("io", path):
                _die()
            return original(self, path, *args)

        setattr(storage_cls, name, patched)

    for name in ("read", "read_range", "list", "stat", "exists"):
        reading(name)

    from spark_jobs.spark_settings import SparkSettings

    run_units = SparkSettings.run_units

    def units(self: Any, *args: Any, **kwargs: Any) -> Any:
        if marker.phase != "deleting":  # deletion batches run as units too
            marker.enter("tasks")
        results = run_units(self, *args, **kwargs)
        marker.done("units")
        if marker.hit("units"):
            _die()
        return results

    SparkSettings.run_units = units

    delete = SparkSettings.delete

    def deleting_batches(self: Any, *args: Any, **kwargs: Any) -> Any:
        marker.enter("deleting")
        return delete(self, *args, **kwargs)

    SparkSettings.delete = deleting_batches

    from lakeops.iceberg.sql_catalog import SqlCatalog

    swap = SqlCatalog.swap

    def swapped(self: Any, expected: str, new: str, payload: bytes) -> str:
        landed = swap(self, expected, new, payload)
        marker.done("swap", new)
        if marker.hit("swap", new):
            _die()
        return landed

    SqlCatalog.swap = swapped

    delete_many = storage_cls.delete_many

    def deleting(self: Any, paths: Any) -> int:
        paths = list(paths)
        when = marker.hit("delete", paths[0] if paths else "")
        if when == "before":
            _die()
        if when:
            delete_many(self, paths[: int(len(paths) * marker.fraction)])
            _die()
        return delete_many(self, paths)

    storage_cls.delete_many = deleting

    if spec.get("slow_worker"):
        _slow_compaction(spec["slow_worker"])
    return marker


def _slow_compaction(pid_dir: str) -> None:
    """Compaction tasks that first announce their worker's pid and wait to be killed."""
    import functools

    from lakeops.delta.maintenance.compaction import CompactionPlan as DeltaPlan
    from lakeops.iceberg.maintenance.compaction import CompactionPlan as IcebergPlan

    for plan_type in (DeltaPlan, IcebergPlan):
        task = plan_type.task

        def slow_task(plan: Any, task: Callable[[Any], Any] = task) -> Any:
            return functools.partial(_slow_task, task(plan), pid_dir)

        plan_type.task = slow_task  # type: ignore[method-assign]


def _slow_task(task: Callable[[Any], Any], pid_dir: str, unit: Any) -> Any:
    # Runs in the Spark worker; a function of ``__main__``, so cloudpickle ships it by value.
    import os as _os
    import time as _time

    with open(_os.path.join(pid_dir, f"{_os.getpid()}.pid"), "w") as f:
        f.write(str(_os.getpid()))
    _time.sleep(120)
    return task(unit)


if __name__ == "__main__":
    marker = install(json.loads(os.environ["LAKEOPS_CRASH"]))
    from spark_jobs.cli import main

    marker.enter("planning")
    status = main(sys.argv[1:])
    marker.enter("done")
    sys.exit(status)
