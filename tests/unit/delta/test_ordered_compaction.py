"""Z-order and sorted compaction of Delta tables (``--zorder-by``, ``--sort-by``) on delta-rs tables:
every file of each partition is rewritten in the order, delta-rs reads exactly the same rows after, the
new files' statistics prune (their ranges shrink), a second run finds the partitions already ordered,
and bad columns are refused by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg_tables import small_file_table

from lakeops import api
from lakeops.delta.maintenance.compaction import ORDER_TAG
from lakeops.errors import InvalidArgument, UsageError
from lakeops.ops.compaction import CompactionOptions
from spark_jobs.cli import main as lakeops

GRID = 16  # x and y take 16 values each: 256 rows per region


def _grid_table(tmp_path: Path) -> str:
    """Two partitions (region), each written by 8 appends of rows scattered over a 16x16 grid."""
    location = str(tmp_path / "grid")
    cells = [(x, y) for x in range(GRID) for y in range(GRID)]
    for append in range(8):
        rows = cells[append::8]
        for region in ("eu", "us"):
            write_deltalake(
                location,
                pa.table(
                    {
                        "x": pa.array([c[0] for c in rows], pa.int64()),
                        "y": pa.array([c[1] for c in rows], pa.int64()),
                        "region": [region] * len(rows),
                    }
                ),
                mode="append",
                partition_by=["region"],
            )
    return location


def _rows(location: str) -> list[tuple[int, int, str]]:
    table = DeltaTable(location).to_pyarrow_table()
    return sorted(zip(table["x"].to_pylist(), table["y"].to_pylist(), table["region"].to_pylist(), strict=True))


def _adds(location: str) -> list[dict[str, Any]]:
    """delta-rs's view of the live files (``min.x``, ``partition.region``, ...)."""
    return pa.table(DeltaTable(location).get_add_actions(flatten=True)).to_pylist()


def _ranges(location: str, column: str) -> list[int]:
    """Per live file, how many grid values of ``column`` its min/max statistics span."""
    return [add[f"max.{column}"] - add[f"min.{column}"] + 1 for add in _adds(location)]


def test_zorder_rewrites_each_partition_so_both_columns_prune(tmp_path: Path) -> None:
    location = _grid_table(tmp_path)
    before = _rows(location)
    assert all(span == GRID for span in _ranges(location, "x"))  # every append spans the whole grid
    # 256 rows of two int64 columns per partition, in files of about a quarter of that
    options = CompactionOptions(zorder_by=["x", "y"], target_file_size=900)

    report = api.compact(location, options)

    assert (report.files_removed, report.partitions_compacted) == (16, 2) and report.files_added >= 4
    assert _rows(location) == before  # delta-rs reads the same rows
    x_spans, y_spans = _ranges(location, "x"), _ranges(location, "y")
    # files cover part of the grid in both columns (appended files, or a sort by x, span all of y)
    assert sum(x_spans) / len(x_spans) <= GRID * 0.75 and sum(y_spans) / len(y_spans) <= GRID * 0.75, (x_spans, y_spans)
    history = DeltaTable(location).history(1)[0]
    assert history["operation"] == "OPTIMIZE"
    assert json.loads(history["operationParameters"]["zOrderBy"]) == ["x", "y"]
    commit = Path(location) / "_delta_log" / f"{DeltaTable(location).version():020}.json"
    adds = [json.loads(line)["add"] for line in commit.read_text().splitlines() if '"add"' in line[:8]]
    tags = {json.dumps(a["tags"], sort_keys=True) for a in adds}
    assert len(tags) == 1 and all(ORDER_TAG in json.loads(t) for t in tags)  # every new file: this rewrite

    again = api.compact(location, options)
    assert (again.groups, again.committed_version) == (0, None)  # already in this order
    write_deltalake(location, pa.table({"x": [3], "y": [4], "region": ["eu"]}), mode="append", partition_by=["region"])
    third = api.compact(location, options)
    assert third.partitions_compacted == 1 and _rows(location) == sorted([*before, (3, 4, "eu")])


def test_sort_by_writes_files_with_disjoint_ranges(tmp_path: Path) -> None:
    location = _grid_table(tmp_path)
    before = _rows(location)

    api.compact(location, CompactionOptions(sort_by=["y"], target_file_size=900))

    assert _rows(location) == before
    for region in ("eu", "us"):
        adds = [a for a in _adds(location) if a["partition.region"] == region]
        bounds = sorted((a["min.y"], a["max.y"]) for a in adds)
        assert len(bounds) >= 2 and all(hi <= lo for (_, hi), (lo, _) in zip(bounds, bounds[1:], strict=False))


def test_bad_orders_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    location = _grid_table(tmp_path)
    version = DeltaTable(location).version()
    with pytest.raises(InvalidArgument, match="--zorder-by 'region' is a partition column"):
        api.compact(location, CompactionOptions(zorder_by=["region"]))
    with pytest.raises(InvalidArgument, match="--sort-by 'z' is not a column of the table"):
        api.compact(location, CompactionOptions(sort_by=["z"]))
    with pytest.raises(InvalidArgument, match="--zorder-by and --sort-by exclude each other"):
        api.compact(location, CompactionOptions(zorder_by=["x"], sort_by=["y"]))
    assert DeltaTable(location).version() == version


def test_iceberg_names_its_own_sort_option(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=3, rows=5)
    with pytest.raises(UsageError, match="--zorder-by does not apply to this table's format"):
        api.compact(table.identifier, CompactionOptions(catalog_uri=table.catalog_uri, zorder_by=["id"]))


def test_the_cli_takes_comma_separated_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = _grid_table(tmp_path)
    with pytest.raises(SystemExit) as exited:
        lakeops(["compact", location, "--zorder-by", "x,,y"])
    assert exited.value.code == 2 and "expected column names separated by commas" in capsys.readouterr().err
    assert lakeops(["compact", location, "--zorder-by", "x, y", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["files_removed"] == 16
