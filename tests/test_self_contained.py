"""The repository is self-contained: a fresh clone anywhere runs its tests and demo.

No tracked file may point outside the checkout (an absolute path of one machine, or a sibling
``shared`` directory of the original workplace), and no runtime database may be tracked (Dagster
creates its SQLite storage beside the ``dagster.yaml`` it opens). Files not yet added but not ignored
are checked too, so a new file is caught before its commit.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from lakeops_testdata import TESTDATA

ROOT = Path(__file__).resolve().parents[1]

# Spelled in pieces so that this file does not match itself.
_WORKPLACE = "/" + "work" + "/"
_SIBLING = ".." + "/" + "shared"
#: An absolute path under the workplace root: not preceded by anything that makes it part of a longer
#: path or URL (``s3://bucket/work/`` and ``docs/work/`` are fine).
_ABSOLUTE = re.compile(rb"(?<![\w.:/~-])" + re.escape(_WORKPLACE.encode()))
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _checkout_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    files = [ROOT / name for name in listed.decode("utf-8", "surrogateescape").split("\0") if name]
    return [f for f in files if f.is_file() and not f.is_symlink()]


def test_no_file_names_a_machine_path_or_a_sibling_shared_directory() -> None:
    offenders = []
    for path in _checkout_files():
        data = path.read_bytes()
        for number, line in enumerate(data.splitlines(), start=1):
            if _ABSOLUTE.search(line) or _SIBLING.encode() in line:
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.decode(errors='replace').strip()[:120]}")
    assert not offenders, "paths outside the checkout:\n" + "\n".join(offenders)


def test_no_runtime_database_is_tracked() -> None:
    databases = []
    for path in _checkout_files():
        with path.open("rb") as f:
            if f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC:
                databases.append(str(path.relative_to(ROOT)))
    assert not databases, f"SQLite databases in the checkout (runtime state, create them instead): {databases}"


def test_the_fixtures_are_in_the_checkout_with_their_provenance() -> None:
    assert TESTDATA == ROOT / "tests" / "data"
    provenance = (TESTDATA / "PROVENANCE.md").read_text()
    for source in sorted(p.name for p in TESTDATA.iterdir() if p.is_dir()):
        assert f"`{source}/" in provenance, f"tests/data/{source} has no provenance"


def test_no_test_wrote_into_the_fixtures() -> None:
    """The fixtures live in the checkout, writable: a test that runs an operation on one in place (not
    on a copy) changes them, or leaves an audit record, a trash or a staging file in them."""
    _checkout_files()  # skips outside a git checkout
    status = subprocess.run(
        ["git", "status", "--porcelain", "-z", "--untracked-files=all", "--", "tests/data"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8", "surrogateescape")
    entries = [entry for entry in status.split("\0") if entry]
    changed = [entry for entry in entries if entry[1] in "MD"]  # changed in the work tree, not staged
    leftovers = [entry for entry in entries if entry.startswith("??") and re.search(r"_lakeops_|\.lakeops-tmp", entry)]
    assert not changed and not leftovers, f"tests/data changed by a test (copy fixtures first): {changed + leftovers}"


def test_the_pattern_finds_what_it_must_and_only_that() -> None:
    assert _ABSOLUTE.search(f'Path("{_WORKPLACE}shared/testdata")'.encode())
    assert _ABSOLUTE.search(f"see {_WORKPLACE}main".encode())
    assert not _ABSOLUTE.search(b"s3://bucket/work/t")
    assert not _ABSOLUTE.search(b"docs/work/x")
