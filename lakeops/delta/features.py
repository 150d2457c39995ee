"""Protocol versions and table features ("Protocol Evolution", "Table Features", Appendix
"Valid Feature Names in Table Features", "Writer Version Requirements", "Reader Version Requirements").

:data:`FEATURES` says, per table feature, which operations honour it. A table enabling a feature that is
not there is refused: for reading if it is a reader feature, for writing if it is a writer feature;
a known feature is refused by the operations that do not support it yet. Each error names the
feature (and the operation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from lakeops.delta.actions import Protocol
from lakeops.errors import UnsupportedFeature

MAX_READER_VERSION = 3
MAX_WRITER_VERSION = 7

#: What lakeops does to a Delta table, as the feature table names it: reading its log (inspect, time
#: travel, every operation's snapshot), reading its data as a change feed's source (``cdc``), and each
#: operation that writes or deletes. ``commit`` is any commit lakeops lands (compaction's, a change
#: table's), checked again when another writer's commit changed the protocol under a running operation.
Operation = Literal["read", "cdc", "compact", "checkpoint", "expire", "vacuum", "write", "commit"]
ALL_OPERATIONS: frozenset[Operation] = frozenset(get_args(Operation))


@dataclass(frozen=True)
class FeatureSupport:
    """How far lakeops honours one table feature: the operations that follow its rules (the others
    refuse a table that enables it, naming the feature, the operation and ``why``)."""

    reader: bool
    writer: bool
    operations: frozenset[Operation] = ALL_OPERATIONS
    why: str = ""


#: Every table feature lakeops knows ("Valid Feature Names in Table Features"); a feature a table
#: enables that is not here is refused by every operation.
FEATURES: dict[str, FeatureSupport] = {
    "appendOnly": FeatureSupport(reader=False, writer=True),
    "invariants": FeatureSupport(reader=False, writer=True),
    "checkConstraints": FeatureSupport(reader=False, writer=True),
    "generatedColumns": FeatureSupport(reader=False, writer=True),
    "changeDataFeed": FeatureSupport(reader=False, writer=True),
    "columnMapping": FeatureSupport(reader=True, writer=True),
    "identityColumns": FeatureSupport(reader=False, writer=True),
    "deletionVectors": FeatureSupport(reader=True, writer=True),
    # https://github.com/delta-io/delta/blob/master/PROTOCOL.md#in-commit-timestamps: lakeops's commits
    # carry one, and versions from the enablement on are dated by it (lakeops.delta.commit_time).
    "inCommitTimestamp": FeatureSupport(reader=False, writer=True),
    # https://github.com/delta-io/delta/blob/master/PROTOCOL.md#timestamp-without-timezone-timestampntz
    # ``timestamp_ntz`` is a naive ``timestamp("us")`` in Arrow, serialised without a zone in
    # statistics and partition values (lakeops.delta.schema, .stats, .partitions); a table lakeops
    # creates enables the feature when its schema needs it (lakeops.delta.writer).
    "timestampNtz": FeatureSupport(reader=True, writer=True),
    # https://github.com/delta-io/delta/blob/master/PROTOCOL.md#type-widening: files written before a
    # widening are cast to the current type on read and the recorded changes validated
    # (lakeops.delta.type_widening); rewrites write the current type and never touch the schema, so
    # ``delta.typeChanges`` stays as it is. Delta 3.2-3.3 wrote the feature as ``typeWidening-preview``.
    "typeWidening": FeatureSupport(reader=True, writer=True),
    "typeWidening-preview": FeatureSupport(reader=True, writer=True),
    # https://github.com/delta-io/delta/blob/master/PROTOCOL.md#vacuum-protocol-check: VACUUM checks the
    # writer protocol as well as the reader's, which lakeops's vacuum does for every table
    # (lakeops.delta.maintenance.orphans).
    "vacuumProtocolCheck": FeatureSupport(reader=True, writer=True),
    # V2 checkpoints (UUID-named, sidecars) are read, written by ``checkpoint`` (never a classic or
    # multi-part one on such a table) and cleaned up with their sidecars by ``expire``.
    "v2Checkpoint": FeatureSupport(reader=True, writer=True),
    # Domains are replayed, kept in every checkpoint, and a commit conflicts with a concurrent one
    # changing a domain it writes.
    "domainMetadata": FeatureSupport(reader=False, writer=True),
    # https://github.com/delta-io/delta/blob/master/PROTOCOL.md#row-tracking: every commit lakeops lands
    # that adds files numbers them above the ``delta.rowTracking`` high-water mark at the version it
    # lands at; compaction materialises copied rows' stable row ids and commit versions when tracking
    # is enabled (lakeops.delta.row_tracking); appends (a change table's) number their new rows.
    "rowTracking": FeatureSupport(reader=False, writer=True),
    # https://github.com/delta-io/delta/blob/master/PROTOCOL.md#clustered-table: compaction clusters by
    # the ``delta.clustering`` columns in Z-order, only files unclustered or clustered by lakeops;
    # appends add unclustered files with full statistics (lakeops.delta.clustering).
    "clustering": FeatureSupport(reader=False, writer=True),
    # https://github.com/delta-io/delta/blob/master/PROTOCOL.md#variant-data-type (and its shredded
    # form): the log of such a table is read, checkpointed, expired and vacuumed (none of those opens a
    # data file), but variant values are never decoded or rewritten.
    **dict.fromkeys(
        ("variantType", "variantType-preview", "variantShredding", "variantShredding-preview"),
        FeatureSupport(
            reader=True,
            writer=True,
            operations=frozenset({"read", "checkpoint", "expire", "vacuum"}),
            why="lakeops does not decode or rewrite variant values; log maintenance and VACUUM run",
        ),
    ),
    # https://github.com/delta-io/delta/blob/master/PROTOCOL.md#writer-requirements-for-icebergcompatv2:
    # the requirements bind the data files and schema a writer adds; checkpoints, log expiry and
    # VACUUM add neither, and change capture only reads.
    **dict.fromkeys(
        ("icebergCompatV1", "icebergCompatV2"),
        FeatureSupport(
            reader=False,
            writer=True,
            operations=frozenset({"read", "cdc", "checkpoint", "expire", "vacuum"}),
            why="compaction would have to write partition values and nested field ids into its Parquet "
            "files as IcebergCompat requires, which lakeops does not yet",
        ),
    ),
}

READER_FEATURES = frozenset(name for name, f in FEATURES.items() if f.reader)
WRITER_FEATURES = frozenset(FEATURES)

#: Features implied by legacy protocol versions (before table features existed).
_LEGACY_WRITER = {
    2: {"appendOnly", "invariants"},
    3: {"checkConstraints"},
    4: {"changeDataFeed", "generatedColumns"},
    5: {"columnMapping"},
    6: {"identityColumns"},
}


def _refuse_unknown(table: str, kind: str, listed: list[str] | None, supported: frozenset[str], verb: str) -> None:
    unknown = sorted(set(listed or ()) - supported)
    if unknown:
        raise UnsupportedFeature(
            f"{table}: {kind} feature{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} not supported; "
            f"refusing to {verb} (supported: {', '.join(sorted(supported))})"
        )


def check_readable(protocol: Protocol, table: str, operation: Operation = "read") -> None:
    """Raise :class:`UnsupportedFeature` unless lakeops can read this table correctly: its log
    (``read``) or, for ``cdc``, its data too."""
    if protocol.min_reader_version > MAX_READER_VERSION:
        # Still name any unknown reader feature the protocol lists: "say which feature"
        # (docs/architecture.md, "Safety rules").
        listed = sorted(set(protocol.reader_features or ()) - READER_FEATURES)
        also = f"; unsupported reader features listed: {', '.join(listed)}" if listed else ""
        raise UnsupportedFeature(
            f"{table}: reader version {protocol.min_reader_version} is not supported "
            f"(lakeops reads up to {MAX_READER_VERSION}){also}"
        )
    if protocol.min_reader_version == 3:
        _refuse_unknown(table, "reader", protocol.reader_features, READER_FEATURES, "read")
    _refuse_for(protocol, table, operation)


def check_writable(protocol: Protocol, table: str, operation: Operation) -> None:
    """Raise :class:`UnsupportedFeature` unless lakeops's ``operation`` honours every feature the
    table enables."""
    check_readable(protocol, table)
    _refuse_for(protocol, table, operation)  # before the unknown writer features: the sharper message
    if protocol.min_writer_version > MAX_WRITER_VERSION:
        raise UnsupportedFeature(
            f"{table}: writer version {protocol.min_writer_version} is not supported "
            f"(lakeops writes up to {MAX_WRITER_VERSION})"
        )
    if protocol.min_writer_version == 7:
        _refuse_unknown(table, "writer", protocol.writer_features, WRITER_FEATURES, "write")


def _refuse_for(protocol: Protocol, table: str, operation: Operation) -> None:
    """Refuse ``operation`` when a known feature the table enables does not support it yet."""
    for name in sorted(enabled_features(protocol)):
        support = FEATURES.get(name)
        if support is not None and operation not in support.operations:
            raise UnsupportedFeature(
                f"{table}: table feature {name} is not supported by lakeops {operation} yet"
                + (f" ({support.why})" if support.why else "")
            )


def supported_operations(protocol: Protocol) -> dict[str, list[str]]:
    """For ``inspect``: each enabled feature and the operations lakeops runs on a table with it."""
    return {
        name: sorted(FEATURES[name].operations) if name in FEATURES else []
        for name in sorted(enabled_features(protocol))
    }


def enabled_features(protocol: Protocol) -> set[str]:
    """Every feature the protocol enables, legacy versions translated to feature names."""
    features: set[str] = set()
    if protocol.min_writer_version == 7:
        features |= set(protocol.writer_features or ())
    else:
        for version, implied in _LEGACY_WRITER.items():
            if protocol.min_writer_version >= version:
                features |= implied
    if protocol.min_reader_version == 3:
        features |= set(protocol.reader_features or ())
    elif protocol.min_reader_version == 2:
        features.add("columnMapping")
    return features
