"""Paths that escape the table root (issue 10), through the ``lakeops`` command line.

A hostile or careless writer can name files outside the table: ``../outside.parquet`` and absolute
``file://`` paths in a Delta ``remove``, another bucket, a data file PyIceberg registered from
elsewhere, or a directory inside the table that is a symlink to somewhere else on local disk.
Whatever the log or manifest says, ``orphans`` and ``expire`` never delete such a file: Delta's
VACUUM lists only the root (it does not follow symlinked directories); Iceberg expiry leaves data
that legitimately lives outside the location alone and counts it (``files_outside_location``); a
delete that would pass through a symlink out of the root stops with an error naming the path.
Icechunk garbage collection only ever considers objects listed under the repository's object
directories; a virtual chunk's absolute location is never a candidate. Every test checks that the
outside file still exists. The cases here delete at most one batch, on the driver, or are dry runs
(Icechunk GC deletes on Spark), so no Spark session starts.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake
from icechunk_repos import LINE
from pyiceberg_tables import PyIcebergTable, batch, create_table

from lakeops.icechunk.manifest import VirtualChunkRef
from lakeops.icechunk.writer import ChangeSet, commit, init_repository
from lakeops.storage import LocalStorage
from spark_jobs.cli import main as lakeops

OLD = time.time() - 30 * 86400


def _age(*paths: Path) -> None:
    for path in paths:
        os.utime(path, (OLD, OLD), follow_symlinks=False)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any] | None, str]:
    """Exit status, the JSON report (None on failure) and stderr of ``lakeops ARGV --json``."""
    code = lakeops([*argv, "--json"])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else None), captured.err


def _expire_all_but_current(
    capsys: pytest.CaptureFixture[str], table: PyIcebergTable
) -> tuple[int, dict[str, Any] | None, str]:
    """``lakeops expire`` of every snapshot but the current one, whatever its age."""
    argv = ["expire", table.identifier, "--older-than", "0d", "--retain-last", "1", "--force"]
    return _run(capsys, *argv, "--catalog-uri", table.catalog_uri)


def _parquet(path: Path, ids: list[int]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path)
    return path


def test_delta_vacuum_leaves_tombstones_outside_the_root_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "table"
    write_deltalake(str(root), pa.table({"id": pa.array([1, 2], pa.int64())}))
    outside = _parquet(tmp_path / "outside.parquet", [9])
    elsewhere = _parquet(tmp_path / "elsewhere" / "x.parquet", [9])
    behind_link = _parquet(tmp_path / "linked" / "y.parquet", [9])
    os.symlink(tmp_path / "linked", root / "p")
    _age(outside, elsewhere, behind_link)
    hostile = ["../outside.parquet", f"file://{elsewhere}", "s3://other-bucket/x.parquet", "p/y.parquet"]
    hostile.append("sub/../../outside.parquet")
    removes = [{"remove": {"path": p, "deletionTimestamp": 1000, "dataChange": True}} for p in hostile]
    (root / "_delta_log" / f"{1:020d}.json").write_text("\n".join(json.dumps(r) for r in removes) + "\n")

    code, report, err = _run(capsys, "orphans", str(root), "--older-than", "0d", "--force-short-retention")

    assert code == 0, err
    assert report is not None and report["deleted_files"] == 0 and report["paths"] == [], report
    assert outside.exists() and elsewhere.exists() and behind_link.exists()


def test_iceberg_expiry_keeps_data_registered_from_outside_the_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = create_table(tmp_path)
    external = tmp_path / "external" / "ext.parquet"
    external.parent.mkdir()
    pq.write_table(batch(1000, 5), external)
    table.table.add_files([f"file://{external}"])
    table.reload().delete("id >= 0")  # the external file is now reached only by the older snapshots
    table.reload()

    code, report, err = _expire_all_but_current(capsys, table)

    assert code == 0, err
    assert report is not None and report["files_outside_location"] == 1, report
    assert str(external) not in json.dumps(report.get("paths", []))
    assert external.exists()


def test_iceberg_expiry_refuses_to_delete_through_a_symlink_out_of_the_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = create_table(tmp_path)
    outside_dir = tmp_path / "mounted"
    outside_dir.mkdir()
    os.symlink(outside_dir, Path(table.location) / "data")  # writes go through the link to another place
    table.table.append(batch(0, 5))
    table.reload().delete("id >= 0")
    table.reload()
    written = sorted(outside_dir.rglob("*.parquet"))
    assert written, "PyIceberg wrote no data file through the symlinked directory"

    code, report, err = _expire_all_but_current(capsys, table)

    assert code != 0 and report is None
    assert "outside" in err and any(p.name in err for p in written), err
    assert all(p.exists() for p in written)


def test_icechunk_gc_never_plans_virtual_chunks_or_objects_behind_a_symlink(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    storage = LocalStorage()
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"0123456789abcdef")
    init_repository(storage, str(root))
    virtual = ChangeSet().add_group("/").add_array("/line", LINE)
    virtual.set_virtual_chunk("/line", (0,), VirtualChunkRef(f"file://{outside}", 0, 4))
    virtual.set_virtual_chunk("/line", (1,), VirtualChunkRef(f"file://{root}/../outside.bin", 4, 4))
    commit(storage, str(root), virtual, message="virtual chunks outside the repository")
    replaced = ChangeSet().set_chunk("/line", (0,), b"\x01").set_chunk("/line", (1,), b"\x02")
    commit(
        storage, str(root), replaced, message="the virtual chunks are replaced: no snapshot but the old reaches them"
    )
    *older, _tip = sorted((root / "refs" / "branch.main").iterdir(), reverse=True)  # the tip sorts first
    for branch_file in older:  # what `lakeops expire` does: only the tip names a snapshot now
        branch_file.unlink()
    linked = tmp_path / "linked-chunks"
    linked.mkdir()
    stray = linked / "0000000000000000000Z"  # an id-shaped object no snapshot names, behind a symlink
    stray.write_bytes(b"not ours")
    os.symlink(linked, root / "chunks" / "elsewhere")
    _age(outside, stray, *root.rglob("*"))

    code, report, err = _run(capsys, "orphans", str(root), "--older-than", "0d", "--force-short-retention", "--dry-run")

    assert code == 0, err
    assert report is not None and report["paths"], "the dry run plans nothing: the test would prove nothing"
    planned = json.dumps(report)
    assert "outside.bin" not in planned and "linked-chunks" not in planned and "elsewhere" not in planned
    assert outside.exists() and stray.exists()
