"""Settings every contender shares, so they do the same work."""

from __future__ import annotations

#: Compaction target for ours and delta-rs alike (lakeops' Delta default; Iceberg's is 512 MB).
TARGET_FILE_SIZE = 128 * 1024 * 1024

#: Parquet writer options of what each format's contenders write, which the limit writes too (it moves
#: the same bytes): delta-rs' OPTIMIZE and lakeops' Delta writer use ZSTD level 4; PyIceberg's tables
#: and lakeops' Iceberg writer the Iceberg default codec, ZSTD, at the library's default level.
DELTA_PARQUET: dict[str, object] = {"compression": "zstd", "compression_level": 4}
ICEBERG_PARQUET: dict[str, object] = {"compression": "zstd"}
