"""The options of Iceberg's compaction, named as the reference implementation's ``rewrite_data_files``
names them, in a module without the format's dependencies (pyarrow, fastavro) so that the command line
and :class:`lakeops.ops.options.CompactionOptions` build on it. The shared fields are
:mod:`lakeops.compaction_options`'."""

from __future__ import annotations

from pydantic import Field

from lakeops.compaction_options import CommitRetries, FileRewrites, Sizing
from lakeops.iceberg.maintenance.defaults import DEFAULT_MAX_FILE_GROUP_SIZE
from lakeops.option_fields import ByteCount, ByteSize

__all__ = ["IcebergCompactionOptions"]


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
