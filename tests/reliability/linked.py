"""Tables whose directories are symlinks out of them, and the invariant every command must keep (issue 19).

A :class:`Kind` builds a small table of one format, names its directories that a hostile or careless
user can replace by a link (top-level ones, a partition, lakeops's trash and audit folders) and the
commands that delete, move or write. :func:`link_out` moves such a directory elsewhere and leaves a
link; :func:`tree` snapshots a directory's files and bytes. The invariant: whatever the command does,
nothing outside the table changes, and the table reads the same afterwards (its live files survive).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from icechunk_repos import build_history, contents
from pyiceberg_tables import PyIcebergTable, rows_of, small_file_table

from lakeops.icechunk.ids import new_id
from lakeops.storage import LocalStorage
from spark_jobs.cli import main as lakeops

OLD = time.time() - 60 * 86400
#: A trash run older than any retention, as ``purge-trash`` looks for them.
RUN_ID = "20200101T000000Z-abcdef"
TRASH, AUDIT = "_lakeops_trash", "_lakeops_audit"


def tree(directory: Path) -> dict[str, bytes]:
    """Every file below ``directory`` (links not followed) and its bytes."""
    found: dict[str, bytes] = {}
    for current, _, files in os.walk(directory):
        for name in files:
            path = Path(current, name)
            found[str(path.relative_to(directory))] = b"<link>" if path.is_symlink() else path.read_bytes()
    return found


def without_audit(files: dict[str, bytes]) -> dict[str, bytes]:
    """The files but the audit records (a refused run still records that it failed)."""
    return {name: data for name, data in files.items() if not name.startswith(f"{AUDIT}/")}


def age(directory: Path) -> None:
    """Make every file below ``directory`` older than any retention."""
    for current, _, files in os.walk(directory):
        for name in files:
            os.utime(Path(current, name), (OLD, OLD), follow_symlinks=False)


def link_out(root: Path, name: str, outside: Path) -> Path:
    """Move ``root/name`` to ``outside/name`` (or create that empty) and leave a symlink in its place.

    Returns the link's target. A trash moved out gets a stray run-id-shaped directory, the shape
    ``purge-trash`` deletes."""
    source, target = root / name, outside / name.replace("/", "_")
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.exists():
        shutil.move(source, target)
    else:
        target.mkdir()
    if name == TRASH:
        (target / RUN_ID).mkdir(exist_ok=True)
        (target / RUN_ID / "precious.txt").write_bytes(b"not the table's")
    source.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, source)
    return target


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    """Exit status and stderr of ``lakeops ARGV --json``."""
    code = lakeops([*argv, "--json"])
    return code, capsys.readouterr().err


@dataclass(frozen=True)
class Table:
    """One built table: its root, how the command line names it, and how a peer reads it."""

    root: Path
    target: list[str]
    read: Callable[[], Any]


@dataclass(frozen=True)
class Kind:
    """A table format as these tests use it."""

    name: str
    build: Callable[[Path], Table]
    #: Directories (relative to the root) a link may replace.
    dirs: tuple[str, ...]
    #: Commands that delete, move or write (arguments after the table).
    commands: tuple[tuple[str, ...], ...]


def _delta(path: Path) -> Table:
    root = path / "t"
    for version in range(4):
        data = pa.table({"id": pa.array([version, version + 100], pa.int64()), "p": ["a", "b"]})
        write_deltalake(str(root), data, mode="append", partition_by=["p"])
    DeltaTable(str(root)).create_checkpoint()
    (root / "p=a" / "stray.parquet").write_bytes(b"an orphan")  # something for orphans to take
    age(root)
    return Table(root, [str(root)], lambda: DeltaTable(str(root)).to_pyarrow_table().sort_by("id").to_pylist())


def _iceberg(path: Path) -> Table:
    table: PyIcebergTable = small_file_table(path, "identity", appends=3, rows=6)
    root = Path(table.location)
    (root / "data" / "stray.parquet").write_bytes(b"an orphan")
    age(root)
    return Table(
        root,
        [table.identifier, "--catalog-uri", table.catalog_uri],
        lambda: rows_of(table.catalog.load_table(table.identifier).scan().to_arrow()),
    )


def _icechunk(path: Path) -> Table:
    root = path / "repo"
    build_history(LocalStorage(), str(root), commits=4)
    (root / "chunks" / new_id()).write_bytes(b"an orphan")  # named by no snapshot
    age(root)
    return Table(root, [str(root)], lambda: contents(LocalStorage(), str(root)))


_ORPHANS = ("orphans", "--older-than", "0s", "--force-short-retention")
#: What every format's table goes through: orphan removal plain and quarantined, and the trash purge.
_CLEANUP = (_ORPHANS, (*_ORPHANS, "--quarantine"), ("purge-trash", "--older-than", "0s"))
_COMPACT = ("compact", "--min-input-files", "2")
KINDS = {
    "delta": Kind(
        "delta",
        _delta,
        ("_delta_log", "p=a", "p=b", TRASH, AUDIT),
        (_COMPACT, ("checkpoint", "--force"), ("expire", "--older-than", "1d", "--force"), *_CLEANUP),
    ),
    "iceberg": Kind(
        "iceberg",
        _iceberg,
        ("metadata", "data", "data/category=a", TRASH, AUDIT),
        (
            _COMPACT,
            ("checkpoint", "--rewrite-all"),
            ("expire", "--older-than", "0s", "--force", "--retain-last", "1"),
            *_CLEANUP,
        ),
    ),
    "icechunk": Kind(
        "icechunk",
        _icechunk,
        ("refs", "snapshots", "manifests", "chunks", TRASH, AUDIT),
        (("compact",), ("expire", "--older-than", "0s", "--force"), *_CLEANUP),
    ),
}
