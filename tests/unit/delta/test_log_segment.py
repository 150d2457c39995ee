"""Log listing, segment selection, commit timestamps and replay on small synthetic logs
("Delta Log Entries", "Checkpoints", "Action Reconciliation")."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeops.delta.commit_file import parse_commit
from lakeops.delta.commit_time import CommitClock
from lakeops.delta.log_segment import (
    checkpoint_file_names,
    commit_timestamps,
    list_log,
    segment_for_version,
)
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import CorruptFile, NotATable, VersionNotFound
from lakeops.storage import open_storage

SCHEMA_STRING = json.dumps(
    {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
)
PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 2}
DV_PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["deletionVectors"],
    "writerFeatures": ["deletionVectors"],
}
METADATA = {
    "id": "00000000-0000-0000-0000-000000000001",
    "format": {"provider": "parquet", "options": {}},
    "schemaString": SCHEMA_STRING,
    "partitionColumns": [],
    "configuration": {},
}


def _add(path: str, dv: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"path": path, "partitionValues": {}, "size": 100, "modificationTime": 0, "dataChange": True}
    if dv is not None:
        body["deletionVector"] = dv
    return {"add": {**body, **extra}}


def _remove(path: str, dv: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"path": path, "deletionTimestamp": 1, "dataChange": True}
    if dv is not None:
        body["deletionVector"] = dv
    return {"remove": body}


def _dv(path_or_inline: str, cardinality: int) -> dict[str, Any]:
    return {
        "storageType": "u",
        "pathOrInlineDv": path_or_inline,
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": cardinality,
    }


def _log(root: Path) -> Path:
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    return log


def write_commit(root: Path, version: int, actions: list[dict[str, Any]]) -> Path:
    path = _log(root) / f"{version:020d}.json"
    path.write_text("".join(json.dumps(a) + "\n" for a in actions), encoding="utf-8")
    return path


def write_table(root: Path, versions: int) -> None:
    """Commits 0..versions-1: v0 creates the table with file0; each later version adds file<v>."""
    write_commit(root, 0, [{"protocol": PROTOCOL}, {"metaData": METADATA}, _add("file0.parquet")])
    for v in range(1, versions):
        write_commit(root, v, [{"commitInfo": {"operation": "WRITE"}}, _add(f"file{v}.parquet")])


_MAP = pa.map_(pa.string(), pa.string())
_CHECKPOINT_SCHEMA = pa.schema(
    [
        ("protocol", pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())])),
        (
            "metaData",
            pa.struct(
                [
                    ("id", pa.string()),
                    ("format", pa.struct([("provider", pa.string()), ("options", _MAP)])),
                    ("schemaString", pa.string()),
                    ("partitionColumns", pa.list_(pa.string())),
                    ("configuration", _MAP),
                ]
            ),
        ),
        (
            "add",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("partitionValues", _MAP),
                    ("size", pa.int64()),
                    ("modificationTime", pa.int64()),
                    ("dataChange", pa.bool_()),
                ]
            ),
        ),
    ]
)


def write_checkpoint(root: Path, version: int, live: list[str], *, parts: int = 1) -> list[Path]:
    """A valid checkpoint of ``version`` holding protocol, metadata and ``live`` adds, in ``parts`` files."""
    rows: list[dict[str, Any]] = [
        {"protocol": PROTOCOL},
        {"metaData": {**METADATA, "format": {"provider": "parquet", "options": []}, "configuration": []}},
    ]
    rows += [
        {"add": {"path": p, "partitionValues": [], "size": 100, "modificationTime": 0, "dataChange": False}}
        for p in live
    ]
    names = checkpoint_file_names(version, parts)
    paths = []
    for index, name in enumerate(names):
        chunk = rows[index::parts]
        table = pa.Table.from_pylist(chunk, schema=_CHECKPOINT_SCHEMA)
        path = _log(root) / name
        pq.write_table(table, path)
        paths.append(path)
    return paths


def _load(root: Path, **kwargs: Any) -> Any:
    return load_snapshot(open_storage(str(root)), str(root), **kwargs)


def _paths(snapshot: Any) -> set[str]:
    return {add.path for add in snapshot.files.values()}


# --- checkpoints ----------------------------------------------------------------------------------


def test_incomplete_multi_part_checkpoint_is_skipped_for_an_older_complete_one(tmp_path: Path) -> None:
    write_table(tmp_path, 6)
    write_checkpoint(tmp_path, 2, ["file0.parquet", "file1.parquet", "file2.parquet"])
    # A writer died while writing a 3-part checkpoint of version 4: part 2 is missing. Its parts are
    # garbage too, so reading them at all would fail.
    for index in (1, 3):
        (tmp_path / "_delta_log" / f"{4:020d}.checkpoint.{index:010d}.{3:010d}.parquet").write_bytes(b"partial")
    # Commits 0 and 1 are expired: version 5 is only reachable through the complete checkpoint.
    for version in (0, 1):
        (tmp_path / "_delta_log" / f"{version:020d}.json").unlink()

    listing = list_log(open_storage(str(tmp_path)), str(tmp_path))
    assert sorted(listing.checkpoints) == [2]
    assert sorted(listing.incomplete_checkpoints) == [4]
    assert len(listing.incomplete_checkpoints[4]) == 2

    segment = segment_for_version(listing, str(tmp_path), 5)
    assert segment.checkpoint_version == 2
    assert [v for v, _ in segment.commits] == [3, 4, 5]
    snapshot = _load(tmp_path)
    assert snapshot.version == 5
    assert _paths(snapshot) == {f"file{v}.parquet" for v in range(6)}


def test_complete_multi_part_checkpoint_is_used_in_part_order(tmp_path: Path) -> None:
    write_table(tmp_path, 4)
    write_checkpoint(tmp_path, 3, [f"file{v}.parquet" for v in range(4)], parts=3)
    for version in range(4):
        (tmp_path / "_delta_log" / f"{version:020d}.json").unlink()
    snapshot = _load(tmp_path)
    assert snapshot.version == 3
    assert snapshot.segment.checkpoint is not None and snapshot.segment.checkpoint.parts == 3
    assert [Path(f.path).name for f in snapshot.segment.checkpoint.files] == checkpoint_file_names(3, 3)
    assert _paths(snapshot) == {f"file{v}.parquet" for v in range(4)}


def test_only_an_incomplete_checkpoint_and_expired_commits_is_version_not_found(tmp_path: Path) -> None:
    write_table(tmp_path, 4)
    write_checkpoint(tmp_path, 2, ["file0.parquet"], parts=2)[1].unlink()
    for version in (0, 1, 2):
        (tmp_path / "_delta_log" / f"{version:020d}.json").unlink()
    with pytest.raises(VersionNotFound, match=r"00000000000000000000\.json"):
        _load(tmp_path)


def test_v2_checkpoint_is_a_checkpoint_and_its_sidecars_are_not(tmp_path: Path) -> None:
    """A UUID-named checkpoint is complete on its own; one without checkpointMetadata is corrupt."""
    log = _log(tmp_path)
    name = f"{3:020d}.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json"
    (log / name).write_text('{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}\n')
    write_commit(tmp_path, 4, [_add("file4.parquet")])
    (log / "_sidecars").mkdir()
    (log / "_sidecars" / f"{3:020d}.checkpoint.0000000001.0000000001.parquet").write_bytes(b"x")
    listing = list_log(open_storage(str(tmp_path)), str(tmp_path))
    assert list(listing.checkpoints) == [3] and listing.incomplete_checkpoints == {}
    assert [Path(f.path).name for f in listing.checkpoints[3].files] == [name]
    with pytest.raises(
        CorruptFile, match=r"80a083e8-7026-4e79-81be-64bd76c43a11\.json: UUID-named .*checkpointMetadata"
    ):
        _load(tmp_path)


# --- missing and out-of-range versions ------------------------------------------------------------


def test_missing_commit_is_version_not_found_naming_the_file(tmp_path: Path) -> None:
    write_table(tmp_path, 4)
    (tmp_path / "_delta_log" / f"{2:020d}.json").unlink()
    assert _paths(_load(tmp_path, version=1)) == {"file0.parquet", "file1.parquet"}
    with pytest.raises(VersionNotFound) as info:
        _load(tmp_path)
    message = str(info.value)
    assert "cannot reconstruct version 3" in message
    assert "00000000000000000002.json is missing" in message


@pytest.mark.parametrize("version", [4, 100, -1])
def test_version_outside_the_log_is_version_not_found(tmp_path: Path, version: int) -> None:
    write_table(tmp_path, 4)
    with pytest.raises(VersionNotFound, match=rf"version {version} does not exist \(latest is 3\)"):
        _load(tmp_path, version=version)


def test_no_delta_log_is_not_a_table(tmp_path: Path) -> None:
    (tmp_path / "part-0.parquet").write_bytes(b"PAR1")
    with pytest.raises(NotATable, match="no Delta log") as info:
        _load(tmp_path)
    assert str(tmp_path) in str(info.value)
    # A _delta_log with nothing a reader can use is no table either.
    (_log(tmp_path) / "_last_checkpoint.tmp").write_text("junk")
    (tmp_path / "_delta_log" / "00000000000000000000.crc").write_text("{}")
    with pytest.raises(NotATable):
        _load(tmp_path)


# --- corrupt commits ------------------------------------------------------------------------------


def test_truncated_last_line_is_corrupt_file_naming_file_and_line(tmp_path: Path) -> None:
    write_table(tmp_path, 2)
    path = tmp_path / "_delta_log" / f"{1:020d}.json"
    lines = [json.dumps({"commitInfo": {}}), json.dumps(_add("a.parquet")), json.dumps(_add("b.parquet"))]
    path.write_text("\n".join(lines)[:-25], encoding="utf-8")  # the writer died mid-line, no newline
    assert _paths(_load(tmp_path, version=0)) == {"file0.parquet"}
    with pytest.raises(CorruptFile) as info:
        _load(tmp_path)
    message = str(info.value)
    assert str(path) in message
    assert "line 3" in message


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_unicode_line_separators_inside_json_strings_are_not_line_breaks(separator: str) -> None:
    """JSON allows U+2028/U+2029/U+0085 unescaped in strings; only ``\\n`` ends an action line."""
    value = f"a{separator}b"
    line = json.dumps(
        _add(
            "f.parquet", partitionValues={"p": value}, stats=json.dumps({"minValues": {"s": value}}, ensure_ascii=False)
        ),
        ensure_ascii=False,
    )
    raw = f"{json.dumps({'commitInfo': {}})}\n{line}\r\n".encode()
    commit = parse_commit(raw, 1, "/t/_delta_log/00000000000000000001.json")
    assert [a.partition_values for a in commit.adds] == [{"p": value}]
    assert json.loads(commit.adds[0].stats or "")["minValues"]["s"] == value


# --- timestamps -----------------------------------------------------------------------------------


def _set_mtime_ms(path: Path, ms: int) -> None:
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


def _at(ms: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


def test_non_monotonic_mtimes_are_adjusted_and_time_travel_uses_them(tmp_path: Path) -> None:
    write_table(tmp_path, 4)
    base = 1_700_000_000_000
    mtimes = [base, base + 3000, base + 2000, base + 4000]  # v2's file is older than v1's (a copy, a clock)
    for version, ms in enumerate(mtimes):
        _set_mtime_ms(tmp_path / "_delta_log" / f"{version:020d}.json", ms)
    listing = list_log(open_storage(str(tmp_path)), str(tmp_path))
    assert commit_timestamps(listing) == [(0, base), (1, base + 3000), (2, base + 3001), (3, base + 4000)]

    def version_at(ms: int) -> int:
        snapshot = _load(tmp_path, timestamp=_at(ms))
        return int(snapshot.version)

    assert version_at(base) == 0
    assert version_at(base + 2500) == 0  # v2's raw mtime is before this, its adjusted time is not
    assert version_at(base + 3000) == 1
    assert version_at(base + 3001) == 2
    assert version_at(base + 3999) == 2
    assert version_at(base + 10_000) == 3
    assert _load(tmp_path, version=2).timestamp_ms == base + 3001
    with pytest.raises(VersionNotFound, match="before the earliest retained commit"):
        _load(tmp_path, timestamp=_at(base - 1))


@pytest.mark.parametrize("ms", [544_315_830_004, 2_193_264_996_411])
def test_time_travel_to_the_exact_commit_millisecond(tmp_path: Path, ms: int) -> None:
    """For these instants ``int(dt.timestamp() * 1000)`` is one less than the millisecond (float error)."""
    assert int(_at(ms).timestamp() * 1000) == ms - 1  # the trap the lookup must avoid
    write_table(tmp_path, 2)
    _set_mtime_ms(tmp_path / "_delta_log" / f"{0:020d}.json", ms - 10)
    _set_mtime_ms(tmp_path / "_delta_log" / f"{1:020d}.json", ms)
    storage = open_storage(str(tmp_path))
    clock = CommitClock(storage, list_log(storage, str(tmp_path)), enablement=None)  # commits dated by their files
    assert clock.version_at(str(tmp_path), _at(ms)) == 1
    assert clock.version_at(str(tmp_path), _at(ms) - timedelta(microseconds=1)) == 0
    assert _load(tmp_path, timestamp=_at(ms)).version == 1


# --- reconciliation -------------------------------------------------------------------------------


def test_reconciliation_is_keyed_by_path_and_deletion_vector(tmp_path: Path) -> None:
    dv1, dv2 = _dv("ab^-aqEH.-t@S}K{vb[*k^", 1), _dv("cd^-aqEH.-t@S}K{vb[*k^", 2)
    write_commit(tmp_path, 0, [{"protocol": DV_PROTOCOL}, {"metaData": METADATA}, _add("a.parquet"), _add("b.parquet")])
    write_commit(tmp_path, 1, [_remove("a.parquet"), _add("a.parquet", dv1)])  # first DELETE: a gets a DV
    # Second DELETE in one commit, add written before remove (as Spark does): same path, new DV.
    write_commit(tmp_path, 2, [_add("a.parquet", dv2), _remove("a.parquet", dv1)])
    write_commit(tmp_path, 3, [_remove("b.parquet")])
    write_commit(tmp_path, 4, [_add("b.parquet")])  # re-added: its tombstone goes

    id1, id2 = "uab^-aqEH.-t@S}K{vb[*k^@1", "ucd^-aqEH.-t@S}K{vb[*k^@1"
    v1 = _load(tmp_path, version=1)
    assert set(v1.files) == {("a.parquet", id1), ("b.parquet", None)}
    assert set(v1.tombstones) == {("a.parquet", None)}

    v2 = _load(tmp_path, version=2)
    assert set(v2.files) == {("a.parquet", id2), ("b.parquet", None)}
    assert v2.files[("a.parquet", id2)].deletion_vector is not None
    assert v2.files[("a.parquet", id2)].deletion_vector.cardinality == 2
    assert set(v2.tombstones) == {("a.parquet", None), ("a.parquet", id1)}

    v3 = _load(tmp_path, version=3)
    assert set(v3.files) == {("a.parquet", id2)}
    assert set(v3.tombstones) == {("a.parquet", None), ("a.parquet", id1), ("b.parquet", None)}

    v4 = _load(tmp_path)
    assert set(v4.files) == {("a.parquet", id2), ("b.parquet", None)}
    assert set(v4.tombstones) == {("a.parquet", None), ("a.parquet", id1)}
