"""Defaults of Delta maintenance options, in a module without the format's dependencies so that the
command line, the option models and ``inspect`` read them without importing the format's code."""

from __future__ import annotations

from collections.abc import Mapping

from lakeops.delta.properties import TARGET_FILE_SIZE
from lakeops.units import parse_size

__all__ = ["DEFAULT_DV_PURGE_RATIO", "DEFAULT_PART_SIZE", "DEFAULT_TARGET_FILE_SIZE", "table_target_file_size"]

#: Compaction's target when neither the run nor ``delta.targetFileSize`` sets one.
DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024

#: Rows a DV may hide before its file is rewritten even when it is not small (Delta's default ratio).
DEFAULT_DV_PURGE_RATIO = 0.05
#: Actions per part before a checkpoint is split. A task holds its part's actions as Python objects
#: (about 2 KB per ``add`` with stats), so a part costs its task up to ~2 GB at this size.
DEFAULT_PART_SIZE = 1_000_000


def table_target_file_size(configuration: Mapping[str, str]) -> int:
    """The table's ``delta.targetFileSize``, else :data:`DEFAULT_TARGET_FILE_SIZE`."""
    prop = configuration.get(TARGET_FILE_SIZE)
    return parse_size(prop) if prop else DEFAULT_TARGET_FILE_SIZE
