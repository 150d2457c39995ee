"""Delta log expiry ("Metadata Cleanup"): which log files go, what stays readable, and the safety checks.

delta-rs writes the tables and checkpoints; commit ages are set with ``os.utime``, since the protocol
dates a commit by its file's modification time.
"""

from __future__ import annotations

import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from lakeops_testdata import TESTDATA

from lakeops.delta.last_checkpoint import parse_last_checkpoint
from lakeops.delta.maintenance.expiry import (
    ExpiryOptions,
    ExpiryPlan,
    commit_expiry,
    delete_log_batch,
    plan_expiry,
)
from lakeops.delta.scan import read_snapshot
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import InvalidArgument, ProtocolError, UnsafeOperation, UnsupportedFeature, VersionNotFound
from lakeops.storage import StorageOptions, open_storage
from lakeops.units import parse_retention

DAY = 86400.0
NOW = time.time()


def _log(location: Path) -> Path:
    return location / "_delta_log"


def _names(location: Path) -> set[str]:
    return {p.name for p in _log(location).iterdir()}


def _age_commits(location: Path, days_ago: dict[int, float]) -> None:
    for version, days in days_ago.items():
        stamp = NOW - days * DAY
        os.utime(_log(location) / f"{version:020d}.json", (stamp, stamp))


def _write_table(
    location: Path, commits: int, checkpoints: tuple[int, ...], config: dict[str, str] | None = None
) -> None:
    for version in range(commits):
        write_deltalake(
            str(location), pa.table({"id": [version]}), mode="append", configuration=config if version == 0 else None
        )
        if version in checkpoints:
            DeltaTable(str(location)).create_checkpoint()


def _copy(name: str, tmp_path: Path, *, kernel: bool = False) -> Path:
    source = TESTDATA / ("delta-kernel" if kernel else "delta-rs") / name
    target = tmp_path / name
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)  # the fixtures are read-only
    return target


def _plan(location: Path, **options: object) -> ExpiryPlan:
    storage = open_storage(str(location))
    snapshot = load_snapshot(storage, str(location))
    return plan_expiry(snapshot, storage, ExpiryOptions.model_validate(options), now_ms=int(NOW * 1000))


def _expire(location: Path, **options: object) -> ExpiryPlan:
    plan = _plan(location, **options)
    for batch in commit_expiry(plan, StorageOptions()).batches:
        delete_log_batch(batch)
    return plan


def _ids(location: Path, version: int | None = None) -> list[int]:
    table = DeltaTable(str(location), version=version)
    return sorted(table.to_pyarrow_table().column("id").to_pylist())


def test_expiry_keeps_the_newest_checkpoint_below_the_cutoff_and_everything_after(tmp_path: Path) -> None:
    location = tmp_path / "t"
    _write_table(location, 7, checkpoints=(2, 4))
    _age_commits(location, {0: 40, 1: 39, 2: 38, 3: 37, 4: 36, 5: 1, 6: 0})
    before = {v: _ids(location, v) for v in range(7)}

    plan = _expire(location)

    assert (plan.cutoff_version, plan.checkpoint_version) == (4, 4)
    assert _names(location) == {
        "00000000000000000004.checkpoint.parquet",
        "00000000000000000004.json",
        "00000000000000000005.json",
        "00000000000000000006.json",
        "_last_checkpoint",
    }
    assert sorted(Path(f.path).name for f in plan.files) == [
        "00000000000000000000.json",
        "00000000000000000001.json",
        "00000000000000000002.checkpoint.parquet",
        "00000000000000000002.json",
        "00000000000000000003.json",
    ]
    storage = open_storage(str(location))
    for version in (4, 5, 6):  # every retained version, by lakeops and by delta-rs
        snapshot = load_snapshot(storage, str(location), version=version)
        assert sorted(read_snapshot(snapshot, storage).column("id").to_pylist()) == before[version]
        assert _ids(location, version) == before[version]
    assert _ids(location) == before[6]
    for version in (0, 3):
        with pytest.raises(VersionNotFound, match=f"cannot reconstruct version {version}"):
            load_snapshot(storage, str(location), version=version)
    with pytest.raises(Exception, match="No files in log segment"):  # delta-rs agrees version 3 is gone
        DeltaTable(str(location), version=3)
    # Time travel to a moment before the earliest retained commit fails clearly too.
    with pytest.raises(VersionNotFound, match="before the earliest retained commit"):
        load_snapshot(storage, str(location), timestamp=datetime.fromtimestamp(NOW - 38 * DAY, UTC))


