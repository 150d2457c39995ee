"""lakeops: the table-format rules of the lakeops platform.

This package is pure: it imports neither pyspark nor dagster. Spark jobs (``spark_jobs``) execute
the plans it produces and Dagster (``orchestration``) decides when. ``lakeops.open(address, ...)``
returns a table handle (:class:`lakeops.ops.table.Table`) that the :mod:`lakeops.api` functions take
in place of an address; it is imported on first use, so importing a submodule stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakeops.ops.table import open_table as open  # noqa: A004 - lakeops.open, as the API names it

__version__ = "0.1.0"

__all__ = ["__version__", "open"]


def __getattr__(name: str) -> Any:
    """``lakeops.open``: :func:`lakeops.ops.table.open_table`, imported when first asked for."""
    if name == "open":
        from lakeops.ops.table import open_table

        return open_table
    raise AttributeError(f"module 'lakeops' has no attribute {name!r}")
