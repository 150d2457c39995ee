"""lakeops.ordering: linear and Z-order row orders, on generated tables (hypothesis) and on a grid whose
Z-order is known."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeops.errors import InvalidArgument
from lakeops.ordering import order_indices

values = st.lists(st.one_of(st.none(), st.integers(-5, 5)), min_size=0, max_size=40)


@settings(max_examples=60, deadline=None)
@given(xs=values, data=st.data())
def test_every_order_is_a_permutation_and_linear_is_sorted(xs: list[int | None], data: st.DataObject) -> None:
    ys = data.draw(st.lists(st.text(max_size=2), min_size=len(xs), max_size=len(xs)))
    table = pa.table({"x": pa.array(xs, pa.int64()), "y": pa.array(ys, pa.string())})
    for curve in ("linear", "zorder"):
        order = order_indices(table, ["x", "y"], curve).to_pylist()  # type: ignore[arg-type]
        assert sorted(order) == list(range(len(xs)))
    linear = table.take(order_indices(table, ["x", "y"], "linear")).to_pylist()
    assert linear == sorted(table.to_pylist(), key=lambda r: (r["x"] is None, r["x"] or 0, r["y"]))


def test_zorder_visits_a_grid_quadrant_by_quadrant() -> None:
    """On a 4x4 grid the Z curve fills each 2x2 quadrant before the next, in Morton order."""
    cells = [(x, y) for x in range(4) for y in range(4)]
    table = pa.table({"x": [c[0] for c in cells], "y": [c[1] for c in cells]})
    visited = table.take(order_indices(table, ["x", "y"], "zorder")).to_pylist()
    quadrants = [{(r["x"] // 2, r["y"] // 2) for r in visited[i : i + 4]} for i in range(0, 16, 4)]
    assert quadrants == [{(0, 0)}, {(0, 1)}, {(1, 0)}, {(1, 1)}]
    assert [(r["x"], r["y"]) for r in visited[:4]] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_skewed_and_constant_columns_still_interleave() -> None:
    """Ranks, not raw values, feed the curve: a column of huge values does not drown a small one."""
    table = pa.table({"big": [10**15, 1, 10**15, 1], "small": [0, 0, 1, 1], "same": [7, 7, 7, 7]})
    order = order_indices(table, ["big", "small", "same"], "zorder").to_pylist()
    assert [table.column("big")[i].as_py() for i in order] == [1, 1, 10**15, 10**15]
    assert [table.column("small")[i].as_py() for i in order] == [0, 1, 0, 1]


def test_a_column_of_only_nulls_ties_everywhere() -> None:
    table = pa.table({"n": pa.nulls(3), "x": [3, 1, 2]})
    assert order_indices(table, ["n", "x"], "zorder").to_pylist() == [1, 2, 0]


def test_unorderable_and_missing_columns_are_refused() -> None:
    table = pa.table({"s": [{"a": 1}], "x": [1]})
    with pytest.raises(InvalidArgument, match="ordering column 's' of type struct<a: int64> cannot be ordered"):
        order_indices(table, ["s", "x"], "zorder")
    with pytest.raises(InvalidArgument, match="ordering column 'nope' is not a column"):
        order_indices(table, ["nope"], "linear")


@pytest.mark.parametrize(("dims", "side"), [(2, 16), (3, 8), (4, 4)])
def test_hilbert_steps_to_a_neighbouring_cell_every_time(dims: int, side: int) -> None:
    """The Hilbert curve through a full grid never jumps: consecutive cells differ by one in one column."""
    cells = list(itertools.product(range(side), repeat=dims))
    table = pa.table({f"c{i}": [c[i] for c in cells] for i in range(dims)})
    path = [cells[i] for i in order_indices(table, list(table.column_names), "hilbert").to_pylist()]
    assert sorted(path) == cells and path[0] == (0,) * dims
    assert all(sum(abs(a - b) for a, b in zip(p, q, strict=True)) == 1 for p, q in zip(path, path[1:], strict=False))
