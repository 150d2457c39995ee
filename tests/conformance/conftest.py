"""Real Delta tables from other writers (``tests/data/delta-rs`` and ``tests/data/delta-kernel``).

The fixtures are read-only. Plain tables are read in place; the ``.tar.zst`` golden tables
are unpacked once per session into a temporary directory. A test that writes or deletes must first
take its own copy with :func:`copy_table`.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from lakeops_testdata import TESTDATA

SOURCES = ("delta-rs", "delta-kernel", "modern/delta")
_ARCHIVE = ".tar.zst"


@dataclass(frozen=True)
class FixtureTable:
    """One test table: ``root`` holds ``_delta_log``; ``expected`` is the golden data directory, if any."""

    name: str
    root: Path
    expected: Path | None


def discover_table_names() -> list[str]:
    """``<source>/<table>`` for every plain table directory and every archive under the sources."""
    names = []
    for source in SOURCES:
        base = TESTDATA / source
        if not base.is_dir():
            continue
        for entry in sorted(base.iterdir()):
            if entry.is_dir() and (entry / "_delta_log").is_dir():
                names.append(f"{source}/{entry.name}")
            elif entry.name.endswith(_ARCHIVE):
                names.append(f"{source}/{entry.name[: -len(_ARCHIVE)]}")
    return names


@pytest.fixture(scope="session")
def delta_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FixtureTable]:
    """Every discovered table by name, archives unpacked (once) under a session temporary directory."""
    if not TESTDATA.is_dir():
        pytest.fail(f"testdata directory {TESTDATA} is missing (tests/data of the checkout)")
    unpack_dir = tmp_path_factory.mktemp("delta-testdata")
    tables: dict[str, FixtureTable] = {}
    for name in discover_table_names():
        source, table = name.split("/", 1)
        plain = TESTDATA / source / table
        if plain.is_dir():
            tables[name] = FixtureTable(name, plain, None)
            continue
        archive = TESTDATA / source / f"{table}{_ARCHIVE}"
        subprocess.run(["tar", "--zstd", "-xf", str(archive), "-C", str(unpack_dir)], check=True)
        unpacked = unpack_dir / table
        root = unpacked / "delta"
        assert (root / "_delta_log").is_dir(), f"{archive} did not unpack to {table}/delta/_delta_log"
        expected = unpacked / "expected"
        tables[name] = FixtureTable(name, root, expected if expected.is_dir() else None)
    return tables


@pytest.fixture
def copy_table(delta_tables: dict[str, FixtureTable], tmp_path: Path) -> Callable[[str], Path]:
    """``copy_table(name)``: a private, writable copy of a table's root under ``tmp_path``."""

    def copy(name: str) -> Path:
        target = tmp_path / name.replace("/", "__")
        shutil.copytree(delta_tables[name].root, target)
        return target

    return copy
