"""A rewrite task's memory is bounded by its read batch and one output file, not by its group (issue 9).

Measured as the peak of an Arrow memory pool that tracks only the rewrite, in a fresh process that
rewrites one group of ~1 MB files into 2 MB targets. The control is the sorted rewrite, which must
hold the group's rows to sort them: the same measurement sees it hold the whole group, so the
bound the unsorted rewrite meets is a real observation, not a blind spot of the measurement.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.transforms import IdentityTransform

from tests.pyiceberg_tables import ARROW_SCHEMA, PyIcebergTable, create_table

FILES = 48
ROWS_PER_FILE = 40_000  # ~1 MB of Parquet each (random scores and amounts do not compress)
TARGET = 2 * 1024 * 1024

#: Runs in a fresh process: plan the table's one group, then rewrite it with every Arrow allocation
#: going through a proxy pool whose peak counts the rewrite alone. ``os._exit``: the pool must
#: outlive every buffer, so the process skips teardown.
SCRIPT = """
import json, os, sys
import pyarrow as pa
from lakeops.iceberg.maintenance import compaction
from lakeops.iceberg.maintenance.options import IcebergCompactionOptions
from lakeops.iceberg.table import TableRef, load_table
from lakeops.storage import StorageOptions

catalog_uri, identifier, target, sort = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "sorted"
table = load_table(TableRef(catalog_uri=catalog_uri, identifier=identifier), StorageOptions())
options = IcebergCompactionOptions(target_file_size=target, min_input_files=2, sort=sort)
[group] = compaction.plan_compaction(table, options, StorageOptions()).groups
pool = pa.proxy_memory_pool(pa.default_memory_pool())
pa.set_memory_pool(pool)
result = compaction.rewrite_group(group)
print(json.dumps({"peak": pool.max_memory(), "files_in": len(group.files), "files_out": len(result.written),
                  "rows": result.rows_written}), flush=True)
os._exit(0)
"""


def _rows(start: int, count: int) -> pa.Table:
    rng = np.random.default_rng(start)
    ids = np.arange(start, start + count, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "ts": pa.array(ids * 1_000_000, pa.timestamp("us")),
            "category": pa.array(np.where(ids % 2 == 0, "a", "b")),
            "amount": pa.array(rng.integers(0, 10**8, count)).cast(pa.decimal128(21, 2)).cast(pa.decimal128(10, 2)),
            "score": rng.random(count),
            "day": pa.array((ids % 3).astype(np.int32), pa.date32()),
        },
        schema=ARROW_SCHEMA,
    )


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> PyIcebergTable:
    """FILES small files in a table sorted by score (used only when the rewrite is asked to sort)."""
    made = create_table(
        tmp_path_factory.mktemp("memory"), sort_order=SortOrder(SortField(source_id=5, transform=IdentityTransform()))
    )
    for i in range(FILES):
        made.table.append(_rows(i * ROWS_PER_FILE, ROWS_PER_FILE))
    return made


def _rewrite(table: PyIcebergTable, mode: str) -> dict[str, Any]:
    argv = [sys.executable, "-c", SCRIPT, table.catalog_uri, table.identifier, str(TARGET), mode]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    outcome: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcome


@pytest.fixture(scope="module")
def group_bytes() -> int:
    """What the group's rows take in memory once decoded (what holding the group would cost)."""
    return _rows(0, ROWS_PER_FILE).nbytes * FILES


def test_an_unsorted_rewrite_holds_one_batch_and_one_output_file(table: PyIcebergTable, group_bytes: int) -> None:
    outcome = _rewrite(table, "unsorted")
    assert outcome["files_in"] == FILES and outcome["rows"] == FILES * ROWS_PER_FILE
    assert outcome["files_out"] > 1  # the group spans several output files
    assert outcome["peak"] < group_bytes / 4, outcome  # measured: about a ninth


def test_a_sorted_rewrite_holds_the_group_and_the_measurement_sees_it(table: PyIcebergTable, group_bytes: int) -> None:
    outcome = _rewrite(table, "sorted")
    assert outcome["files_in"] == FILES and outcome["rows"] == FILES * ROWS_PER_FILE
    assert outcome["peak"] > group_bytes, outcome
