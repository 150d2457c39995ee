"""The Icechunk FlatBuffers schemas, field by field, for :mod:`lakeops.icechunk.flatbuf_codec`.

Transcribed from ``common.fbs``, ``repo.fbs``, ``snapshot.fbs``, ``manifest.fbs`` and
``transaction_log.fbs`` in https://github.com/earth-mover/icechunk/tree/main/icechunk-format/flatbuffers
(the schemas the spec's "File Formats" section includes), in declaration order, which fixes each
field's slot. ``SnapshotInfo.pruned_ancestor_tx_logs`` is spec 2.1's addition ("Changes from spec
version 2 to 2.1"). Struct sizes include FlatBuffers' padding: ``ManifestFileInfo`` is an
``ObjectId12``, 4 bytes of padding, ``size_bytes: uint64``, ``num_chunk_refs: uint32`` and 4 more.
"""

from __future__ import annotations

from lakeops.icechunk.flatbuf_codec import Bytes, Child, Field, Scalar, Schema, String, Struct, UnionOf, Vector

__all__ = [
    "ARRAY_NODE",
    "EXPIRATION_RAN",
    "GROUP_NODE",
    "MANIFEST",
    "MANIFEST_FILE_INFO",
    "NEW_COMMIT",
    "OBJECT_ID8",
    "OBJECT_ID12",
    "REPO",
    "SNAPSHOT",
    "TRANSACTION_LOG",
]

OBJECT_ID12 = Struct(12, 1)
OBJECT_ID8 = Struct(8, 1)
MANIFEST_FILE_INFO = Struct(32, 8)
_CHUNK_INDEX_RANGE = Struct(8, 4)
_DIMENSION_SHAPE = Struct(16, 8)

_U8, _U16, _U32, _I32, _U64, _BOOL = Scalar("B"), Scalar("H"), Scalar("I"), Scalar("i"), Scalar("Q"), Scalar("?")


def _table(name: str, *fields: tuple[str, object]) -> Schema:
    return Schema(name, tuple(Field(field_name, kind) for field_name, kind in fields))  # type: ignore[arg-type]


_METADATA_ITEM = _table("MetadataItem", ("name", String()), ("value", Bytes()))

# repo.fbs
_REF = _table("Ref", ("name", String()), ("snapshot_index", _U32))
_SNAPSHOT_INFO = _table(
    "SnapshotInfo",
    ("id", OBJECT_ID12),
    ("parent_offset", _I32),
    ("flushed_at", _U64),
    ("message", String()),
    ("metadata", Vector(Child(_METADATA_ITEM))),
    ("pruned_ancestor_tx_logs", Vector(OBJECT_ID12)),
)
_REPO_STATUS = _table("RepoStatus", ("availability", _U8), ("set_at", _U64), ("limited_availability_reason", String()))
_NAMED = (("name", String()),)
_PREVIOUS = (("name", String()), ("previous_snap_id", OBJECT_ID12))
#: ``UpdateType`` union members, by type code (declaration order, from 1).
_UPDATE_TYPES = {
    1: _table("RepoInitializedUpdate"),
    2: _table("RepoMigratedUpdate", ("from_version", _U8), ("to_version", _U8)),
    3: _table("ConfigChangedUpdate"),
    4: _table("MetadataChangedUpdate"),
    5: _table("TagCreatedUpdate", *_NAMED),
    6: _table("TagDeletedUpdate", *_PREVIOUS),
    7: _table("BranchCreatedUpdate", *_NAMED),
    8: _table("BranchDeletedUpdate", *_PREVIOUS),
    9: _table("BranchResetUpdate", *_PREVIOUS),
    10: _table("NewCommitUpdate", ("branch", String()), ("new_snap_id", OBJECT_ID12)),
    11: _table(
        "CommitAmendedUpdate", ("branch", String()), ("previous_snap_id", OBJECT_ID12), ("new_snap_id", OBJECT_ID12)
    ),
    12: _table("NewDetachedSnapshotUpdate", ("new_snap_id", OBJECT_ID12)),
    13: _table("GCRanUpdate"),
    14: _table("ExpirationRanUpdate"),
    15: _table("FeatureFlagChangedUpdate", ("id", _U16), ("new_value", _BOOL), ("is_set", _BOOL)),
    16: _table("RepoStatusChangedUpdate", ("status", Child(_REPO_STATUS))),
}
NEW_COMMIT = 10
EXPIRATION_RAN = 14
_UPDATE = _table("Update", ("update_type", UnionOf(_UPDATE_TYPES)), ("updated_at", _U64), ("backup_path", String()))
REPO = _table(
    "Repo",
    ("spec_version", _U8),
    ("tags", Vector(Child(_REF))),
    ("branches", Vector(Child(_REF))),
    ("deleted_tags", Vector(String())),
    ("snapshots", Vector(Child(_SNAPSHOT_INFO))),
    ("status", Child(_REPO_STATUS)),
    ("metadata", Vector(Child(_METADATA_ITEM))),
    ("latest_updates", Vector(Child(_UPDATE))),
    ("repo_before_updates", String()),
    ("config", Bytes()),
    ("enabled_feature_flags", Vector(_U16)),
    ("disabled_feature_flags", Vector(_U16)),
    ("extra", Bytes()),
)

