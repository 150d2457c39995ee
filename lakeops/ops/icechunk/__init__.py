"""The Icechunk side of the operations, one module an operation: ``expiry``, ``orphans`` (garbage
collection), ``compaction`` (chunk packing), ``cdc`` (snapshot diffs) and ``inspect``; ``repository``
says which kind of repository a run meets.

Seed-format repositories (docs/architecture.md, "Specifications") are maintained by
:mod:`lakeops.icechunk.maintenance`; repositories in the ``icechunk`` package's newer format are
detected, and their expiry and garbage collection delegated to that package
(:mod:`lakeops.icechunk.maintenance.delegated`); the other operations refuse them by name. Each module
plans, runs the plan on the caller's :class:`~lakeops.execution.Executor` where it has units
(:mod:`lakeops.ops.run`), and reports.
"""
