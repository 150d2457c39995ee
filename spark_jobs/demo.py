"""``make demo``: the main job end to end on the embedded default (local warehouse, Spark local[*]).

Builds a Delta table of many small appends under ``./.lakeops-demo/warehouse`` (written by delta-rs,
as a real data team's ingestion would), then runs ``lakeops inspect``, ``lakeops compact`` and
``lakeops inspect`` again, and checks that delta-rs reads the same rows afterwards.
"""

from __future__ import annotations

import shutil
import sys
from datetime import date, timedelta
from pathlib import Path

import pyarrow as pa

from spark_jobs.cli import main as lakeops
from spark_jobs.session import stop_session

WAREHOUSE = Path(".lakeops-demo/warehouse").resolve()


def build_table(location: Path, appends: int = 120) -> int:
    from deltalake import write_deltalake

    rows = 0
    for i in range(appends):
        day = date(2026, 11, 1) + timedelta(days=i % 4)
        batch = pa.table(
            {
                "event_id": pa.array(range(rows, rows + 250), pa.int64()),
                "user": pa.array([f"user-{(rows + j) % 97}" for j in range(250)]),
                "amount": pa.array([(rows + j) * 0.25 for j in range(250)], pa.float64()),
                "day": pa.array([day] * 250, pa.date32()),
            }
        )
        write_deltalake(str(location), batch, mode="append", partition_by=["day"])
        rows += batch.num_rows
    return rows


def run() -> int:
    from deltalake import DeltaTable

    table = WAREHOUSE / "events"
    shutil.rmtree(table, ignore_errors=True)
    print(f"writing 120 small appends to {table} with delta-rs ...", flush=True)
    rows = build_table(table)
    before = DeltaTable(str(table)).to_pyarrow_table().sort_by("event_id")

    for argv in (["inspect", str(table)], ["compact", str(table)], ["inspect", str(table)]):
        print(f"\n$ lakeops {' '.join(argv)}", flush=True)
        code = lakeops(argv)
        if code:
            return code

    after = DeltaTable(str(table))
    history = after.history(1)[0]
    same = after.to_pyarrow_table().sort_by("event_id").equals(before)
    print(
        f"\ndelta-rs reads {after.to_pyarrow_table().num_rows} rows (wrote {rows}); identical to before: {same}; "
        f"latest operation: {history['operation']}"
    )
    stop_session()  # end the JVM before the interpreter exits, not during its teardown
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(run())
