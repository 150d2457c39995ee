"""The Icechunk side of the operations, one module an operation: ``expiry``, ``orphans`` (garbage
collection), ``compaction`` (chunk packing), ``cdc`` (snapshot diffs) and ``inspect``; ``repository``
says which kind of repository a run meets.

Every operation runs on seed-format repositories and on Icechunk format 1 and 2 repositories
(docs/architecture.md, "Specifications"), by the rules of :mod:`lakeops.icechunk.maintenance` (its
``versioned_*`` modules for formats 1 and 2). Each module plans, runs the plan on the caller's
:class:`~lakeops.executors.Executor` where it has units (:mod:`lakeops.ops.batches`), and reports.
"""
