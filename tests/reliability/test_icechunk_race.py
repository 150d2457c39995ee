"""The icechunk package committing in a loop against lakeops compaction and expiry (issue 34, break 5).

Each round builds a fresh format 1 repository with the package (``old``, written by three commits
that expiry then drops from the history, and ``racer``), starts :mod:`reliability.icechunk_committer`
in a process of its own (each commit sets one new element of ``racer``) and, while it commits, runs
``lakeops compact`` and ``lakeops expire`` through :mod:`lakeops.api`. Then, read through the package:
every commit it acknowledged is an ancestor of ``main``, and ``racer`` and ``old`` read as written; the
same again after ``lakeops orphans`` (no age floor) deleted whatever no history reaches, so an
acknowledged commit erased from ``main`` also loses its chunks.

On a local file system the package replaces ``ref.json`` by renaming a file over it, unlocked; on S3
it writes with ``If-Match``, as lakeops does. ``$LAKEOPS_ICECHUNK_RACE_ROUNDS`` rounds per storage
(default 1; ``make test-reliability`` runs 10).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import icechunk
import numpy as np
import pytest
import zarr
from reliability.icechunk_committer import ACKNOWLEDGED, CAPACITY, package_storage

from lakeops import api
from lakeops.errors import CommitConflict, CommitStateUnknown
from lakeops.ops.compaction import CompactionOptions
from lakeops.ops.expiry import ExpiryOptions
from lakeops.ops.orphans import OrphansOptions
from lakeops.storage import StorageOptions

ROUNDS = int(os.environ.get("LAKEOPS_ICECHUNK_RACE_ROUNDS", "1"))


@dataclass(frozen=True)
class Pace:
    """What lakeops runs in each round while the package commits, one after the other, and how long the
    committer waits at most between two commits (a random time). On local disk the package commits
    about every 60 ms, a few times during each lakeops commit, so both land and their ref writes
    interleave; on moto's S3, where every request takes milliseconds, less often, so that lakeops'
    commits land too and the history stays short enough to read."""

    operations: tuple[str, ...]
    pause_s: float


LOCAL = Pace(("compact", "expire", *["compact"] * 4, "expire", *["compact"] * 4), 0.1)
S3 = Pace(("compact", "expire", "compact"), 0.5)
COMMITTER = Path(__file__).with_name("icechunk_committer.py")
OLD = np.arange(1, 9, dtype="i8") * 11


@dataclass
class Round:
    """One round's repository and what happened in it."""

    location: str
    options: StorageOptions
    pace: Pace
    old_until: float = 0.0
    acknowledged: dict[int, str] = field(default_factory=dict)
    outcomes: Counter[str] = field(default_factory=Counter)


def _repository(location: str, options: StorageOptions) -> Any:
    return icechunk.Repository.open(package_storage(location, options.endpoint_url))


def _create(subject: Round) -> None:
    """``old`` in three commits, then ``racer`` (all before ``old_until``); every chunk in a chunk object
    of its own (no inline chunks), for compaction to pack."""
    config = icechunk.RepositoryConfig(inline_chunk_threshold_bytes=0)
    repo = icechunk.Repository.create(package_storage(subject.location, subject.options.endpoint_url), config=config)
    for part in range(3):
        session = repo.writable_session("main")
        group = zarr.open_group(session.store, mode="a")
        old = group["old"] if "old" in group else group.create_array("old", shape=(8,), chunks=(1,), dtype="i8")
        old[part * 3 : part * 3 + 3] = OLD[part * 3 : part * 3 + 3]
        session.commit(f"old {part}")
    session = repo.writable_session("main")
    zarr.open_group(session.store, mode="a").create_array(
        "racer", shape=(CAPACITY,), chunks=(1,), dtype="i8", fill_value=0
    )
    session.commit("racer")
    subject.old_until = time.time()
    time.sleep(0.2)  # every commit of the committer is flushed well after old_until


