"""Defaults of Delta maintenance options, in a module without dependencies so that the command line
and the option models show them without importing the format's code (pyarrow and all)."""

from __future__ import annotations

__all__ = ["DEFAULT_DV_PURGE_RATIO", "DEFAULT_PART_SIZE"]

#: Rows a DV may hide before its file is rewritten even when it is not small (Delta's default ratio).
DEFAULT_DV_PURGE_RATIO = 0.05
#: Actions per part before a checkpoint is split. A task holds its part's actions as Python objects
#: (about 2 KB per ``add`` with stats), so a part costs its task up to ~2 GB at this size.
DEFAULT_PART_SIZE = 1_000_000
