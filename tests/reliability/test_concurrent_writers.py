"""Maintenance under concurrent real writers (issue 10).

A delta-rs or PyIceberg writer commits in a loop (appends, deletes, merges or overwrites, slow appends
whose data file waits before its commit, abandoned files) while lakeops runs cdc, compact, checkpoint,
expire and orphans on the same table, repeatedly, for a bounded time. After every maintenance step the
writer is paused at a step boundary and, read through the peer: the rows equal the writer's own model
of what it committed; every file a retained version references exists (Delta: every version still in
the log, except files a later version removed before VACUUM's cutoff, which Delta lets VACUUM delete
although the log may keep those versions longer; Iceberg: every snapshot's manifest list,
manifests, data and delete files); the change feed holds each change once and replays to the table at
its watermark. Expiry and orphan removal use short, forced retentions so they really delete, and keep
what the change feed has not extracted yet (``keep_from_version``, as Dagster passes it); the orphan age
floor is longer than a slow writer's hold, so a file about to be committed is never taken, while the
abandoned files are.

Each loop runs ``$LAKEOPS_WRITERS_SECONDS`` seconds (default 10; ``make test-reliability`` runs 120).
On S3 (moto), delta-rs commits with conditional put (``If-None-Match``) and needs no locking provider.
The Delta table is partitioned by id bucket and compaction takes the buckets the writer seldom changes,
as a real schedule would, so compactions both commit (rebasing over the writer) and abort. Each test
prints what happened: the writer's commits, lost conflicts, retries and dropped steps; per operation,
runs, commit attempts, retries (attempts after a lost race) and aborts (the plan no longer applied).

Compaction under steady ingestion (issue 19): a writer committing every second — appends, and deletes,
merges and overwrites of mostly recent rows — against compaction of the whole table, run after run.
The writer's changes really remove files a compaction rewrites, while its groups are rewritten by
Spark tasks (seconds, as in production); each compaction must still land by rebasing over the writer's
commits and dropping only the groups they touched: at least once per minute of writer time (once in a
short run), the rows exact and every retained file there.
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyiceberg_tables import catalog as sql_catalog
from reliability.writers import (
    DeltaWriter,
    FilesCheck,
    IcebergWriter,
    RetainedFiles,
    Rows,
    Writer,
    delta_rs_options,
    iso_ms,
    listed,
    replay_changes,
    rows_of,
)

from lakeops.errors import CommitConflict
from lakeops.ops.report import Report
from lakeops.storage import StorageOptions
from lakeops.storage.uri import normalize
from spark_jobs.operations import run_operation

pytestmark = pytest.mark.long  # minutes of work: CI runs it as its own stage (make test-long)

SECONDS = float(os.environ.get("LAKEOPS_WRITERS_SECONDS", "10"))
#: Orphan age floor: longer than a slow writer holds its uncommitted file (HOLD_S).
ORPHAN_FLOOR = "3s"
HOLD_S = 1.0
EXPIRE_AFTER = "2s"
OPERATIONS = ("cdc", "compact", "checkpoint", "expire", "orphans")
#: Steady ingestion: the writer commits a step a second; compaction must land at least once a minute.
#: The checks pause the writer, so they run every CHECK_EVERY_S (and at the end), not after every run.
#: The table starts with HISTORY appends (a table under ingestion has older, colder data too).
PACE_S = 1.0
LANDS_EVERY_S = 60.0
CHECK_EVERY_S = 10.0
HISTORY = 20
#: What the plan units' tasks import, imported once per Python worker before the loops start.
WORKER_MODULES = (
    "lakeops.changefeed.cdf_export",
    "lakeops.delta.maintenance.compaction",
    "lakeops.iceberg.maintenance.changelog",
    "lakeops.iceberg.maintenance.compaction",
    "lakeops.iceberg.maintenance.rewrite_manifests",
)
#: Pickled by value (a lambda), so the Spark workers need not import this test module.
_warm_worker = lambda batches: [__import__(m) for m in WORKER_MODULES] and batches  # noqa: E731


@pytest.fixture(scope="module")
def spark_session(s3_server: Any) -> Any:
    """One local Spark session for the module's plan units (built after the S3 credentials are in the
    environment, so its workers inherit them), its Python workers started before any loop's clock runs.
    Left running: a later Spark suite reuses it."""
    from spark_jobs.session import build_session

    session = build_session(master="local[2]", app_name="lakeops-writers")
    session.range(4, numPartitions=2).mapInArrow(_warm_worker, "id long").collect()
    return session


@dataclass
class Tally:
    """Per operation: runs, runs that landed a commit, commit attempts, retries (attempts after a lost
    race), aborts (a ``CommitConflict`` raised: the plan no longer applied), compaction groups dropped
    because a concurrent commit touched their files, files deleted."""

    runs: Counter[str] = field(default_factory=Counter)
    landed: Counter[str] = field(default_factory=Counter)
    attempts: Counter[str] = field(default_factory=Counter)
    retries: Counter[str] = field(default_factory=Counter)
    aborts: Counter[str] = field(default_factory=Counter)
    dropped_groups: Counter[str] = field(default_factory=Counter)
    deleted: Counter[str] = field(default_factory=Counter)
    #: Orphans: files kept for being younger than the floor, and candidates the metadata (or, at the
    #: re-check just before deleting, a commit that landed meanwhile) still needed.
    protected_young_files: int = 0
    still_needed: int = 0
    checks: int = 0
    seconds: Counter[str] = field(default_factory=Counter)
    vacuumed_old_files: int = 0

    def record(self, name: str, report: Report) -> None:
        self.runs[name] += 1
        metrics = report.metrics()
        attempts = int(metrics.get("commit_attempts", 0))
        commits = int(metrics.get("commits", 1 if attempts else 0))
        self.landed[name] += commits > 0
        self.attempts[name] += attempts
        self.retries[name] += max(attempts - commits, 0)
        self.dropped_groups[name] += int(metrics.get("groups_dropped_by_conflict", 0))
        self.deleted[name] += int(metrics.get("deleted_files", 0))
        if name == "orphans":
            self.protected_young_files += int(metrics.get("files_too_recent", 0))
            self.still_needed += int(metrics.get("files_still_needed", 0))


class Subject(ABC):
    """One table under test: its writer, how lakeops runs on it and how the peer reads it."""

    table: str
    writer: Writer
    options: StorageOptions
    extra: dict[str, object] = {}
    #: The change feed's commit column: what orders the changes.
    commit_column = ""
    #: What the change feed extracted last (Delta version, Iceberg snapshot id; 0: nothing yet).
    watermark: int | str = 0
    #: The version from which expiry and orphans keep everything: the change feed still needs it.
    keep_from: int | None = None
    #: Change-feed runs whose range started inside what the output already held.
    overlapping_runs = 0
    cdc_runs = 0
    #: The latest cutoff of an orphans run: files tombstoned before it may be gone (Delta VACUUM).
    vacuum_cutoff_ms: int | None = None

    def next_cdc_overlaps(self) -> bool:
        """Every other change-feed run re-extracts the last range too: the output must skip it."""
        self.cdc_runs += 1
        return self.cdc_runs % 2 == 1

    @abstractmethod
    def cdc_range(self) -> dict[str, object] | None:
        """The next change-feed range (``from_version``, ``output``), or None when nothing is new."""

    @abstractmethod
    def after_cdc(self, report: Any) -> None: ...

    @abstractmethod
    def rows(self) -> Rows: ...

    @abstractmethod
    def rows_at_watermark(self) -> Rows: ...

    @abstractmethod
    def retained_files(self) -> FilesCheck: ...

    @abstractmethod
    def location(self) -> str: ...

    def changes(self) -> pa.Table:
        return DeltaTable(self.output, storage_options=delta_rs_options(self.options)).to_pyarrow_table()

    def compact_options(self) -> dict[str, object]:
        return {}

    @abstractmethod
    def expire_options(self) -> dict[str, object]: ...

    @abstractmethod
    def orphan_options(self) -> dict[str, object]: ...


class DeltaSubject(Subject):
    commit_column = "_commit_version"

    def __init__(self, uri: str, output: str, options: StorageOptions, *, pace_s: float = 0.0) -> None:
        self.table = uri
        self.output = output
        self.options = options
        self.rs = delta_rs_options(options)
        self.files = RetainedFiles(options)
        self.writer = DeltaWriter(uri, options, seed=10, hold_s=HOLD_S, pace_s=pace_s)
        self.next_version = 0

    def cdc_range(self) -> dict[str, object] | None:
        latest = DeltaTable(self.table, storage_options=self.rs).version()
        if self.next_version > latest:
            return None
        # now and then re-extract the last version: the output's watermark must make it a no-op
        overlap = self.next_cdc_overlaps() and self.next_version > 0
        self.overlapping_runs += overlap
        start = self.next_version - 1 if overlap else self.next_version
        return {"from_version": start, "output": self.output}

    def after_cdc(self, report: Any) -> None:
        self.watermark = report.to_version
        self.next_version = report.to_version + 1
        self.keep_from = report.to_version

    def rows(self) -> Rows:
        return rows_of(DeltaTable(self.table, storage_options=self.rs).to_pyarrow_table())

    def rows_at_watermark(self) -> Rows:
        return rows_of(DeltaTable(self.table, version=int(self.watermark), storage_options=self.rs).to_pyarrow_table())

    def retained_files(self) -> FilesCheck:
        return self.files.delta(self.table, self.vacuum_cutoff_ms)

    def location(self) -> str:
        return self.table

    def expire_options(self) -> dict[str, object]:
        return {"older_than": EXPIRE_AFTER, "force": True, "keep_from_version": self.keep_from}

    def compact_options(self) -> dict[str, object]:
        return {"where": f"bucket < {self.writer.cold_bucket()}"}  # the buckets the writer seldom changes

    def orphan_options(self) -> dict[str, object]:
        return {"older_than": ORPHAN_FLOOR, "force_short_retention": True, "keep_from_version": self.keep_from}


class IcebergSubject(Subject):
    commit_column = "_commit_sequence_number"

    def __init__(
        self,
        tmp_path: Path,
        output: str,
        options: StorageOptions,
        s3: tuple[str, str] | None,
        *,
        pace_s: float = 0.0,
    ) -> None:
        catalog, uri = sql_catalog(tmp_path, s3=s3)
        self.catalog = catalog
        self.table = "db.events"
        self.extra = {"catalog_uri": uri}
        self.output = output
        self.options = options
        self.files = RetainedFiles(options)
        self.writer = IcebergWriter(catalog, self.table, options, seed=20, hold_s=HOLD_S, pace_s=pace_s)
        self.watermark = "0"
        self.watermark_seq: int | None = None
        self.previous: tuple[str, int | None] = ("0", None)  # the watermark before, with its sequence number

    def cdc_range(self) -> dict[str, object] | None:
        current = self.catalog.load_table(self.table).metadata.current_snapshot_id
        if str(current) == str(self.watermark):
            return None
        # now and then re-extract from the previous watermark: the output's watermark must skip what it holds
        overlap = self.next_cdc_overlaps() and self.previous[0] != "0"
        self.overlapping_runs += overlap
        return {"from_version": self.previous[0] if overlap else str(self.watermark), "output": self.output}

    def after_cdc(self, report: Any) -> None:
        if report.to_snapshot_id is not None:
            self.previous = (str(self.watermark), self.watermark_seq)
            self.watermark, self.watermark_seq = str(report.to_snapshot_id), report.read_version
            # keep both ends a later run may start from (an overlapping re-run starts at the previous one)
            self.keep_from = self.previous[1] if self.previous[1] is not None else self.watermark_seq

    def rows(self) -> Rows:
        return rows_of(self.catalog.load_table(self.table).scan().to_arrow())

    def rows_at_watermark(self) -> Rows:
        if self.watermark == "0":
            return {}
        return rows_of(self.catalog.load_table(self.table).scan(snapshot_id=int(self.watermark)).to_arrow())

    def retained_files(self) -> FilesCheck:
        return self.files.iceberg(self.catalog.load_table(self.table))

    def location(self) -> str:
        return str(self.catalog.load_table(self.table).location())

    def expire_options(self) -> dict[str, object]:
        return {"older_than": EXPIRE_AFTER, "force": True, "retain_last": 2, "keep_from_version": self.keep_from}

    def orphan_options(self) -> dict[str, object]:
        return {"older_than": ORPHAN_FLOOR, "force_short_retention": True}


def run_step(subject: Subject, name: str, tally: Tally, *, whole_table: bool = False) -> None:
    """One maintenance operation through ``run_operation``; a ``CommitConflict`` is an abort.
    ``whole_table``: compaction takes every partition, the ones the writer is changing too."""
    options: dict[str, object] = dict(subject.extra)
    if name == "cdc":
        cdc_range = subject.cdc_range()
        if cdc_range is None:
            return
        options |= cdc_range
    elif name == "compact":
        options |= {"min_input_files": 2} | ({} if whole_table else subject.compact_options())
    elif name == "expire":
        options |= subject.expire_options()
    elif name == "orphans":
        options |= subject.orphan_options()
    try:
        report = run_operation(name, subject.table, options, storage_options=subject.options)
    except CommitConflict:
        tally.runs[name] += 1
        tally.aborts[name] += 1
        return
    tally.record(name, report)
    if name == "cdc":
        subject.after_cdc(report)
    if name == "orphans" and getattr(report, "cutoff", ""):
        cutoff = iso_ms(report.cutoff) + 999  # the report gives the cutoff to the second, truncated
        subject.vacuum_cutoff_ms = max(cutoff, subject.vacuum_cutoff_ms or cutoff)


def check_invariants(subject: Subject, tally: Tally) -> None:
    """With the writer between two steps: the peer reads the model's rows, every retained version's
    files exist, the change feed holds each change once and replays to the table at its watermark."""
    with subject.writer.paused():
        assert subject.rows() == subject.writer.model, f"{subject.table}: the peer's rows differ from the writers'"
        files = subject.retained_files()
        tally.vacuumed_old_files = max(tally.vacuumed_old_files, files.vacuumed_old_files)
        if subject.watermark not in (0, "0") or tally.runs["cdc"]:
            replayed, _ = replay_changes(subject.changes(), subject.commit_column)
            assert replayed == subject.rows_at_watermark(), f"{subject.table}: the change feed does not replay"
    tally.checks += 1


def maintain(subject: Subject, seconds: float) -> Tally:
    """Run the operations in turn against the live writer for ``seconds``, checking after each."""
    tally = Tally()
    subject.writer.start()
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            for name in OPERATIONS:
                subject.writer.check_alive()
                started = time.monotonic()
                run_step(subject, name, tally)
                checked = time.monotonic()
                check_invariants(subject, tally)
                tally.seconds[name] += checked - started
                tally.seconds["checks"] += time.monotonic() - checked
    finally:
        subject.writer.stop()
    return tally


def finish(subject: Subject, tally: Tally) -> None:
    """Writers stopped: once the abandoned files are past the floor, orphans takes every one of them
    and the tables still pass every check; CDC catches up and replays to the final table."""
    time.sleep(float(ORPHAN_FLOOR.removesuffix("s")) + 0.5)
    run_step(subject, "cdc", tally)
    run_step(subject, "orphans", tally)
    check_invariants(subject, tally)
    present = listed(subject.location(), subject.options)
    left = [p for p in subject.writer.stats.abandoned_files if normalize(p) in present]
    assert not left, f"abandoned files past the floor were not removed: {left}"
    assert subject.rows_at_watermark() == subject.writer.model


def summary(label: str, subject: Subject, tally: Tally) -> str:
    """What the run did, for the log: the writer's commits and lost conflicts, each operation's runs,
    runs that landed a commit, commit attempts, retries, aborts and (compaction) groups dropped by
    conflict, what expiry and orphans deleted and kept, the checks."""
    stats = subject.writer.stats
    ops = "\n".join(
        f"  {n:<10} {tally.runs[n]:>3} runs {tally.landed[n]:>3} landed {tally.attempts[n]:>3} commit attempts "
        f"{tally.retries[n]:>3} retries {tally.aborts[n]:>3} aborts {tally.dropped_groups[n]:>3} groups dropped "
        f"{tally.deleted[n]:>5} files deleted {tally.seconds[n]:>6.1f} s"
        for n in OPERATIONS
    )
    return (
        f"[{label}] writer: {sum(stats.committed.values())} commits {dict(stats.committed)}; "
        f"{stats.conflicts} conflicts, {stats.retries} retries, {stats.dropped} dropped; "
        f"{stats.in_flight_files} files committed {HOLD_S} s after writing, {len(stats.abandoned_files)} abandoned\n"
        f"{ops}\n"
        f"  orphans kept {tally.protected_young_files} files younger than {ORPHAN_FLOOR} and "
        f"{tally.still_needed} still needed; {tally.vacuumed_old_files} files of versions past the vacuum "
        f"horizon gone (as Delta allows)\n"
        f"  cdc: {subject.overlapping_runs} runs started inside the extracted range\n"
        f"  {tally.checks} invariant checks ({tally.seconds['checks']:.1f} s); "
        f"{len(subject.writer.model)} rows at the end"
    )


def exercise(label: str, subject: Subject) -> None:
    tally = maintain(subject, SECONDS)
    finish(subject, tally)
    print(summary(label, subject, tally))
    assert sum(subject.writer.stats.committed.values()) > 0
    assert tally.runs["compact"] and tally.runs["orphans"] and tally.runs["expire"]


def test_delta_rs_writer_local(spark_session: Any, tmp_path: Path) -> None:
    exercise("delta local", DeltaSubject(str(tmp_path / "events"), str(tmp_path / "changes"), StorageOptions()))


def test_pyiceberg_writer_local(spark_session: Any, tmp_path: Path) -> None:
    exercise("iceberg local", IcebergSubject(tmp_path, str(tmp_path / "changes"), StorageOptions(), None))


@pytest.mark.s3
def test_delta_rs_writer_s3(spark_session: Any, s3_bucket: Any) -> None:
    exercise("delta s3", DeltaSubject(f"{s3_bucket.uri}/events", f"{s3_bucket.uri}/changes", s3_bucket.options))


def compact_under_ingestion(label: str, subject: Subject) -> None:
    """Compaction of the whole table, run after run for ``SECONDS``, against a writer committing every
    ``PACE_S``: it lands at least once per ``LANDS_EVERY_S`` of writer time (once in a short run); every
    ``CHECK_EVERY_S`` and at the end the peer reads the writer's rows exactly and every retained file
    exists."""
    tally = Tally()
    for _ in range(HISTORY):
        subject.writer.step("append")
    stats = subject.writer.stats
    history = stats.committed.copy()
    subject.writer.start()
    started = last_check = time.monotonic()
    try:
        while time.monotonic() < started + SECONDS:
            subject.writer.check_alive()
            done = tally.landed["compact"] + tally.aborts["compact"]
            run_step(subject, "compact", tally, whole_table=True)
            if tally.landed["compact"] + tally.aborts["compact"] == done:
                time.sleep(PACE_S)  # nothing to compact: wait for the writer's next files
            if time.monotonic() - last_check >= CHECK_EVERY_S:
                check_invariants(subject, tally)
                last_check = time.monotonic()
    finally:
        subject.writer.stop()
    elapsed = time.monotonic() - started
    check_invariants(subject, tally)
    committed = stats.committed - history
    landed, runs, aborts = tally.landed["compact"], tally.runs["compact"], tally.aborts["compact"]
    print(
        f"[{label}] writer: {committed.total()} commits in {elapsed:.0f} s {dict(committed)}, "
        f"{stats.conflicts} lost conflicts\n"
        f"  compact: {landed} landed of {runs} runs ({aborts} aborted, {runs - landed - aborts} had nothing to do); "
        f"{tally.attempts['compact']} commit attempts, {tally.retries['compact']} retries, "
        f"{tally.dropped_groups['compact']} groups dropped by conflict; {tally.checks} invariant checks, "
        f"{len(subject.writer.model)} rows at the end"
    )
    assert committed.total() >= elapsed / PACE_S / 2, "the writer did not keep its pace"
    assert landed >= max(1, int(elapsed // LANDS_EVERY_S)), f"compaction landed {landed} times in {elapsed:.0f} s"


def test_compaction_lands_under_a_delta_rs_writer(spark_session: Any, tmp_path: Path) -> None:
    subject = DeltaSubject(str(tmp_path / "events"), str(tmp_path / "changes"), StorageOptions(), pace_s=PACE_S)
    compact_under_ingestion("delta local, steady writer", subject)


def test_compaction_lands_under_a_pyiceberg_writer(spark_session: Any, tmp_path: Path) -> None:
    subject = IcebergSubject(tmp_path, str(tmp_path / "changes"), StorageOptions(), None, pace_s=PACE_S)
    compact_under_ingestion("iceberg local, steady writer", subject)


@pytest.mark.s3
@pytest.mark.slow
def test_compaction_lands_under_a_delta_rs_writer_s3(spark_session: Any, s3_bucket: Any) -> None:
    subject = DeltaSubject(f"{s3_bucket.uri}/events", f"{s3_bucket.uri}/changes", s3_bucket.options, pace_s=PACE_S)
    compact_under_ingestion("delta s3, steady writer", subject)


@pytest.mark.s3
@pytest.mark.slow
def test_pyiceberg_writer_s3(spark_session: Any, s3_bucket: Any, s3_server: Any, tmp_path: Path) -> None:
    subject = IcebergSubject(
        tmp_path, f"{s3_bucket.uri}/changes", s3_bucket.options, (s3_bucket.uri, s3_server.endpoint_url)
    )
    exercise("iceberg s3", subject)
