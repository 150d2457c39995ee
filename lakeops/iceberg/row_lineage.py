"""Row lineage in data files (https://iceberg.apache.org/spec/#row-lineage): the metadata columns
``_row_id`` and ``_last_updated_sequence_number`` ("Reserved Field IDs") as a reader produces them,
so that a writer moving rows to a new file (compaction) can copy them there.

A data file with a ``first_row_id`` gives each row whose stored ``_row_id`` is null (or missing)
``first_row_id + _pos``, and each null ``_last_updated_sequence_number`` the file's data sequence
number; stored non-null values are kept as they are. A file with a null ``first_row_id`` (written
before a table's upgrade to v3, never assigned ids) yields null for both. Writing the values into the
new file ("When an existing row is moved to a different data file ... must be copied") keeps them
when the new file inherits a different ``first_row_id``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakeops.iceberg.types import NestedField, PrimitiveType

__all__ = ["LAST_UPDATED_SEQUENCE_NUMBER", "LINEAGE_FIELDS", "ROW_ID", "inherit"]

_LONG = PrimitiveType(name="long")
ROW_ID = NestedField(id=2147483540, name="_row_id", required=False, type=_LONG)
LAST_UPDATED_SEQUENCE_NUMBER = NestedField(
    id=2147483539, name="_last_updated_sequence_number", required=False, type=_LONG
)
LINEAGE_FIELDS = (ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER)


def inherit(batch: pa.RecordBatch, first_row_id: int | None, sequence_number: int, start: int) -> pa.RecordBatch:
    """``batch`` (rows ``start``.. of their file, lineage columns read or null) with the lineage
    values a reader produces for them, given the file's ``first_row_id`` and data sequence number."""
    rows = batch.num_rows
    if first_row_id is None:
        row_ids: pa.Array = pa.nulls(rows, pa.int64())
        sequence_numbers: pa.Array = pa.nulls(rows, pa.int64())
    else:
        positions = pa.array(np.arange(first_row_id + start, first_row_id + start + rows, dtype=np.int64))
        row_ids = pc.coalesce(batch.column(ROW_ID.name), positions)
        sequence_numbers = pc.coalesce(
            batch.column(LAST_UPDATED_SEQUENCE_NUMBER.name), pa.scalar(sequence_number, pa.int64())
        )
    batch = batch.set_column(batch.schema.get_field_index(ROW_ID.name), batch.schema.field(ROW_ID.name), row_ids)
    index = batch.schema.get_field_index(LAST_UPDATED_SEQUENCE_NUMBER.name)
    return batch.set_column(index, batch.schema.field(index), sequence_numbers)
