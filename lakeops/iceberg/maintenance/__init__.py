"""Iceberg maintenance operations: each a plan (pure, on the driver) and units of work (pure functions
an executor runs: Spark tasks or threads). ``compaction``, ``rewrite_manifests`` and ``changelog``
(change capture into a Delta change table) write new files and commit them; ``expiry`` commits the
snapshots' removal and then deletes what it freed, ``orphans`` deletes what no snapshot reaches.
``options`` and ``defaults`` hold the option models and defaults."""
