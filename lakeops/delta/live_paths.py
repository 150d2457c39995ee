"""The file locations a snapshot references, tested a chunk of listed locations at a time.

VACUUM keeps every file a live ``add`` names ("Add File and Remove File"; paths are relative URIs
resolved against the root, https://github.com/delta-io/delta/blob/master/PROTOCOL.md#add-file-and-remove-file).
A Python set of 10 M absolute locations costs about 2 GB; most of them are a checkpoint's rows
already held as Arrow (:class:`~lakeops.delta.live_files.LiveFiles`), whose plain relative paths
(nothing to decode or collapse) are the location's rest after the root as written. Those stay the
Arrow column they are and are matched against each chunk of listed locations with ``is_in``; every
other location (commit adds held as objects, deletion-vector files, tombstones, paths that need
decoding) is resolved into a set as before. A listed name that is not UTF-8 is looked up in the set
only (:func:`lakeops.arrays.lookup_array`): no Arrow column holds it, so it is kept or not exactly as
when the table has no checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakeops.arrays import lookup_array
from lakeops.delta.checkpoint_reader import AddColumn
from lakeops.storage.uri import resolve

__all__ = ["NOT_PLAIN", "LivePaths"]

#: A relative path that ``resolve`` would decode or collapse: a percent-escape or colon, an absolute
#: path, an empty, ``.`` or ``..`` segment (the complement of ``lakeops.storage.uri``'s plain paths).
NOT_PLAIN = r"[%:]|^/|//|/$|^$|(^|/)\.\.?(/|$)"


class LivePaths:
    """Locations to keep under ``table_root`` (normalised): ``locations`` as a set, plus the plain
    relative paths of ``columns`` (their location is the root, a slash and the path)."""

    def __init__(self, table_root: str, columns: Iterable[AddColumn], locations: set[str]) -> None:
        self.locations = locations
        self._prefix = table_root.rstrip("/") + "/"
        self._columns: list[pa.Array] = []
        absolute_root = table_root.startswith(("/", "s3://", "s3a://", "s3n://"))
        for column in columns:
            paths = column.paths
            other = pc.match_substring_regex(paths, NOT_PLAIN) if absolute_root else None
            if other is not None and not pc.any(other).as_py():
                self._columns.append(paths)  # the usual case: the column itself, no copy
                continue
            if other is not None:
                self._columns.append(paths.filter(pc.invert(other)))
                paths = paths.filter(other)
            locations.update(resolve(table_root, path) for path in paths.to_pylist())

    def kept(self, locations: Sequence[str]) -> set[str]:
        """Those of ``locations`` (normalised) that are kept."""
        found = {location for location in locations if location in self.locations}
        prefix = self._prefix
        rest = [loc[len(prefix) :] for loc in locations if loc.startswith(prefix) and loc not in found]
        if rest and self._columns:
            wanted = lookup_array(rest)  # a name that is not UTF-8: a null, in no column
            for paths in self._columns:
                hits = paths.filter(pc.is_in(paths, value_set=wanted.cast(paths.type)))
                found.update(prefix + path for path in hits.to_pylist())
        return found
