"""The names of the Iceberg table properties lakeops reads (keys of the table metadata's ``properties``).

Each is defined once here, as PyIceberg's ``TableProperties`` does, with the section of the
configuration reference (https://iceberg.apache.org/docs/latest/configuration/#table-properties)
or of the spec (https://iceberg.apache.org/spec/) that defines it. lakeops writes none of them: it
honours them when it writes files, commits, expires snapshots or looks for orphans.
"""

from __future__ import annotations

# --- write properties (configuration, "Write properties") ---------------------------------------------

#: Compaction's target data file size, in bytes.
WRITE_TARGET_FILE_SIZE_BYTES = "write.target-file-size-bytes"
#: Where new data files go, instead of ``<location>/data`` (spec, "Path Construction").
WRITE_DATA_PATH = "write.data.path"
#: Where new metadata files go, instead of ``<location>/metadata`` (spec, "Path Construction").
WRITE_METADATA_PATH = "write.metadata.path"
#: Parquet codec of the data files lakeops writes.
PARQUET_COMPRESSION = "write.parquet.compression-codec"
#: Its level, when the codec takes one.
PARQUET_COMPRESSION_LEVEL = "write.parquet.compression-level"
#: Parquet row group size, in bytes.
PARQUET_ROW_GROUP_SIZE_BYTES = "write.parquet.row-group-size-bytes"
#: Parquet page size, in bytes.
PARQUET_PAGE_SIZE_BYTES = "write.parquet.page-size-bytes"
#: The metrics mode of every column without its own (``none``, ``counts``, ``truncate(n)``, ``full``).
DEFAULT_WRITE_METRICS_MODE = "write.metadata.metrics.default"
#: Prefix of a column's own metrics mode (``write.metadata.metrics.column.<name>``).
METRICS_MODE_COLUMN_CONF_PREFIX = "write.metadata.metrics.column."
#: How many columns get metrics by default.
METRICS_MAX_INFERRED_COLUMN_DEFAULTS = "write.metadata.metrics.max-inferred-column-defaults"
#: Delete the oldest metadata files a commit drops from the metadata log.
METADATA_DELETE_AFTER_COMMIT_ENABLED = "write.metadata.delete-after-commit.enabled"
#: How many previous metadata files the metadata log keeps.
METADATA_PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"

# --- commit properties (configuration, "Table behavior properties") -------------------------------------

#: Retries of a commit that lost its compare-and-swap.
COMMIT_NUM_RETRIES = "commit.retry.num-retries"
#: The first retry's wait, in milliseconds.
COMMIT_MIN_RETRY_WAIT_MS = "commit.retry.min-wait-ms"
#: The longest wait between retries, in milliseconds.
COMMIT_MAX_RETRY_WAIT_MS = "commit.retry.max-wait-ms"
#: How long a commit may keep retrying, in milliseconds.
COMMIT_TOTAL_RETRY_TIME_MS = "commit.retry.total-timeout-ms"
#: A manifest rewrite's target manifest size, in bytes.
MANIFEST_TARGET_SIZE_BYTES = "commit.manifest.target-size-bytes"

# --- snapshot expiry (configuration, "Table behavior properties"; spec, "Snapshot References") ------------

#: Snapshots older than this (milliseconds) may expire, unless a branch's own setting says otherwise.
MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
#: Snapshots each branch keeps, however old.
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
#: Age (milliseconds) after which a tag or a branch other than ``main`` expires.
MAX_REF_AGE_MS = "history.expire.max-ref-age-ms"

# --- reading (spec, "Column Projection") ---------------------------------------------------------------

#: The name mapping (JSON) that gives field ids to the columns of files written without them.
DEFAULT_NAME_MAPPING = "schema.name-mapping.default"
