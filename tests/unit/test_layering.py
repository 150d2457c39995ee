"""The layers hold: ``lakeops`` imports and passes its unit tests with pyspark and dagster absent."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import lakeops

ROOT = Path(__file__).resolve().parents[2]

# Makes ``import pyspark`` / ``import dagster`` fail exactly as on a machine without them.
_BLOCKER = """
import sys
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyspark", "dagster", "py4j"):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the layering test)")
        return None
sys.meta_path.insert(0, _Absent())
"""


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(lakeops.__path__, prefix="lakeops."))


def test_every_lakeops_module_imports_without_spark_or_dagster() -> None:
    code = _BLOCKER + "\n".join(f"import {name}" for name in _modules())
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert len(_modules()) > 20


def test_unit_tests_pass_without_spark_or_dagster() -> None:
    code = _BLOCKER + (
        "import pytest\n"
        "sys.exit(pytest.main(['tests/unit', '-q', '-p', 'no:cacheprovider', "
        "'--deselect', 'tests/unit/test_layering.py::test_unit_tests_pass_without_spark_or_dagster']))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout
