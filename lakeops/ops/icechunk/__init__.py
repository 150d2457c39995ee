"""The Icechunk side of the operations, one module an operation: ``expiry``, ``orphans`` (garbage
collection), ``compaction`` (chunk packing), ``cdc`` (snapshot diffs) and ``inspect``; ``repository``
says which kind of repository a run meets.

Seed-format repositories (docs/architecture.md, "Specifications") and Icechunk format 1 and 2
repositories are maintained by :mod:`lakeops.icechunk.maintenance` (formats 1 and 2: expiry,
garbage collection, change capture and ``inspect``; compaction refuses them by name). Each module
plans, runs the plan on the caller's :class:`~lakeops.execution.Executor` where it has units
(:mod:`lakeops.ops.run`), and reports.
"""
