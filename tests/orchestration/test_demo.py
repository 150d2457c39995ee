"""The demo's history is dated over six weeks in each format's own fields, and its tables stay valid for
their writers' readers (issue 20: the Iceberg history was stamped "now", so expiry expired nothing).
Small histories here; ``tests/test_readme.py`` runs the whole ``make demo`` and checks that every
operation has work on its first run."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from deltalake import DeltaTable
from pyiceberg.catalog.sql import SqlCatalog

from lakeops.iceberg.table import TableRef, load_table
from lakeops.icechunk.repository import Repository
from orchestration import demo

DAY = timedelta(days=1)


def _mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def _ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def _close(a: datetime, b: datetime) -> bool:
    return abs(a - b) < timedelta(milliseconds=2)


def test_delta_commits_and_their_files_are_dated_over_six_weeks(tmp_path: Path) -> None:
    location = tmp_path / "events"
    demo.build_delta(location, appends=12)
    times = demo.commit_times(12)
    assert times[0] == demo.NOW - 42 * DAY and times[-1] < demo.NOW - DAY

    table = DeltaTable(str(location))
    assert table.to_pyarrow_table().num_rows == 12 * 200
    assert table.metadata().configuration == {"delta.logRetentionDuration": "interval 7 days"}
    history = sorted(table.history(), key=lambda commit: commit["version"])
    assert [commit["timestamp"] for commit in history] == [_ms(when) for when in times]
    log = location / "_delta_log"
    for version, when in enumerate(times):
        commit = log / f"{version:020d}.json"
        assert _close(_mtime(commit), when)  # the protocol's commit time
        added = [json.loads(line).get("add") for line in commit.read_text().splitlines()]
        for add in filter(None, added):  # each data file dated as the commit that added it
            assert _close(_mtime(location / add["path"]), when)
    leftover = location / "day=2026-10-01" / "part-crashed-writer-0000.parquet"
    assert _close(_mtime(leftover), demo.NOW - 10 * DAY)


def test_iceberg_snapshots_are_restamped_consistently_in_every_metadata_file(tmp_path: Path) -> None:
    uri, identifier = demo.build_iceberg(tmp_path, appends=6)
    table = SqlCatalog("default", uri=uri).load_table(identifier)
    assert table.scan().to_arrow().num_rows == 6 * 100 - 150  # PyIceberg reads it
    snapshots = sorted(table.metadata.snapshots, key=lambda snapshot: snapshot.sequence_number)
    commits = demo.commit_times(7)  # six appends, then the delete (one commit of two snapshots)
    expected = [_ms(when) for when in commits[:6]] + [_ms(commits[6]), _ms(commits[6]) + 1]
    assert [snapshot.timestamp_ms for snapshot in snapshots] == expected
    for snapshot in snapshots:  # time travel by timestamp finds each one
        found = table.snapshot_as_of_timestamp(snapshot.timestamp_ms)
        assert found is not None and found.snapshot_id == snapshot.snapshot_id
    assert table.metadata.last_updated_ms == snapshots[-1].timestamp_ms

    location = Path(table.location().removeprefix("file://"))
    files = sorted((location / "metadata").glob("*.metadata.json"))
    stamps = {s.snapshot_id: s.timestamp_ms for s in snapshots}
    updated = {}
    for path in files:
        document = json.loads(path.read_text())
        updated[path.name] = document["last-updated-ms"]
        assert all(s["timestamp-ms"] == stamps[s["snapshot-id"]] for s in document["snapshots"])
        assert all(e["timestamp-ms"] == stamps[e["snapshot-id"]] for e in document["snapshot-log"])
        assert document["last-updated-ms"] == max(
            (s["timestamp-ms"] for s in document["snapshots"]), default=_ms(demo.NOW - 43 * DAY)
        )
        for entry in document["metadata-log"]:
            assert entry["timestamp-ms"] == updated[entry["metadata-file"].rsplit("/", 1)[-1]]
        assert _close(_mtime(path), datetime.fromtimestamp(document["last-updated-ms"] / 1000, UTC))
    assert [updated[path.name] for path in files] == sorted(updated.values())
    for snapshot in snapshots:  # a manifest list is dated as the commit that wrote it
        manifest_list = Path(snapshot.manifest_list.removeprefix("file://"))
        commit = max(t for t in updated.values() if t <= snapshot.timestamp_ms + 1)
        assert _close(_mtime(manifest_list), datetime.fromtimestamp(commit / 1000, UTC))
    lakeops_view = load_table(TableRef(catalog_uri=uri, identifier=identifier), None)  # and lakeops reads it
    assert [s.timestamp_ms for s in lakeops_view.metadata.snapshots] == [s.timestamp_ms for s in snapshots]


def test_icechunk_snapshots_and_objects_are_dated_by_their_commits(tmp_path: Path) -> None:
    location = tmp_path / "arrays"
    demo.build_icechunk(location, commits=5)
    repo = Repository.open(str(location))
    ancestry = repo.ancestry(repo.resolve("main"))[::-1]
    expected = [demo.NOW - 6 * DAY, demo.NOW - 5 * DAY] + [demo.NOW - (4 - k) * DAY for k in range(5)]
    assert [entry.written_at for entry in ancestry] == expected
    dated = {_mtime(path) for path in location.rglob("*") if path.is_file()}
    assert all(any(_close(when, at) for at in expected) or _close(when, demo.NOW - 10 * DAY) for when in dated)
    for entry in ancestry:  # each snapshot file dated as its commit
        assert entry.file_id is not None
        assert _close(_mtime(location / "snapshots" / entry.file_id), entry.written_at)
