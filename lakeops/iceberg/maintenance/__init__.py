"""Iceberg maintenance operations: each a plan (pure, on the driver), units of work (pure functions run
by Spark tasks) and a commit."""
