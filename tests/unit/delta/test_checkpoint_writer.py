"""Checkpoint encoding (schema, every field kept, typed stats) and planning (parts, expiry, pointer), no Spark."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeops.delta.actions import Add, Metadata, Protocol, Remove, Txn, action_to_line
from lakeops.delta.checkpoint_reader import read_checkpoint_part
from lakeops.delta.checkpoint_writer import (
    CheckpointAction,
    checkpoint_bytes,
    checkpoint_schema,
    encode_actions,
    schema_from_text,
    schema_to_text,
)
from lakeops.delta.last_checkpoint import parse_last_checkpoint
from lakeops.delta.log_segment import list_log
from lakeops.delta.maintenance.checkpoint import (
    CheckpointOptions,
    finalize_checkpoint,
    plan_checkpoint,
    write_part,
    write_parts_on_driver,
)
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import UnsupportedFeature
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.local import LocalStorage

NOW_MS = 1_800_000_000_000
DAY_MS = 86_400_000


def _schema_string(*fields: tuple[str, Any], mapped: bool = False) -> str:
    out = []
    for i, (name, dtype) in enumerate(fields, start=1):
        meta = {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": f"col-{i}"} if mapped else {}
        out.append({"name": name, "type": dtype, "nullable": True, "metadata": meta})
    return json.dumps({"type": "struct", "fields": out})


def _metadata(schema_string: str, partition_columns: list[str] | None = None, **configuration: str) -> Metadata:
    return Metadata.model_validate(
        {
            "id": "table-id",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema_string,
            "partitionColumns": partition_columns or [],
            "configuration": configuration,
            "createdTime": NOW_MS,
        }
    )


PROTOCOL = Protocol(minReaderVersion=1, minWriterVersion=2)
DV_PROTOCOL = Protocol(
    minReaderVersion=3,
    minWriterVersion=7,
    readerFeatures=["deletionVectors"],
    writerFeatures=["deletionVectors"],
)


def _round_trip(tmp_path: Path, actions: list[CheckpointAction], schema: pa.Schema) -> list[CheckpointAction]:
    path = tmp_path / "00000000000000000001.checkpoint.parquet"
    path.write_bytes(checkpoint_bytes(encode_actions(actions, schema)))
    return list(read_checkpoint_part(open_storage(str(tmp_path)), str(path)))


def _field(struct: pa.DataType, name: str) -> pa.Field:
    return struct.field(struct.get_field_index(name))


def _is_string_map(t: pa.DataType) -> bool:
    return pa.types.is_map(t) and t.key_type == pa.string() and t.item_type == pa.string()


def test_schema_has_the_appendix_types_and_null_feature_lists(tmp_path: Path) -> None:
    metadata = _metadata(_schema_string(("id", "long"), ("day", "date")), ["day"])
    schema = checkpoint_schema(PROTOCOL, metadata)
    assert schema.names == ["metaData", "protocol", "txn", "add", "remove"]
    protocol = schema.field("protocol").type
    assert _field(protocol, "minReaderVersion").type == pa.int32()
    assert _field(protocol, "readerFeatures").type.value_type == pa.string()
    assert _field(protocol, "writerFeatures").type.value_type == pa.string()
    meta = schema.field("metaData").type
    assert _is_string_map(_field(meta, "configuration").type)
    assert _is_string_map(_field(_field(meta, "format").type, "options").type)
    assert _field(meta, "partitionColumns").type.value_type == pa.string()
    assert _field(meta, "createdTime").type == pa.int64()
    add = schema.field("add").type
    assert _is_string_map(_field(add, "partitionValues").type)
    assert _field(add, "size").type == _field(add, "modificationTime").type == pa.int64()
    assert _field(add, "stats").type == pa.string()
    assert _is_string_map(_field(add, "tags").type)
    assert add.get_field_index("stats_parsed") == add.get_field_index("partitionValues_parsed") == -1
    dv = _field(add, "deletionVector").type
    assert [(f.name, f.type) for f in dv] == [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
    assert _field(schema.field("txn").type, "version").type == pa.int64()
    assert _field(schema.field("remove").type, "deletionTimestamp").type == pa.int64()
    assert schema_from_text(schema_to_text(schema)).equals(schema)
    # A table without table features still has both lists, as nulls.
    (row,) = pq.read_table(
        pa.BufferReader(checkpoint_bytes(encode_actions([PROTOCOL], schema))), columns=["protocol"]
    ).to_pylist()
    assert row["protocol"] == {
        "minReaderVersion": 1,
        "minWriterVersion": 2,
        "readerFeatures": None,
        "writerFeatures": None,
    }


def test_every_field_of_every_action_survives_a_round_trip(tmp_path: Path) -> None:
    metadata = _metadata(_schema_string(("id", "long"), ("part", "integer")), ["part"], **{"delta.appendOnly": "false"})
    dv = {
        "storageType": "u",
        "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA",
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": 2,
    }
    add = Add.model_validate(
        {
            "path": "part=1/a%20b.parquet",
            "partitionValues": {"part": "1"},
            "size": 10,
            "modificationTime": 5,
            "dataChange": True,
            "stats": '{"numRecords":3}',
            "tags": {"INSERTION_TIME": "1", "empty": None},
            "deletionVector": {**dv, "maxRowIndex": 9},
            "baseRowId": 100,
            "defaultRowCommitVersion": 4,
            "clusteringProvider": "liquid",
            "futureField": {"nested": [1, 2], "flag": True},
        }
    )
    plain_add = Add.model_validate(
        {
            "path": "part=2/c.parquet",
            "partitionValues": {"part": None},
            "size": 1,
            "modificationTime": 1,
            "dataChange": False,
        }
    )
    remove = Remove.model_validate(
        {
            "path": "part=1/a%20b.parquet",
            "deletionTimestamp": 7,
            "dataChange": True,
            "extendedFileMetadata": True,
            "partitionValues": {"part": "1"},
            "size": 10,
            "stats": '{"numRecords":3}',
            "tags": {"k": "v"},
            "deletionVector": {**dv, "pathOrInlineDv": "old_dv_descriptor___", "offset": None},
            "baseRowId": 100,
            "defaultRowCommitVersion": 3,
        }
    )
    txn = Txn(appId="stream-1", version=42, lastUpdated=9)
    actions: list[CheckpointAction] = [DV_PROTOCOL, metadata, txn, add, plain_add, remove]
    schema = checkpoint_schema(DV_PROTOCOL, metadata, txns=[txn], adds=[add, plain_add], removes=[remove])
    back = _round_trip(tmp_path, actions, schema)
    assert [type(a) for a in back] == [Protocol, Metadata, Txn, Add, Add, Remove]
    assert [a.to_json_dict() for a in back] == [a.to_json_dict() for a in actions]
    assert back[3].key == add.key and back[5].key == remove.key


def test_extra_fields_of_disagreeing_types_are_kept_as_json_text(tmp_path: Path) -> None:
    metadata = _metadata(_schema_string(("id", "long")))
    adds = [
        Add.model_validate({"path": f"f{i}", "size": 1, "modificationTime": 1, "dataChange": True, "odd": value})
        for i, value in enumerate([1, "x", {"a": 1}])
    ]
    adds.append(Add.model_validate({"path": "g", "size": 1, "modificationTime": 1, "dataChange": True, "empty": {}}))
    schema = checkpoint_schema(PROTOCOL, metadata, adds=adds)
    assert _field(schema.field("add").type, "odd").type == _field(schema.field("add").type, "empty").type == pa.string()
    back = _round_trip(tmp_path, [PROTOCOL, metadata, *adds], schema)
    assert [(a.model_extra or {}).get("odd") for a in back[2:]] == ["1", "x", '{"a":1}', None]
    assert (back[-1].model_extra or {}).get("empty") == "{}"


def test_stats_and_partition_values_as_typed_structs(tmp_path: Path) -> None:
    schema_string = _schema_string(
        ("id", "long"),
        ("price", "decimal(10,2)"),
        ("ts", "timestamp"),
        ("local", "timestamp_ntz"),
        ("name", "string"),
        ("s", {"type": "struct", "fields": [{"name": "a", "type": "integer", "nullable": True, "metadata": {}}]}),
        ("tags", {"type": "array", "elementType": "string", "containsNull": True}),
        ("day", "date"),
    )
    metadata = _metadata(schema_string, ["day"], **{"delta.checkpoint.writeStatsAsStruct": "true"})
    stats = {
        "numRecords": 4,
        "minValues": {
            "id": 1,
            "price": 12.3,
            "ts": "2024-01-02T03:04:05.006Z",
            "local": "2024-01-02T03:04:05.006",
            "name": "a",
            "s": {"a": -1},
        },
        "maxValues": {
            "id": "not a number",
            "price": 99.99,
            "ts": "2024-01-03T00:00:00.000Z",
            "name": "z",
            "s": {"a": 7},
        },
        "nullCount": {"id": 0, "price": 1, "s": {"a": 2}, "tags": 0},
        "tightBounds": True,
    }
    add = Add.model_validate(
        {
            "path": "day=2024-01-02/f.parquet",
            "partitionValues": {"day": "2024-01-02"},
            "size": 1,
            "modificationTime": 1,
            "dataChange": True,
            "stats": json.dumps(stats),
        }
    )
    no_stats = Add.model_validate(
        {
            "path": "day=__null/g.parquet",
            "partitionValues": {"day": None},
            "size": 1,
            "modificationTime": 1,
            "dataChange": True,
        }
    )
    schema = checkpoint_schema(PROTOCOL, metadata, adds=[add, no_stats])
    table = encode_actions([PROTOCOL, metadata, add, no_stats], schema)
    parsed = pq.read_table(pa.BufferReader(checkpoint_bytes(table))).column("add").to_pylist()[2:]
    assert parsed[0]["partitionValues_parsed"] == {"day": dt.date(2024, 1, 2)}
    assert parsed[1]["partitionValues_parsed"] == {"day": None} and parsed[1]["stats_parsed"] is None
    got = parsed[0]["stats_parsed"]
    assert got["numRecords"] == 4 and got["tightBounds"] is True
    assert got["minValues"] == {
        "id": 1,
        "price": Decimal("12.30"),
        "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC),
        "local": dt.datetime(2024, 1, 2, 3, 4, 5, 6000),
        "name": "a",
        "s": {"a": -1},
    }
    # A statistic that does not fit its column's type is left out (unknown), never guessed.
    assert got["maxValues"]["id"] is None and got["maxValues"]["price"] == Decimal("99.99")
    # Arrays get a null count but no bounds; partition columns get neither.
    assert got["nullCount"] == {"id": 0, "price": 1, "ts": None, "local": None, "name": None, "s": {"a": 2}, "tags": 0}
    stats_type = _field(schema.field("add").type, "stats_parsed").type
    assert _field(stats_type, "minValues").type.get_field_index("tags") == -1
    assert _field(stats_type, "minValues").type.get_field_index("day") == -1


def test_column_mapping_uses_physical_names_in_parsed_structs() -> None:
    metadata = _metadata(
        _schema_string(("id", "long"), ("region", "string"), mapped=True),
        ["region"],
        **{"delta.columnMapping.mode": "name", "delta.checkpoint.writeStatsAsStruct": "true"},
    )
    protocol = Protocol(minReaderVersion=2, minWriterVersion=5)
    add = Add.model_validate(
        {
            "path": "x.parquet",
            "partitionValues": {"col-2": "eu"},
            "size": 1,
            "modificationTime": 1,
            "dataChange": True,
            "stats": '{"numRecords":1,"minValues":{"col-1":5},"maxValues":{"col-1":6},"nullCount":{"col-1":0}}',
        }
    )
    schema = checkpoint_schema(protocol, metadata, adds=[add])
    (row,) = encode_actions([add], schema).column("add").to_pylist()
    assert row["partitionValues_parsed"] == {"col-2": "eu"}
    assert row["stats_parsed"]["minValues"] == {"col-1": 5} and row["stats_parsed"]["nullCount"] == {"col-1": 0}


def test_write_stats_as_json_false_drops_the_column_and_readers_rebuild_it(tmp_path: Path) -> None:
    metadata = _metadata(
        _schema_string(("id", "long")),
        **{"delta.checkpoint.writeStatsAsJson": "false", "delta.checkpoint.writeStatsAsStruct": "true"},
    )
    add = Add.model_validate(
        {
            "path": "f.parquet",
            "size": 1,
            "modificationTime": 1,
            "dataChange": True,
            "stats": '{"numRecords":2,"minValues":{"id":1},"maxValues":{"id":9},"nullCount":{"id":0}}',
        }
    )
    schema = checkpoint_schema(PROTOCOL, metadata, adds=[add])
    assert schema.field("add").type.get_field_index("stats") == -1
    (back,) = [a for a in _round_trip(tmp_path, [PROTOCOL, metadata, add], schema) if isinstance(a, Add)]
    assert json.loads(back.stats or "") == json.loads(add.stats or "")


# --- planning and writing ---------------------------------------------------------------------------


def _write_log(root: Path, commits: list[list[CheckpointAction]]) -> None:
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    for version, actions in enumerate(commits):
        (log / f"{version:020d}.json").write_text("\n".join(action_to_line(a) for a in actions) + "\n")


def _add(path: str, **extra: Any) -> Add:
    return Add.model_validate(
        {"path": path, "size": 10, "modificationTime": 1, "dataChange": True, "stats": '{"numRecords":1}', **extra}
    )


def _remove(path: str, deleted_ms: int | None, **extra: Any) -> Remove:
    return Remove.model_validate({"path": path, "deletionTimestamp": deleted_ms, "dataChange": True, **extra})


def _table(tmp_path: Path, protocol: Protocol = PROTOCOL, **configuration: str) -> str:
    metadata = _metadata(_schema_string(("id", "long")), **configuration)
    commits: list[list[CheckpointAction]] = [[protocol, metadata]]
    commits += [[_add(f"f{i:03d}.parquet") for i in range(j * 10, j * 10 + 10)] for j in range(4)]
    dv = {
        "storageType": "i",
        "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
        "sizeInBytes": 40,
        "cardinality": 6,
    }
    commits.append(
        [
            _remove("f000.parquet", NOW_MS - 10 * DAY_MS),  # expired (default retention: one week)
            _remove("f001.parquet", NOW_MS - DAY_MS),  # kept
            _remove("f002.parquet", None),  # no timestamp: expired
            _remove("f003.parquet", NOW_MS - DAY_MS),
            _add("f003.parquet", deletionVector=dv),  # same path, new DV: two actions for one path
            Txn(appId="old", version=1, lastUpdated=NOW_MS - 40 * DAY_MS),
            Txn(appId="new", version=2, lastUpdated=NOW_MS),
        ]
    )
    _write_log(tmp_path, commits)
    return str(tmp_path)


def _plan(root: str, **options: Any) -> Any:
    snapshot = load_snapshot(open_storage(root), root, version=options.get("version"))
    return plan_checkpoint(snapshot, CheckpointOptions(**options), StorageOptions(), now_ms=NOW_MS)


def test_plan_keeps_unexpired_tombstones_and_all_txns_by_default(tmp_path: Path) -> None:
    plan = _plan(_table(tmp_path))
    assert (plan.add_files, plan.remove_tombstones, plan.expired_tombstones) == (37, 2, 2)
    assert (plan.txns, plan.expired_txns) == (2, 0)
    assert plan.actions == 2 + 2 + 37 + 2 and len(plan.parts) == 1


def test_table_properties_set_both_retentions(tmp_path: Path) -> None:
    root = _table(
        tmp_path,
        **{
            "delta.deletedFileRetentionDuration": "interval 12 hours",
            "delta.setTransactionRetentionDuration": "interval 30 days",
        },
    )
    plan = _plan(root)
    assert (plan.remove_tombstones, plan.expired_tombstones) == (0, 4)
    assert (plan.txns, plan.expired_txns) == (1, 1)


def test_parts_split_between_paths_deterministically_and_hold_the_whole_state(tmp_path: Path) -> None:
    root = _table(tmp_path)
    plan = _plan(root, part_size=7)
    assert _plan(root, part_size=7).model_dump() == plan.model_dump()
    assert len(plan.parts) == 7 and [p.part for p in plan.parts] == list(range(1, 8))
    assert all(p.actions <= 7 for p in plan.parts) and sum(p.actions for p in plan.parts) == plan.actions
    # f003's tombstone and its re-add (new DV) share a part: a path never straddles two parts.
    holder = [p for p in plan.parts if p.holds("f003.parquet")]
    assert len(holder) == 1 and holder[0].remove_tombstones >= 1
    written = [write_part(part) for part in plan.parts]
    first_bytes = [Path(p.location).read_bytes() for p in plan.parts]
    assert finalize_checkpoint(plan, written, StorageOptions()) is not None
    # A second attempt writes byte-identical parts (rows clustered by path, fixed order).
    [write_part(part) for part in plan.parts]
    assert [Path(p.location).read_bytes() for p in plan.parts] == first_bytes

    expected = load_snapshot(open_storage(root), root, version=4)  # version 4: no checkpoint covers it
    for version in range(6):
        (tmp_path / "_delta_log" / f"{version:020d}.json").unlink()
    state = load_snapshot(open_storage(root), root)
    assert state.version == 5 and state.segment.checkpoint is not None and state.segment.checkpoint.parts == 7
    assert state.files.keys() == {*expected.files} - {
        ("f000.parquet", None),
        ("f001.parquet", None),
        ("f002.parquet", None),
        ("f003.parquet", None),
    } | {("f003.parquet", "iwi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L")}
    assert set(state.tombstones) == {("f001.parquet", None), ("f003.parquet", None)}
    assert set(state.txns) == {"old", "new"} and state.protocol == expected.protocol
    pointer_path = tmp_path / "_delta_log" / "_last_checkpoint"
    pointer = parse_last_checkpoint(pointer_path.read_bytes(), str(pointer_path))
    assert (pointer.version, pointer.size, pointer.parts, pointer.num_of_add_files) == (5, plan.actions, 7, 37)
    assert pointer.size_in_bytes == sum(len(b) for b in first_bytes)


def test_existing_checkpoint_is_left_alone_unless_forced(tmp_path: Path) -> None:
    root = _table(tmp_path)
    plan = _plan(root)
    finalize_checkpoint(plan, write_parts_on_driver(plan), StorageOptions())
    again = _plan(root)
    assert again.already_checkpointed and again.parts == []
    forced = _plan(root, force=True)
    assert forced.already_checkpointed and len(forced.parts) == 1


def test_an_older_version_never_moves_the_pointer_back(tmp_path: Path) -> None:
    root = _table(tmp_path)
    latest = _plan(root)
    finalize_checkpoint(latest, write_parts_on_driver(latest), StorageOptions())
    older = _plan(root, version=2)
    assert older.version == 2
    assert finalize_checkpoint(older, write_parts_on_driver(older), StorageOptions()) is None
    listing = list_log(open_storage(root), root)
    assert set(listing.checkpoints) == {2, 5}
    assert listing.last_checkpoint is not None and listing.last_checkpoint.version == 5


def test_a_pointer_another_writer_moves_meanwhile_is_read_again_not_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer points ``_last_checkpoint`` at version 5 between lakeops' read of it (none yet)
    and lakeops' write for version 2: the write is conditional, fails, and the pointer read again is
    newer, so it stays at 5 ("Last Checkpoint File": readers start from it)."""
    root = _table(tmp_path)
    latest = _plan(root)
    finalize_checkpoint(latest, write_parts_on_driver(latest), StorageOptions())
    pointer = Path(root) / "_delta_log" / "_last_checkpoint"
    theirs = pointer.read_bytes()
    pointer.unlink()
    older = _plan(root, version=2)
    written = write_parts_on_driver(older)
    real = LocalStorage.read_versioned

    def racing(self: LocalStorage, path: str) -> tuple[bytes, str]:
        try:
            return real(self, path)
        finally:
            if path.endswith("_last_checkpoint") and not pointer.exists():
                pointer.write_bytes(theirs)  # the other writer, just after our read

    monkeypatch.setattr(LocalStorage, "read_versioned", racing)
    assert finalize_checkpoint(older, written, StorageOptions()) is None
    assert pointer.read_bytes() == theirs
    assert parse_last_checkpoint(theirs, str(pointer)).version == 5


def test_unsupported_writer_feature_is_refused_by_name(tmp_path: Path) -> None:
    protocol = Protocol(minReaderVersion=3, minWriterVersion=7, readerFeatures=[], writerFeatures=["madeUpFeature"])
    root = _table(tmp_path, protocol)
    with pytest.raises(UnsupportedFeature, match="madeUpFeature"):
        _plan(root)
    assert not list((tmp_path / "_delta_log").glob("*.parquet"))


def test_part_tasks_of_a_forced_rewrite_never_read_the_checkpoint_being_replaced(tmp_path: Path) -> None:
    root = _table(tmp_path)
    first = _plan(root, part_size=10)
    finalize_checkpoint(first, [write_part(part) for part in first.parts], StorageOptions())
    forced = _plan(root, part_size=10, force=True)
    # Sibling tasks replace these parts while a task replays: it must take the commits instead.
    for part in forced.parts:
        Path(part.location).write_bytes(b"being replaced")
    written = [write_part(part) for part in forced.parts]
    assert [w.actions for w in written] == [p.actions for p in forced.parts]
    assert finalize_checkpoint(forced, written, StorageOptions()) is not None
    assert len(load_snapshot(open_storage(root), root).files) == forced.add_files
