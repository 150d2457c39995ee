"""Protocol versions and table features ("Protocol Evolution", "Table Features", Appendix
"Valid Feature Names in Table Features", "Writer Version Requirements", "Reader Version Requirements").

lakeops implements every feature the specification names. A table listing anything else is refused:
for reading if the feature is a reader feature, for writing if it is a writer feature, and the error
names the feature.
"""

from __future__ import annotations

from lakeops.delta.actions import Metadata, Protocol
from lakeops.errors import UnsupportedFeature

MAX_READER_VERSION = 3
MAX_WRITER_VERSION = 7

READER_FEATURES = frozenset({"columnMapping", "deletionVectors"})
WRITER_FEATURES = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "generatedColumns",
        "changeDataFeed",
        "columnMapping",
        "identityColumns",
        "deletionVectors",
    }
)

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


def check_readable(protocol: Protocol, table: str) -> None:
    """Raise :class:`UnsupportedFeature` unless lakeops can read this table correctly."""
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


def check_writable(protocol: Protocol, table: str) -> None:
    """Raise :class:`UnsupportedFeature` unless lakeops can also write this table correctly."""
    check_readable(protocol, table)
    if protocol.min_writer_version > MAX_WRITER_VERSION:
        raise UnsupportedFeature(
            f"{table}: writer version {protocol.min_writer_version} is not supported "
            f"(lakeops writes up to {MAX_WRITER_VERSION})"
        )
    if protocol.min_writer_version == 7:
        _refuse_unknown(table, "writer", protocol.writer_features, WRITER_FEATURES, "write")


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


def is_append_only(protocol: Protocol, metadata: Metadata) -> bool:
    """``delta.appendOnly=true`` on a protocol that supports the feature ("Append-only Tables")."""
    return "appendOnly" in enabled_features(protocol) and (
        metadata.configuration.get("delta.appendOnly", "false").lower() == "true"
    )


def column_mapping_active(protocol: Protocol, metadata: Metadata) -> str:
    """The column mapping mode the reader must honour: ``none``, ``name`` or ``id``."""
    if "columnMapping" not in enabled_features(protocol):
        return "none"
    return metadata.configuration.get("delta.columnMapping.mode", "none")