def test_cutoff_between_checkpoints_keeps_the_older_one(tmp_path: Path) -> None:
    location = tmp_path / "t"
    _write_table(location, 7, checkpoints=(2, 4))
    _age_commits(location, {0: 40, 1: 39, 2: 38, 3: 37, 4: 2, 5: 1, 6: 0})

    plan = _expire(location)

    assert (plan.cutoff_version, plan.checkpoint_version) == (3, 2)
    assert sorted(Path(f.path).name for f in plan.files) == ["00000000000000000000.json", "00000000000000000001.json"]
    assert "00000000000000000002.checkpoint.parquet" in _names(location)
    assert _ids(location, 2) == [0, 1, 2] and _ids(location) == list(range(7))
    assert plan.last_checkpoint_target is None  # the pointer names version 4, which stays


def test_an_unreadable_cutoff_checkpoint_stops_expiry(tmp_path: Path) -> None:
    location = tmp_path / "t"
    _write_table(location, 7, checkpoints=(2, 4))
    _age_commits(location, {0: 40, 1: 39, 2: 38, 3: 37, 4: 2, 5: 1, 6: 0})
    (_log(location) / "00000000000000000002.checkpoint.parquet").write_bytes(b"not parquet")
    before = _names(location)

    with pytest.raises(UnsafeOperation, match="checkpoint at version 2 .* cannot be read .* nothing deleted"):
        _expire(location)

    assert _names(location) == before


def test_floors_keep_a_consumers_versions_and_the_last_n(tmp_path: Path) -> None:
    """All seven commits are past the retention; a change-feed consumer that extracted through version 3
    still needs versions 3.. readable, so the cutoff checkpoint drops from 4 to 2; retain_last=5 keeps
    versions 2..6, the same; a floor below every checkpoint stops expiry with a note naming it."""
    location = tmp_path / "t"
    _write_table(location, 7, checkpoints=(2, 4))
    _age_commits(location, {v: 40 - v for v in range(7)})
    before = {v: _ids(location, v) for v in range(2, 7)}

    assert _plan(location).checkpoint_version == 4  # without a floor
    assert _plan(location, retain_last=5).checkpoint_version == 2
    stopped = _plan(location, keep_from_version=1)
    assert stopped.checkpoint_version is None and stopped.files == [] and stopped.floor_version == 1
    assert stopped.note is not None and "at or below version 1 (version 1 and later must stay readable" in stopped.note

    plan = _expire(location, keep_from_version=3, retain_last=2)  # the lower floor wins

    assert (plan.cutoff_version, plan.floor_version, plan.checkpoint_version) == (6, 3, 2)
    assert sorted(Path(f.path).name for f in plan.files) == [f"{v:020d}.json" for v in range(2)]
    storage = open_storage(str(location))
    for version in range(2, 7):  # every version from the checkpoint on, with its commit JSON
        assert _ids(location, version) == before[version]
        assert (_log(location) / f"{version:020d}.json").exists()
        load_snapshot(storage, str(location), version=version)
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        ExpiryOptions(retain_last=0)


def test_dry_run_deletes_nothing(tmp_path: Path) -> None:
    location = tmp_path / "t"
    _write_table(location, 5, checkpoints=(3,))
    _age_commits(location, {v: 40 - v for v in range(5)})
    before = _names(location)

    plan = _plan(location)

    assert sorted(Path(f.path).name for f in plan.files) == [f"{v:020d}.json" for v in range(3)]
    assert _names(location) == before


