"""``pip install lakeops`` without extras, into a fresh virtual environment, is the library and the
``lakeops`` command on a driver with neither pyspark nor Dagster (issue 35): ``lakeops.api`` imports,
``lakeops inspect`` reports on a local Delta table and ``lakeops compact`` rewrites it on the driver, and
what needs an extra says which one to install.

The project is installed as a user installs it: from a copy of what a wheel is built from, its build
backend in an isolated build environment and every dependency from the index (pip's cache makes a rerun
quick), so a dependency that the library needs but that only an extra brings fails here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

pytestmark = pytest.mark.long  # a virtual environment and the dependencies installed into it: about a minute

ROOT = Path(__file__).resolve().parents[2]
#: What the wheel is built from (pyproject.toml names the packages and the readme), as deploy/Dockerfile copies.
SOURCES = ("pyproject.toml", "README.md", "lakeops", "spark_jobs", "orchestration")
#: The import names of what the extras spark, connect and dagster bring.
EXTRAS_ONLY = ("pyspark", "py4j", "grpc", "dagster", "dagster_webserver", "dagster_postgres", "dagster_k8s")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the project installed from a copy of this checkout, no extras."""
    base = tmp_path_factory.mktemp("fresh-install")
    source = base / "lakeops"
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    # This environment's pip installs into the new one (--python): it needs no pip of its own.
    install = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet", str(source)]
    installed = subprocess.run(install, capture_output=True, text=True, env=_clean_env(), timeout=1500, check=False)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return venv


def _clean_env() -> dict[str, str]:
    """The environment without lakeops' settings (a Spark master) or a path to this checkout."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("LAKEOPS_", "PYTHONPATH", "VIRTUAL_ENV"))}


def _run(venv: Path, program: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``program`` of the virtual environment (``python``, ``lakeops``), run outside the checkout."""
    command = [str(venv / "bin" / program), *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=_clean_env(), timeout=300, check=False)


@pytest.fixture
def events(tmp_path: Path) -> Path:
    """A local Delta table of five one-row files, written by delta-rs."""
    location = tmp_path / "events"
    for i in range(5):
        write_deltalake(str(location), pa.table({"id": [i], "name": [f"n{i}"]}), mode="append")
    return location


def test_the_library_and_the_command_import_without_spark_or_dagster(venv: Path, tmp_path: Path) -> None:
    probe = (
        "import importlib.util, lakeops.api, spark_jobs.cli\n"
        "print(lakeops.api.__file__)\n"
        f"print([name for name in {EXTRAS_ONLY!r} if importlib.util.find_spec(name)])"
    )
    run = _run(venv, "python", "-c", probe, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    location, present = run.stdout.splitlines()
    assert Path(location).is_relative_to(venv)  # the installed copy, not this checkout
    assert present == "[]"


def test_lakeops_inspect_reports_a_local_delta_table(venv: Path, events: Path, tmp_path: Path) -> None:
    shown = _run(venv, "lakeops", "inspect", str(events), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "live files" in shown.stdout and str(events) in shown.stdout
    as_json = _run(venv, "lakeops", "inspect", str(events), "--json", cwd=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert (report["format"], report["version"], report["live_files"], report["rows"]) == ("delta", 4, 5, 5)


def test_lakeops_compact_rewrites_a_local_delta_table_on_the_driver(venv: Path, events: Path, tmp_path: Path) -> None:
    run = _run(venv, "lakeops", "compact", str(events), "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "on the driver" in run.stderr
    report = json.loads(run.stdout)
    assert (report["files_removed"], report["files_added"], report["committed_version"]) == (5, 1, 5)
    compacted = DeltaTable(str(events))
    assert len(compacted.file_uris()) == 1
    assert sorted(compacted.to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2, 3, 4]


def test_what_needs_an_extra_names_it(venv: Path, events: Path, tmp_path: Path) -> None:
    on_spark = _run(venv, "lakeops", "compact", str(events), "--master", "local[1]", cwd=tmp_path)
    assert on_spark.returncode == 2
    assert on_spark.stderr.strip().endswith(
        "error: MissingExtra: Spark (master local[1]) needs the extra 'spark' of lakeops, which is not installed "
        "(No module named 'pyspark'): pip install 'lakeops[spark]'"
    ), on_spark.stderr
    assert len(DeltaTable(str(events)).file_uris()) == 5  # nothing ran

    dagster = _run(venv, "python", "-c", "import orchestration.definitions", cwd=tmp_path)
    assert dagster.returncode == 1
    assert dagster.stderr.strip().splitlines()[-1] == (
        "spark_jobs.extras.MissingExtra: loading the Dagster definitions of lakeops (orchestration) needs the extra "
        "'dagster' of lakeops, which is not installed (No module named 'dagster'): pip install 'lakeops[dagster]'"
    )
