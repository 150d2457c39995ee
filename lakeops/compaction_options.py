"""The compaction options every format shares, each declared once.

Every format's compaction options model (:class:`lakeops.delta.maintenance.options.DeltaCompactionOptions`,
:class:`lakeops.iceberg.maintenance.options.IcebergCompactionOptions`,
:class:`lakeops.icechunk.maintenance.options.IcechunkPackingOptions`) is built from the groups here,
the API's :class:`lakeops.ops.options.CompactionOptions` from those models, and the registry's
compaction policy (:class:`lakeops.registry.CompactionPolicy`) from the groups a policy sets. A
field's ``description`` is its help on the command line (``lakeops compact --help``, generated from
these models by :mod:`spark_jobs.option_arguments`) and its line in the docs
(:mod:`lakeops.option_fields`). A module of pydantic and the unit parsers only, so that the
command line imports no format's code to show its options.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lakeops.errors import LakeopsError
from lakeops.option_fields import ByteSize, OptionKind, Predicate
from lakeops.units import parse_duration

__all__ = ["CommitRetries", "FileRewrites", "RewritePiece", "Sizing"]


class _Options(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Sizing(_Options):
    """What a rewrite aims at and when a group is worth it: every format's compaction and the registry's policy."""

    target_file_size: ByteSize | None = Field(
        default=None,
        description="size of the files written, e.g. 128MB (default: the table property delta.targetFileSize / "
        "write.target-file-size-bytes, else 128MB for Delta, 512MB for Iceberg, 64MB for Icechunk)",
    )
    min_input_files: int = Field(
        default=5, ge=1, description="smallest group worth rewriting", json_schema_extra={"metavar": "N"}
    )


class RewritePiece(_Options):
    """A bounded piece of a compaction (:mod:`lakeops.ops.bounded`), the rest left for the next run."""

    max_rewrite_bytes: ByteSize | None = Field(
        default=None,
        description="rewrite only the first file groups whose input fits this size (at least one): a piece of "
        "the compaction, the rest left for the next run",
    )


class CommitRetries(_Options):
    """How long a commit that loses races to writers keeps rebasing: Delta's and Iceberg's compaction,
    and the registry's policy."""

    commit_retries: int | None = Field(
        default=None,
        ge=0,
        description="retries of a commit that lost a race, each rebased on the commits that landed first "
        "(default: Iceberg's commit.retry.num-retries, else 10)",
        json_schema_extra={"metavar": "N"},
    )
    commit_timeout: Annotated[timedelta, OptionKind("duration", "DURATION")] | None = Field(
        default=None,
        description="total time those retries may take, e.g. 10m (default: Iceberg's "
        "commit.retry.total-timeout-ms, else 30m)",
    )

    @field_validator("commit_timeout", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        """``"10m"`` as the command line and the registry write durations."""
        if not isinstance(value, str):
            return value
        try:
            return parse_duration(value)
        except LakeopsError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("commit_timeout")
    @classmethod
    def _positive(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError(f"expected a positive duration, got {value}")
        return value


class FileRewrites(_Options):
    """Which partitions a rewrite of data files takes, and how often it commits: Delta and Iceberg."""

    where: Predicate | None = Field(
        default=None,
        description="partition predicate, e.g. \"day >= '2024-01-01' AND region = 'eu'\" (Iceberg: partition "
        "field names, or columns partitioned by identity)",
    )
    partial_progress: int | None = Field(
        default=None,
        ge=1,
        description="commit after every K file groups (Delta: each batch its own OPTIMIZE version; Iceberg: its "
        "own snapshot), so a failure keeps the batches that landed; the error names them and the exit status is 1",
        json_schema_extra={"metavar": "K"},
    )
