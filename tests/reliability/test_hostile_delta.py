"""Hostile and broken Delta logs (issue 10): every parser a table can feed us, fed damaged real files.

Sources are copies of delta-rs fixtures (``table-with-dv-small``: an on-disk deletion vector;
``table_with_deletion_logs``: 21 commits, a checkpoint with ``stats_parsed``, ``_last_checkpoint``).
Each property mutates them as bytes (torn, flipped, truncated) and as structure (one action field
replaced by a hostile JSON value or removed) and asserts :func:`hostile.must_hold`: a result or a
:class:`~lakeops.errors.LakeopsError` with a message, within the time limit. End to end, a whole
table with one damaged commit is replayed and vacuum-planned, and no file of it disappears.
Budget: ``LAKEOPS_FUZZ_EXAMPLES`` (see :mod:`hostile`).
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, reject
from hypothesis import strategies as st
from lakeops_testdata import TESTDATA
from reliability.hostile import FUZZ, NASTY_JSON, json_bytes, must_hold, mutated_bytes, mutated_tree, names

from lakeops.delta.actions import DeletionVectorDescriptor
from lakeops.delta.checkpoint_reader import read_checkpoint_part, read_checkpoint_part_columnar
from lakeops.delta.commit_file import parse_commit
from lakeops.delta.deletion_vectors import read_deletion_vector
from lakeops.delta.last_checkpoint import parse_last_checkpoint
from lakeops.delta.maintenance.orphans import VacuumOptions, plan_vacuum
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import LakeopsError
from lakeops.storage import LocalStorage, StorageOptions
from spark_jobs.operations import run_operation

DV_TABLE = TESTDATA / "delta-rs" / "table-with-dv-small"
LOG_TABLE = TESTDATA / "delta-rs" / "table_with_deletion_logs"
STORAGE = LocalStorage()
DV_COMMIT = (DV_TABLE / "_delta_log" / "00000000000000000001.json").read_bytes()
COMMITS = [DV_COMMIT, *((LOG_TABLE / "_delta_log" / f"{v:020d}.json").read_bytes() for v in (0, 1, 11, 20))]
LAST_CHECKPOINT = (LOG_TABLE / "_delta_log" / "_last_checkpoint").read_bytes()
CHECKPOINT = (LOG_TABLE / "_delta_log" / "00000000000000000010.checkpoint.parquet").read_bytes()


def _lines(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in raw.decode().split("\n") if line.strip()]


def _dv_descriptor() -> dict[str, Any]:
    for action in _lines(DV_COMMIT):
        if "add" in action and "deletionVector" in action["add"]:
            descriptor: dict[str, Any] = action["add"]["deletionVector"]
            return descriptor
    raise AssertionError("the fixture commit has no deletion vector")


DV_DESCRIPTOR = _dv_descriptor()
DV_FILE = next(DV_TABLE.glob("deletion_vector_*.bin"))


@pytest.fixture(scope="module")
def dv_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the DV table; each DV example overwrites its DV file."""
    root = tmp_path_factory.mktemp("dv") / "t"
    shutil.copytree(DV_TABLE, root)
    return root


@pytest.mark.parametrize("raw", NASTY_JSON, ids=range(len(NASTY_JSON)))
def test_pathological_json_in_every_delta_json_file(raw: bytes) -> None:
    commit = must_hold(lambda: parse_commit(raw, 3, "/t/_delta_log/00000000000000000003.json"), "parse_commit")
    pointer = must_hold(lambda: parse_last_checkpoint(raw, "/t/_delta_log/_last_checkpoint"), "parse_last_checkpoint")
    assert not isinstance(pointer, LakeopsError) or names(pointer, "_last_checkpoint")
    assert not isinstance(commit, LakeopsError) or names(commit, "00000000000000000003.json")


@FUZZ
@given(data=st.data())
def test_damaged_commit_bytes(data: st.DataObject) -> None:
    raw = data.draw(mutated_bytes(data.draw(st.sampled_from(COMMITS))))
    result = must_hold(lambda: parse_commit(raw, 7, "/t/_delta_log/00000000000000000007.json"), "parse_commit")
    assert not isinstance(result, LakeopsError) or names(result, "00000000000000000007.json")


@FUZZ
@given(data=st.data())
def test_hostile_commit_actions(data: st.DataObject) -> None:
    actions = _lines(data.draw(st.sampled_from(COMMITS)))
    index = data.draw(st.integers(0, len(actions) - 1))
    actions[index] = data.draw(mutated_tree(actions[index]))
    raw = b"\n".join(json_bytes(a) for a in actions)
    result = must_hold(lambda: parse_commit(raw, 7, "/t/_delta_log/00000000000000000007.json"), "parse_commit")
    assert not isinstance(result, LakeopsError) or names(result, "00000000000000000007.json")


@FUZZ
@given(data=st.data())
def test_hostile_last_checkpoint(data: st.DataObject) -> None:
    if data.draw(st.booleans()):
        raw = data.draw(mutated_bytes(LAST_CHECKPOINT))
    else:
        raw = json_bytes(data.draw(mutated_tree(json.loads(LAST_CHECKPOINT))))
    result = must_hold(lambda: parse_last_checkpoint(raw, "/t/_delta_log/_last_checkpoint"), "parse_last_checkpoint")
    assert not isinstance(result, LakeopsError) or names(result, "_last_checkpoint")


