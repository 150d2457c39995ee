"""Parquet: footer statistics by logical type (https://github.com/apache/parquet-format/blob/master/LogicalTypes.md).

Format-neutral: Delta (``lakeops.delta.stats``) and Iceberg metrics both build on
:mod:`lakeops.parquet.statistics`.
"""

from lakeops.parquet.statistics import (
    ColumnStatistics,
    ColumnType,
    FileStatistics,
    Kind,
    LeafColumn,
    file_statistics,
    nan_counts,
)

__all__ = [
    "ColumnStatistics",
    "ColumnType",
    "FileStatistics",
    "Kind",
    "LeafColumn",
    "file_statistics",
    "nan_counts",
]
