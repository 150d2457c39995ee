"""docs/architecture.md stays a map of the code: every path it names exists, and every module of an
operation (the format-neutral dispatch, each format's maintenance, each command) is on it, so a
newcomer finds the code for any operation and format in one hop."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
#: Packages whose every module, in sub-packages too, the map must name.
MAPPED = (
    "lakeops/ops",
    "lakeops/delta/maintenance",
    "lakeops/iceberg/maintenance",
    "lakeops/icechunk/maintenance",
    "lakeops/changefeed",
    "spark_jobs",
    "orchestration/airflow",
)
_PATH = re.compile(r"`((?:lakeops|spark_jobs|orchestration|tests|deploy|dagster_home|docs|bench)/[^`\s]*)`")


def _named() -> set[str]:
    return set(_PATH.findall(DOC.read_text()))


def test_every_path_the_map_names_exists() -> None:
    missing = sorted(
        path
        for path in _named()
        if "<" not in path and not path.startswith("docs/docs/") and not (ROOT / path.rstrip("/")).exists()
    )
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_operation_module_is_on_the_map() -> None:
    named = _named()
    modules = sorted(
        str(path.relative_to(ROOT))
        for package in MAPPED
        for path in (ROOT / package).rglob("*.py")
        if path.name != "__init__.py"
    )
    absent = [module for module in modules if module not in named]
    assert not absent, f"modules missing from docs/architecture.md's tables: {absent}"
