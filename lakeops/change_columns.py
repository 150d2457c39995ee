"""The columns a change feed adds to a table's rows, whatever the table's format: one definition.

Delta's change data feed ("Change Data Files" and the CDF read schema: ``_change_type``,
``_commit_version``, ``_commit_timestamp``, :mod:`lakeops.delta.cdf`) names the first three; an
Iceberg changelog (:mod:`lakeops.iceberg.maintenance.changelog`) keeps ``_change_type`` and
``_commit_timestamp`` and identifies the commit by snapshot id and sequence number instead of a
version. The change tables that ``lakeops cdc`` writes (:mod:`lakeops.changefeed`) carry these names,
and verification (:mod:`lakeops.ops.verify`) recognises a change table by them.

Format-neutral, below every format package: Delta's CDF reader and the change-table writer above
Delta both use it.
"""

from __future__ import annotations

__all__ = [
    "CHANGE_TYPE",
    "COMMIT_SEQUENCE_NUMBER",
    "COMMIT_SNAPSHOT_ID",
    "COMMIT_TIMESTAMP",
    "COMMIT_VERSION",
    "DELTA_CHANGE_COLUMNS",
    "ICEBERG_CHANGE_COLUMNS",
]

#: What the row is: ``insert``, ``delete``, ``update_preimage`` or ``update_postimage``.
CHANGE_TYPE = "_change_type"
#: The Delta version that made the change.
COMMIT_VERSION = "_commit_version"
#: When the change was committed.
COMMIT_TIMESTAMP = "_commit_timestamp"
#: The Iceberg snapshot that made the change.
COMMIT_SNAPSHOT_ID = "_commit_snapshot_id"
#: That snapshot's sequence number (the change table's position along the source's history).
COMMIT_SEQUENCE_NUMBER = "_commit_sequence_number"

#: The columns a Delta change feed adds, in their order.
DELTA_CHANGE_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)
#: The columns an Iceberg changelog adds, in their order.
ICEBERG_CHANGE_COLUMNS = (CHANGE_TYPE, COMMIT_SNAPSHOT_ID, COMMIT_SEQUENCE_NUMBER, COMMIT_TIMESTAMP)
