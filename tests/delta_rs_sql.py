"""delta-rs as the oracle for tables with reader features its ``to_pyarrow_table`` refuses.

``DeltaTable.to_pyarrow_table`` (delta-rs 1.6) refuses deletion vectors and column mapping; its SQL
engine (``QueryBuilder``, on delta-kernel) reads both. Neither reads ``vacuumProtocolCheck`` or
``typeWidening(-preview)`` tables.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder


def delta_rs_rows(root: Path | str, where: str = "") -> pa.Table:
    """The table's rows as delta-rs's SQL engine reads them (``where``: an optional SQL condition)."""
    sql = f"select * from t where {where}" if where else "select * from t"
    return pa.table(QueryBuilder().register("t", DeltaTable(str(root))).execute(sql).read_all())
