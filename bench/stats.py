"""Medians, ratios and the slope of cost over work."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def slope(sizes: Sequence[float], seconds: Sequence[float]) -> float | None:
    """The log-log least-squares slope of time over work: 1.0 is linear, 2.0 quadratic, below 1 a
    fixed cost (start-up) still dominating. None with fewer than two sizes."""
    if len(sizes) < 2:
        return None
    xs = [math.log(s) for s in sizes]
    ys = [math.log(max(t, 1e-9)) for t in seconds]
    return statistics.linear_regression(xs, ys).slope
