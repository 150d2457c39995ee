"""The two-pass Delta checkpoint (issue 23 part 4): a replay of keys only, then the winning rows read
again from their sources part by part, must write exactly the files the whole-table route writes.

Each case checkpoints two copies of one table at a fixed clock, one from a full snapshot (the
whole-table route) and one from a keys-only snapshot (two passes, as ``lakeops checkpoint`` does),
and compares the parts byte for byte; delta-rs reads the lakeops tables through the new checkpoint
alone. Tables: the scale benchmark's log-only table in small (a lakeops-schema multi-part
checkpoint, commits of adds and of removes) with commits added for unexpired tombstones, a
deletion vector and a transaction; the real V2 checkpoints with sidecars of ``tests/data/modern``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from lakeops_testdata import TESTDATA

from bench.workloads.delta_scale import scale_log
from lakeops import api
from lakeops.delta import snapshot as snapshot_module
from lakeops.delta.actions import Add, Remove, Txn, action_to_line
from lakeops.delta.log_segment import list_log
from lakeops.delta.maintenance import checkpoint as delta_checkpoint
from lakeops.delta.maintenance.checkpoint import (
    CheckpointOptions,
    CheckpointPlan,
    finalize_checkpoint,
    plan_checkpoint,
    write_parts_on_driver,
)
from lakeops.delta.snapshot import load_snapshot
from lakeops.storage import StorageOptions, open_storage

MODERN = TESTDATA / "modern" / "delta"
DAY_MS = 86_400_000


def _checkpoint(root: Path, *, keys_only: bool, **options: object) -> tuple[CheckpointPlan, list[bytes]]:
    """Plan at a fixed clock (tombstone expiry alike in both routes), write and point at it."""
    snapshot = load_snapshot(open_storage(str(root)), str(root), keys_only=keys_only)
    plan = plan_checkpoint(snapshot, CheckpointOptions(force=True, **options), StorageOptions(), now_ms=_NOW_MS)
    written = write_parts_on_driver(plan)
    assert finalize_checkpoint(plan, written, StorageOptions()) is not None
    return plan, [Path(part.location).read_bytes() for part in plan.parts]


def _both_routes(root: Path, tmp_path: Path, **options: object) -> tuple[CheckpointPlan, CheckpointPlan, Path]:
    """Checkpoint a copy by each route; both must write the same bytes. Returns both plans and the
    two-pass copy."""
    whole_root, two_pass_root = tmp_path / "whole", tmp_path / "two-pass"
    shutil.copytree(root, whole_root)
    shutil.copytree(root, two_pass_root)
    whole, whole_bytes = _checkpoint(whole_root, keys_only=False, **options)
    two_pass, two_pass_bytes = _checkpoint(two_pass_root, keys_only=True, **options)
    assert (whole.two_pass, two_pass.two_pass) == (False, True)
    assert two_pass.model_dump(exclude={"parts", "table_root"}) == whole.model_dump(exclude={"parts", "table_root"})
    assert len(two_pass_bytes) == len(whole_bytes) and two_pass_bytes == whole_bytes
    return whole, two_pass, two_pass_root


_NOW_MS = int(time.time() * 1000)


def _scale_table(tmp_path: Path) -> Path:
    """The benchmark's table in small: 1,000 adds in a one-part checkpoint at version 10, three
    commits of 100 adds, one removing 100 checkpoint files 30 days ago (expired tombstones)."""
    root = tmp_path / "source"
    scale_log(root, actions=1_400, per_commit=100)
    return root


def _commit(root: Path, actions: list[Add | Remove | Txn]) -> None:
    log = root / "_delta_log"
    version = max(int(p.name[:20]) for p in log.glob("*.json")) + 1
    (log / f"{version:020d}.json").write_text("\n".join(action_to_line(a) for a in actions) + "\n")


def _add(path: str, **fields: object) -> Add:
    return Add.model_validate({"path": path, "size": 10, "modificationTime": 1, "dataChange": True, **fields})


def _remove(path: str) -> Remove:
    return Remove.model_validate({"path": path, "deletionTimestamp": _NOW_MS - DAY_MS, "dataChange": True})


def _paths(root: Path, count: int) -> list[str]:
    """The first ``count`` live paths, by the lakeops replay."""
    return sorted(key[0] for key in load_snapshot(open_storage(str(root)), str(root)).files)[:count]


def _delta_rs_files(root: Path) -> tuple[list[str], int]:
    """The live files' paths and their total size, as delta-rs reads the log."""
    actions = pa.table(DeltaTable(str(root)).get_add_actions(flatten=True))
    return sorted(actions.column("path").to_pylist()), sum(actions.column("size_bytes").to_pylist())


