"""Table-property names are written once, in each format's ``properties`` module: no other module of
``lakeops``, ``spark_jobs``, ``orchestration`` or ``bench`` spells one as a string literal, so a
misspelt key cannot hide in one of them."""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType

import pytest

from lakeops.delta import properties as delta_properties
from lakeops.iceberg import properties as iceberg_properties

ROOT = Path(__file__).resolve().parents[2]
#: The packages whose code must use the constants.
CHECKED = ("lakeops", "spark_jobs", "orchestration", "bench")


def names(module: ModuleType) -> dict[str, str]:
    """Property value -> constant name, for every constant the module defines."""
    return {value: name for name, value in vars(module).items() if name.isupper() and isinstance(value, str)}


def literals(path: Path) -> list[tuple[int, str]]:
    """Every string constant in the module at ``path`` (docstrings too), with its line."""
    return [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


@pytest.mark.parametrize("module", [delta_properties, iceberg_properties], ids=["delta", "iceberg"])
def test_each_property_is_named_once(module: ModuleType) -> None:
    defined = names(module)
    constants = [name for name, value in vars(module).items() if name.isupper() and isinstance(value, str)]
    assert len(defined) == len(constants), "two constants name the same property"
    own = Path(module.__file__ or "")
    spelt = [
        f"{path.relative_to(ROOT)}:{line}: {value!r} (use {module.__name__}.{defined[value]})"
        for package in CHECKED
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != own
        for line, value in literals(path)
        if value in defined
    ]
    assert spelt == []


def test_the_constants_are_the_specs_names() -> None:
    """A few names as the specifications spell them (a renamed constant must keep its value)."""
    assert delta_properties.LOG_RETENTION_DURATION == "delta.logRetentionDuration"
    assert delta_properties.COLUMN_MAPPING_MODE == "delta.columnMapping.mode"
    assert iceberg_properties.WRITE_TARGET_FILE_SIZE_BYTES == "write.target-file-size-bytes"
    assert iceberg_properties.MAX_SNAPSHOT_AGE_MS == "history.expire.max-snapshot-age-ms"
