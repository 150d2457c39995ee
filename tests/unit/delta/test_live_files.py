"""A snapshot keeps its checkpoint's adds as Arrow rows (:class:`lakeops.delta.live_files.LiveFiles`)
and must read exactly as the object-per-file replay did (issue 9): same keys, same ``Add`` values,
same errors on a damaged checkpoint.

The reference is the replay as it was: every checkpoint row built into an object, then each commit.
"""

from __future__ import annotations

import json
import time
from itertools import groupby
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lakeops_testdata import TESTDATA

from lakeops.delta import commit_columns
from lakeops.delta.actions import Add, Remove
from lakeops.delta.checkpoint_files import read_checkpoint_file
from lakeops.delta.checkpoint_writer import checkpoint_bytes, encode_actions, schema_from_text
from lakeops.delta.commit_columns import parse_commit_columnar
from lakeops.delta.commit_file import parse_commit
from lakeops.delta.live_files import LiveFiles
from lakeops.delta.log_compaction import read_replay_file
from lakeops.delta.log_segment import list_log, segment_for_version
from lakeops.delta.maintenance.checkpoint import (
    CheckpointOptions,
    finalize_checkpoint,
    plan_checkpoint,
    select_actions,
    write_parts_on_driver,
)
from lakeops.delta.snapshot import Replay, load_snapshot
from lakeops.errors import CorruptFile, LakeopsError
from lakeops.storage import LocalStorage, StorageOptions, open_storage

STORAGE = LocalStorage()
CHECKPOINTED = sorted({p.parent.parent for p in TESTDATA.rglob("_delta_log/*.checkpoint*.parquet")})


def _reference(root: str) -> dict[tuple[str, str | None], Add]:
    """The live files as the object-per-file replay gives them."""
    storage = open_storage(root)
    segment = segment_for_version(list_log(storage, root), root)
    replay = Replay(root)
    if segment.checkpoint is not None:
        for part in segment.checkpoint.files:
            replay.apply_checkpoint(read_checkpoint_file(storage, f"{root}/_delta_log", part.path))
    for version, info in segment.replay_files():
        replay.apply_commit(parse_commit(read_replay_file(storage, info), version, info.path))
    return replay.files


def _same_files(files: LiveFiles, expected: dict[tuple[str, str | None], Add]) -> None:
    assert len(files) == len(expected)
    assert sorted(files, key=repr) == sorted(expected, key=repr)
    assert dict(files.items()) == expected
    assert sorted(files.values(), key=lambda a: repr(a.key)) == sorted(expected.values(), key=lambda a: repr(a.key))
    for key, add in expected.items():
        assert key in files and files[key] == add
        assert files[key].__dict__ == add.__dict__ and files[key].model_fields_set == add.model_fields_set
    assert ("no-such-file", None) not in files
    with pytest.raises(KeyError):
        files["no-such-file", None]


