"""Makes the heavy layers unimportable, exactly as on a machine without them: ``make test`` runs the
unit tests with :data:`ENV` set, so ``lakeops`` is shown to pass them with no Spark, Dagster or
Airflow installed (the root ``conftest.py`` calls :func:`install` before any test module loads)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

ENV = "LAKEOPS_TEST_WITHOUT_SPARK_AND_ORCHESTRATORS"
ABSENT = ("pyspark", "py4j", "dagster", "airflow")


class _Absent:
    """A finder that refuses every module of the packages ``names``, ahead of the real finders."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r} (absent in this test run: tests/absent_modules.py)")
        return None


def install(names: Sequence[str] = ABSENT) -> None:
    """Refuse the top-level packages ``names`` (the heavy layers unless told) from now on; one already
    imported would defeat the point, so that fails."""
    loaded = sorted(name for name in sys.modules if name.split(".")[0] in names)
    if loaded:
        raise RuntimeError(f"{', '.join(loaded)} imported before the blocker was installed")
    if not any(isinstance(finder, _Absent) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Absent(names))