def _checkpoint_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(io.BytesIO(CHECKPOINT)).to_pylist()
    return rows


CHECKPOINT_ROWS = _checkpoint_rows()


@FUZZ
@given(data=st.data())
def test_hostile_checkpoint_parquet(data: st.DataObject, tmp_path: Path) -> None:
    """Torn parquet bytes, and checkpoints whose action structs hold other types or miss fields."""
    if data.draw(st.booleans()):
        raw = data.draw(mutated_bytes(CHECKPOINT))
    else:
        rows = list(CHECKPOINT_ROWS)
        index = data.draw(st.integers(0, len(rows) - 1))
        rows[index] = data.draw(mutated_tree(rows[index]))
        if not isinstance(rows[index], dict):
            reject()  # a parquet row is a struct
        sink = io.BytesIO()
        try:
            pq.write_table(pa.Table.from_pylist(rows), sink)
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            reject()  # pyarrow cannot even write such a file; not an input a table can hold
        raw = sink.getvalue()
    path = tmp_path / "00000000000000000010.checkpoint.parquet"
    path.write_bytes(raw)
    result = must_hold(lambda: list(read_checkpoint_part(STORAGE, str(path))), "read_checkpoint_part")
    assert not isinstance(result, LakeopsError) or names(result, path.name)
    # The first pass of a checkpoint reads the add rows as keys: the same bytes, the same verdicts.
    keys = must_hold(
        lambda: list(read_checkpoint_part_columnar(STORAGE, str(path), keys_only=True)), "keys-only checkpoint read"
    )
    assert not isinstance(keys, LakeopsError) or names(keys, path.name)


@FUZZ
@given(data=st.data())
def test_hostile_deletion_vectors(data: st.DataObject, dv_root: Path) -> None:
    """A hostile descriptor (offsets, sizes, paths, storage types) over a damaged or intact DV file."""
    target = dv_root / DV_FILE.name
    target.write_bytes(
        data.draw(mutated_bytes(DV_FILE.read_bytes())) if data.draw(st.booleans()) else DV_FILE.read_bytes()
    )
    fields = data.draw(mutated_tree(DV_DESCRIPTOR)) if data.draw(st.booleans()) else DV_DESCRIPTOR
    try:
        descriptor = DeletionVectorDescriptor.model_validate(fields)
    except Exception:
        reject()  # parse_commit refuses such descriptors (test_hostile_commit_actions)
    must_hold(
        lambda: read_deletion_vector(descriptor, STORAGE, str(dv_root), data_file="part-0.parquet"),
        "read_deletion_vector",
    )


@pytest.mark.parametrize("offset", [1, 2**62])
def test_deletion_vector_with_huge_size_is_refused_without_reading_gigabytes(dv_root: Path, offset: int) -> None:
    (dv_root / DV_FILE.name).write_bytes(DV_FILE.read_bytes())
    # Beyond the Int a log line may hold (parse_commit refuses it): built without validation.
    descriptor = DeletionVectorDescriptor.model_construct(**{**DV_DESCRIPTOR, "sizeInBytes": 2**62, "offset": offset})
    error = must_hold(lambda: read_deletion_vector(descriptor, STORAGE, str(dv_root)), "read_deletion_vector")
    assert names(error, DV_FILE.name)


@FUZZ
@given(data=st.data())
def test_table_with_one_hostile_commit_is_replayed_and_planned_without_deleting(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("table") / "t"
    shutil.copytree(DV_TABLE, root)
    commit = root / "_delta_log" / "00000000000000000001.json"
    if data.draw(st.booleans()):
        commit.write_bytes(data.draw(mutated_bytes(DV_COMMIT)))
    else:
        actions = _lines(DV_COMMIT)
        index = data.draw(st.integers(0, len(actions) - 1))
        actions[index] = data.draw(mutated_tree(actions[index]))
        commit.write_bytes(b"\n".join(json_bytes(a) for a in actions))
    before = sorted(p for p in root.rglob("*"))

    snapshot = must_hold(lambda: load_snapshot(STORAGE, str(root)), "load_snapshot")
    if not isinstance(snapshot, LakeopsError):
        must_hold(
            lambda: plan_vacuum(snapshot, STORAGE, VacuumOptions(), StorageOptions(), now_ms=2**41),
            "plan_vacuum",
        )
        must_hold(lambda: run_operation("inspect", str(root)), "lakeops inspect")
    assert sorted(p for p in root.rglob("*")) == before


@pytest.mark.parametrize(
    "stats", ["not json", "[]", '{"numRecords": "many"}', '{"numRecords": [1]}', "[" * 100_000, '{"numRecords": 1e999}']
)
def test_hostile_add_stats_are_named_by_inspect(stats: str, tmp_path: Path) -> None:
    root = tmp_path / "t"
    shutil.copytree(DV_TABLE, root)
    actions = _lines(DV_COMMIT)
    for action in actions:
        if "add" in action:
            action["add"]["stats"] = stats
    (root / "_delta_log" / "00000000000000000001.json").write_bytes(b"\n".join(json_bytes(a) for a in actions))

    error = must_hold(lambda: run_operation("inspect", str(root)), "lakeops inspect")

    assert names(error, "part-00000-fae5310a", "stats"), error