def test_no_checkpoint_at_or_below_the_cutoff_deletes_nothing(tmp_path: Path) -> None:
    location = tmp_path / "t"
    _write_table(location, 6, checkpoints=(4,))
    _age_commits(location, {0: 40, 1: 39, 2: 38, 3: 37, 4: 1, 5: 0})
    before = _names(location)

    plan = _expire(location)

    assert plan.cutoff_version == 3 and plan.checkpoint_version is None and plan.files == []
    assert plan.note is not None and "no complete checkpoint at or below version 3" in plan.note
    assert _names(location) == before


def test_nothing_older_than_the_retention(tmp_path: Path) -> None:
    location = tmp_path / "t"
    _write_table(location, 3, checkpoints=(1,))
    plan = _expire(location)
    assert plan.cutoff_version is None and plan.files == []
    assert plan.note is not None and "no commit is older than the retention" in plan.note


def test_stale_incomplete_multipart_checkpoints_below_the_cutoff_go_and_later_ones_stay(tmp_path: Path) -> None:
    location = tmp_path / "t"
    _write_table(location, 7, checkpoints=(4,))
    _age_commits(location, {v: 40 - v for v in range(7)})
    single = (_log(location) / "00000000000000000004.checkpoint.parquet").read_bytes()
    stale = "00000000000000000001.checkpoint.0000000001.0000000002.parquet"  # part 2 of 2 never landed
    later = "00000000000000000005.checkpoint.0000000002.0000000003.parquet"
    for name in (stale, later):
        (_log(location) / name).write_bytes(single)
    # A Hadoop checksum sidecar goes with its commit; one of a kept commit stays.
    (_log(location) / ".00000000000000000000.json.crc").write_bytes(b"crc")
    (_log(location) / ".00000000000000000005.json.crc").write_bytes(b"crc")

    plan = _expire(location)

    assert (plan.cutoff_version, plan.checkpoint_version) == (6, 4)
    names = _names(location)
    assert stale not in names and ".00000000000000000000.json.crc" not in names
    assert later in names and ".00000000000000000005.json.crc" in names
    assert {f"{v:020d}.json" for v in range(4, 7)} <= names
    assert _ids(location) == list(range(7))


def test_multipart_checkpoint_and_version_checksums(tmp_path: Path) -> None:
    location = _copy("v1-multi-part-struct-stats-only", tmp_path, kernel=True)
    _age_commits(location, {v: 40 - v for v in range(6)})
    storage = open_storage(str(location))
    before = sorted(read_snapshot(load_snapshot(storage, str(location)), storage).column("id").to_pylist())

    plan = _expire(location)

    assert plan.checkpoint_version == 5
    names = _names(location)
    # Spark wrote Hadoop ".<name>.crc" sidecars: those of expired files went with them.
    assert {n for n in names if n.startswith(".")} == {f".{n}.crc" for n in names if not n.startswith(".")}
    assert {n for n in names if not n.startswith(".")} == {
        "00000000000000000005.checkpoint.0000000001.0000000003.parquet",
        "00000000000000000005.checkpoint.0000000002.0000000003.parquet",
        "00000000000000000005.checkpoint.0000000003.0000000003.parquet",
        "00000000000000000005.crc",
        "00000000000000000005.json",
        "_last_checkpoint",
    }
    assert [f.kind for f in plan.files].count("checksum") == 5
    snapshot = load_snapshot(storage, str(location))
    assert snapshot.segment.checkpoint_version == 5
    assert sorted(read_snapshot(snapshot, storage).column("id").to_pylist()) == before
    # (delta-rs refuses to read this table: it lists the deletionVectors reader feature)


