"""Icechunk (seed format, Icechunk 0.1.0-alpha): the rules of its spec as a pure library.

The spec: https://icechunk.io/en/latest/spec/ and, for the seed format's own sections, docs/architecture.md
("Specifications").

``ids`` (Crockford base32 object ids), ``refs`` (branch sequence files and tags), ``snapshot`` and
``manifest`` (the MessagePack structures), ``repository`` (reading a repository on any
:class:`~lakeops.storage.Storage`: refs, ancestry, hierarchy, chunks, reachability) and ``writer``
(our own commits, for tests and maintenance operations).
"""
