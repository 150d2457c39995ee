"""Partition values and table locations with ``%``, ``%20``, ``%25``, spaces, colons, ``+`` and
non-ASCII text (issue 19, item 1: ``orphans`` deleted live data of such PyIceberg tables).

Each format spells these paths its own way, and lakeops must read them as its peer does. Iceberg
file paths are literal strings: PyIceberg names the directory of ``a%20b`` ``category=a%2520b`` and
records exactly that. Delta ``add.path`` values are URIs decoded once: delta-rs names the same
directory ``s=a%2520b`` and records ``s=a%252520b``. The peer writes each table, lakeops maintains
it, and the peer reads every row back: ``orphans`` (every file aged past the floor) deletes the
planted orphan and nothing referenced, ``compact`` writes into the directories the peer reads,
``expire`` deletes exactly what only expired snapshots reached, ``cdc`` replays to the table and
``inspect`` counts it. Locally and on S3 (moto), where keys are literal in every format.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from iceberg_merge_on_read import add_position_deletes, load
from lakeops_cli import run_json
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg_tables import PyIcebergTable, batch, create_table, replay_changes

from lakeops.iceberg.table import TableRef
from lakeops.storage import StorageOptions, open_storage

#: Partition values a URI decoder gets wrong: an escape (``%20``, ``%25``), a lone ``%``, a space,
#: a colon, a ``+`` (a space in form encoding) and non-ASCII text.
VALUES = ("100%", "a%20b", "x y", "ü", "2024-01-01 10:00:00", "FR:Paris", "a+b", "%25")
#: A table location with the same traits (PyIceberg spells the warehouse into every path).
HOSTILE_DIR = "wh 100%25 ü:x+y"
#: The Delta one has no ``%``: delta-rs reads a table root as a URL and percent-decodes it.
DELTA_HOSTILE_DIR = "t ü:x+y"
OLD = 1_500_000_000.0  # July 2017: older than any floor
MASTER = ("--master", "local[2]")


@pytest.fixture(params=["local", "local-hostile-location", pytest.param("s3", marks=pytest.mark.s3)])
def where(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _storage_args(s3_bucket: Any | None) -> tuple[str, ...]:
    return ("--endpoint-url", s3_bucket.options.endpoint_url) if s3_bucket is not None else ()


class _Files:
    """The files under a table location (local or S3), lakeops's audit records left out."""

    def __init__(self, location: str, options: StorageOptions) -> None:
        self.location, self.storage = location, open_storage(location, options)

    def __call__(self) -> set[str]:
        return {f.path for f in self.storage.list(self.location) if "/_lakeops_audit/" not in f.path}

    def age(self) -> None:
        """Every file past any floor: local mtimes set back; S3 cannot be dated back, so the runs on
        S3 pass ``--older-than 0s`` and only need a second to pass (S3 times have second precision)."""
        if self.location.startswith("s3://"):
            time.sleep(1.1)
            return
        for path in self():
            os.utime(path, (OLD, OLD))


def _floor(s3_bucket: Any | None) -> tuple[str, ...]:
    return ("--older-than", "0s", "--force-short-retention") if s3_bucket is not None else ("--older-than", "3d")


# --- Iceberg ---------------------------------------------------------------------------------------


def _iceberg(tmp_path: Path, where: str, s3_bucket: Any | None, *, values: tuple[str, ...] = VALUES) -> PyIcebergTable:
    """Three PyIceberg appends partitioned by identity on ``category`` (every value of ``values`` and
    null) and a copy-on-write delete (rewritten files, ``DELETED`` entries)."""
    s3 = (s3_bucket.uri, s3_bucket.options.endpoint_url) if s3_bucket is not None else None
    warehouse = HOSTILE_DIR if where != "local" else "warehouse"
    table = create_table(tmp_path, "identity", s3=s3, warehouse_dir=warehouse)
    for i in range(3):
        table.table.append(batch(i * 2 * len(values), 2 * len(values), categories=values))
        table.reload()
    table.table.delete("id < 3")
    table.reload()
    return table


def _physical(path: str) -> str:
    """A path as the metadata records it, as lakeops's listing shows it: literally (no decoding)."""
    return path.removeprefix("file://")