def _drop_log_before(root: Path, version: int) -> None:
    """Only the checkpoint of ``version`` remains: a reader must take every file from it."""
    for path in (root / "_delta_log").iterdir():
        older = path.is_file() and path.name[:20].isdigit() and int(path.name[:20]) < version
        if older or path.name == f"{version:020d}.json":
            path.unlink()


@pytest.mark.parametrize("part_size", [1_000_000, 250])
def test_scale_table_two_pass_writes_the_whole_route_bytes_and_delta_rs_reads_them(
    tmp_path: Path, part_size: int
) -> None:
    root = _scale_table(tmp_path)
    before = _delta_rs_files(root)
    whole, two_pass, written = _both_routes(root, tmp_path, part_size=part_size)
    assert (two_pass.add_files, two_pass.remove_tombstones, two_pass.expired_tombstones) == (1_200, 0, 100)
    assert len(two_pass.parts) == (1 if part_size > 1_300 else 5)
    _drop_log_before(written, two_pass.version)
    assert _delta_rs_files(written) == before


def test_tombstones_dvs_and_txns_from_a_two_pass_checkpoint_replay_alike(tmp_path: Path) -> None:
    """A checkpoint whose part holds a deletion vector (read as objects, not keys) and unexpired
    tombstones, checkpointed again by both routes after more commits."""
    root = _scale_table(tmp_path)
    removed, dv_path = _paths(root, 3)[:2], _paths(root, 3)[2]
    dv = {"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"}
    dv |= {"sizeInBytes": 40, "cardinality": 6}
    _commit(
        root,
        [_remove(p) for p in [*removed, dv_path]]
        + [
            _add(dv_path, deletionVector=dv),
            Txn.model_validate({"appId": "bench", "version": 3, "lastUpdated": _NOW_MS}),
        ],
    )
    first, _ = _checkpoint(root, keys_only=True, part_size=300)  # the two-pass route writes the checkpoint read next
    assert first.two_pass and (first.remove_tombstones, first.txns) == (3, 1)
    _commit(root, [_add("late.parquet", stats='{"numRecords":1}')])
    whole, two_pass, written = _both_routes(root, tmp_path, part_size=300)
    assert (two_pass.add_files, two_pass.remove_tombstones, two_pass.txns) == (1_199, 3, 1)
    state = load_snapshot(open_storage(str(written)), str(written))
    assert state.segment.checkpoint is not None and state.segment.checkpoint.version == two_pass.version
    assert {key for key in state.files if key[0] == dv_path} == {
        (dv_path, "iwi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L")
    }
    assert sorted(k[0] for k in state.tombstones) == sorted([*removed, dv_path])


