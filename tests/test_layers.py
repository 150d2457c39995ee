"""The import contracts in ``pyproject.toml`` (``[tool.importlinter]``, run by ``make lint``) hold on this
tree, and each one fails when the layer it guards is broken on purpose in a copy of the tree.

Also: no module imports another module's private name (``from m import _x`` or ``m._x``), which
import-linter does not see.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lakeops", "spark_jobs", "orchestration")
#: ``lint-imports``, run by this interpreter.
LINT_IMPORTS = [sys.executable, "-c", "import sys, importlinter.cli as c; sys.exit(c.lint_imports_command())"]

FLOORS = "Three floors: orchestration (Dagster, Airflow) > spark_jobs (Spark) > lakeops (the formats' rules)"
PURE = "lakeops imports neither Spark nor an orchestrator (Dagster, Airflow)"
SPARK_JOBS = "spark_jobs runs without an orchestrator (Dagster, Airflow)"
AIRFLOW_NO_DAGSTER = "The Airflow DAGs (orchestration.airflow) never import Dagster"
DAGSTER_NO_AIRFLOW = "The Dagster modules of orchestration never import Airflow"
NEUTRAL = "The orchestrator-neutral modules of orchestration import neither Dagster nor Airflow"
LAKEOPS_LAYERS = "Inside lakeops: operations > formats > change feed > Delta > format-neutral helpers"
FORMATS = "The formats are independent, except that Iceberg's and Icechunk's change feeds are Delta change tables"
ACYCLIC = "No import cycles between the modules of any package"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` run in ``root`` on the packages there (not the installed ones)."""
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "400"}  # one contract a line
    return subprocess.run([*LINT_IMPORTS, "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300)


def broken(output: str) -> set[str]:
    """The names of the contracts reported broken (``<name> BROKEN``, maybe ``(N ignored imports)`` after)."""
    return {match[1] for match in re.finditer(r"^(.+?) BROKEN(?: \(.*\))?$", output, re.MULTILINE)}


def test_the_contracts_hold_on_this_tree() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
    contracts = (FLOORS, PURE, SPARK_JOBS, AIRFLOW_NO_DAGSTER, DAGSTER_NO_AIRFLOW, NEUTRAL, LAKEOPS_LAYERS, FORMATS)
    for name in (*contracts, ACYCLIC):
        assert re.search(rf"^{re.escape(name)} KEPT", result.stdout, re.MULTILINE), name


def test_every_lakeops_module_has_a_floor() -> None:
    """A top-level module of ``lakeops`` left out of the floors contract may import anything in it."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = (contract["layers"] for contract in contracts if contract["id"] == "lakeops-layers")
    floored = {name.strip() for layer in layers for name in re.split(r"[|:]", layer)}
    modules = {
        f"lakeops.{path.stem if path.is_file() else path.name}"
        for path in (ROOT / "lakeops").iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py") or (path / "__init__.py").exists()
    }
    assert sorted(modules - floored) == []


def _contract(contract_id: str) -> dict[str, list[str]]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = (contract for contract in contracts if contract["id"] == contract_id)
    return contract


def test_every_orchestration_module_is_dagster_airflow_or_neutral() -> None:
    """A new module of ``orchestration`` left out of both lists could import either orchestrator: each is
    a Dagster module (no Airflow), a neutral one (neither), or inside ``orchestration.airflow`` (no Dagster)."""
    modules = {
        f"orchestration.{path.stem}"
        for path in (ROOT / "orchestration").glob("*.py")
        if path.name not in ("__init__.py", "__main__.py")
    }
    listed = set(_contract("dagster-no-airflow")["source_modules"]) | set(
        _contract("neutral-orchestration")["source_modules"]
    )
    assert sorted(modules ^ listed) == []
    assert _contract("airflow-no-dagster")["source_modules"] == ["orchestration.airflow"]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the three packages and the contracts, to break."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def append(path: Path, code: str) -> None:
    path.write_text(path.read_text() + "\n\n" + code + "\n")


# (what is broken, module to add it to, code added, contracts it breaks: an upward import is a cycle too)
VIOLATIONS = [
    (
        "a format imports the operations above it",
        "lakeops/delta/maintenance/orphans.py",
        "import lakeops.ops.cdc",
        {LAKEOPS_LAYERS},
    ),
    ("a neutral helper imports a format", "lakeops/units.py", "from lakeops.iceberg import metadata", {LAKEOPS_LAYERS}),
    (
        "Delta imports the change feed above it",
        "lakeops/delta/cdf.py",
        "import lakeops.changefeed.table",
        {LAKEOPS_LAYERS, FORMATS},
    ),
    ("Iceberg imports Icechunk", "lakeops/iceberg/scan.py", "import lakeops.icechunk.refs", {LAKEOPS_LAYERS, FORMATS}),
    ("Iceberg's scan imports Delta", "lakeops/iceberg/scan.py", "import lakeops.delta.schema", {FORMATS}),
    ("lakeops imports pyspark", "lakeops/storage/local.py", "import pyspark.sql", {PURE}),
    ("lakeops imports dagster, inside a function", "lakeops/registry.py", "def f():\n    import dagster", {PURE}),
    ("spark_jobs imports orchestration", "spark_jobs/compact.py", "import orchestration.assets", {FLOORS, SPARK_JOBS}),
    ("lakeops imports airflow", "lakeops/units.py", "def f():\n    import airflow", {PURE}),
    ("spark_jobs imports airflow", "spark_jobs/compact.py", "import airflow", {SPARK_JOBS}),
    (
        "the Airflow DAGs import a Dagster module",
        "orchestration/airflow/operator.py",
        "import orchestration.resources",
        {AIRFLOW_NO_DAGSTER},
    ),
    ("a Dagster module imports airflow", "orchestration/sensors.py", "import airflow.sdk", {DAGSTER_NO_AIRFLOW}),
    ("a neutral module imports dagster", "orchestration/operations.py", "import dagster", {NEUTRAL}),
    (
        "a cycle behind a function-level import",
        "lakeops/iceberg/types.py",
        "def f():\n    from lakeops.iceberg import manifest",
        {ACYCLIC},
    ),
]


@pytest.mark.parametrize(("what", "module", "code", "contracts"), VIOLATIONS, ids=[v[0] for v in VIOLATIONS])
def test_a_deliberate_violation_breaks_its_contract(
    tree: Path, what: str, module: str, code: str, contracts: set[str]
) -> None:
    append(tree / module, code)
    result = lint_imports(tree)
    assert result.returncode != 0, f"{what}: lint-imports passed\n{result.stdout}"
    assert contracts <= broken(result.stdout), result.stdout


# --- private names ---------------------------------------------------------------------------------


def _first_party(module: str) -> bool:
    return module.split(".")[0] in PACKAGES


def private_uses(path: Path, source: str) -> Iterator[str]:
    """``from m import _x`` and ``m._x`` (``m`` a module of this project imported by name) in one file."""
    tree = ast.parse(source)
    modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and _first_party(node.module):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    yield f"{path}:{node.lineno}: from {node.module} import {alias.name}"
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _first_party(alias.name):
                    modules[alias.asname or alias.name.split(".")[0]] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            yield f"{path}:{node.lineno}: {node.value.id}.{node.attr}"


def test_no_module_imports_another_modules_private_names() -> None:
    found = [
        use
        for package in (*PACKAGES, "bench")
        for path in sorted((ROOT / package).rglob("*.py"))
        for use in private_uses(path.relative_to(ROOT), path.read_text())
    ]
    assert not found, "private names used across modules (make them public):\n" + "\n".join(found)


def test_the_private_name_check_sees_both_forms() -> None:
    source = "from lakeops.delta.actions import _Action\nfrom lakeops.icechunk import refs\nrefs._parse(1)\n"
    assert list(private_uses(Path("x.py"), source)) == [
        "x.py:1: from lakeops.delta.actions import _Action",
        "x.py:3: refs._parse",
    ]
    assert list(private_uses(Path("x.py"), "from lakeops.units import parse_size\nimport os\nos._exit\n")) == []
