"""Literal path segments as partition values and table locations (issue 19, item 1), through the
``lakeops`` command line.

Hypothesis draws values made of ``%``, ``%25``, ``%2520``, ``%20``, non-ASCII text, spaces, colons and
``+``, the pieces a URI decoder reads differently from a file system. The peer writes a table
partitioned by them (PyIceberg: in a directory it names by ``quote_plus``, recorded literally; delta-rs:
Hive-escaped, recorded as a URI), every file is aged past the floor, an orphan is planted in a hostile
partition directory, and ``lakeops orphans`` must delete exactly that orphan while the peer still reads
every row of every snapshot. Iceberg locations are hostile too; Delta roots keep ``%`` out because
delta-rs itself percent-decodes a table root. Iceberg runs locally and on S3 (moto), Delta locally.
Orphan removal on such small tables deletes on the driver, so no Spark session starts.

Budget: each example builds a real table (about a second), so a property runs
:data:`TABLE_EXAMPLES` examples, an eighth of ``LAKEOPS_FUZZ_EXAMPLES`` (see :mod:`hostile`) and at
least 2; ``make test-reliability`` thus runs 250.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st
from lakeops_cli import run_json
from pyiceberg_tables import PyIcebergTable, batch, create_table
from reliability.hostile import EXAMPLES, FUZZ

from lakeops.storage import open_storage

TABLE_EXAMPLES = max(2, EXAMPLES // 8)
OLD = time.time() - 30 * 86400

#: What a URI decoder and a file system disagree on, and plain characters to mix them with.
_PIECES = ["%", "%25", "%2520", "%20", "%C3%BC", "ü", "日本", " ", ":", "+", "a", "Z", "0", "-", "_", "."]
#: One literal path segment: never empty, never a whole ``.`` or ``..`` (not a partition value a
#: writer would put in one directory name).
segments = (
    st.lists(st.sampled_from(_PIECES), min_size=1, max_size=6).map("".join).filter(lambda s: s not in (".", ".."))
)


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() and "_lakeops_audit" not in p.parts}


def _age(files: set[Path]) -> None:
    for path in files:
        os.utime(path, (OLD, OLD))


def _plant(files: set[Path], column: str) -> Path:
    """An old orphan in one of ``column``'s partition directories (not the null one)."""
    directories = {p.parent for p in files if p.parent.name.startswith(f"{column}=")}
    orphan = max(d for d in directories if d.name != f"{column}=null") / "00000-9-orphan.parquet"
    orphan.write_bytes(b"left behind by a failed writer")
    os.utime(orphan, (OLD, OLD))
    return orphan


def _snapshot_rows(table: PyIcebergTable) -> dict[int, list[dict[str, Any]]]:
    return {s.snapshot_id: table.rows(s.snapshot_id) for s in table.reload().snapshots()}


def _iceberg_table(tmp: Path, values: list[str], warehouse: str, s3: tuple[str, str] | None = None) -> PyIcebergTable:
    """Two PyIceberg appends partitioned by ``values`` (and null) and a copy-on-write delete."""
    table = create_table(tmp, "identity", s3=s3, warehouse_dir=warehouse)
    for i in range(2):
        table.table.append(batch(i * 10, 10, categories=tuple(values)))
        table.reload()
    table.table.delete("id < 2")
    return table


@settings(FUZZ, max_examples=TABLE_EXAMPLES)
@given(values=st.lists(segments, min_size=1, max_size=3, unique=True), warehouse=segments)
def test_iceberg_orphans_delete_nothing_referenced(
    tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], values: list[str], warehouse: str
) -> None:
    table = _iceberg_table(tmp_path_factory.mktemp("iceberg"), values, f"w{warehouse}")
    root = Path(table.location)
    before = _files(root)
    _age(before)
    orphan = _plant(before, "category")
    rows = _snapshot_rows(table)

    report = run_json(capsys, "orphans", table.identifier, "--catalog-uri", table.catalog_uri, "--older-than", "3d")

    assert report["deleted_files"] == 1 and not orphan.exists() and _files(root) == before
    assert _snapshot_rows(table) == rows


@pytest.mark.s3
@settings(FUZZ, max_examples=TABLE_EXAMPLES)
@given(values=st.lists(segments, min_size=1, max_size=3, unique=True), warehouse=segments)
def test_iceberg_orphans_on_s3_delete_nothing_referenced(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    s3_bucket: Any,
    values: list[str],
    warehouse: str,
) -> None:
    """The same on S3, where keys are literal: each example in its own warehouse of the one bucket."""
    endpoint = s3_bucket.options.endpoint_url
    s3 = (s3_bucket.uri, endpoint)
    table = _iceberg_table(tmp_path_factory.mktemp("iceberg"), values, f"w{uuid.uuid4().hex[:8]}{warehouse}", s3)
    location = table.table.location()
    storage = open_storage(location, s3_bucket.options)

    def listed() -> set[str]:
        return {f.path for f in storage.list(location) if "/_lakeops_audit/" not in f.path}

    before = listed()
    directory = max(p.rsplit("/", 1)[0] for p in before if "/data/category=" in p and "/category=null/" not in p)
    orphan = f"{directory}/00000-9-orphan.parquet"
    storage.write(orphan, b"left behind by a failed writer")
    rows = _snapshot_rows(table)
    time.sleep(1.1)  # S3 modification times have second precision; moto cannot date objects back

    argv = ["--endpoint-url", endpoint, "--older-than", "0s", "--force-short-retention"]
    report = run_json(capsys, "orphans", table.identifier, "--catalog-uri", table.catalog_uri, *argv)

    assert report["deleted_files"] == 1 and listed() == before
    assert _snapshot_rows(table) == rows


@settings(FUZZ, max_examples=TABLE_EXAMPLES)
@given(values=st.lists(segments, min_size=1, max_size=3, unique=True), name=segments)
def test_delta_orphans_delete_nothing_referenced(
    tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], values: list[str], name: str
) -> None:
    root = tmp_path_factory.mktemp("delta") / f"t{name.replace('%', '')}"
    for i in range(2):
        ids = pa.array(range(i * len(values), (i + 1) * len(values)), pa.int64())
        write_deltalake(str(root), pa.table({"id": ids, "s": values}), mode="append", partition_by=["s"])
    before = _files(root)
    _age(before)
    orphan = _plant(before, "s")
    rows = DeltaTable(str(root)).to_pyarrow_table().sort_by("id")

    report = run_json(capsys, "orphans", str(root), "--older-than", "7d")

    assert report["deleted_untracked_files"] == 1 and not orphan.exists() and _files(root) == before
    assert DeltaTable(str(root)).to_pyarrow_table().sort_by("id").equals(rows)
