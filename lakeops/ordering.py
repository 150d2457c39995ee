"""Row orders a compaction can write: linear (sort by columns), Z-order and Hilbert (space-filling curves).

A linear sort makes files prune well on the first column only; a space-filling curve visits the
cells of all columns' positions so that rows close in all of them land in the same files, and min/max
statistics prune on each column. Z-order interleaves the bits of each position (Delta's
``OPTIMIZE ZORDER BY``, delta-rs's z-order); the Hilbert curve (Delta's liquid clustering) never jumps:
consecutive cells are neighbours, so a file's rows span fewer distant ranges. Neither is a table-format
rule: the files stay ordinary data files, so any reader reads them.

Each column is first replaced by its dense rank (ties share a rank, nulls last), which makes every
orderable type comparable and spreads skewed values evenly; ranks are scaled to an equal number of
bits per column so no column dominates the curve.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakeops.errors import InvalidArgument

__all__ = ["Curve", "order_indices"]

Curve = Literal["linear", "zorder", "hilbert"]

#: Bits of the 64-bit Z-value; each of n columns gets ``64 // n`` (at most 32) of them.
_KEY_BITS = 64


def order_indices(table: pa.Table, columns: Sequence[str], curve: Curve) -> pa.Array:
    """The row positions of ``table`` in ``curve`` order of ``columns`` (stable: equal keys keep
    their order). ``columns`` must be top-level columns of an orderable type."""
    for name in columns:
        if name not in table.column_names:
            raise InvalidArgument(f"ordering column {name!r} is not a column of the rows")
    if curve == "linear":
        return pc.sort_indices(table, sort_keys=[(name, "ascending") for name in columns])
    if not columns:
        raise InvalidArgument(f"a {curve} order needs at least one column")
    bits = min(32, _KEY_BITS // len(columns))
    keys = [_scaled_rank(table.column(name), name, bits) for name in columns]
    if curve == "hilbert":
        keys = _hilbert_transpose(keys, bits)
    return pa.array(np.argsort(_interleave(keys, bits), kind="stable"))


def _interleave(keys: list[np.ndarray], bits: int) -> np.ndarray:
    """One 64-bit key per row: bit ``bits - 1`` of every key in turn, then the next bit down."""
    code = np.zeros(len(keys[0]), dtype=np.uint64)
    for bit in range(bits - 1, -1, -1):
        for key in keys:
            code = (code << np.uint64(1)) | ((key >> np.uint64(bit)) & np.uint64(1))
    return code


def _hilbert_transpose(coordinates: list[np.ndarray], bits: int) -> list[np.ndarray]:
    """The Hilbert index of each row's coordinates in "transposed" form, whose interleaved bits are the
    index (J. Skilling, "Programming the Hilbert curve", AIP Conf. Proc. 707, 2004: axes to transpose)."""
    x = [c.copy() for c in coordinates]
    n = len(x)
    q = 1 << (bits - 1)
    while q > 1:  # undo the excess work of the curve's reflections, bit by bit from the top
        low = np.uint64(q - 1)
        for i in range(n):
            flip = (x[i] & np.uint64(q)) != 0
            x[0] = np.where(flip, x[0] ^ low, x[0])
            swap = np.where(flip, np.uint64(0), (x[0] ^ x[i]) & low)
            x[0] ^= swap
            x[i] ^= swap
        q >>= 1
    for i in range(1, n):  # Gray encode
        x[i] ^= x[i - 1]
    t = np.zeros_like(x[0])
    q = 1 << (bits - 1)
    while q > 1:
        t = np.where((x[n - 1] & np.uint64(q)) != 0, t ^ np.uint64(q - 1), t)
        q >>= 1
    return [xi ^ t for xi in x]


def _scaled_rank(values: pa.ChunkedArray, name: str, bits: int) -> np.ndarray:
    """Dense ranks from 0, scaled to ``bits`` bits (the largest rank maps to ``2**bits - 1``)."""
    if pa.types.is_null(values.type):  # nothing but nulls: every row ties
        return np.zeros(len(values), dtype=np.uint64)
    try:
        ranks = pc.rank(values, sort_keys="ascending", tiebreaker="dense")
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidArgument(f"ordering column {name!r} of type {values.type} cannot be ordered") from exc
    rank: np.ndarray = ranks.to_numpy(zero_copy_only=False).astype(np.uint64) - np.uint64(1)
    top = int(rank.max()) if len(rank) else 0
    if top == 0:
        return rank
    if top.bit_length() > bits:
        shift = top.bit_length() - bits
        rank >>= np.uint64(shift)
        top >>= shift
    return rank * np.uint64((1 << bits) - 1) // np.uint64(top)
