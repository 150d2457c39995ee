"""Without an extra, what needs it says which one to install: ``pip install lakeops`` gives a driver with
neither pyspark nor Dagster, where a run on Spark or the Dagster definitions must end in one message
naming ``pip install 'lakeops[...]'``, not in an ImportError traceback. The packages are made
unimportable in the command's own process (:mod:`absent_modules`); tests/packaging installs the
project without extras for real.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

ROOT = Path(__file__).parents[2]


def _without(packages: tuple[str, ...], code: str) -> subprocess.CompletedProcess[str]:
    """``python -c code`` from the checkout, with the top-level ``packages`` unimportable."""
    blocked = f"import sys; sys.path.insert(0, 'tests'); import absent_modules; absent_modules.install({packages!r})\n"
    return subprocess.run(
        [sys.executable, "-c", blocked + code], capture_output=True, text=True, cwd=ROOT, check=False, timeout=300
    )


def _lakeops_without(packages: tuple[str, ...], *argv: str) -> subprocess.CompletedProcess[str]:
    return _without(packages, f"from spark_jobs.cli import main; sys.exit(main({list(argv)!r}))")


@pytest.fixture
def small_files(tmp_path: Path) -> Path:
    """A Delta table of five one-row files: a compaction has work to run."""
    location = tmp_path / "events"
    for i in range(5):
        write_deltalake(str(location), pa.table({"id": [i]}), mode="append")
    return location


def test_a_run_on_spark_without_pyspark_names_the_spark_extra(small_files: Path) -> None:
    run = _lakeops_without(("pyspark", "py4j"), "compact", str(small_files), "--master", "local[1]")
    assert run.returncode == 2, run.stderr
    assert (
        "error: MissingExtra: Spark (master local[1]) needs the extra 'spark' of lakeops, which is not installed "
        "(No module named 'pyspark'"
    ) in run.stderr
    assert "pip install 'lakeops[spark]'" in run.stderr and "Traceback" not in run.stderr
    assert len(DeltaTable(str(small_files)).file_uris()) == 5  # planned, nothing run or committed


def test_the_same_run_on_the_driver_needs_no_pyspark(small_files: Path) -> None:
    run = _lakeops_without(("pyspark", "py4j"), "compact", str(small_files), "--json")
    assert run.returncode == 0, run.stderr
    compacted = DeltaTable(str(small_files))
    assert len(compacted.file_uris()) == 1
    assert sorted(compacted.to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2, 3, 4]


def test_spark_connect_without_its_client_names_the_connect_extra(small_files: Path) -> None:
    run = _lakeops_without(("grpc",), "compact", str(small_files), "--master", "sc://127.0.0.1:1")
    assert run.returncode == 2, run.stderr
    assert "error: MissingExtra: Spark Connect (sc://127.0.0.1:1) needs the extra 'connect' of lakeops" in run.stderr
    assert "pip install 'lakeops[connect]'" in run.stderr and "Traceback" not in run.stderr
    assert len(DeltaTable(str(small_files)).file_uris()) == 5


@pytest.mark.parametrize(
    ("package", "module", "needed_for"),
    [
        ("dagster", "orchestration.definitions", "loading the Dagster definitions of lakeops (orchestration)"),
        ("airflow", "orchestration.airflow.pools", "loading the Airflow DAGs of lakeops (orchestration.airflow)"),
    ],
    ids=["dagster", "airflow"],
)
def test_an_orchestrators_definitions_without_it_name_its_extra(package: str, module: str, needed_for: str) -> None:
    run = _without((package,), f"import {module}")
    assert run.returncode == 1
    *_, last = run.stderr.strip().splitlines()
    assert last.startswith(
        f"spark_jobs.extras.MissingExtra: {needed_for} needs the extra '{package}' of lakeops, which is not installed "
        f"(No module named '{package}'"
    ), run.stderr
    assert last.endswith(f": pip install 'lakeops[{package}]'")


def test_the_neutral_orchestration_modules_need_no_orchestrator() -> None:
    """``orchestration`` itself and its shared modules import with neither Dagster nor Airflow."""
    run = _without(("dagster", "airflow"), "import orchestration.operations, orchestration.runs; print('ok')")
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
