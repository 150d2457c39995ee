"""lakeops: the table-format rules of the lakeops platform.

This package is pure: it imports neither pyspark nor dagster. Spark jobs (``spark_jobs``) execute
the plans it produces and Dagster (``orchestration``) decides when.
"""

__version__ = "0.1.0"
