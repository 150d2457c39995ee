"""A snapshot keeps its checkpoint's adds as Arrow rows (:class:`lakeops.delta.live_files.LiveFiles`)
and must read exactly as the object-per-file replay did (issue 9): same keys, same ``Add`` values,
same errors on a damaged checkpoint.

The reference is the replay as it was: every checkpoint row built into an object, then each commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lakeops_testdata import TESTDATA

from lakeops.delta.actions import Add
from lakeops.delta.checkpoint_reader import read_checkpoint_part
from lakeops.delta.commit_file import parse_commit
from lakeops.delta.live_files import LiveFiles
from lakeops.delta.log_segment import list_log, read_log_file, segment_for_version
from lakeops.delta.snapshot import _Replay, load_snapshot
from lakeops.errors import CorruptFile
from lakeops.storage import LocalStorage, open_storage

STORAGE = LocalStorage()
CHECKPOINTED = sorted({p.parent.parent for p in TESTDATA.rglob("_delta_log/*.checkpoint*.parquet")})


def _reference(root: str) -> dict[tuple[str, str | None], Add]:
    """The live files as the object-per-file replay gives them."""
    storage = open_storage(root)
    segment = segment_for_version(list_log(storage, root), root)
    replay = _Replay(root)
    if segment.checkpoint is not None:
        for part in segment.checkpoint.files:
            replay.apply_checkpoint(read_checkpoint_part(storage, part.path))
    for version, info in segment.commits:
        replay.apply_commit(parse_commit(read_log_file(storage, info), version, info.path))
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


def test_fixtures_have_checkpointed_tables() -> None:
    assert len(CHECKPOINTED) >= 5


@pytest.mark.parametrize("root", CHECKPOINTED, ids=[str(p.relative_to(TESTDATA)) for p in CHECKPOINTED])
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


def test_commits_after_the_checkpoint_override_its_rows(tmp_path: Path) -> None:
    root = _table(tmp_path)
    remove = {"remove": {"path": "f1", "deletionTimestamp": 5, "dataChange": True}}
    _commit(root, 2, remove, _add("f2", size=99), _add("new"))
    _commit(root, 3, {"remove": {"path": "new", "dataChange": True}}, _add("f1", size=7))
    files = load_snapshot(STORAGE, str(root)).files
    assert isinstance(files, LiveFiles)
    assert sorted(k[0] for k in files) == ["f0", "f1", "f2", "f3", "f4"]
    assert files["f2", None].size == 99 and files["f1", None].size == 7
    assert [len(c) for c in files.columns] == [3]  # f0, f3 and f4 are still rows
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
