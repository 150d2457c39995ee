"""Log replay against every real Delta table in tests/data, checked against delta-rs ("Delta Log
Entries", "Checkpoints", "Last Checkpoint File", "Action Reconciliation", "Table Features").

Each table either replays to exactly the state delta-rs (``deltalake`` 1.6) reports — version, live
file URIs, protocol, metadata — or is refused with :class:`UnsupportedFeature` naming the feature, or
(one table) rejected as corrupt. ``EXPECTATIONS`` states which, per table, together with facts of our
own (version, live file count, checkpoint used, live rows from the golden ``expected/`` data) so a
table delta-rs cannot open is still checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from lakeops.delta.commit_file import parse_commit
from lakeops.delta.last_checkpoint import checksum
from lakeops.delta.log_segment import list_log
from lakeops.delta.snapshot import DeltaSnapshot, load_snapshot
from lakeops.errors import CorruptFile, UnsupportedFeature, VersionNotFound
from lakeops.storage import normalize, open_storage

Outcome = Literal["replay", "refuse", "corrupt"]


@dataclass(frozen=True)
class Expect:
    outcome: Outcome
    version: int | None = None  # latest version
    live_files: int | None = None
    checkpoint: int | None = None  # checkpoint version the latest snapshot starts from
    feature: str | None = None  # for "refuse": the feature the error must name
    on_disk: bool = True  # live data files are present (False: a log-only fixture)
    rows: int | None = None  # live rows, equal to the row count of expected/


def replay(version: int, live_files: int, checkpoint: int | None = None, **kw: Any) -> Expect:
    return Expect("replay", version, live_files, checkpoint, **kw)


def refuse(feature: str) -> Expect:
    return Expect("refuse", feature=feature)


EXPECTATIONS: dict[str, Expect] = {
    # delta-rs crates/test/tests/data
    "delta-rs/cdf-table": replay(3, 9),
    "delta-rs/cdf-table-non-partitioned": replay(4, 11),
    "delta-rs/cdf-table-with-cdc-and-dvs": replay(25, 2),
    "delta-rs/checkpoint-cdf-table": replay(5, 13, 3),
    "delta-rs/checkpoint-v2-table": replay(9, 8, 8),
    "delta-rs/checkpoint_with_partitions": replay(2, 2, 2, on_disk=False),
    "delta-rs/checkpoints_vacuumed": replay(12, 12, 10, on_disk=False),
    "delta-rs/delta-0.2.0": replay(3, 3, 3),
    "delta-rs/delta-1.2.1-only-struct-stats": replay(12, 12, 10),
    "delta-rs/delta-checkpoint-stats-optional": replay(2, 2, 2),
    "delta-rs/latest_not_checkpointed": replay(3, 1, 2, on_disk=False),
    "delta-rs/partition-type-primitives": replay(0, 16),
    "delta-rs/simple_table": replay(4, 5),
    "delta-rs/simple_table_features": refuse("blahabl"),  # delta-rs cannot open it either
    "delta-rs/simple_table_with_cdc": replay(2, 1),
    "delta-rs/simple_table_with_checkpoint": replay(10, 11, 10),
    "delta-rs/table-with-dv-small": replay(1, 1),
    "delta-rs/table-without-dv-small": replay(0, 1),
    "delta-rs/table_failed_last_checkpoint_update": replay(3, 4, 3),  # pointer says 1: stale
    "delta-rs/table_with_column_mapping": replay(0, 2),
    "delta-rs/table_with_deletion_logs": replay(20, 1, 20),
    "delta-rs/table_with_partitioning_mapping": replay(4, 2),
    "delta-rs/with_checkpoint_no_last_checkpoint": replay(3, 1, 2, on_disk=False),
    # delta-kernel-rs: plain directories
    "delta-kernel/v1-multi-part-partitioned-struct-stats-only": replay(5, 5, 5),
    "delta-kernel/v1-multi-part-struct-stats-only": replay(5, 5, 5),
    # delta-kernel-rs: .tar.zst golden tables
    "delta-kernel/basic-with-inserts-deletes-checkpoint": replay(13, 7, 10, rows=41),
    "delta-kernel/basic-with-vacuum-protocol-check-feature": replay(1, 2, rows=100),
    "delta-kernel/checkpoint": replay(14, 1, 10, on_disk=False),
    "delta-kernel/corrupted-last-checkpoint-kernel": Expect("corrupt"),
    "delta-kernel/dv-partitioned-with-checkpoint": replay(15, 15, 10, rows=35),
    "delta-kernel/dv-with-columnmapping": replay(15, 15, 10, rows=35),
    "delta-kernel/log-replay-dv-key-cases": replay(3, 1, rows=47),
    "delta-kernel/multi-part-checkpoint": replay(1, 10, 1, rows=31),
    "delta-kernel/only-checkpoint-files": replay(2, 7, 2, rows=25),
    "delta-kernel/snapshot-vacuumed": replay(5, 2, rows=20),
    # Spark golden tables (delta-io/delta) with features beyond the seed specification
    "modern/delta/data-reader-timestamp_ntz": replay(1, 4),
    "modern/delta/data-reader-timestamp_ntz-id-mode": replay(1, 4),
    "modern/delta/type-widening-nested": replay(2, 2),
    "modern/delta/table-with-icebegCompatV2Enabled": replay(0, 2),
    # delta-rs: a variant column (log maintenance only; its data files are not in the fixture)
    "modern/delta/spark-variant-stable-feature-checkpoint": replay(1, 4, on_disk=False),
    # delta-rs and delta-kernel-rs tables of the log features (V2 checkpoints, log compaction, checksums,
    # domain metadata)
    "modern/delta/compacted-log-files-table": replay(25, 2),
    "modern/delta/crc-full": replay(0, 0),
    "modern/delta/table-with-domain-metadata": replay(108, 109, 108, on_disk=False),
    "modern/delta/v2-checkpoint-json": replay(2, 4, 2),
    "modern/delta/v2-checkpoint-parquet": replay(2, 4, 2),
    "modern/delta/v2-checkpoints-json-with-sidecars": replay(6, 101, 6),
    "modern/delta/v2-checkpoints-parquet-without-sidecars": replay(2, 3, 2),
}

REPLAYED = [name for name, e in EXPECTATIONS.items() if e.outcome == "replay"]
REFUSED = [name for name, e in EXPECTATIONS.items() if e.outcome == "refuse"]


def _load(root: Path, **kwargs: Any) -> DeltaSnapshot:
    return load_snapshot(open_storage(str(root)), str(root), **kwargs)


def _live_locations(snapshot: DeltaSnapshot) -> list[str]:
    return [snapshot.file_location(add.path) for add in snapshot.files.values()]


def _delta_rs_locations(table: DeltaTable) -> list[str]:
    return [normalize(uri) for uri in table.file_uris()]


def _protocol_tuple(protocol: Any) -> tuple[int, int, list[str] | None, list[str] | None]:
    def features(value: Any) -> list[str] | None:
        return sorted(value) if value else None  # delta-rs reports an empty list as None

    return (
        protocol.min_reader_version,
        protocol.min_writer_version,
        features(protocol.reader_features),
        features(protocol.writer_features),
    )


def _live_rows(snapshot: DeltaSnapshot) -> int:
    """Rows the table holds: parquet footer row counts minus the rows deletion vectors hide."""
    total = 0
    for add in snapshot.files.values():
        total += pq.ParquetFile(snapshot.file_location(add.path)).metadata.num_rows
        if add.deletion_vector is not None:
            total -= add.deletion_vector.cardinality
    return total


def _expected_rows(expected: Path) -> int:
    return sum(pq.ParquetFile(f).metadata.num_rows for f in sorted(expected.glob("*.parquet")))


def test_every_testdata_table_has_an_expectation(delta_tables: dict[str, Any]) -> None:
    assert sorted(delta_tables) == sorted(EXPECTATIONS)


@pytest.mark.parametrize("name", REPLAYED)
def test_replay_matches_delta_rs(name: str, delta_tables: dict[str, Any]) -> None:
    expect = EXPECTATIONS[name]
    table = delta_tables[name]
    ours = _load(table.root)
    theirs = DeltaTable(str(table.root))

    assert ours.version == theirs.version() == expect.version
    assert ours.segment.checkpoint_version == expect.checkpoint

    ours_files = _live_locations(ours)
    assert len(set(ours_files)) == len(ours_files), "a live path appears twice (adds must have unique paths)"
    assert sorted(ours_files) == sorted(_delta_rs_locations(theirs))
    assert len(ours_files) == expect.live_files
    root = normalize(str(table.root))
    assert all(f.startswith(root + "/") for f in ours_files)

    assert _protocol_tuple(ours.protocol) == _protocol_tuple(theirs.protocol())
    meta = theirs.metadata()
    assert ours.metadata.id == meta.id
    assert ours.metadata.name == meta.name
    assert ours.metadata.description == meta.description
    assert ours.metadata.partition_columns == list(meta.partition_columns)
    assert ours.metadata.configuration == dict(meta.configuration)
    assert ours.metadata.created_time == meta.created_time

    # numRecords per file, wherever delta-rs reports it (from JSON stats or checkpoint stats_parsed).
    actions = pa.table(theirs.get_add_actions(flatten=True)).to_pydict()
    theirs_records = {
        normalize(ours.file_location(path)): n for path, n in zip(actions["path"], actions["num_records"], strict=True)
    }
    ours_records = {ours.file_location(a.path): a.num_records for a in ours.files.values()}
    assert {k: v for k, v in theirs_records.items() if v is not None}.items() <= ours_records.items()

    if expect.on_disk:
        missing = [f for f in ours_files if not Path(f).is_file()]
        assert not missing
    if expect.rows is not None:
        assert table.expected is not None, f"{name} should ship expected/ data"
        assert _live_rows(ours) == expect.rows == _expected_rows(table.expected)


@pytest.mark.parametrize("name", REFUSED)
def test_unsupported_reader_feature_is_refused_by_name(name: str, delta_tables: dict[str, Any]) -> None:
    feature = EXPECTATIONS[name].feature
    assert feature is not None
    with pytest.raises(UnsupportedFeature, match=rf"\b{feature}\b") as info:
        _load(delta_tables[name].root)
    assert str(delta_tables[name].root) in str(info.value)


def test_simple_table_features_refused_at_every_version(delta_tables: dict[str, Any]) -> None:
    """delta-rs cannot open this table (reader version 5 with a feature list); our own facts instead."""
    root = delta_tables["delta-rs/simple_table_features"].root
    first = parse_commit((root / "_delta_log" / f"{0:020d}.json").read_bytes(), 0, "v0")
    assert first.protocol is not None and first.protocol.min_reader_version == 5
    assert "blahabl" in (first.protocol.reader_features or [])
    listing = list_log(open_storage(str(root)), str(root))
    assert listing.latest_version == 4
    for version in range(5):
        with pytest.raises(UnsupportedFeature, match="blahabl"):
            _load(root, version=version, listing=listing)


def test_vacuum_protocol_check_table_readable_before_the_feature(delta_tables: dict[str, Any]) -> None:
    """Version 0 predates the feature (protocol 1/2) and matches delta-rs; version 1 enables it."""
    table = delta_tables["delta-kernel/basic-with-vacuum-protocol-check-feature"]
    v0 = _load(table.root, version=0)
    assert sorted(_live_locations(v0)) == sorted(_delta_rs_locations(DeltaTable(str(table.root), version=0)))
    assert table.expected is not None
    assert _live_rows(v0) == _expected_rows(table.expected) == 100  # v1 changed only the protocol
    v1 = parse_commit((table.root / "_delta_log" / f"{1:020d}.json").read_bytes(), 1, "v1")
    assert v1.adds == [] and v1.removes == []
    assert v1.protocol is not None and v1.protocol.reader_features == ["vacuumProtocolCheck"]


def test_v2_checkpoint_alone_reconstructs_the_table(copy_table: Callable[[str], Path]) -> None:
    """With the commits before the V2 checkpoint expired, the segment comes from it and its sidecar
    ("V2 Spec", "Sidecar Files"): the same live files as the full log gives."""
    root = copy_table("delta-rs/checkpoint-v2-table")
    full = sorted(_live_locations(_load(root)))
    log = root / "_delta_log"
    for version in range(9):
        (log / f"{version:020d}.json").unlink()
    listing = list_log(open_storage(str(root)), str(root))
    assert sorted(Path(f.path).name for f in listing.v2_checkpoints) == [
        "00000000000000000006.checkpoint.f5ee283b-37c7-46af-b64c-8f77c6a5c43a.json",
        "00000000000000000008.checkpoint.e5ac4dc4-be27-4106-8a55-609707487f83.json",
    ]
    snapshot = _load(root)
    assert (snapshot.version, snapshot.segment.checkpoint_version) == (9, 8)
    assert sorted(_live_locations(snapshot)) == full and len(full) == 8
    with pytest.raises(VersionNotFound):
        _load(root, version=7)


def test_corrupted_last_checkpoint_is_reported(delta_tables: dict[str, Any], copy_table: Callable[[str], Path]) -> None:
    """An empty ``_last_checkpoint`` is a CorruptFile naming it; without the pointer the table replays."""
    name = "delta-kernel/corrupted-last-checkpoint-kernel"
    table = delta_tables[name]
    pointer = table.root / "_delta_log" / "_last_checkpoint"
    assert pointer.read_bytes() == b""
    with pytest.raises(CorruptFile, match="empty") as info:
        _load(table.root)
    assert str(pointer) in str(info.value)

    # Our own facts: the log itself is sound (checkpoint 10 + commit 11) and holds the expected rows.
    root = copy_table(name)
    (root / "_delta_log" / "_last_checkpoint").unlink()
    snapshot = _load(root)
    assert snapshot.version == 11 == DeltaTable(str(table.root)).version()
    assert snapshot.segment.checkpoint_version == 10
    assert sorted(Path(f).name for f in _live_locations(snapshot)) == sorted(
        Path(f).name for f in _delta_rs_locations(DeltaTable(str(table.root)))
    )
    assert table.expected is not None
    assert _live_rows(snapshot) == _expected_rows(table.expected) == 100


def test_last_checkpoint_checksum_validates(delta_tables: dict[str, Any], copy_table: Callable[[str], Path]) -> None:
    name = "delta-rs/table_with_deletion_logs"
    root = delta_tables[name].root
    listing = list_log(open_storage(str(root)), str(root))
    pointer = listing.last_checkpoint
    assert pointer is not None and pointer.checksum is not None
    raw = json.loads((root / "_delta_log" / "_last_checkpoint").read_text())
    assert checksum(raw) == pointer.checksum.lower()
    assert (pointer.version, pointer.num_of_add_files) == (20, 1)
    assert len(_load(root, listing=listing).files) == pointer.num_of_add_files

    # The checksum is really checked: a one-field change in a copy is reported, naming the file.
    copy = copy_table(name)
    tampered = copy / "_delta_log" / "_last_checkpoint"
    tampered.write_text(tampered.read_text().replace('"size":5,', '"size":6,', 1))
    with pytest.raises(CorruptFile, match="checksum mismatch") as info:
        list_log(open_storage(str(copy)), str(copy))
    assert str(tampered) in str(info.value)


def test_stale_last_checkpoint_does_not_win_over_the_listing(delta_tables: dict[str, Any]) -> None:
    root = delta_tables["delta-rs/table_failed_last_checkpoint_update"].root
    snapshot = _load(root)
    assert snapshot.listing.last_checkpoint is not None
    assert snapshot.listing.last_checkpoint.version == 1
    assert sorted(snapshot.listing.checkpoints) == [1, 3]
    assert snapshot.segment.checkpoint_version == 3
    assert [v for v, _ in snapshot.segment.commits] == []


@pytest.mark.parametrize(
    ("name", "version", "parts"),
    [
        ("delta-kernel/multi-part-checkpoint", 1, 2),
        ("delta-kernel/v1-multi-part-struct-stats-only", 5, 3),
        ("delta-kernel/v1-multi-part-partitioned-struct-stats-only", 5, 3),
    ],
)
def test_multi_part_checkpoints_are_used_whole(
    name: str, version: int, parts: int, delta_tables: dict[str, Any]
) -> None:
    snapshot = _load(delta_tables[name].root)
    checkpoint = snapshot.segment.checkpoint
    assert checkpoint is not None
    assert (checkpoint.version, checkpoint.parts) == (version, parts)
    assert [Path(f.path).name for f in checkpoint.files] == [
        f"{version:020d}.checkpoint.{i:010d}.{parts:010d}.parquet" for i in range(1, parts + 1)
    ]


def test_stats_rebuilt_from_stats_parsed_equal_the_original_json(delta_tables: dict[str, Any]) -> None:
    """The checkpoint holds only ``stats_parsed``; the commits before it hold the JSON a writer wrote."""
    root = delta_tables["delta-rs/delta-1.2.1-only-struct-stats"].root
    assert (
        "stats"
        not in pq.ParquetFile(root / "_delta_log" / f"{10:020d}.checkpoint.parquet")
        .schema_arrow.field("add")
        .type.names
    )
    snapshot = _load(root, version=10)
    assert snapshot.segment.checkpoint_version == 10 and snapshot.segment.commits == ()
    original: dict[str, str] = {}
    for version in range(11):
        commit = parse_commit((root / "_delta_log" / f"{version:020d}.json").read_bytes(), version, "c")
        original.update({add.path: add.stats for add in commit.adds if add.stats})
    compared = 0
    for add in snapshot.files.values():
        assert add.stats is not None
        assert json.loads(add.stats) == json.loads(original[add.path])
        compared += 1
    assert compared == 10


@pytest.mark.parametrize(
    "name", ["delta-kernel/v1-multi-part-struct-stats-only", "delta-kernel/v1-multi-part-partitioned-struct-stats-only"]
)
def test_struct_only_stats_match_delta_rs(name: str, delta_tables: dict[str, Any]) -> None:
    root = delta_tables[name].root
    snapshot = _load(root)
    actions = pa.table(DeltaTable(str(root)).get_add_actions(flatten=True)).to_pydict()
    by_path = {normalize(snapshot.file_location(p)): i for i, p in enumerate(actions["path"])}
    assert len(by_path) == len(snapshot.files) == 5
    for add in snapshot.files.values():
        i = by_path[snapshot.file_location(add.path)]
        stats = json.loads(add.stats or "{}")
        assert stats["numRecords"] == actions["num_records"][i]
        for column in ("id", "value"):
            assert stats["minValues"][column] == actions[f"min.{column}"][i]
            assert stats["maxValues"][column] == actions[f"max.{column}"][i]
            assert stats["nullCount"][column] == actions[f"null_count.{column}"][i]


def test_dv_keys_reconcile_add_before_remove_in_one_commit(delta_tables: dict[str, Any]) -> None:
    """Each DELETE writes ``add(path, new DV)`` then ``remove(path, old DV)``: keys differ, order is moot."""
    snapshot = _load(delta_tables["delta-kernel/log-replay-dv-key-cases"].root)
    ((key, add),) = snapshot.files.items()
    path = add.path
    assert add.deletion_vector is not None and add.deletion_vector.cardinality == 3
    assert key == (path, add.deletion_vector.unique_id)
    assert set(snapshot.tombstones) == {
        (path, None),
        (path, "uh{&8fAg]=QYJvl-}c!yH@1"),
        (path, "uj=hZPftg7qJYIw^L+Oz9@1"),
    }


TIME_TRAVEL = [
    "delta-rs/table_with_deletion_logs",
    "delta-rs/cdf-table-with-cdc-and-dvs",
    "delta-rs/checkpoints_vacuumed",
    "delta-kernel/dv-partitioned-with-checkpoint",
    "delta-kernel/log-replay-dv-key-cases",
]


@pytest.mark.parametrize("name", TIME_TRAVEL)
def test_time_travel_matches_delta_rs_at_every_version(name: str, delta_tables: dict[str, Any]) -> None:
    root = delta_tables[name].root
    listing = list_log(open_storage(str(root)), str(root))
    latest = listing.latest_version
    assert latest is not None
    earliest = 5 if name == "delta-rs/checkpoints_vacuumed" else 0
    for version in range(earliest, latest + 1):
        ours = _load(root, version=version, listing=listing)
        theirs = DeltaTable(str(root), version=version)
        assert ours.version == theirs.version() == version
        assert sorted(_live_locations(ours)) == sorted(_delta_rs_locations(theirs)), f"version {version}"
        assert _protocol_tuple(ours.protocol) == _protocol_tuple(theirs.protocol()), f"version {version}"
        assert ours.metadata.configuration == dict(theirs.metadata().configuration), f"version {version}"


def test_vacuumed_versions_are_not_found_with_a_clear_message(delta_tables: dict[str, Any]) -> None:
    root = delta_tables["delta-rs/checkpoints_vacuumed"].root
    listing = list_log(open_storage(str(root)), str(root))
    assert min(listing.commits) == 5 and sorted(listing.checkpoints) == [5, 10]
    assert listing.last_checkpoint is None
    assert _load(root, version=5, listing=listing).segment.checkpoint_version == 5
    for version in range(5):
        with pytest.raises(VersionNotFound) as info:
            _load(root, version=version, listing=listing)
        message = str(info.value)
        assert f"cannot reconstruct version {version}" in message
        assert "00000000000000000000.json" in message
        assert "earliest commit kept: 5" in message
