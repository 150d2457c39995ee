"""The names of the Delta table properties lakeops reads (keys of ``metaData.configuration``).

Each is defined once here, with where it is specified: a section of the protocol
(https://github.com/delta-io/delta/blob/master/PROTOCOL.md) or, for the properties the protocol leaves
to implementations, Delta's table-properties reference (https://docs.delta.io/latest/table-properties.html).
Column metadata keys (``delta.columnMapping.physicalName``, ``delta.typeChanges``) and domain names
(``delta.rowTracking``, ``delta.clustering``) are not table properties; they stay with their rules, as
do the ``lakeops.cdc.*`` keys lakeops writes on a change table (:mod:`lakeops.changefeed.table`).
"""

from __future__ import annotations

# --- retention and cleanup (docs.delta.io, "Delta table properties reference") ----------------------

#: How long log entries are kept for time travel; ``expire`` removes older ones ("Metadata Cleanup").
LOG_RETENTION_DURATION = "delta.logRetentionDuration"
#: How long a removed file stays in the log as a tombstone, and so how long ``vacuum`` leaves it.
DELETED_FILE_RETENTION_DURATION = "delta.deletedFileRetentionDuration"
#: How long an application's ``txn`` survives without a new commit ("Transaction Identifiers").
SET_TRANSACTION_RETENTION_DURATION = "delta.setTransactionRetentionDuration"
#: "false": writers never clean the log up on their own (lakeops's ``expire`` then needs ``force``).
ENABLE_EXPIRED_LOG_CLEANUP = "delta.enableExpiredLogCleanup"

# --- writing files (docs.delta.io, "Delta table properties reference") --------------------------------

#: Compaction's target file size (a size with unit, or bytes).
TARGET_FILE_SIZE = "delta.targetFileSize"
#: How many leading columns get statistics ("Per-file Statistics").
DATA_SKIPPING_NUM_INDEXED_COLS = "delta.dataSkippingNumIndexedCols"
#: The columns that get statistics, overriding the count above ("Per-file Statistics").
DATA_SKIPPING_STATS_COLUMNS = "delta.dataSkippingStatsColumns"
#: Whether writers record the change data feed ("Writer Requirements for AddCDCFile"), which ``cdc`` reads.
ENABLE_CHANGE_DATA_FEED = "delta.enableChangeDataFeed"

# --- checkpoints (PROTOCOL.md "Checkpoint Specs", "Writer Version Requirements") ---------------------

#: Whether a checkpoint's ``add`` actions carry ``stats`` as JSON (default true).
CHECKPOINT_WRITE_STATS_AS_JSON = "delta.checkpoint.writeStatsAsJson"
#: Whether they carry ``stats_parsed`` and ``partitionValues_parsed`` structs (default false).
CHECKPOINT_WRITE_STATS_AS_STRUCT = "delta.checkpoint.writeStatsAsStruct"

# --- table features' settings --------------------------------------------------------------------------

#: ``none``, ``name`` or ``id`` ("Column Mapping").
COLUMN_MAPPING_MODE = "delta.columnMapping.mode"
#: Row tracking on ("Row Tracking").
ENABLE_ROW_TRACKING = "delta.enableRowTracking"
#: Row tracking supported but new rows get no ids ("Row Tracking").
ROW_TRACKING_SUSPENDED = "delta.rowTrackingSuspended"
#: The data files' column holding materialized row ids ("Row Tracking", "Row IDs").
ROW_ID_COLUMN_NAME = "delta.rowTracking.materializedRowIdColumnName"
#: The data files' column holding materialized row commit versions ("Row Tracking", "Row Commit Versions").
ROW_COMMIT_VERSION_COLUMN_NAME = "delta.rowTracking.materializedRowCommitVersionColumnName"
#: In-commit timestamps on ("In-Commit Timestamps").
ENABLE_IN_COMMIT_TIMESTAMPS = "delta.enableInCommitTimestamps"
#: The version from which commits carry one ("Writer Requirements for In-Commit Timestamps").
IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
