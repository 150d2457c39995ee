"""Crashes (issues 10 and 19): SIGKILL the driver, and an executor's Python worker, at randomised points
of every operation, in each phase of its run, then check what a reader and the next runs see.

The phases (:data:`crashing.PHASES`) are the flow's: planning, tasks (mid-task: a data file of a unit
being written), files-written (every unit done, nothing committed), committing, before-pointer (the new
metadata or checkpoint complete, the catalog row or ``_last_checkpoint`` not yet updated), committed,
deleting, audit. Every kill reports the phase it hit (the session summary counts them), and the kills
"at a random moment" are timed from the killed run's own entry into a phase, never from the
interpreter's start.

For each operation and format a reference is computed once: the table *before* (an untouched build)
and *after* (a clean run on another build, recorded through the same wrapper in a subprocess). Each
kill point then draws N among the matching calls the clean run made (seeded: ``LAKEOPS_CRASH_ROUNDS``
seeds per point, one by default) and kills a fresh build's run there (:mod:`crashing`). Afterwards:

1. the peer (delta-rs, PyIceberg, our Icechunk reader) reads what it read before, or what the clean
   run left — never a mix;
2. nothing a retained version needs is missing (Delta: every version both *before* and *after* can
   read; Iceberg: every snapshot of the current metadata; Icechunk: every object a ref reaches);
3. the same command, run again, exits 0 and leaves the *after* state;
4. once the files are past the age floor (``os.utime``), ``orphans --older-than 0s
   --force-short-retention`` leaves nothing that no metadata references: every leftover of the killed
   attempt was unreferenced and is gone.

Spark runs: the killed runs start their own (``local[*]``, or the driver path when a plan is small);
the clean and repeated runs go through this process's session.
"""

from __future__ import annotations

import os
import random
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from icechunk_repos import build_history, contents, missing_objects
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.serializers import FromInputFile
from pyiceberg_tables import rows_of, small_file_table
from reliability.crashing import PHASES_HIT, ROUNDS, Call, Point, descendants, run

from lakeops.icechunk import refs
from lakeops.icechunk.ids import new_id
from lakeops.icechunk.repository import Repository
from lakeops.storage import open_storage
from spark_jobs.cli import main as lakeops

pytestmark = pytest.mark.long  # minutes of work: CI runs it as its own stage (make test-long)

LONG_AGO = time.time() - 60 * 86400
_LOG_FILE = re.compile(r"^(\d{20}\.(json|crc|checkpoint(\.\d{10}\.\d{10})?\.parquet)|_last_checkpoint)$")
_OWN_DIRS = ("_lakeops_audit", "_lakeops_trash")


def _age(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_file():
            os.utime(path, (LONG_AGO, LONG_AGO))


def _files(root: Path) -> set[str]:
    """Every file under ``root`` except lakeops's audit records and trash."""
    return {
        str(p)
        for p in root.rglob("*")
        if p.is_file() and not any(part in _OWN_DIRS for part in p.relative_to(root).parts)
    }


# ------------------------------------------------------------------------------------------------
# The three formats: build a table, read it as a peer, check retained versions, find leftovers.


@dataclass
class Table:
    """One built table: ``argv`` names it on the command line, ``root`` is its directory."""

    root: Path
    argv: list[str]
    extra: dict[str, Any] = field(default_factory=dict)


class Delta:
    name = "delta"

    @staticmethod
    def build(where: Path) -> Table:
        """Eight small delta-rs appends (change data feed on), a row delete (tombstones, a change data
        file), a checkpoint, one more append; an untracked file; everything aged 60 days."""
        root = where / "table"
        for i in range(8):
            data = pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "v": [f"r{j}" for j in range(10)]})
            config = {"delta.enableChangeDataFeed": "true"} if i == 0 else None
            write_deltalake(str(root), data, mode="append", configuration=config)
        table = DeltaTable(str(root))
        table.delete("id < 15")
        table.create_checkpoint()
        write_deltalake(str(root), pa.table({"id": pa.array([100, 101], pa.int64()), "v": ["x", "y"]}), mode="append")
        (root / "part-00000-untracked-c000.snappy.parquet").write_bytes(b"a crashed writer's file")
        _age(root)
        return Table(root, [str(root)])

    @staticmethod
    def rows(root: Path) -> Counter[tuple[Any, ...]]:
        if not any((root / "_delta_log").glob("*.json")):
            return Counter()
        rows = DeltaTable(str(root)).to_pyarrow_table().to_pylist()
        # Wall-clock columns (CDC's _commit_timestamp) differ between two builds of the same table.
        return Counter(tuple(v for v in r.values() if not isinstance(v, datetime)) for r in rows)

    @staticmethod
    def readable(root: Path) -> set[int]:
        """Versions delta-rs loads with every data file present."""
        found = set()
        for commit in (root / "_delta_log").glob("*.json"):
            version = int(commit.name.split(".")[0])
            try:
                uris = DeltaTable(str(root), version=version).file_uris()
            except Exception:  # an expired version: the log no longer reaches it
                continue
            if all(os.path.exists(uri.removeprefix("file://")) for uri in uris):
                found.add(version)
        return found

    @staticmethod
    def leftovers(root: Path) -> set[str]:
        """Files that neither the log is made of nor the latest version references."""
        live = {uri.removeprefix("file://") for uri in DeltaTable(str(root)).file_uris()}
        log = root / "_delta_log"
        return {
            path
            for path in _files(root)
            if path not in live and not (Path(path).parent == log and _LOG_FILE.match(Path(path).name))
        }