def test_rows_with_a_field_outside_the_schema_take_the_whole_route(tmp_path: Path) -> None:
    """A checkpoint's add rows setting a field lakeops' schema lacks: the whole-table route widens the
    schema for it, so the two-pass route is not taken and the bytes are the same."""
    root = _scale_table(tmp_path)
    (part,) = (root / "_delta_log").glob("*.checkpoint.*.parquet")
    table = pq.read_table(part)
    adds = table.column("add").combine_chunks()
    extra = pa.array([None if not valid else "x" for valid in adds.is_valid().to_pylist()], pa.string())
    fields = [adds.field(i) for i in range(adds.type.num_fields)] + [extra]
    widened = pa.StructArray.from_arrays(
        fields, names=[*adds.type.names, "futureField"], mask=pc.invert(adds.is_valid())
    )
    pq.write_table(table.set_column(table.schema.get_field_index("add"), "add", widened), part)
    snapshot = load_snapshot(open_storage(str(root)), str(root), keys_only=True)
    plan = plan_checkpoint(snapshot, CheckpointOptions(force=True), StorageOptions(), now_ms=_NOW_MS)
    assert not plan.two_pass
    whole_root = tmp_path / "whole"
    shutil.copytree(root, whole_root)
    _, whole_bytes = _checkpoint(whole_root, keys_only=False)
    assert b"futureField" in whole_bytes[0]
    assert write_parts_on_driver(plan) and [Path(p.location).read_bytes() for p in plan.parts] == whole_bytes


@pytest.mark.parametrize(
    "name", ["v2-checkpoint-parquet", "v2-checkpoints-json-with-sidecars.tar.zst", "v2-checkpoint-json"]
)
def test_v2_checkpoints_with_sidecars_are_read_again_from_their_sidecars(name: str, tmp_path: Path) -> None:
    source = MODERN / name
    if name.endswith(".tar.zst"):
        subprocess.run(["tar", "--zstd", "-xf", str(source), "-C", str(tmp_path)], check=True)
        root = tmp_path / name.removesuffix(".tar.zst")
    else:
        root = tmp_path / name
        shutil.copytree(source, root)
    whole, two_pass, written = _both_routes(root, tmp_path)
    assert len(two_pass.parts) == 1 and two_pass.add_files == whole.add_files > 0
    files = json.dumps(sorted(k[0] for k in load_snapshot(open_storage(str(root)), str(root)).files))
    assert json.dumps(sorted(k[0] for k in load_snapshot(open_storage(str(written)), str(written)).files)) == files


@pytest.mark.parametrize("threshold", [0, None], ids=["two-passes", "one-replay"])
def test_api_checkpoint_takes_two_passes_above_the_threshold_and_reports_the_same_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threshold: int | None
) -> None:
    """Above TWO_PASS_ABOVE_ACTIONS the snapshot is loaded keys only; either way the same checkpoint."""
    if threshold is not None:
        monkeypatch.setattr(delta_checkpoint, "TWO_PASS_ABOVE_ACTIONS", threshold)
    loaded: list[bool] = []
    load = snapshot_module.load_snapshot

    def recording(*args: Any, **kwargs: Any) -> Any:
        loaded.append(kwargs.get("keys_only", False))
        return load(*args, **kwargs)

    monkeypatch.setattr(snapshot_module, "load_snapshot", recording)
    root = _scale_table(tmp_path)
    report = api.checkpoint(str(root))
    assert (True in loaded) is (threshold == 0)
    assert (report.status, report.version, report.add_files, report.parts) == ("written", 14, 1_200, 1)
    assert report.expired_tombstones == 100 and report.last_checkpoint_updated
    _drop_log_before(root, 14)
    assert len(_delta_rs_files(root)[0]) == 1_200


def test_the_size_that_decides_two_passes_is_the_last_checkpoints_else_estimated_from_bytes(tmp_path: Path) -> None:
    root = _scale_table(tmp_path)
    storage = open_storage(str(root))
    listing = list_log(storage, str(root))
    assert listing.last_checkpoint is not None and not delta_checkpoint.two_passes(listing, str(root), None)
    huge = listing.last_checkpoint.model_copy(update={"size": delta_checkpoint.TWO_PASS_ABOVE_ACTIONS + 1})
    assert delta_checkpoint.two_passes(replace(listing, last_checkpoint=huge), str(root), None)
    # Without the pointer, the checkpoint's bytes at 20 B an action: a few KB is far below.
    assert not delta_checkpoint.two_passes(replace(listing, last_checkpoint=None), str(root), None)
