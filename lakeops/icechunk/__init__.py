"""Icechunk: the rules of its spec as a pure library, for three on-disk formats.

* The seed format (Icechunk 0.1.0-alpha: plain MessagePack files, one branch sequence file per
  commit), read and written: ``ids`` (Crockford base32 object ids), ``refs`` (branch sequence files
  and tags), ``encoding``, ``snapshot`` and ``manifest`` (the MessagePack structures), ``repository``
  (reading a repository on any :class:`~lakeops.storage.Storage`: refs, ancestry, hierarchy, chunks,
  reachability) and ``writer`` (commits: chunk packing's, and the tests' and demo's repositories).
* Icechunk format 1 (icechunk 1.x) and format 2 (icechunk 2.x, spec versions 2 and 2.1), read
  natively and rewritten in the repository's own spec version: ``versioned`` (detection and
  reading), ``binary`` (the file header), ``flatbuf``, ``fbs`` and ``flatbuf_codec`` (FlatBuffers
  payloads, decoded and re-encoded whole), ``objects`` (snapshot and manifest files), ``repo_info``
  and ``repo_update`` (refs and the snapshot graph, changed atomically).

The spec: https://icechunk.io/en/latest/spec/ (format 2), its earlier versions for sections only they
have (docs/architecture.md, "Specifications"). The maintenance rules: :mod:`lakeops.icechunk.maintenance`.
"""
