"""Compaction planning and the rewrite task, run directly (they are pure: no Spark needed)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from lakeops.delta.maintenance.compaction import plan_compaction, rewrite_group
from lakeops.delta.maintenance.options import DeltaCompactionOptions
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import InvalidArgument
from lakeops.storage import StorageOptions, open_storage


def _table(tmp_path: Path, appends: int, *, partitioned: bool = True) -> str:
    location = str(tmp_path / "t")
    for i in range(appends):
        batch = pa.table(
            {
                "id": pa.array(range(i * 100, i * 100 + 100), pa.int64()),
                "payload": pa.array([f"row-{j:08d}-" * 4 for j in range(i * 100, i * 100 + 100)]),
                "day": pa.array([f"2026-11-0{1 + i % 2}"] * 100),
            }
        )
        write_deltalake(location, batch, mode="append", partition_by=["day"] if partitioned else None)
    return location


def _plan(location: str, **options: object):  # type: ignore[no-untyped-def]
    snapshot = load_snapshot(open_storage(location), location)
    return plan_compaction(snapshot, DeltaCompactionOptions.model_validate(options), StorageOptions())


def test_bins_respect_partitions_and_min_input_files(tmp_path: Path) -> None:
    location = _table(tmp_path, 9)  # 5 files on day 1, 4 on day 2
    plan = _plan(location)
    assert [g.partition_values for g in plan.groups] == [{"day": "2026-11-01"}]
    assert len(plan.groups[0].files) == 5 and plan.candidate_files == 9
    assert len(_plan(location, min_input_files=4).groups) == 2


def test_bins_never_exceed_the_target_size(tmp_path: Path) -> None:
    location = _table(tmp_path, 12, partitioned=False)
    sizes = [f.size for f in _plan(location, min_input_files=2).groups[0].files]
    target = sum(sizes) // 3
    plan = _plan(location, min_input_files=2, target_file_size=target)
    assert len(plan.groups) >= 3
    assert all(g.bytes <= target and len(g.files) >= 2 for g in plan.groups)
    planned = [f.location for g in plan.groups for f in g.files]
    assert len(planned) == len(set(planned))  # no file in two bins
    assert set(planned) <= {f.location for f in _plan(location, min_input_files=2).groups[0].files}


def test_rewrite_task_splits_output_by_estimated_rows(tmp_path: Path) -> None:
    location = _table(tmp_path, 6, partitioned=False)
    group = _plan(location, min_input_files=2).groups[0]
    # A target a quarter of the bin: the task must roll over to new files as it streams.
    small = group.model_copy(update={"target_file_size": group.bytes // 4})
    result = rewrite_group(small)
    assert len(result.written) >= 3
    assert sum(w.rows for w in result.written) == result.rows_read == 600
    ids = pa.concat_tables(pq.read_table(w.location) for w in result.written).column("id").to_pylist()
    assert sorted(ids) == list(range(600))
    # Nothing is committed by the task itself: the table still has its 6 files.
    assert len(DeltaTable(location).file_uris()) == 6


def test_where_must_name_partition_columns(tmp_path: Path) -> None:
    location = _table(tmp_path, 2)
    with pytest.raises(InvalidArgument, match="id is not one"):
        _plan(location, where="id > 3")
    assert _plan(location, where="day = '2026-11-02'", min_input_files=1).candidate_files == 1
