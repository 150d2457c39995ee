"""Settings every contender shares, so they do the same work."""

from __future__ import annotations

#: Compaction target for ours and delta-rs alike (lakeops' Delta default; Iceberg's is 512 MB).
TARGET_FILE_SIZE = 128 * 1024 * 1024