@pytest.fixture(params=["objects", "columns"])
def commit_adds(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Commits' adds read as objects (small commits), or as columns (every commit, as large ones are)."""
    if request.param == "columns":
        monkeypatch.setattr(commit_columns, "MIN_COLUMN_ROWS", 1)
    return str(request.param)


def test_fixtures_have_checkpointed_tables() -> None:
    assert len(CHECKPOINTED) >= 5


ALL_TABLES = sorted({p.parent.parent for p in TESTDATA.rglob("_delta_log/00000000000000000000.json")})


def _replayable(root: Path) -> bool:
    try:
        _reference(str(root))
        load_snapshot(STORAGE, str(root))
    except LakeopsError:
        return False
    return True


REPLAYABLE = [root for root in ALL_TABLES if _replayable(root)]


def test_most_fixture_tables_replay() -> None:
    assert len(REPLAYABLE) >= 20 and set(CHECKPOINTED) & set(REPLAYABLE)


@pytest.mark.usefixtures("commit_adds")
@pytest.mark.parametrize("root", REPLAYABLE, ids=[str(p.relative_to(TESTDATA)) for p in REPLAYABLE])
def test_fixture_tables_read_as_the_object_replay(root: Path) -> None:
    expected = _reference(str(root))
    snapshot = load_snapshot(STORAGE, str(root))
    assert isinstance(snapshot.files, LiveFiles)
    _same_files(snapshot.files, expected)


def test_fixture_checkpoints_without_dvs_or_parsed_stats_stay_columns() -> None:
    # The others (rows with a deletion vector or only stats_parsed) are built as objects while loading.
    kept = {root.name for root in CHECKPOINTED if load_snapshot(STORAGE, str(root)).files.columns}  # type: ignore[attr-defined]
    assert {"checkpoint-cdf-table", "delta-0.2.0", "simple_table_with_checkpoint"} <= kept


# --- a log-only table: a checkpoint of version 1, then commits that touch its files ---------------


def _add(path: str, size: int = 10, **extra: object) -> dict[str, object]:
    body = {"path": path, "partitionValues": {"p": "x"}, "size": size, "modificationTime": 1, "dataChange": True}
    return {"add": {**body, **extra}}


def _commit(root: Path, version: int, *actions: dict[str, object]) -> None:
    lines = [json.dumps({"commitInfo": {"timestamp": version}}), *map(json.dumps, actions)]
    (root / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def _table(tmp_path: Path, files: int = 5) -> Path:
    root = tmp_path / "t"
    (root / "_delta_log").mkdir(parents=True)
    schema = {"type": "struct", "fields": [{"name": "p", "type": "string", "nullable": True, "metadata": {}}]}
    header = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "i",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": ["p"],
                "configuration": {},
            }
        },
    ]
    _commit(root, 0, *header)
    _commit(root, 1, *(_add(f"f{i}", stats='{"numRecords":3}') for i in range(files)))
    from deltalake import DeltaTable

    DeltaTable(str(root)).create_checkpoint()
    return root


def test_the_checkpoint_rows_stay_columns(tmp_path: Path) -> None:
    root = _table(tmp_path)
    files = load_snapshot(STORAGE, str(root)).files
    assert isinstance(files, LiveFiles)
    assert [len(c) for c in files.columns] == [5] and not files.objects
    assert files["f3", None].num_records == 3
    _same_files(files, _reference(str(root)))


def test_commits_after_the_checkpoint_override_its_rows(tmp_path: Path, commit_adds: str) -> None:
    root = _table(tmp_path)
    remove = {"remove": {"path": "f1", "deletionTimestamp": 5, "dataChange": True}}
    _commit(root, 2, remove, _add("f2", size=99), _add("new"))
    _commit(root, 3, {"remove": {"path": "new", "dataChange": True}}, _add("f1", size=7))
    files = load_snapshot(STORAGE, str(root)).files
    assert isinstance(files, LiveFiles)
    assert sorted(k[0] for k in files) == ["f0", "f1", "f2", "f3", "f4"]
    assert files["f2", None].size == 99 and files["f1", None].size == 7
    # f0, f3 and f4 are still checkpoint rows; the commits' live adds are objects or rows of theirs
    assert [len(c) for c in files.columns] == ([3] if commit_adds == "objects" else [3, 1, 1])
    _same_files(files, _reference(str(root)))


def _rewrite_checkpoint(root: Path, change: object) -> Path:
    (path,) = (root / "_delta_log").glob("*.checkpoint.parquet")
    table = pq.read_table(path)
    pq.write_table(change(table), path)  # type: ignore[operator]
    return path


def test_a_checkpoint_repeating_a_file_keeps_its_last_row(tmp_path: Path) -> None:
    root = _table(tmp_path)
    _rewrite_checkpoint(root, lambda t: pa.concat_tables([t, t.slice(len(t) - 1)]))  # the last add again
    files = load_snapshot(STORAGE, str(root)).files
    assert len(files) == 5
    _same_files(files, _reference(str(root)))  # type: ignore[arg-type]


def test_interleaved_table_rows_are_read_as_one_run_would_be(tmp_path: Path) -> None:
    root = _table(tmp_path)
    # the table actions (null add) between file rows: the add rows are no longer one run
    _rewrite_checkpoint(root, lambda t: pa.concat_tables([t.slice(3), t.slice(0, 3)]))
    files = load_snapshot(STORAGE, str(root)).files
    assert len(files) == 5
    _same_files(files, _reference(str(root)))  # type: ignore[arg-type]


