"""What the ``lakeops`` command imports: only what the command and the table's format need.

An on-call engineer runs ``lakeops inspect`` dozens of times a night, so its start-up is guarded by
structure, not by timing: the modules a run leaves in ``sys.modules`` (``python -X importtime`` misses
those loaded by ``importlib.import_module``, as the command modules are) are checked, and a command on
a local Delta table must not import SQLAlchemy (Iceberg catalogs), boto3 (S3), pandas (pyarrow probes
for it on its first conversion of Python objects), the Icechunk or Iceberg code, Spark or Dagster;
``lakeops --help`` not even pyarrow.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

ROOT = Path(__file__).parents[2]
#: Never imported by a Delta command on a local table (top-level packages and lakeops subpackages).
NOT_FOR_LOCAL_DELTA = {
    "sqlalchemy",
    "boto3",
    "botocore",
    "pandas",
    "icechunk",
    "zarr",
    "pyspark",
    "dagster",
    "fastavro",
    "lakeops.icechunk",
    "lakeops.ops.icechunk",
    "lakeops.iceberg.maintenance",
    "lakeops.iceberg.manifest",
    "lakeops.iceberg.metadata",
    "lakeops.delta.maintenance.compaction",
    "lakeops.iceberg.sql_catalog",
    "lakeops.iceberg.glue_catalog",
    "lakeops.changefeed.table",
}


_PROBE = (
    "import atexit, sys; "
    "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n')); "
    "from spark_jobs.cli import main; sys.exit(main())"
)


def _imported(*argv: str) -> set[str]:
    """Every module ``lakeops *argv`` has imported when it exits."""
    run = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, cwd=ROOT, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    (line,) = [line for line in run.stderr.splitlines() if line.startswith("MODULES ")]
    return set(line.split()[1:])


#: The dependency-free modules of option models and defaults (the command line shows them), and the
#: packages holding them (whose ``__init__`` imports nothing): not the format's code.
ALLOWED = {
    "lakeops.iceberg.maintenance",
    "lakeops.iceberg.maintenance.defaults",
    "lakeops.iceberg.maintenance.options",
    "lakeops.icechunk",
    "lakeops.icechunk.maintenance",
    "lakeops.icechunk.maintenance.options",
}


def _offending(imported: set[str], forbidden: set[str]) -> list[str]:
    return sorted(m for m in imported - ALLOWED if any(m == f or m.startswith(f + ".") for f in forbidden))


@pytest.fixture(scope="module")
def delta_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    location = tmp_path_factory.mktemp("cli") / "events"
    for i in range(5):
        write_deltalake(str(location), pa.table({"id": [i], "name": [f"n{i}"]}), mode="append")
    return location


@pytest.mark.parametrize(
    "command",
    [
        ["inspect"],
        ["checkpoint", "--dry-run"],
        ["expire", "--dry-run"],
        ["orphans", "--dry-run"],
    ],
    ids=lambda c: c[0],
)
def test_a_delta_command_imports_only_what_delta_needs(command: list[str], delta_table: Path) -> None:
    imported = _imported(command[0], str(delta_table), *command[1:], "--json")
    assert "lakeops.delta.snapshot" in imported  # the probe sees the real run
    assert _offending(imported, NOT_FOR_LOCAL_DELTA) == []


def test_help_imports_neither_pyarrow_nor_any_format() -> None:
    imported = _imported("--help")
    assert {"spark_jobs.compact", "spark_jobs.cdc", "lakeops.ops.options"} <= imported  # every command's options
    assert _offending(imported, NOT_FOR_LOCAL_DELTA | {"pyarrow", "numpy", "lakeops.delta.snapshot"}) == []


def test_planning_a_delta_registry_imports_only_what_delta_needs(delta_table: Path, tmp_path: Path) -> None:
    """``plan-maintenance`` dry-runs every operation of each table: on a registry of one local Delta
    table, that is Delta's code only (its compaction's among it: the plan is a compaction's dry run)."""
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(f"tables:\n  - name: events\n    location: {delta_table}\n")
    imported = _imported("plan-maintenance", "--registry", str(registry), "--budget", "60m", "--json")
    assert "lakeops.planning.planner" in imported
    assert _offending(imported, NOT_FOR_LOCAL_DELTA - {"lakeops.delta.maintenance.compaction"}) == []


def test_a_delta_compaction_reads_its_files_without_pyarrow_dataset(delta_table: Path, tmp_path: Path) -> None:
    """``pyarrow.dataset`` costs 0.3-0.6 s to import; a data file is one Parquet file, read without it."""
    from deltalake import DeltaTable

    table = tmp_path / "events"
    shutil.copytree(delta_table, table)
    imported = _imported("compact", str(table), "--json")
    assert "lakeops.delta.maintenance.compaction" in imported
    assert _offending(imported, {"pyarrow.dataset"}) == []
    compacted = DeltaTable(str(table))
    assert len(compacted.file_uris()) == 1
    assert sorted(compacted.to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2, 3, 4]