class Iceberg:
    name = "iceberg"

    @staticmethod
    def build(where: Path) -> Table:
        """Five PyIceberg appends of ten rows, a copy-on-write delete, a stray file; aged 60 days."""
        where.mkdir(parents=True, exist_ok=True)
        table = small_file_table(where, appends=5, rows=10)
        table.table.delete("id < 5")
        table.reload()
        root = Path(table.location)
        (root / "data" / "stray-00000.parquet").write_bytes(b"a crashed writer's file")
        _age(root)
        return Table(root, [table.identifier, "--catalog-uri", table.catalog_uri], {"table": table})

    @staticmethod
    def rows(root: Path, table: Any) -> list[dict[str, Any]]:
        return rows_of(table.catalog.load_table(table.identifier).scan().to_arrow())

    @staticmethod
    def _metadata(location: str) -> Any:
        return FromInputFile.table_metadata(PyArrowFileIO().new_input(location))

    @classmethod
    def _reached(cls, metadata: Any, *, deleted: bool = True, strict: bool = True) -> set[str]:
        """Every file the snapshots of ``metadata`` name; ``deleted``: with their DELETED entries'.
        ``strict=False`` (an older metadata file): skip manifest lists and manifests an expiry deleted."""
        io = PyArrowFileIO()
        paths: set[str] = set()
        for snapshot in metadata.snapshots:
            paths.add(snapshot.manifest_list)
            if not strict and not os.path.exists(snapshot.manifest_list.removeprefix("file://")):
                continue
            for manifest in snapshot.manifests(io):
                paths.add(manifest.manifest_path)
                if not strict and not os.path.exists(manifest.manifest_path.removeprefix("file://")):
                    continue
                paths.update(
                    e.data_file.file_path for e in manifest.fetch_manifest_entry(io, discard_deleted=not deleted)
                )
        paths.update(s.statistics_path for s in metadata.statistics)
        return {p.removeprefix("file://") for p in paths}

    @classmethod
    def missing(cls, table: Any) -> list[str]:
        """Files of the current metadata's snapshots (every one is retained) that do not exist."""
        current = table.catalog.load_table(table.identifier).metadata_location
        return sorted(p for p in cls._reached(cls._metadata(current), deleted=False) if not os.path.exists(p))

    @classmethod
    def leftovers(cls, root: Path, table: Any) -> set[str]:
        """Files no metadata file in the log (current, previous still present) references."""
        current = table.catalog.load_table(table.identifier).metadata_location.removeprefix("file://")
        kept = {current}
        metadata = cls._metadata(current)
        kept |= cls._reached(metadata)
        for entry in metadata.metadata_log:
            previous = entry.metadata_file.removeprefix("file://")
            if os.path.exists(previous):
                kept.add(previous)
                kept |= cls._reached(cls._metadata(previous), strict=False)
        return _files(root) - kept


class Icechunk:
    name = "icechunk"

    @staticmethod
    def build(where: Path) -> Table:
        root = where / "repo"
        build_history(open_storage(str(root)), str(root), commits=8)
        for _ in range(3):  # a crashed writer's chunks: garbage for the collector
            (root / "chunks" / new_id()).write_bytes(b"never committed")
        _age(root)
        return Table(root, [str(root)])

    @staticmethod
    def rows(root: Path) -> Any:
        return contents(open_storage(str(root)), str(root))

    @staticmethod
    def missing(root: Path) -> list[str]:
        return missing_objects(open_storage(str(root)), str(root))

    @staticmethod
    def leftovers(root: Path) -> set[str]:
        """Files that are not refs nor reached from a branch file or tag (garbage collection's roots)."""
        storage = open_storage(str(root))
        repo = Repository(storage, str(root))
        roots = [v.snapshot_id for b in repo.branches() for v in refs.branch_history(storage, str(root), b)]
        roots += [repo.resolve(t, "tag") for t in repo.tags()]
        live = repo.reachable(roots)
        kept = {repo.snapshot_path(i) for i in live.snapshots} | {repo.manifest_path(i) for i in live.manifests}
        kept |= {repo.chunk_path(i) for i in live.chunks} | {repo.attributes_path(i) for i in live.attribute_files}
        ref_files = {p for p in _files(root) if Path(p).relative_to(root).parts[0] == "refs"}
        return _files(root) - kept - ref_files - {str(root / "repo")}


