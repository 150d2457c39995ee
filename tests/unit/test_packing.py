"""Bin-packing of rewrite groups and the re-cutting of row streams into files."""

from __future__ import annotations

import pyarrow as pa

from lakeops.packing import UNBOUNDED_ROWS, first_fit_decreasing, rows_per_file, split_into_files


def test_first_fit_decreasing_fills_groups_and_is_deterministic() -> None:
    sizes = {"a": 60, "b": 50, "c": 40, "d": 30, "e": 20, "big": 500}
    groups = first_fit_decreasing(list(sizes), sizes.__getitem__, str, 100)
    assert groups == [["big"], ["a", "c"], ["b", "d", "e"]]
    assert first_fit_decreasing(list(reversed(sizes)), sizes.__getitem__, str, 100) == groups


def test_rows_per_file_estimate() -> None:
    assert rows_per_file(100, 1000, 100) == 10
    assert rows_per_file(1, 1000, 10) == 1
    assert rows_per_file(100, 1000, 0) == rows_per_file(100, 0, 5) == UNBOUNDED_ROWS


def test_split_into_files_recuts_chunks() -> None:
    chunks = [pa.table({"x": list(range(0, 7))}), pa.table({"x": list(range(7, 9))}), pa.table({"x": [9, 10]})]
    pieces = list(split_into_files(chunks, 4))
    files: list[list[int]] = [[]]
    for piece, complete in pieces:
        files[-1].extend(piece.column("x").to_pylist())
        if complete:
            files.append([])
    assert files == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]
    assert [complete for _, complete in pieces].count(True) == 2