def test_a_pointer_to_an_expiring_checkpoint_is_rewritten_first(tmp_path: Path) -> None:
    location = _copy("table_failed_last_checkpoint_update", tmp_path)  # pointer names version 1; newest is 3
    _age_commits(location, {v: 40 - v for v in range(4)})
    before = DeltaTable(str(location)).to_pyarrow_table()

    plan = _expire(location)

    assert plan.checkpoint_version == 3 and plan.last_checkpoint_target == 3
    pointer = parse_last_checkpoint((_log(location) / "_last_checkpoint").read_bytes(), "_last_checkpoint")
    checkpoint = _log(location) / "00000000000000000003.checkpoint.parquet"
    assert pointer.version == 3 and pointer.checksum is not None
    assert pointer.size == pq.read_metadata(checkpoint).num_rows
    assert pointer.size_in_bytes == checkpoint.stat().st_size
    assert "00000000000000000001.checkpoint.parquet" not in _names(location)
    assert DeltaTable(str(location)).to_pyarrow_table().equals(before)


def test_a_pointer_to_a_missing_checkpoint_is_repaired(tmp_path: Path) -> None:
    location = tmp_path / "t"
    _write_table(location, 6, checkpoints=(2, 4))
    _age_commits(location, {v: 40 - v for v in range(6)})
    (_log(location) / "00000000000000000004.checkpoint.parquet").unlink()  # the pointer now dangles

    plan = _expire(location)

    assert plan.checkpoint_version == 2 and plan.last_checkpoint_target == 2
    pointer = parse_last_checkpoint((_log(location) / "_last_checkpoint").read_bytes(), "_last_checkpoint")
    assert pointer.version == 2
    assert _ids(location) == list(range(6))


def test_retention_checks(tmp_path: Path) -> None:
    location = tmp_path / "t"
    _write_table(location, 3, checkpoints=(1,), config={"delta.logRetentionDuration": "interval 10 days"})
    _age_commits(location, {0: 6, 1: 5, 2: 4})

    assert _plan(location).retention == timedelta(days=10)
    with pytest.raises(
        UnsafeOperation, match=r"retention 3d is shorter than the table's delta.logRetentionDuration \(10d\)"
    ):
        _plan(location, retention=timedelta(days=3))
    assert [Path(f.path).name for f in _plan(location, retention=timedelta(days=3), force=True).files] == [
        "00000000000000000000.json"
    ]
    assert _plan(location, retention=timedelta(days=12)).files == []  # longer is always allowed
    with pytest.raises(InvalidArgument, match="negative"):
        _plan(location, retention=timedelta(days=-1), force=True)
    with pytest.raises(InvalidArgument, match="longer than zero"):
        _plan(location, retention=timedelta(0), force=True)
    with pytest.raises(InvalidArgument, match=r"retention '-1d' is negative"):
        parse_retention("-1d")
    assert parse_retention("36h") == timedelta(hours=36)


def test_bad_property_and_disabled_cleanup_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    _write_table(bad, 1, checkpoints=(), config={"delta.logRetentionDuration": "forever"})
    with pytest.raises(ProtocolError, match="delta.logRetentionDuration='forever' is not an interval"):
        _plan(bad)
    off = tmp_path / "off"
    _write_table(off, 3, checkpoints=(1,), config={"delta.enableExpiredLogCleanup": "false"})
    _age_commits(off, {0: 40, 1: 39, 2: 38})
    with pytest.raises(UnsafeOperation, match="delta.enableExpiredLogCleanup=false"):
        _plan(off)
    assert len(_plan(off, force=True).files) == 1


def test_unsupported_writer_features_are_refused(tmp_path: Path) -> None:
    location = tmp_path / "t"
    _write_table(location, 1, checkpoints=())
    commit = _log(location) / "00000000000000000001.json"
    commit.write_text(
        '{"protocol":{"minReaderVersion":1,"minWriterVersion":7,"writerFeatures":["aFeatureFromTheFuture"]}}\n'
    )
    with pytest.raises(UnsupportedFeature, match="aFeatureFromTheFuture"):
        _plan(location)
