"""Icechunk maintenance (issue 6): the rules, as pure plans, unit tasks and commits.

``retention`` (the age floor shared by expiry and garbage collection), ``expiry`` (superseded
branch files), ``gc`` (objects no retained snapshot reaches), ``packing`` (small chunk objects
packed into shared chunk files), ``diff`` (structural changes between snapshots, for ``cdc``),
``summary`` (``inspect``) and ``delegated`` (repositories in the newer on-disk format of the
``icechunk`` package, maintained through that package's own API).
"""
