"""Icechunk maintenance (issue 6): the rules, as pure plans, unit tasks and commits.

``retention`` (the age floor shared by expiry and garbage collection), ``expiry`` (superseded
branch files), ``orphans`` (garbage collection: objects no retained snapshot reaches), ``packing`` (small chunk objects
packed into shared chunk files), ``diff`` (structural changes between snapshots, for ``cdc``),
``summary`` (``inspect``); for Icechunk format 1 and 2 repositories ``versioned_expiry`` (histories
shortened as Icechunk's ``expire_snapshots`` does), ``versioned_orphans`` and ``versioned_packing`` (the
seed format's packing, committed in the repository's own spec version).
"""
