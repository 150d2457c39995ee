"""Delta log actions as pydantic models (protocol sections "Actions" and "Deletion Vectors").

Field names mirror the protocol through aliases; unknown fields are kept (``extra="allow"``) because
the protocol says readers must ignore unrecognised fields, and a rewrite (checkpoint, compaction)
must not silently drop what a newer writer recorded. Fields the protocol types ``long`` or ``int``
are bounded as those types are (:data:`Long`, :data:`Int`): a larger number in a log is corrupt, and
is refused when the line is read, not later by Arrow, naming nothing.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from lakeops.errors import CorruptFile
from lakeops.integer_types import BOUNDS, Int, Long

_A = TypeVar("_A", bound="ActionModel")



class ActionModel(BaseModel):
    """The base of every action model (and of the structures actions hold): protocol field names,
    frozen, unknown fields kept."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="allow")

    def to_json_dict(self) -> dict[str, Any]:
        """The action's body as the log writes it: protocol field names, absent rather than null."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class DeletionVectorDescriptor(ActionModel):
    """Where a deletion vector lives and how many rows it removes ("Deletion Vector Descriptor Schema")."""

    storage_type: Literal["u", "i", "p"] = Field(alias="storageType")
    path_or_inline_dv: str = Field(alias="pathOrInlineDv")
    offset: Int | None = None
    size_in_bytes: Int = Field(alias="sizeInBytes")
    cardinality: Long

    @property
    def unique_id(self) -> str:
        """``<storageType><pathOrInlineDv>[@<offset>]`` — the DV half of a logical file's key."""
        base = f"{self.storage_type}{self.path_or_inline_dv}"
        return base if self.offset is None else f"{base}@{self.offset}"


class Format(ActionModel):
    provider: str = "parquet"
    options: dict[str, str] = Field(default_factory=dict)


class Metadata(ActionModel):
    """The ``metaData`` action: schema, partitioning and table properties."""

    id: str
    name: str | None = None
    description: str | None = None
    format: Format = Field(default_factory=Format)
    schema_string: str = Field(alias="schemaString")
    partition_columns: list[str] = Field(alias="partitionColumns", default_factory=list)
    created_time: Long | None = Field(alias="createdTime", default=None)
    configuration: dict[str, str] = Field(default_factory=dict)


class Protocol(ActionModel):
    """The ``protocol`` action: reader/writer versions and, from 3/7, the table feature lists."""

    min_reader_version: Int = Field(alias="minReaderVersion")
    min_writer_version: Int = Field(alias="minWriterVersion")
    reader_features: list[str] | None = Field(alias="readerFeatures", default=None)
    writer_features: list[str] | None = Field(alias="writerFeatures", default=None)


class Add(ActionModel):
    """The ``add`` action: one logical file (data file + optional DV) present in the table."""

    path: str
    partition_values: dict[str, str | None] = Field(alias="partitionValues", default_factory=dict)
    size: Long
    modification_time: Long = Field(alias="modificationTime")
    data_change: bool = Field(alias="dataChange")
    stats: str | None = None
    tags: dict[str, str | None] | None = None
    deletion_vector: DeletionVectorDescriptor | None = Field(alias="deletionVector", default=None)

    @property
    def key(self) -> tuple[str, str | None]:
        """The logical-file primary key ``(path, dvId)`` of "Action Reconciliation"."""
        return (self.path, self.deletion_vector.unique_id if self.deletion_vector else None)

    @property
    def num_records(self) -> int | None:
        """``numRecords`` from the JSON stats, if recorded."""
        if not self.stats:
            return None
        try:
            value = json.loads(self.stats).get("numRecords")
            count = int(value) if value is not None else None
        except (ValueError, TypeError, AttributeError, OverflowError, RecursionError) as exc:  # hostile stats
            raise CorruptFile(
                f"add {self.path}: stats {self.stats[:80]!r} hold no readable numRecords ({type(exc).__name__})"
            ) from None
        low, high = BOUNDS["long"]
        if count is not None and not low <= count <= high:
            raise CorruptFile(f"add {self.path}: stats numRecords {count} is outside the protocol's long range")
        return count