def _reached(table: PyIcebergTable, snapshot_ids: set[int], *, deleted: bool) -> set[str]:
    """Manifest lists, manifests and content files the snapshots reach, as PyIceberg reads them;
    ``deleted``: also the files their ``DELETED`` entries name (which keep nothing alive)."""
    io: PyArrowFileIO = table.table.io  # type: ignore[assignment]
    found: set[str] = set()
    for snapshot in table.reload().snapshots():
        if snapshot.snapshot_id not in snapshot_ids:
            continue
        found.add(_physical(snapshot.manifest_list))
        for manifest in snapshot.manifests(io):
            found.add(_physical(manifest.manifest_path))
            entries = manifest.fetch_manifest_entry(io, discard_deleted=not deleted)
            found |= {_physical(e.data_file.file_path) for e in entries}
    return found


def _every_snapshot(table: PyIcebergTable) -> dict[int, list[dict[str, Any]]]:
    return {s.snapshot_id: table.rows(s.snapshot_id) for s in table.reload().snapshots()}


def _partition_dir(table: PyIcebergTable, value: str) -> str:
    """The directory PyIceberg writes ``value``'s files in (``quote_plus``, as Java's ``URLEncoder``)."""
    return f"{_physical(table.table.location())}/data/category={quote_plus(value, safe='')}"


@pytest.mark.parametrize("value", VALUES)
def test_iceberg_orphans_delete_no_referenced_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    table = _iceberg(tmp_path, "local", None, values=(value, "plain"))
    files = _Files(table.location, StorageOptions())
    orphan = f"{_partition_dir(table, value)}/00000-9-orphan.parquet"
    Path(orphan).write_bytes(b"left behind by a failed writer")
    snapshots, listed = _every_snapshot(table), files()
    files.age()

    report = run_json(capsys, "orphans", table.identifier, "--catalog-uri", table.catalog_uri, "--older-than", "3d")

    assert report["deleted_files"] == 1 and files() == listed - {orphan}
    assert _every_snapshot(table) == snapshots


def test_iceberg_maintenance_keeps_every_row(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest, where: str
) -> None:
    s3_bucket = request.getfixturevalue("s3_bucket") if where == "s3" else None
    options = s3_bucket.options if s3_bucket is not None else StorageOptions()
    table = _iceberg(tmp_path, where, s3_bucket)
    ref = TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier)
    # a position delete file written by lakeops, naming a data file of the "100%" partition
    task = next(t for t in table.table.scan().plan_files() if t.file.partition[0] == "100%")
    add_position_deletes(load(ref, options), [(task.file.file_path, 0)], partition={"category": "100%"})
    argv = (table.identifier, "--catalog-uri", table.catalog_uri, *_storage_args(s3_bucket))
    files = _Files(_physical(table.table.location()), options)
    rows = table.rows()

    inspected = run_json(capsys, "inspect", *argv)
    assert inspected["partitions"] == len(VALUES) + 1
    assert inspected["live_files"] == len(table.table.inspect.data_files())

    out = tmp_path / "changes"
    changes = run_json(capsys, "cdc", *argv, "--from", "0", "--output", str(out), *MASTER)
    assert changes["rows_delete"] > 0
    assert replay_changes([], pa.table(DeltaTable(str(out)).to_pyarrow_table()).to_pylist()) == replay_changes(rows)

    orphan = f"{_partition_dir(table, 'a%20b')}/00000-9-orphan.parquet"
    files.storage.write(orphan, b"left behind by a failed writer")
    snapshots, listed = _every_snapshot(table), files()
    files.age()
    cleaned = run_json(capsys, "orphans", *argv, *_floor(s3_bucket))
    assert cleaned["deleted_files"] == 1 and files() == listed - {orphan}
    assert _every_snapshot(table) == snapshots

    compacted = run_json(capsys, "compact", *argv, "--min-input-files", "2", *MASTER)
    assert compacted["files_added"] > 0 and compacted["rows_removed_by_deletes"] == 1
    assert table.rows() == rows
    new = {_physical(f) for f in table.table.inspect.files().column("file_path").to_pylist()} - listed
    assert new and all(f.rsplit("/", 1)[0] in {_partition_dir(table, v) for v in (*VALUES, "null")} for f in new)

    current = table.reload().current_snapshot()
    assert current is not None
    expired_ids = {s.snapshot_id for s in table.table.snapshots()} - {current.snapshot_id}
    only_expired = _reached(table, expired_ids, deleted=True) - _reached(table, {current.snapshot_id}, deleted=False)
    before = files()
    expired = run_json(capsys, "expire", *argv, "--older-than", "0d", "--retain-last", "1", "--force")
    assert expired["snapshots_expired"] == len(expired_ids)
    assert before - files() == only_expired and table.rows() == rows

    files.age()
    again = run_json(capsys, "orphans", *argv, *_floor(s3_bucket))
    assert again["deleted_files"] == 0 and table.rows() == rows


