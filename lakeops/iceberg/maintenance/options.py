"""The options of Iceberg's maintenance (compaction, manifest rewriting, snapshot expiry, orphan removal),
named as the reference implementation's procedures (``rewrite_data_files``, ``rewrite_manifests``, ...)
name them, in a module without the format's dependencies (pyarrow, fastavro) so that the command line
and :mod:`lakeops.ops.options` build on it. The shared fields are :mod:`lakeops.compaction_options`'
and :mod:`lakeops.retention_options`'."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from lakeops.compaction_options import CommitRetries, FileRewrites, Sizing
from lakeops.iceberg.maintenance.defaults import DEFAULT_MAX_FILE_GROUP_SIZE, PrefixMismatchMode
from lakeops.option_fields import ByteCount, ByteSize
from lakeops.retention_options import FileRetention, VersionRetention

__all__ = [
    "IcebergCompactionOptions",
    "IcebergManifestOptions",
    "IcebergOrphanOptions",
    "IcebergSnapshotExpiryOptions",
]


class IcebergCompactionOptions(Sizing, CommitRetries, FileRewrites):
    """The bin-pack options; ``None`` means "table property, else default"."""

    min_file_size: ByteCount | None = Field(
        default=None, description="files below this are rewritten (default 75% of target)"
    )
    max_file_size: ByteSize | None = Field(
        default=None, description="files above this are split (default 180% of target)"
    )
    delete_file_threshold: int | None = Field(
        default=None,
        ge=1,
        description="rewrite files with at least this many delete files applied",
        json_schema_extra={"metavar": "N"},
    )
    max_file_group_size: ByteSize = Field(
        default=DEFAULT_MAX_FILE_GROUP_SIZE, description="largest group one task rewrites"
    )
    sort: bool = Field(default=False, description="sort rewritten rows by the table's sort order")
    remove_dangling_deletes: bool = Field(
        default=True,
        description="keep delete files that no longer apply to any data file (default: remove them)",
        json_schema_extra={"flag": "--keep-dangling-deletes"},
    )
    manifest_threshold: int | None = Field(
        default=None,
        ge=0,
        description="read the data manifests in Spark tasks when the plan reads more than N of them (default 200)",
        json_schema_extra={"metavar": "N"},
    )


class IcebergManifestOptions(BaseModel):
    """Iceberg's checkpoint, ``rewrite_manifests``: which manifests are merged, into what size."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target_manifest_size: ByteSize | None = Field(
        default=None,
        description="size of the merged manifests, e.g. 8MB (default: commit.manifest.target-size-bytes, else 8MB)",
        json_schema_extra={"metavar": None},
    )
    rewrite_all: bool = Field(default=False, description="rewrite manifests at or above the target size too")


class IcebergSnapshotExpiryOptions(VersionRetention):
    """Snapshot expiry: the shared fields, and snapshots named to expire as well."""

    snapshot_id: list[int] | None = Field(
        default=None,
        description="Iceberg: expire this snapshot too (repeatable; never a branch or tag head)",
        json_schema_extra={"metavar": "ID"},
    )


class IcebergOrphanOptions(FileRetention):
    """Orphan removal: the shared fields, and what a path under another scheme or bucket is."""

    prefix_mismatch_mode: PrefixMismatchMode | None = Field(
        default=None,
        description="a listed file that the metadata names under another scheme or authority (bucket): stop with an "
        "error (default), ignore (keep it) or delete (treat it as unreferenced)",
    )
