"""File names that are not UTF-8 in tables that keep their live files as Arrow rows (issue 34): a Delta
table with a checkpoint (its adds are a checkpoint's rows), and an Iceberg table (its data files are
manifest columns). ``orphans`` on the first ended in ``UnicodeEncodeError``: the listed name was encoded
to look it up among the rows.

Each example scatters untracked files whose names hold bytes UTF-8 cannot decode (lone continuation
bytes, truncated sequences, overlong forms, encoded surrogates, beside valid UTF-8) over the table, in
plain, partition-like, hidden and log directories, old or new, the table's own directory name possibly
undecodable too; then runs ``lakeops orphans`` (dry run, deleting, into the trash and restored) or
``inspect``. Every outcome is a report or a :class:`~lakeops.errors.LakeopsError` naming the table or a
file, never a traceback; a run deletes exactly the old untracked files the format's rules allow, and the
table reads back, every row, through delta-rs or PyIceberg. Budget: ``LAKEOPS_FUZZ_EXAMPLES``
(:mod:`hostile`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import assume, given
from hypothesis import strategies as st
from pyiceberg_tables import PyIcebergTable, small_file_table
from reliability.hostile import FUZZ

from lakeops import quarantine
from lakeops.errors import LakeopsError
from lakeops.jsontext import printable
from spark_jobs.cli import main as lakeops

#: Byte sequences UTF-8 cannot decode.
UNDECODABLE = [b"\xff", b"\xfe", b"\x80", b"\xbf", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xc3", b"\xe2\x82"]
#: Bytes a name may hold besides them: ASCII, valid UTF-8, characters Delta paths percent-encode.
ORDINARY = [b"a", b"Z", b"0", b"-", b"_", b".", b" ", b"%", b"=", b"\xc3\xa9", b"\xf0\x9f\x98\x80"]
OLD = 0.0  # 1970: past every retention
DELTA_IDS = [0, 1, 2, 3]


@st.composite
def undecodable(draw: st.DrawFn) -> bytes:
    """A file or directory name that is not UTF-8."""
    parts = draw(st.lists(st.sampled_from(UNDECODABLE + ORDINARY), min_size=1, max_size=6))
    name = b"".join([*parts, draw(st.sampled_from(UNDECODABLE))] if draw(st.booleans()) else parts)
    assume(name not in (b".", b".."))
    return name if not _utf8(name) else name + draw(st.sampled_from(UNDECODABLE))


@st.composite
def odd_files(draw: st.DrawFn, top_level: list[bytes]) -> list[tuple[bytes, bool]]:
    """1-4 relative paths (bytes) of untracked files, each with whether it is old."""
    files = []
    for _ in range(draw(st.integers(1, 4))):
        depth = draw(st.integers(0, 2))
        folders = [
            draw(st.sampled_from([b"sub", b"p=" + draw(undecodable()), draw(undecodable()), b"_tmp", b".hidden"]))
            for _ in range(depth)
        ]
        if folders and draw(st.booleans()):
            folders[0] = draw(st.sampled_from(top_level))
        name = draw(undecodable())
        if draw(st.booleans()):
            name = draw(st.sampled_from([b"_", b".", b""])) + name + draw(st.sampled_from([b".parquet", b".json", b""]))
        files.append((b"/".join([*folders, name]), draw(st.booleans())))
    paths = dict(files)  # one age per path
    assume(not any(other.startswith(path + b"/") for path in paths for other in paths))  # a file, not a folder
    return list(paths.items())


def _place(root: bytes, files: list[tuple[bytes, bool]]) -> list[bytes]:
    """The files under ``root``, one byte each, aged as drawn; returns their absolute paths."""
    paths = []
    for relative, old in files:
        path = root + b"/" + relative
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(b"x")
        if old:
            os.utime(path, (OLD, OLD))
        paths.append(path)
    return paths


def _tree(root: bytes) -> set[bytes]:
    """Every file under ``root`` but lakeops' own trash and audit folders."""
    reserved = {quarantine.TRASH_DIR.encode(), quarantine.AUDIT_DIR.encode()}
    found = set()
    for folder, dirs, names in os.walk(root):
        if folder == root:
            dirs[:] = [d for d in dirs if d not in reserved]
        found.update(os.path.join(folder, name) for name in names)
    return found


def _error_names(err: str, *names: str) -> bool:
    """Whether ``err`` is one LakeopsError's message naming one of ``names``."""
    head, _, message = err.partition(": ")
    classes = {c.__name__ for c in _subclasses(LakeopsError)}
    return head.strip().removeprefix("error: ") in classes and any(printable(n) in message for n in names)


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _run(capsys: pytest.CaptureFixture[str], argv: list[str], names: list[str]) -> dict[str, Any] | None:
    """``lakeops ARGV --json``'s report, or None after a LakeopsError naming one of ``names``."""
    code = lakeops([*argv, "--json"])
    out, err = capsys.readouterr()
    if code == 0:
        report: dict[str, Any] = json.loads(out)
        return report
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code in (1, 2) and lines and _error_names(" ".join(err.split()), *names), err
    return None


OPERATIONS = st.sampled_from(["dry run", "delete", "quarantine", "inspect"])


def _orphans_argv(operation: str, listing: list[str]) -> list[str]:
    return {"dry run": ["--dry-run"], "delete": [], "quarantine": ["--quarantine"]}[operation] + listing