# --- Delta -----------------------------------------------------------------------------------------


def _delta_rs_options(s3_bucket: Any | None) -> dict[str, str] | None:
    if s3_bucket is None:
        return None
    return {
        "AWS_ENDPOINT_URL": s3_bucket.options.endpoint_url,
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        **{k: os.environ[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")},
    }


def _delta_rows(location: str, options: dict[str, str] | None) -> list[dict[str, Any]]:
    return sorted(DeltaTable(location, storage_options=options).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def _live(location: str, options: dict[str, str] | None) -> set[str]:
    """The live data files as delta-rs resolves them, below ``location`` (local paths or ``s3://``
    keys). delta-rs spells the root of each file as its table URI (``t%20%C3%BC:x+y``) and the rest as
    the decoded path, so the root part is swapped for ``location``."""
    table = DeltaTable(location, storage_options=options)
    root = table.table_uri.removeprefix("file://").rstrip("/")
    return {f"{location}/{uri.removeprefix(root)[1:]}" for uri in table.file_uris()}


def test_delta_maintenance_keeps_every_row(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest, where: str
) -> None:
    s3_bucket = request.getfixturevalue("s3_bucket") if where == "s3" else None
    name = DELTA_HOSTILE_DIR if where != "local" else "events"
    location = f"{s3_bucket.uri}/{name}" if s3_bucket is not None else str(tmp_path / name)
    delta_rs = _delta_rs_options(s3_bucket)
    for i in range(3):
        ids = range(i * len(VALUES), (i + 1) * len(VALUES))
        write_deltalake(
            location,
            pa.table({"id": pa.array(ids, pa.int64()), "s": list(VALUES)}),
            mode="append",
            partition_by=["s"],
            storage_options=delta_rs,
        )
    DeltaTable(location, storage_options=delta_rs).delete("id = 1")  # a rewritten file and a tombstone
    files = _Files(location, s3_bucket.options if s3_bucket is not None else StorageOptions())
    rows = _delta_rows(location, delta_rs)
    argv = (location, *_storage_args(s3_bucket))

    out = tmp_path / "changes"
    run_json(capsys, "cdc", *argv, "--from", "0", "--output", str(out), *MASTER)
    changes = pa.table(DeltaTable(str(out)).to_pyarrow_table()).to_pylist()
    net = Counter((r["id"], r["s"]) for r in changes if r["_change_type"] == "insert")
    net.subtract((r["id"], r["s"]) for r in changes if r["_change_type"] == "delete")
    assert +net == Counter((r["id"], r["s"]) for r in rows)

    live = _live(location, delta_rs)
    orphan = f"{min(live).rsplit('/', 1)[0]}/part-00000-orphan.snappy.parquet"
    files.storage.write(orphan, b"left behind by a failed writer")
    files.age()
    vacuumed = run_json(capsys, "orphans", *argv, *_floor(s3_bucket)[:2], "--force-short-retention")
    assert vacuumed["deleted_untracked_files"] == 1 and orphan not in files() and live <= files()
    assert _delta_rows(location, delta_rs) == rows

    compacted = run_json(capsys, "compact", *argv, "--min-input-files", "2", *MASTER)
    assert compacted["files_added"] == len(VALUES)
    assert _delta_rows(location, delta_rs) == rows
    new = _live(location, delta_rs)
    assert new <= files() and {f.rsplit("/", 1)[0] for f in new} == {f.rsplit("/", 1)[0] for f in live}

    files.age()
    run_json(capsys, "orphans", *argv, *_floor(s3_bucket)[:2], "--force-short-retention")
    assert new <= files() and _delta_rows(location, delta_rs) == rows