def test_undecodable_text_in_a_kept_column_is_refused_when_loading(tmp_path: Path) -> None:
    root = _table(tmp_path)

    def break_a_path(table: pa.Table) -> pa.Table:
        adds = table.column("add").combine_chunks()
        paths = adds.field("path")
        raw = b"".join(p.encode() if p is not None else b"" for p in paths.to_pylist())
        broken = raw.replace(b"f2", b"\xff2")
        bad = pa.Array.from_buffers(
            pa.string(), len(paths), [paths.buffers()[0], paths.buffers()[1], pa.py_buffer(broken)]
        )
        fields = [adds.field(i) if adds.type.field(i).name != "path" else bad for i in range(adds.type.num_fields)]
        struct = pa.StructArray.from_arrays(fields, fields=list(adds.type), mask=adds.is_null())
        return table.set_column(table.schema.get_field_index("add"), "add", struct)

    path = _rewrite_checkpoint(root, break_a_path)
    with pytest.raises(CorruptFile, match=f"{path.name}: checkpoint column add cannot be decoded"):
        load_snapshot(STORAGE, str(root))


# --- commit files' add lines as columns: exactly what validation gives, or validation decides ---------

_ADD = '{"add":{"path":"%s","partitionValues":{"p":"x"},"size":1,"modificationTime":2,"dataChange":true}}'
_PLAIN = [_ADD % "a", _ADD % "b", '{"commitInfo":{"operation":"WRITE"}}', '{"remove":{"path":"c","dataChange":true}}']
_HOSTILE = {
    "null partition value": _ADD.replace('"x"', "null") % "n",
    "absent partition value": _ADD.replace('"p":"x"', "") % "n",
    "other partition key": _ADD.replace('"p":"x"', '"q":"2024-01-01"') % "n",
    "number partition value": _ADD.replace('"x"', "3") % "n",
    "size as text": _ADD.replace('"size":1', '"size":"1"') % "n",
    "size as float": _ADD.replace('"size":1', '"size":1.0') % "n",
    "huge size": _ADD.replace('"size":1', '"size":123456789012345678901') % "n",
    "no size": _ADD.replace('"size":1,', "") % "n",
    "dataChange as text": _ADD.replace("true", '"true"') % "n",
    "undeclared field": _ADD.replace('"size":1', '"size":1,"baseRowId":4') % "n",
    "tags": _ADD.replace('"size":1', '"size":1,"tags":{"t":"v"}') % "n",
    "deletion vector": _ADD.replace(
        '"size":1',
        '"size":1,"deletionVector":{"storageType":"u","pathOrInlineDv":"ab","sizeInBytes":1,"cardinality":1}',
    )
    % "n",
    "stats object": _ADD.replace('"size":1', '"size":1,"stats":{"numRecords":1}') % "n",
    "two keys": _ADD[:-1].replace('{"add"', '{"add"', 1) % "n" + ',"txn":{"appId":"x","version":1}}',
    "two objects on a line": _ADD % "n" + _ADD % "m",
    "repeated field": _ADD.replace('"size":1', '"size":1,"size":2') % "n",
    "null body": '{"add":null}',
    "truncated": (_ADD % "n")[:30],
    "spaced key": (_ADD % "n").replace('{"add":', '{ "add" :'),
    "repeated path": _ADD % "a",
    "invalid surrogate": _ADD % "\\ud800",
}


@pytest.mark.parametrize("line", list(_HOSTILE.values()), ids=list(_HOSTILE))
def test_commit_add_columns_equal_validation_or_defer_to_it(line: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commit_columns, "MIN_COLUMN_ROWS", 1)
    raw = "\n".join([*_PLAIN, line, _ADD % "z"]).encode()
    try:
        expected = parse_commit(raw, 3, "c.json")
    except CorruptFile as error:
        with pytest.raises(CorruptFile) as raised:
            parse_commit_columnar(raw, 3, "c.json", ["p"])
        assert str(raised.value) == str(error)
        return
    commit, column = parse_commit_columnar(raw, 3, "c.json", ["p"])
    adds = commit.adds + (column.build(0, len(column)) if column is not None else [])
    assert adds == expected.adds
    assert [a.model_fields_set for a in adds] == [a.model_fields_set for a in expected.adds]
    assert (commit.removes, commit.commit_info, commit.txns) == (expected.removes, expected.commit_info, expected.txns)