# ------------------------------------------------------------------------------------------------
# Cases: an operation on a format, its kill points, and how its outcome is read.


@dataclass(frozen=True)
class Case:
    fmt: str
    command: list[str]
    points: list[Point]
    #: The table whose rows the operation changes: "out" (CDC's output), else the table itself.
    reads: str = "table"

    @property
    def marks(self) -> list[Any]:
        """The default suite kills every driver-only operation and Delta compaction (every phase, its
        tasks in driver threads included); the other task-running operations (~3.5 s a kill, over 20
        kills) are ``slow``, run by ``make test-reliability`` and ``make test-all``."""
        heavy = self.command[0] == "cdc" or (self.fmt == "iceberg" and self.command[0] in ("compact", "checkpoint"))
        return [pytest.mark.slow] if heavy else []

    @property
    def id(self) -> str:
        return f"{self.fmt}-{self.command[0]}"


def storage(name: str, pattern: str, when: str) -> Point:
    return Point(f"{name}-{when}", "storage", pattern, when)


UNITS = Point("tasks-done", "units")
DELETES = Point("deleting", "delete")
#: Before the Nth call (a read, mostly) while the run plans; while its units run (a data file write).
PLANNING = Point("planning", "phase", "planning")
MID_TASK = Point("mid-task", "phase", "tasks")
DELTA_COMMIT = r"_delta_log/\d{20}\.json$"


CASES = [
    Case(
        "delta",
        ["compact", "--min-input-files", "2"],
        [PLANNING, MID_TASK, UNITS, *(storage("commit", DELTA_COMMIT, w) for w in ("before", "mid", "after"))],
    ),
    Case(
        "delta",
        ["checkpoint"],
        [PLANNING, *(storage("checkpoint", r"\.checkpoint\.parquet$", w) for w in ("mid", "after"))]
        + [storage("last-checkpoint", r"_last_checkpoint$", w) for w in ("before", "mid", "after")],
    ),
    Case("delta", ["expire"], [PLANNING, DELETES]),
    Case("delta", ["orphans", "--older-than", "0s", "--force-short-retention"], [PLANNING, DELETES]),
    Case(
        "delta",
        ["cdc", "--from", "7", "--output", "{out}"],
        [
            PLANNING,
            MID_TASK,
            UNITS,
            *(storage("commit", r"out/" + DELTA_COMMIT, w) for w in ("before", "mid", "after")),
        ],
        reads="out",
    ),
    Case(
        "iceberg",
        ["compact", "--min-input-files", "2"],
        [
            PLANNING,
            MID_TASK,
            UNITS,
            storage("manifest", r"-m\d+\.avro$", "mid"),
            storage("manifest-list", r"/snap-[^/]+\.avro$", "mid"),
            storage("metadata", r"\.metadata\.json$", "after"),
            Point("catalog-updated", "swap"),
        ],
    ),
    Case(
        "iceberg",
        ["checkpoint", "--rewrite-all"],
        [
            PLANNING,
            MID_TASK,
            UNITS,
            storage("manifest-list", r"/snap-[^/]+\.avro$", "before"),
            storage("metadata", r"\.metadata\.json$", "after"),
            Point("catalog-updated", "swap"),
        ],
    ),
    Case(
        "iceberg",
        ["expire", "--older-than", "0s", "--force", "--retain-last", "1"],
        [
            PLANNING,
            *(storage("metadata", r"\.metadata\.json$", w) for w in ("mid", "after")),
            Point("catalog-updated", "swap"),
            DELETES,
        ],
    ),
    Case("iceberg", ["orphans", "--older-than", "0s", "--force-short-retention"], [PLANNING, DELETES]),
    Case("icechunk", ["expire", "--older-than", "0s", "--force"], [PLANNING, DELETES]),
    Case("icechunk", ["orphans", "--older-than", "0s", "--force-short-retention"], [PLANNING, DELETES]),
]

FORMATS: dict[str, Any] = {"delta": Delta, "iceberg": Iceberg, "icechunk": Icechunk}


