"""Delta maintenance operations: each a plan (pure, on the driver) and units of work (pure functions
an executor runs: Spark tasks or threads). ``compaction`` (with ``compaction_rows``) and ``checkpoint``
write new files and commit them; ``expiry`` (log files past the log retention) and ``orphans``
(``VACUUM``) delete (expiry after its commit, ``VACUUM`` after re-checking the plan against the commits
since). Each operation's module is named as lakeops names the operation, in every format.
``options`` and ``defaults`` hold the option models and defaults."""
