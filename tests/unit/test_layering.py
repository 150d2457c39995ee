"""The layers hold: ``lakeops`` imports and passes its unit tests with pyspark and the orchestrators
absent. ``make test`` runs ``tests/unit`` with them blocked (:mod:`absent_modules`); these tests check
the block itself, and that every ``lakeops`` module and every unit test module loads under it."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from pathlib import Path

from absent_modules import ENV

import lakeops

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(lakeops.__path__, prefix="lakeops."))


def _blocked(*args: str) -> subprocess.CompletedProcess[str]:
    """``python args`` with the heavy layers blocked (as ``make test`` runs the unit tests)."""
    env = {**os.environ, ENV: "1"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env)


_CONFTEST = "import sys; sys.path.insert(0, 'tests'); import conftest\n"


def test_the_block_refuses_each_heavy_layer() -> None:
    for name in ("pyspark.sql", "py4j", "dagster", "airflow"):
        result = _blocked("-c", _CONFTEST + f"import {name}")
        assert result.returncode == 1
        top = name.split(".")[0]
        assert f"ModuleNotFoundError: No module named {top!r} (absent in this test run" in result.stderr


def test_every_lakeops_module_imports_without_spark_or_dagster() -> None:
    result = _blocked("-c", _CONFTEST + "\n".join(f"import {name}" for name in _modules()))
    assert result.returncode == 0, result.stderr
    assert len(_modules()) > 20


def test_every_unit_test_module_loads_without_spark_or_dagster() -> None:
    """Collection imports every unit test module and conftest; running them blocked is ``make test``'s."""
    result = _blocked("-m", "pytest", "tests/unit", "--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " tests collected" in result.stdout