def _check_run(
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    root: bytes,
    operation: str,
    removable: set[bytes],
    listing: list[str],
) -> None:
    """Run ``operation`` and check what it did to the files under ``root``: ``removable`` are the files
    orphan removal must delete (every other file stays)."""
    table = os.fsdecode(root)
    before = _tree(root)
    if operation == "inspect":
        report = _run(capsys, ["inspect", *command], [table])
        assert _tree(root) == before
        assert report is None or report["table"]
        return
    argv = ["orphans", *command, *_orphans_argv(operation, listing)]
    report = _run(capsys, argv, [table, *(os.fsdecode(p) for p in before)])
    after = _tree(root)
    if report is None or operation == "dry run":
        assert after == before  # a refusal or a dry run deletes nothing
        if report is not None:
            assert {os.fsencode(p) for p in report["paths"]} == removable
        return
    assert before - after == removable, (before - after) ^ removable
    if operation == "quarantine" and removable:
        entries = quarantine.read_manifest(table, report["quarantine_run"])
        assert {root + b"/" + os.fsencode(e.path) for e in entries} == removable
        assert _run(capsys, ["restore", table, report["quarantine_run"]], [table]) is not None
        assert _tree(root) == before  # every file back where it was


# --- Delta: a checkpoint's rows --------------------------------------------------------------------


@pytest.fixture(scope="module")
def delta_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three delta-rs appends, a checkpoint at version 2 (its adds are Arrow rows), one more append."""
    location = tmp_path_factory.mktemp("delta") / "t"
    for i in DELTA_IDS[:3]:
        write_deltalake(str(location), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    DeltaTable(str(location)).create_checkpoint()
    write_deltalake(str(location), pa.table({"id": pa.array([DELTA_IDS[3]], pa.int64())}), mode="append")
    for path in location.rglob("*"):
        os.utime(path, (OLD, OLD))  # the live files are old too: only the log keeps them
    return location


def _utf8(name: bytes) -> bool:
    try:
        name.decode()
    except UnicodeDecodeError:
        return False
    return True


def _vacuumable(relative: bytes) -> bool:
    """What Delta's VACUUM looks at: nothing hidden below the root (``_`` or ``.``), but the top-level
    ``_change_data`` directory (the table is not partitioned)."""
    parts = relative.split(b"/")
    return not any(
        part.startswith((b"_", b".")) and not (depth == 0 and len(parts) > 1 and part == b"_change_data")
        for depth, part in enumerate(parts)
    )


@FUZZ
@given(data=st.data())
def test_delta_checkpoint_table_with_names_that_are_not_utf8(
    data: st.DataObject,
    delta_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = os.fsencode(tmp_path_factory.mktemp("example"))
    root = home + b"/" + (data.draw(undecodable()) if data.draw(st.booleans()) else b"t")
    shutil.copytree(delta_template, os.fsdecode(root))
    files = data.draw(odd_files([b"_delta_log", b"_change_data", b"_tmp"]))
    paths = _place(root, files)
    removable = {p for p, (relative, old) in zip(paths, files, strict=True) if old and _vacuumable(relative)}
    operation = data.draw(OPERATIONS)
    listing = data.draw(st.sampled_from([[], ["--listing-threshold", "0"]]))

    _check_run(capsys, [os.fsdecode(root)], root, operation, removable, listing)

    for relative, _ in files:  # delta-rs refuses to list a log holding a name that is not UTF-8: ours go
        first, _, below = relative.removeprefix(b"_delta_log/").partition(b"/")
        if relative.startswith(b"_delta_log/"):
            added = root + b"/_delta_log/" + first
            shutil.rmtree(added, ignore_errors=True) if below else os.unlink(added)
    os.rename(root, home + b"/peer")  # delta-rs opens only UTF-8 locations
    rows = DeltaTable(os.fsdecode(home + b"/peer")).to_pyarrow_table().column("id").to_pylist()
    assert sorted(rows) == DELTA_IDS


# --- Iceberg: manifest columns ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def iceberg_table(tmp_path_factory: pytest.TempPathFactory) -> PyIcebergTable:
    """Three PyIceberg appends of five rows, partitioned by day (data files one directory deeper), its
    files aged past the retention: only the metadata keeps them."""
    table = small_file_table(tmp_path_factory.mktemp("iceberg"), "day", appends=3, rows=5)
    for path in Path(table.location).rglob("*"):
        os.utime(path, (OLD, OLD))
    return table


@FUZZ
@given(data=st.data())
def test_iceberg_table_with_names_that_are_not_utf8(
    data: st.DataObject, iceberg_table: PyIcebergTable, capsys: pytest.CaptureFixture[str]
) -> None:
    root = os.fsencode(iceberg_table.location)
    expected = sorted(iceberg_table.table.scan().to_arrow().column("id").to_pylist())
    folders = [root, root + b"/data", root + b"/metadata"]  # where an example adds files or folders
    present = {folder: set(os.listdir(folder)) for folder in folders}
    files = data.draw(odd_files([b"data", b"metadata"]))
    paths = _place(root, files)
    try:
        removable = {p for p, (_, old) in zip(paths, files, strict=True) if old}  # no hidden rule
        command = [iceberg_table.identifier, "--catalog-uri", iceberg_table.catalog_uri]
        operation = data.draw(OPERATIONS)
        listing = data.draw(st.sampled_from([[], ["--listing-threshold", "0"]]))

        _check_run(capsys, command, root, operation, removable, listing)

        assert sorted(iceberg_table.reload().scan().to_arrow().column("id").to_pylist()) == expected
    finally:  # the table is the module's: leave it as it was
        for folder in folders:
            for name in set(os.listdir(folder)) - present[folder]:
                added = folder + b"/" + name
                shutil.rmtree(added) if os.path.isdir(added) and not os.path.islink(added) else os.unlink(added)
