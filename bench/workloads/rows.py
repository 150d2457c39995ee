"""Deterministic synthetic rows: random enough that Parquet cannot compress them away, so a file's
bytes track its row count the way event data does."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

EPOCH_DAY = dt.date(2024, 1, 1)


def event_rows(start: int, count: int, *, day: int, seed: int) -> pa.Table:
    """``count`` rows with ids from ``start``, all in day ``day`` (days after 2024-01-01)."""
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + count, dtype=np.int64)
    day_value = (EPOCH_DAY + dt.timedelta(days=day)).isoformat()
    return pa.table(
        {
            "id": ids,
            "ts": pa.array(rng.integers(0, 86_400_000_000, count, dtype=np.int64), pa.int64()),
            "amount": rng.random(count),
            "user": pa.array(rng.integers(0, 1 << 40, count).astype(str)),
            "day": pa.array([day_value] * count, pa.string()),
        }
    )