def test_plain_commit_adds_become_one_column(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commit_columns, "MIN_COLUMN_ROWS", 1)
    raw = "\n".join([*_PLAIN, _ADD % "z", ""]).encode()
    commit, column = parse_commit_columnar(raw, 3, "c.json", ["p"])
    assert column is not None and not commit.adds and len(commit.removes) == 1
    assert column.build(0, len(column)) == parse_commit(raw, 3, "c.json").adds


# --- a checkpoint written from Arrow rows is the one written from objects ------------------------------


def _greedy_ranges(actions: list[Any], part_size: int) -> list[tuple[int, int]]:
    """The part ranges as the object writer cut them: whole paths, at most ``part_size`` rows."""
    ranges, start, end = [], 0, 0
    for _, group in groupby(actions, key=lambda a: a.path if isinstance(a, Add | Remove) else None):
        size = sum(1 for _ in group)
        if end > start and end - start + size > part_size:
            ranges.append((start, end))
            start = end
        end += size
    return [*ranges, (start, end)]


def _dv_add(path: str) -> dict[str, object]:
    dv = {
        "storageType": "u",
        "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
        "offset": 1,
        "sizeInBytes": 4,
        "cardinality": 1,
    }
    return _add(path, deletionVector=dv)


@pytest.mark.parametrize("part_size", [1_000_000, 3, 1])
def test_a_checkpoint_from_arrow_rows_is_the_one_from_objects(tmp_path: Path, commit_adds: str, part_size: int) -> None:
    root = _table(tmp_path, files=8)
    now = int(time.time() * 1000)
    remove = {"remove": {"path": "f1", "deletionTimestamp": now, "dataChange": True, "size": 10}}
    _commit(root, 2, remove, _add("f2", size=99), _add("g0"), _dv_add("f5"), _dv_add("a0"))
    _commit(root, 3, {"remove": {"path": "g0", "deletionTimestamp": now, "dataChange": True}}, _add("f1", size=7))
    snapshot = load_snapshot(STORAGE, str(root))
    assert isinstance(snapshot.files, LiveFiles) and snapshot.files.columns
    plan = plan_checkpoint(snapshot, CheckpointOptions(part_size=part_size), StorageOptions(), now_ms=now)
    rows = plan._rows
    assert rows is not None and rows.column_rows  # the Arrow path was taken

    objects = dict(snapshot.files.items())
    actions = select_actions(
        snapshot.protocol,
        snapshot.metadata,
        snapshot.txns,
        objects,
        snapshot.tombstones,
        with_table_actions=True,
        tombstone_cutoff_ms=plan.tombstone_cutoff_ms,
        txn_cutoff_ms=plan.txn_cutoff_ms,
    )
    ranges = _greedy_ranges(actions, part_size)
    assert rows.ranges(part_size) == ranges and len(plan.parts) == len(ranges)
    written = write_parts_on_driver(plan)
    for (start, end), part, done in zip(ranges, plan.parts, written, strict=True):
        chunk = actions[start:end]
        expected = encode_actions(chunk, schema_from_text(part.arrow_schema))
        assert rows.encode(start, end, schema_from_text(part.arrow_schema)).equals(expected)
        in_batches = rows.parquet(start, end, schema_from_text(part.arrow_schema), batch_rows=2)
        assert pq.read_table(pa.BufferReader(in_batches)).equals(expected)
        assert pq.read_table(part.location).equals(pq.read_table(pa.BufferReader(checkpoint_bytes(expected))))
        assert (part.actions, part.add_files, part.remove_tombstones) == (
            len(chunk),
            sum(type(a) is Add for a in chunk),
            sum(type(a) is Remove for a in chunk),
        )
        assert (done.actions, done.add_files) == (part.actions, part.add_files)
        assert part.first_path == (None if start == 0 else chunk[0].path)  # type: ignore[union-attr]
    finalize_checkpoint(plan, written, StorageOptions())
    reread = load_snapshot(STORAGE, str(root))
    assert reread.segment.checkpoint_version == 3
    assert dict(reread.files.items()) == objects and reread.tombstones.keys() == snapshot.tombstones.keys()