@dataclass
class Built:
    """A fresh table for one run of a case, and how to read and check it."""

    case: Case
    table: Table
    workdir: Path

    @property
    def fmt(self) -> Any:
        return FORMATS[self.case.fmt]

    @property
    def out(self) -> Path:
        return self.workdir / "out"

    def argv(self) -> list[str]:
        command = [part.replace("{out}", str(self.out)) for part in self.case.command]
        return [command[0], *self.table.argv, *command[1:]]

    def state(self) -> Any:
        if self.case.reads == "out":
            return Delta.rows(self.out)
        if self.case.fmt == "iceberg":
            return Iceberg.rows(self.table.root, self.table.extra["table"])
        return self.fmt.rows(self.table.root)

    def retained(self) -> Any:
        """What must never go missing: Delta, the readable versions; else the missing files (none)."""
        if self.case.fmt == "delta":
            return Delta.readable(self.table.root)
        if self.case.fmt == "iceberg":
            return Iceberg.missing(self.table.extra["table"])
        return Icechunk.missing(self.table.root)

    def cleanup(self) -> set[str]:
        """Age everything, collect garbage with a zero floor, return what is left unreferenced."""
        roots = [self.table.root] + ([self.out] if self.case.reads == "out" else [])
        found: set[str] = set()
        for root, argv in zip(roots, [self.table.argv, [str(self.out)]], strict=False):
            if self.case.fmt == "icechunk":
                _age(root)
                assert lakeops(["expire", *argv, "--older-than", "0s", "--force"]) == 0
            _age(root)
            assert lakeops(["orphans", *argv, "--older-than", "0s", "--force-short-retention"]) == 0
            if self.case.fmt == "iceberg":
                found |= Iceberg.leftovers(root, self.table.extra["table"])
            else:
                found |= (Delta if root == self.out else self.fmt).leftovers(root)
        return found


def build(case: Case, where: Path) -> Built:
    where.mkdir(parents=True)
    return Built(case, FORMATS[case.fmt].build(where), where)


@dataclass
class Reference:
    before: Any
    after: Any
    readable: Any
    calls: list[Call]
    #: (phase, seconds spent in it) from ``planning`` on.
    phases: list[tuple[str, float]]


_REFERENCES: dict[str, Reference] = {}


def reference(case: Case, factory: pytest.TempPathFactory) -> Reference:
    """Before and after a clean run of ``case``, computed once per case. The clean run goes through the
    wrapper in a subprocess, recorded, as a killed run does: it runs its units where a killed run does
    (driver threads, not a Spark session this process may hold) and spends its phases as one does
    (module imports inside the operation included)."""
    if case.id not in _REFERENCES:
        base = factory.mktemp(f"reference-{case.id}")
        untouched = build(case, base / "before")
        clean = build(case, base / "after")
        outcome = run(clean.argv(), record=True, workdir=base)
        assert outcome.returncode == 0, outcome.stderr
        readable = None
        if case.fmt == "delta":
            readable = Delta.readable(untouched.table.root) & Delta.readable(clean.table.root)
        starts = [(phase, at) for at, phase in outcome.journal if phase != "start-up"]
        phases = [(phase, end - at) for (phase, at), (_, end) in zip(starts, starts[1:], strict=False)]
        _REFERENCES[case.id] = Reference(untouched.state(), clean.state(), readable, outcome.calls, phases)
    return _REFERENCES[case.id]


def check_consistent(built: Built, ref: Reference, what: str) -> None:
    """Invariants 1 and 2 of the module docstring."""
    state = built.state()
    assert state in (ref.before, ref.after), f"{what}: the table reads neither its rows before nor after the run"
    retained = built.retained()
    if built.case.fmt == "delta":
        lost = ref.readable - retained
        assert not lost, f"{what}: versions {sorted(lost)} lost data files they need"
    else:
        assert retained == [], f"{what}: files of retained snapshots are missing: {retained}"


def check_recovers(built: Built, ref: Reference, what: str) -> None:
    """Invariants 3 and 4: the rerun completes with the clean run's result; leftovers get collected."""
    assert lakeops(built.argv()) == 0, f"{what}: the next run of the same command failed"
    assert built.state() == ref.after, f"{what}: the next run did not leave what a clean run leaves"
    check_consistent(built, ref, f"{what}, after the next run")
    left = built.cleanup()
    assert not left, f"{what}: orphans left unreferenced files behind: {sorted(left)}"


def _seeds() -> Iterator[Any]:
    for case in CASES:
        for point in case.points:
            for seed in range(ROUNDS):
                yield pytest.param(case, point, seed, id=f"{case.id}-{point.name}-{seed}", marks=case.marks)


