"""Defaults of change-feed options, in a module without dependencies so that the command line and the
option models show them without importing the change-table code (pyarrow and all)."""

from __future__ import annotations

__all__ = ["DEFAULT_UNIT_BYTES"]

#: Input bytes one task reads (and writes as one output file) at most, unless a single file is bigger.
DEFAULT_UNIT_BYTES = 128 * 1024 * 1024