class Remove(ActionModel):
    """The ``remove`` action: a tombstone for a logical file no longer in the table."""

    path: str
    deletion_timestamp: Long | None = Field(alias="deletionTimestamp", default=None)
    data_change: bool = Field(alias="dataChange")
    extended_file_metadata: bool | None = Field(alias="extendedFileMetadata", default=None)
    partition_values: dict[str, str | None] | None = Field(alias="partitionValues", default=None)
    size: Long | None = None
    stats: str | None = None
    tags: dict[str, str | None] | None = None
    deletion_vector: DeletionVectorDescriptor | None = Field(alias="deletionVector", default=None)

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.path, self.deletion_vector.unique_id if self.deletion_vector else None)


class AddCDCFile(ActionModel):
    """The ``cdc`` action: a file holding only the rows this version changed."""

    path: str
    partition_values: dict[str, str | None] = Field(alias="partitionValues", default_factory=dict)
    size: Long
    data_change: bool = Field(alias="dataChange", default=False)
    tags: dict[str, str | None] | None = None


class Txn(ActionModel):
    """The ``txn`` action: an application's idempotency marker."""

    app_id: str = Field(alias="appId")
    version: Long
    last_updated: Long | None = Field(alias="lastUpdated", default=None)


class CommitInfo(ActionModel):
    """The ``commitInfo`` action: free-form provenance; only the fields lakeops reads are typed."""

    timestamp: Long | None = None
    #: "In-Commit Timestamps": when the commit is considered to have succeeded (first action of the commit).
    in_commit_timestamp: Long | None = Field(alias="inCommitTimestamp", default=None)
    operation: str | None = None
    operation_parameters: dict[str, Any] | None = Field(alias="operationParameters", default=None)
    operation_metrics: dict[str, Any] | None = Field(alias="operationMetrics", default=None)
    engine_info: str | None = Field(alias="engineInfo", default=None)


class DomainMetadata(ActionModel):
    """The ``domainMetadata`` action: one named domain's configuration, or its tombstone
    (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#domain-metadata)."""

    domain: str
    configuration: str
    removed: bool = False


class Sidecar(ActionModel):
    """The ``sidecar`` action of a V2 checkpoint: a parquet file of its add/remove actions under
    ``_delta_log/_sidecars`` (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#sidecar-file-information)."""

    path: str
    size_in_bytes: Long = Field(alias="sizeInBytes")
    modification_time: Long = Field(alias="modificationTime")
    tags: dict[str, str | None] | None = None


class CheckpointMetadata(ActionModel):
    """The ``checkpointMetadata`` action every V2 checkpoint holds once
    (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#checkpoint-metadata)."""

    version: Long
    tags: dict[str, str | None] | None = None


#: The single JSON key each action is wrapped in, in log files and checkpoint columns.
ACTION_KEYS: dict[str, type[ActionModel]] = {
    "protocol": Protocol,
    "metaData": Metadata,
    "add": Add,
    "remove": Remove,
    "cdc": AddCDCFile,
    "txn": Txn,
    "commitInfo": CommitInfo,
    "domainMetadata": DomainMetadata,
    "sidecar": Sidecar,
    "checkpointMetadata": CheckpointMetadata,
}
KEY_OF: dict[type[ActionModel], str] = {cls: key for key, cls in ACTION_KEYS.items()}


def action_to_line(action: ActionModel) -> str:
    """One line of a commit file: ``{"<key>": {...}}`` with compact separators."""
    return json.dumps({KEY_OF[type(action)]: action.to_json_dict()}, separators=(",", ":"))


@contextmanager
def bulk_load() -> Iterator[None]:
    """Pause the cyclic garbage collector while a log is turned into (acyclic) action objects.

    Each of the collector's full passes walks every object alive, and building a million actions
    triggers dozens of them: half the time of a large replay. Actions hold no reference cycles, so
    nothing is left for the collector; it runs again (if it was enabled) when the block ends.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def trusted(cls: type[_A], values: dict[str, Any], fields_set: set[str], extra: dict[str, Any]) -> _A:
    """An action built from values already of its fields' exact types, without validation.

    For columns whose Arrow types were checked against the model (checkpoint reading): what
    ``model_validate`` would store, laid out as it stores it (``values`` holds every field by
    attribute name, defaults included; ``fields_set`` the fields the input gave, which frozen models
    never mutate and may share; ``extra`` the undeclared fields). ``tests/unit/delta`` checks the
    result equals ``model_validate``'s for every field kind.
    """
    action = cls.__new__(cls)
    object.__setattr__(action, "__dict__", values)
    object.__setattr__(action, "__pydantic_fields_set__", fields_set)
    object.__setattr__(action, "__pydantic_extra__", extra)
    object.__setattr__(action, "__pydantic_private__", None)
    return action