def _maintain(subject: Round, operation: str) -> None:
    """One lakeops run; a lost race (``CommitConflict``) or an unknown outcome is counted, not raised:
    neither may lose a commit of the package."""
    options = subject.options
    try:
        if operation == "compact":
            api.compact(subject.location, CompactionOptions(min_input_files=2), storage_options=options)
        else:
            older_than = f"{int((time.time() - subject.old_until) * 1000)}ms"
            api.expire(subject.location, ExpiryOptions(older_than=older_than, force=True), storage_options=options)
    except CommitConflict:
        subject.outcomes[f"{operation} conflict"] += 1
        return
    except CommitStateUnknown:
        subject.outcomes[f"{operation} unknown"] += 1
        return
    subject.outcomes[f"{operation} done"] += 1


def _race(subject: Round) -> None:
    """The committer runs while lakeops runs :data:`OPERATIONS`; its acknowledged commits are collected."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, str(COMMITTER), subject.location, str(subject.pace.pause_s)]
    if subject.options.endpoint_url:
        command.append(subject.options.endpoint_url)
    committer = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert committer.stdout is not None
        first = ""
        while not first.startswith(ACKNOWLEDGED):  # wait until the committer is under way
            first = committer.stdout.readline()
            assert first, f"the committer stopped: {committer.communicate()[1]}"
        for operation in subject.pace.operations:
            _maintain(subject, operation)
    finally:
        committer.send_signal(signal.SIGTERM)
        out, err = committer.communicate(timeout=120)
    assert committer.returncode == 0, f"the committer failed: {err[-3000:]}"
    for line in [first, *out.splitlines()]:
        if not line.startswith(ACKNOWLEDGED):
            continue
        record = json.loads(line.removeprefix(ACKNOWLEDGED))
        subject.acknowledged[record["k"]] = record["snapshot"]


def _check(subject: Round, when: str) -> None:
    """Every acknowledged commit is an ancestor of ``main``; ``racer`` and ``old`` read as written."""
    repo = _repository(subject.location, subject.options)
    ancestors = {snapshot.id for snapshot in repo.ancestry(branch="main")}
    lost = {k: sid for k, sid in subject.acknowledged.items() if sid not in ancestors}
    assert not lost, f"{when}: {len(lost)} acknowledged commits are not on main: {sorted(lost.items())[:5]}"
    session = repo.readonly_session(branch="main")
    written = len(subject.acknowledged)
    racer = np.asarray(zarr.open_array(session.store, path="racer", mode="r")[: written + 10])
    expected = np.concatenate([np.arange(1, written + 1, dtype="i8"), np.zeros(10, dtype="i8")])
    assert np.array_equal(racer, expected), f"{when}: racer reads {racer[:20]}..., not as written"
    old = np.asarray(zarr.open_array(session.store, path="old", mode="r")[:])
    assert np.array_equal(old, OLD), f"{when}: old reads {old}"


def _rounds(location: str, options: StorageOptions, pace: Pace) -> None:
    totals: Counter[str] = Counter()
    commits = 0
    for number in range(ROUNDS):
        subject = Round(f"{location}/round-{number}", options, pace)
        _create(subject)
        _race(subject)
        _check(subject, f"round {number}")
        api.orphans(
            subject.location, OrphansOptions(older_than="0s", force_short_retention=True), storage_options=options
        )
        _check(subject, f"round {number}, after orphans")
        totals += subject.outcomes
        commits += len(subject.acknowledged)
    print(f"[icechunk race {location}] {ROUNDS} rounds, {commits} package commits; lakeops: {dict(totals)}")
    assert totals["compact done"] and totals["expire done"], "no compaction or expiry landed: the race did not run"


def test_icechunk_package_commits_race_lakeops_on_local_disk(tmp_path: Path) -> None:
    _rounds(str(tmp_path), StorageOptions(), LOCAL)


@pytest.mark.s3
def test_icechunk_package_commits_race_lakeops_on_s3(s3_bucket: Any) -> None:
    _rounds(s3_bucket.uri, s3_bucket.options, S3)
