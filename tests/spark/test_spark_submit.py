"""``spark-submit spark_jobs/compact.py TABLE ...`` runs the same job as ``lakeops compact``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

ROOT = Path(__file__).resolve().parents[2]


def test_spark_submit_entry_point_compacts(tmp_path: Path) -> None:
    location = str(tmp_path / "t")
    for i in range(8):
        write_deltalake(location, pa.table({"id": [i]}), mode="append")
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    result = subprocess.run(
        [str(spark_submit), "--master", "local[1]", str(ROOT / "spark_jobs" / "compact.py"), location, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["committed_version"] == 8 and report["files_removed"] == 8 and report["files_added"] == 1
    table = DeltaTable(location)
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == list(range(8))
    assert table.history(1)[0]["operation"] == "OPTIMIZE"