# snapshot.fbs
_MANIFEST_FILE_INFO_V2 = _table(
    "ManifestFileInfoV2", ("id", OBJECT_ID12), ("size_bytes", _U64), ("num_chunk_refs", _U32), ("extra", Bytes())
)
_MANIFEST_REF = _table("ManifestRef", ("object_id", OBJECT_ID12), ("extents", Vector(_CHUNK_INDEX_RANGE)))
_ARRAY_NODE_DATA = _table(
    "ArrayNodeData",
    ("shape", Vector(_DIMENSION_SHAPE)),
    ("dimension_names", Vector(Child(_table("DimensionName", ("name", String()))))),
    ("manifests", Vector(Child(_MANIFEST_REF))),
    ("shape_v2", Vector(Child(_table("DimensionShapeV2", ("array_length", _U64), ("num_chunks", _U32))))),
)
ARRAY_NODE = 1
GROUP_NODE = 2
_NODE_SNAPSHOT = _table(
    "NodeSnapshot",
    ("id", OBJECT_ID8),
    ("path", String()),
    ("user_data", Bytes()),
    ("node_data", UnionOf({ARRAY_NODE: _ARRAY_NODE_DATA, GROUP_NODE: _table("GroupNodeData")})),
    ("extra", Bytes()),
)
SNAPSHOT = _table(
    "Snapshot",
    ("id", OBJECT_ID12),
    ("parent_id", OBJECT_ID12),
    ("nodes", Vector(Child(_NODE_SNAPSHOT))),
    ("flushed_at", _U64),
    ("message", String()),
    ("metadata", Vector(Child(_METADATA_ITEM))),
    ("manifest_files", Vector(MANIFEST_FILE_INFO)),
    ("manifest_files_v2", Vector(Child(_MANIFEST_FILE_INFO_V2))),
    ("extra", Bytes()),
)

# manifest.fbs
_CHUNK_REF = _table(
    "ChunkRef",
    ("index", Vector(_U32)),
    ("inline", Bytes()),
    ("offset", _U64),
    ("length", _U64),
    ("chunk_id", OBJECT_ID12),
    ("location", String()),
    ("checksum_etag", String()),
    ("checksum_last_modified", _U32),
    ("compressed_location", Bytes()),
    ("extra", Bytes()),
)
_ARRAY_MANIFEST = _table(
    "ArrayManifest", ("node_id", OBJECT_ID8), ("refs", Vector(Child(_CHUNK_REF))), ("extra", Bytes())
)
MANIFEST = _table(
    "Manifest",
    ("id", OBJECT_ID12),
    ("arrays", Vector(Child(_ARRAY_MANIFEST))),
    ("location_dictionary", Bytes()),
    ("compression_algorithm", Scalar("B", 1)),
    ("extra", Bytes()),
)

# transaction_log.fbs
_NODE_IDS = Vector(OBJECT_ID8)
_ARRAY_UPDATED_CHUNKS = _table(
    "ArrayUpdatedChunks",
    ("node_id", OBJECT_ID8),
    ("chunks", Vector(Child(_table("ChunkIndices", ("coords", Vector(_U32)))))),
)
TRANSACTION_LOG = _table(
    "TransactionLog",
    ("id", OBJECT_ID12),
    ("new_groups", _NODE_IDS),
    ("new_arrays", _NODE_IDS),
    ("deleted_groups", _NODE_IDS),
    ("deleted_arrays", _NODE_IDS),
    ("updated_arrays", _NODE_IDS),
    ("updated_groups", _NODE_IDS),
    ("updated_chunks", Vector(Child(_ARRAY_UPDATED_CHUNKS))),
    ("moved_nodes", Vector(Child(_table("MoveOperation", ("from", String()), ("to", String()))))),
    ("extra", Bytes()),
)