@pytest.mark.parametrize(("case", "point", "seed"), list(_seeds()))
def test_driver_killed_at_a_point(
    case: Case, point: Point, seed: int, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    ref = reference(case, tmp_path_factory)
    matching = [call for call in ref.calls if point.matches(call)]
    assert matching, f"a clean {case.id} run never reaches {point}; calls: {ref.calls}"
    rng = random.Random(f"{case.id}/{point.name}/{seed}")
    nth, fraction = rng.randint(1, len(matching)), rng.random()
    built = build(case, tmp_path / "crashed")
    outcome = run(built.argv(), kill=(point, nth, fraction), workdir=tmp_path)
    what = f"{case.id} killed at {point.name} (call {nth} of {len(matching)}, seed {seed}; phase {outcome.phase})"
    PHASES_HIT.append((what, outcome.phase))
    assert outcome.killed, f"{what}: the run was not killed there: exit {outcome.returncode}\n{outcome.stderr}"
    if point.kind == "phase":
        assert outcome.phase == point.pattern, f"{what}: not killed in the phase {point.pattern}"
    check_consistent(built, ref, what)
    check_recovers(built, ref, what)


TIMED = [case for case in CASES if case.command[0] in ("compact", "expire", "orphans")]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=c.marks) for c in TIMED])
@pytest.mark.parametrize("seed", range(ROUNDS))
def test_driver_killed_at_a_random_moment(
    case: Case, seed: int, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Moments nobody named: SIGKILL at a random time within a phase a clean run goes through, timed from
    when the killed run itself enters that phase (so start-up, where random kills used to land, and a
    loaded machine's slower planning do not decide where it dies); the phase each kill really hit is
    reported (a short phase may be over when the kill lands)."""
    ref = reference(case, tmp_path_factory)
    phases = ref.phases
    # Successive seeds take successive phases, from one drawn per case, so a long budget covers them all.
    offset = random.Random(case.id).randrange(len(phases))
    aimed, length = phases[(offset + seed) % len(phases)]
    delay = random.Random(f"{case.id}/timed/{seed}").uniform(0.0, length)
    built = build(case, tmp_path / "crashed")
    outcome = run(built.argv(), kill_in=(aimed, delay), workdir=tmp_path)
    what = f"{case.id} killed {delay:.3f} s into {aimed} (of {length:.3f} s; seed {seed}; phase {outcome.phase})"
    PHASES_HIT.append((what, outcome.phase))
    assert outcome.returncode in (0, -signal.SIGKILL), f"{what}: exit {outcome.returncode}\n{outcome.stderr}"
    check_consistent(built, ref, what)
    check_recovers(built, ref, what)


def _kill_worker_when_busy(pid_dir: Path) -> Callable[[Any], None]:
    """Wait for a compaction task's announcement, check the pid is a Python worker under the driver's
    JVM (psutil), SIGKILL it."""

    def kill(proc: Any) -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            announced = list(pid_dir.glob("*.pid"))
            if announced:
                pid = int(announced[0].read_text())
                tree = {p.pid: p for p in descendants(proc.pid)}
                assert pid in tree, f"worker {pid} is not a descendant of the driver {proc.pid}"
                assert any("java" in p.name() for p in tree[pid].parents()), "the worker does not run under a JVM"
                os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.2)
        raise AssertionError("no compaction task started")

    return kill


@pytest.mark.slow
def test_executor_worker_killed_mid_task(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Spark local mode does not retry a task (maxFailures=1): the compaction fails cleanly (exit 1 with
    a lakeops error, nothing committed) and the next run succeeds; the files the attempt wrote are
    unreferenced and collected."""
    case = CASES[0]
    ref = reference(case, tmp_path_factory)
    built = build(case, tmp_path / "crashed")
    log_before = sorted(p.name for p in (built.table.root / "_delta_log").iterdir())
    pid_dir = tmp_path / "workers"
    pid_dir.mkdir()
    outcome = run(
        [*built.argv(), "--master", "local[2]"],
        slow_worker=pid_dir,
        while_running=_kill_worker_when_busy(pid_dir),
        workdir=tmp_path,
    )
    assert outcome.returncode == 1, f"exit {outcome.returncode}\n{outcome.stderr}"
    assert "error:" in outcome.stderr, outcome.stderr
    assert sorted(p.name for p in (built.table.root / "_delta_log").iterdir()) == log_before, "something was committed"
    check_consistent(built, ref, "compaction with its worker killed")
    check_recovers(built, ref, "compaction with its worker killed")
