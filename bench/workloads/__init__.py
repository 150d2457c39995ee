"""Workload generators: each writes one table (or log, or repository) of a given size into a
directory and returns a :class:`~bench.workloads.model.Workload` describing how runners reach it."""
