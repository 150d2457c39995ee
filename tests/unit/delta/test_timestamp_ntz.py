"""``timestampNtz`` tables through every operation, via :mod:`lakeops.api`, with delta-rs as the oracle.

"Timestamp without timezone (TimestampNtz)": a naive ``timestamp[us]`` column, also as a partition
column ("Partition Value Serialization"), in statistics, checkpoints (``stats_parsed``,
``partitionValues_parsed``), compaction output and a change table lakeops creates.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_rs_sql import delta_rs_rows
from deltalake import DeltaTable, write_deltalake
from lakeops_testdata import TESTDATA

from lakeops import api
from lakeops.ops.cdc import CdcOptions
from lakeops.ops.compaction import CompactionOptions
from lakeops.ops.expiry import ExpiryOptions
from lakeops.ops.inspect import InspectReport
from lakeops.ops.orphans import OrphansOptions

NTZ = pa.timestamp("us")
PARTITIONS = [datetime(2013, 7, 5, 17, 1, 0, 123456), None]  # a fraction and the null partition
OLD = 1_500_000_000.0


def _delta_rs_table(root: Path) -> pa.Table:
    """Three delta-rs appends of naive timestamps, partitioned by a naive timestamp, with typed
    checkpoint statistics requested and the change data feed enabled."""
    for i in range(3):
        rows = pa.table(
            {
                "id": pa.array([2 * i, 2 * i + 1], pa.int64()),
                "ts": pa.array([datetime(2024, 1, 1 + i, 12, 0, 0, 654321), None], NTZ),
                "p": pa.array(PARTITIONS, NTZ),
            }
        )
        write_deltalake(
            str(root),
            rows,
            mode="append",
            partition_by=["p"],
            configuration={"delta.checkpoint.writeStatsAsStruct": "true", "delta.enableChangeDataFeed": "true"},
        )
    return DeltaTable(str(root)).to_pyarrow_table().sort_by("id")


def _log(root: Path, version: int) -> list[dict[str, object]]:
    return [json.loads(line) for line in (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]


def test_delta_rs_table_through_every_operation(tmp_path: Path) -> None:
    root = tmp_path / "ntz"
    rows = _delta_rs_table(root)
    assert DeltaTable(str(root)).protocol().reader_features == ["timestampNtz"]

    inspected = api.inspect(str(root))
    assert isinstance(inspected, InspectReport)
    assert "timestampNtz" in inspected.features and inspected.refused_operations == {}

    compacted = api.compact(str(root), CompactionOptions(min_input_files=2))
    assert (compacted.groups, compacted.files_removed, compacted.files_added) == (2, 6, 2)
    adds = [a["add"] for a in _log(root, 3) if "add" in a]
    assert sorted(str(a["partitionValues"]["p"]) for a in adds) == ["2013-07-05 17:01:00.123456", "None"]
    stats = [json.loads(a["stats"]) for a in adds if a["partitionValues"]["p"] is not None][0]
    assert (stats["minValues"]["ts"], stats["maxValues"]["ts"]) == (
        "2024-01-01T12:00:00.654",
        "2024-01-03T12:00:00.654",
    )
    assert DeltaTable(str(root)).to_pyarrow_table().sort_by("id").equals(rows)

    assert api.checkpoint(str(root)).status == "written"
    add = pq.read_table(root / "_delta_log" / "00000000000000000003.checkpoint.parquet").column("add").combine_chunks()
    parsed = add.field("partitionValues_parsed")
    assert parsed.type.field("p").type == NTZ
    assert sorted(v for v in parsed.field("p").to_pylist() if v is not None) == [PARTITIONS[0]]
    minimum = add.field("stats_parsed").field("minValues").field("ts")
    assert minimum.type == NTZ and datetime(2024, 1, 1, 12, 0, 0, 654000) in minimum.to_pylist()
    assert DeltaTable(str(root)).to_pyarrow_table().sort_by("id").equals(rows)  # read through the checkpoint

    changes = tmp_path / "changes"
    extracted = api.cdc(str(root), CdcOptions(from_version=0, output=str(changes)))
    assert extracted.rows_insert == 6
    output = DeltaTable(str(changes))
    assert output.protocol().reader_features == ["timestampNtz"]  # a table of naive timestamps needs it
    inserted = output.to_pyarrow_table().filter(pa.compute.equal(pa.compute.field("_change_type"), "insert"))
    assert inserted.select(["id", "ts", "p"]).sort_by("id").equals(rows.select(["id", "ts", "p"]))

    for path in root.rglob("*"):
        os.utime(path, (OLD, OLD))  # every commit and file "a long time ago"
    (root / "stray.parquet").write_bytes(b"untracked")
    expired = api.expire(str(root), ExpiryOptions(older_than="1d", force=True))
    assert expired.deleted_files == 3  # commits 0..2, which the checkpoint at 3 replaces
    vacuumed = api.orphans(str(root), OrphansOptions(older_than="0s", force_short_retention=True))
    assert vacuumed.deleted_files == 7  # the six compacted files and the stray one
    assert not (root / "stray.parquet").exists()
    assert DeltaTable(str(root)).to_pyarrow_table().sort_by("id").equals(rows)


@pytest.mark.parametrize("name", ["data-reader-timestamp_ntz", "data-reader-timestamp_ntz-id-mode"])
def test_spark_golden_table_inspect_compact_checkpoint(tmp_path: Path, name: str) -> None:
    root = tmp_path / name
    shutil.copytree(TESTDATA / "modern" / "delta" / name, root)
    rows = delta_rs_rows(root).sort_by("id")
    assert rows.num_rows == 9 and rows.schema.field("tsNtz").type == NTZ

    inspected = api.inspect(str(root))
    assert isinstance(inspected, InspectReport) and "timestampNtz" in inspected.features

    compacted = api.compact(str(root), CompactionOptions(min_input_files=2))
    assert (compacted.groups, compacted.files_removed, compacted.files_added, compacted.rows_written) == (1, 2, 1, 3)
    (add,) = [a["add"] for a in _log(root, 2) if "add" in a]
    assert list(add["partitionValues"].values()) == ["2013-07-05 17:01:00.123456"]
    assert api.checkpoint(str(root)).status == "written"

    assert delta_rs_rows(root).sort_by("id").equals(rows)
