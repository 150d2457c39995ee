"""The Delta data file writer's row groups: capped at parquet-rs' 1,048,576 rows, as delta-rs writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from delta_schemas import from_arrow_schema
from deltalake import DeltaTable

from lakeops.delta.writer import ROW_GROUP_ROWS, DataFileWriter, append_files, new_table_metadata, read_target
from lakeops.storage import open_storage


def _chunk(start: int, rows: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + rows), pa.int64())})


def test_row_groups_hold_at_most_the_cap_and_every_row_in_order(tmp_path: Path) -> None:
    location = str(tmp_path / "t")
    storage = open_storage(location)
    schema = from_arrow_schema(_chunk(0, 0).schema)
    writer = DataFileWriter(schema)
    chunk = 300_000  # not a divisor of the cap: the fourth chunk crosses the first row group's end
    total = 8 * chunk
    for start in range(0, total, chunk):
        writer.write(_chunk(start, chunk))
    written = writer.finish(storage, location)
    assert written is not None

    parquet = pq.ParquetFile(written.location)
    sizes = [parquet.metadata.row_group(i).num_rows for i in range(parquet.metadata.num_row_groups)]
    assert sizes == [ROW_GROUP_ROWS, ROW_GROUP_ROWS, total - 2 * ROW_GROUP_ROWS]
    assert parquet.read().column("id").to_pylist() == list(range(total))
    assert json.loads(written.add["stats"])["numRecords"] == total

    metadata = new_table_metadata(schema, configuration={})
    append_files(
        storage, read_target(storage, location), metadata=metadata, files=[written], txn=None, operation_parameters={}
    )
    assert DeltaTable(location).to_pyarrow_table().num_rows == total  # the peer reads it
