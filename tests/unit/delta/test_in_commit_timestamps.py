"""In-Commit Timestamps (PROTOCOL.md "In-Commit Timestamps"): no engine here writes them (delta-rs refuses
``delta.enableInCommitTimestamps``), so the table is built by the specification — delta-rs appends, then a
commit enabling the feature at version 3 with the enablement properties, then commits dated only by their
``inCommitTimestamp`` — and delta-rs reads it. File modification times are then made to lie, so every
check below passes only if lakeops dates versions from the enablement version on by their in-commit
timestamps: time travel, log retention, and lakeops's own commits, which must carry one later than the
previous commit's."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from lakeops import api
from lakeops.delta.commit import commit
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import ProtocolError
from lakeops.ops.cdc import CdcOptions
from lakeops.ops.compaction import CompactionOptions
from lakeops.ops.consumers import extracted_through, pending_changes
from lakeops.ops.expiry import ExpiryOptions
from lakeops.ops.target import DeltaTarget
from lakeops.storage import open_storage
from spark_jobs.cli import main as lakeops

DAY_MS = 86_400_000
ENABLED_AT = 3
#: Writer version 2's features (delta-rs's tables) and the one enabled.
WRITER_FEATURES = ["appendOnly", "invariants", "inCommitTimestamp"]


def _commit(location: str, version: int, actions: list[dict[str, object]]) -> None:
    path = Path(location) / "_delta_log" / f"{version:020}.json"
    path.write_text("".join(json.dumps(a) + "\n" for a in actions))


def _set_mtime(location: str, version: int, ms: int) -> None:
    os.utime(Path(location) / "_delta_log" / f"{version:020}.json", (ms / 1000, ms / 1000))


def _ict(location: str, version: int) -> int | None:
    first = (Path(location) / "_delta_log" / f"{version:020}.json").read_text().splitlines()[0]
    return json.loads(first).get("commitInfo", {}).get("inCommitTimestamp")


def _ict_table(tmp_path: Path, now_ms: int) -> tuple[str, list[int]]:
    """Versions 0-2 by delta-rs (file times 40, 39, 38 days ago), 3 enables in-commit timestamps
    (ICT 20 days ago), 4-5 append with ICTs 10 and 1 days ago; returns the location and the ICTs of 3-5."""
    location = str(tmp_path / "ict")
    for i in range(ENABLED_AT):
        write_deltalake(location, pa.table({"id": pa.array([i * 10, i * 10 + 1], pa.int64())}), mode="append")
        _set_mtime(location, i, now_ms - (40 - i) * DAY_MS)
    metadata = json.loads((Path(location) / "_delta_log" / f"{0:020}.json").read_text().splitlines()[2])["metaData"]
    icts = [now_ms - 20 * DAY_MS, now_ms - 10 * DAY_MS, now_ms - 1 * DAY_MS]
    metadata["configuration"] = {
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": str(ENABLED_AT),
        "delta.inCommitTimestampEnablementTimestamp": str(icts[0]),
    }
    _commit(
        location,
        ENABLED_AT,
        [
            {"commitInfo": {"inCommitTimestamp": icts[0], "timestamp": icts[0], "operation": "SET TBLPROPERTIES"}},
            {
                "protocol": {
                    "minReaderVersion": 1,
                    "minWriterVersion": 7,
                    "writerFeatures": ["appendOnly", "invariants", "inCommitTimestamp"],
                }
            },
            {"metaData": metadata},
        ],
    )
    for offset, ict in enumerate(icts[1:], start=1):
        name = f"part-ict-{offset}.parquet"
        pq.write_table(pa.table({"id": pa.array([100 + offset], pa.int64())}), Path(location) / name)
        size = (Path(location) / name).stat().st_size
        _commit(
            location,
            ENABLED_AT + offset,
            [
                {"commitInfo": {"inCommitTimestamp": ict, "timestamp": ict, "operation": "WRITE"}},
                {
                    "add": {
                        "path": name,
                        "partitionValues": {},
                        "size": size,
                        "modificationTime": ict,
                        "dataChange": True,
                    }
                },
            ],
        )
    # File times that lie: the ICT commits look 60 days old, so only their ICTs date them correctly.
    for version in range(ENABLED_AT, ENABLED_AT + 3):
        _set_mtime(location, version, now_ms - 60 * DAY_MS)
    return location, icts


def test_delta_rs_reads_the_table_built_by_the_specification(tmp_path: Path) -> None:
    location, _ = _ict_table(tmp_path, int(time.time() * 1000))
    ids = sorted(DeltaTable(location).to_pyarrow_table()["id"].to_pylist())
    assert ids == [0, 1, 10, 11, 20, 21, 101, 102]


def test_time_travel_uses_in_commit_timestamps_from_the_enablement_version(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    location, icts = _ict_table(tmp_path, now)
    storage = open_storage(location)

    def at(ms: int) -> int:
        return load_snapshot(storage, location, timestamp=datetime.fromtimestamp(ms / 1000, UTC)).version

    assert at(icts[1]) == 4 and at(icts[1] - 1) == 3 and at(icts[2] + 1) == 5
    assert at(now - 39 * DAY_MS) == 1  # before the enablement timestamp: file times of versions 0-2
    assert load_snapshot(storage, location).timestamp_ms == icts[2]


def test_log_retention_counts_from_in_commit_timestamps(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    location, icts = _ict_table(tmp_path, now)
    api.checkpoint(location, None)  # a checkpoint at 5 to expire up to

    # Retention 15 days: versions 0-3 are older (file times 40-38 days, ICT 20 days), 4 and 5 are not,
    # though their files claim 60 days.
    report = api.expire(location, ExpiryOptions(older_than="15d", force=True), dry_run=True)

    assert report.cutoff_version == 3, report
    assert not any(p.endswith(("00004.json", "00005.json")) for p in report.paths)


def test_lakeops_commits_carry_a_later_in_commit_timestamp(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    location, icts = _ict_table(tmp_path, now)
    # The previous commit's ICT is in the future (a fast clock elsewhere): ours must still be later.
    _commit(
        location,
        6,
        [{"commitInfo": {"inCommitTimestamp": now + DAY_MS, "timestamp": now, "operation": "WRITE"}}],
    )

    report = api.compact(location, CompactionOptions(min_input_files=2))

    assert report.committed_version == 7
    first = json.loads((Path(location) / "_delta_log" / f"{7:020}.json").read_text().splitlines()[0])
    assert list(first) == ["commitInfo"] and first["commitInfo"]["inCommitTimestamp"] == now + DAY_MS + 1
    assert sorted(DeltaTable(location).to_pyarrow_table()["id"].to_pylist()) == [0, 1, 10, 11, 20, 21, 101, 102]
    assert _ict(location, 7) == now + DAY_MS + 1
    checksum = json.loads((Path(location) / "_delta_log" / f"{7:020}.crc").read_text())
    assert checksum["inCommitTimestampOpt"] == now + DAY_MS + 1
    assert api.inspect(location).checksum == "matches"


def test_change_table_appends_carry_one_when_the_output_enables_them(tmp_path: Path) -> None:
    source, output = str(tmp_path / "source"), str(tmp_path / "changes")
    write_deltalake(source, pa.table({"id": pa.array([1], pa.int64())}))
    api.cdc(source, CdcOptions(from_version=0, output=output))
    first = json.loads((Path(output) / "_delta_log" / f"{0:020}.json").read_text().splitlines()[1])
    metadata = json.loads((Path(output) / "_delta_log" / f"{0:020}.json").read_text().splitlines()[2])["metaData"]
    assert "protocol" in first
    enabled_at = int(time.time() * 1000) + DAY_MS  # a fast clock: the next commit must still be later
    metadata["configuration"] = {**metadata["configuration"], "delta.enableInCommitTimestamps": "true"}
    metadata["configuration"]["delta.inCommitTimestampEnablementVersion"] = "1"
    metadata["configuration"]["delta.inCommitTimestampEnablementTimestamp"] = str(enabled_at)
    features = sorted({*first["protocol"].get("writerFeatures", ["appendOnly", "invariants"]), "inCommitTimestamp"})
    _commit(
        output,
        1,
        [
            {
                "commitInfo": {
                    "inCommitTimestamp": enabled_at,
                    "timestamp": enabled_at,
                    "operation": "SET TBLPROPERTIES",
                }
            },
            {"protocol": {**first["protocol"], "minWriterVersion": 7, "writerFeatures": features}},
            {"metaData": metadata},
        ],
    )
    write_deltalake(source, pa.table({"id": pa.array([2], pa.int64())}), mode="append")

    report = api.cdc(source, CdcOptions(from_version=1, output=output))

    assert report.committed_version == 2 and _ict(output, 2) == enabled_at + 1
    assert sorted(DeltaTable(output).to_pyarrow_table()["id"].to_pylist()) == [1, 2]


def test_change_feed_ranges_are_dated_like_the_change_rows(tmp_path: Path) -> None:
    """What a consumer extracting by day still needs is dated by in-commit timestamps, as the rows'
    ``_commit_timestamp`` are: by file times (all 38+ days old here) nothing would be pending."""
    now = int(time.time() * 1000)
    location, icts = _ict_table(tmp_path, now)
    output = str(tmp_path / "changes")

    pending = pending_changes(DeltaTarget(location=location), output, since_ms=now - 15 * DAY_MS, until_ms=now)

    assert pending is not None and (pending.first, pending.last, pending.first_committed_ms) == (4, 5, icts[1])
    none_yet = pending_changes(DeltaTarget(location=location), output, since_ms=now - 15 * DAY_MS, until_ms=icts[1])
    assert none_yet is None  # version 4 is committed at icts[1], not before it


LONG_MAX = 2**63 - 1


def _table_files(location: str) -> list[Path]:
    return sorted(p for p in Path(location).rglob("*") if "_lakeops_audit" not in p.parts)


@pytest.mark.parametrize(
    ("previous", "error"),
    [
        (LONG_MAX, f"ProtocolError: {{log}}: commitInfo.inCommitTimestamp is {LONG_MAX}"),  # +1 is no long
        (2**63, "CorruptFile: {log}: line 1: invalid commitInfo action: inCommitTimestamp 9223372036854775808"),
        ("abc", "CorruptFile: {log}: line 1: invalid commitInfo action: Input should be a valid integer"),
        (1.5, "CorruptFile: {log}: line 1: invalid commitInfo action: Input should be a valid integer"),
        (1e30, "CorruptFile: {log}: line 1: invalid commitInfo action:"),
    ],
    ids=["long max", "past long", "text", "fraction", "huge float"],
)
def test_a_previous_in_commit_timestamp_no_commit_can_follow_is_refused_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], previous: object, error: str
) -> None:
    """ "Writer Requirements for In-Commit Timestamps": ours is at least one past the previous commit's,
    a ``long``. After 2^63-1 none is: that was a pydantic ValidationError, which the command line took for
    a bad option (exit 2, naming no file; issue 34). A bad table exits 1 and names the commit file."""
    now = int(time.time() * 1000)
    location, _ = _ict_table(tmp_path, now)
    _commit(location, 6, [{"commitInfo": {"inCommitTimestamp": previous, "timestamp": now, "operation": "WRITE"}}])
    files = _table_files(location)

    assert lakeops(["compact", location, "--min-input-files", "2"]) == 1
    message = " ".join(capsys.readouterr().err.split())
    assert error.format(log=Path(location) / "_delta_log" / f"{6:020}.json") in message, message
    assert _table_files(location) == files  # no data file, no version 7
    assert sorted(DeltaTable(location).to_pyarrow_table()["id"].to_pylist()) == [0, 1, 10, 11, 20, 21, 101, 102]


@pytest.mark.parametrize("previous", [-5, -(2**63), LONG_MAX - 1])
def test_any_other_previous_in_commit_timestamp_is_followed(tmp_path: Path, previous: int) -> None:
    now = int(time.time() * 1000)
    location, _ = _ict_table(tmp_path, now)
    _commit(location, 6, [{"commitInfo": {"inCommitTimestamp": previous, "timestamp": now, "operation": "WRITE"}}])

    assert api.compact(location, CompactionOptions(min_input_files=2)).committed_version == 7

    ict = _ict(location, 7)
    assert ict is not None and ict > previous and ict >= now  # the later of now and one past the previous
    assert sorted(DeltaTable(location).to_pyarrow_table()["id"].to_pylist()) == [0, 1, 10, 11, 20, 21, 101, 102]


def test_a_winner_whose_in_commit_timestamp_no_commit_can_follow_stops_the_rebase(tmp_path: Path) -> None:
    """The same limit met on a version that landed first: the rebase refuses, naming the winner's file."""
    location, _ = _ict_table(tmp_path, int(time.time() * 1000))
    storage = open_storage(location)
    winner = Path(location) / "_delta_log" / f"{6:020}.json"
    winner.write_text(json.dumps({"commitInfo": {"inCommitTimestamp": LONG_MAX, "operation": "WRITE"}}) + "\n")

    with pytest.raises(ProtocolError, match=rf"{winner}: commitInfo.inCommitTimestamp is {LONG_MAX}"):
        commit(
            storage,
            location,
            read_version=5,
            actions=[],
            operation="TEST",
            operation_parameters={},
            conflict_rule=lambda _: None,
            backoff_s=0,
            in_commit_timestamps=True,
        )
    assert not (Path(location) / "_delta_log" / f"{7:020}.json").exists()


def test_a_change_table_no_commit_can_follow_still_tells_its_watermark(tmp_path: Path) -> None:
    """Only a writer needs a next commit: the source's expiry reads how far a change table has extracted
    it (its ``txn``), even from a change table whose last in-commit timestamp is the largest long."""
    source = str(tmp_path / "source")
    write_deltalake(source, pa.table({"id": pa.array([1], pa.int64())}))
    source_id = DeltaTable(source).metadata().id
    now = int(time.time() * 1000)
    output, _ = _ict_table(tmp_path, now)
    commit = {"commitInfo": {"inCommitTimestamp": LONG_MAX, "timestamp": now, "operation": "WRITE"}}
    _commit(output, 6, [commit, {"txn": {"appId": source_id, "version": 0}}])

    assert extracted_through(source, output) == 0
    assert extracted_through(source, str(tmp_path / "absent")) is None
