"""Iceberg table metadata ("Table Metadata", "Table Metadata Fields", "Snapshots", "Snapshot
References", "Table Statistics"; Appendix C "Table Metadata and Snapshots"; Appendix E).

One model reads v1, v2 and v3 files and presents them as v2, with Appendix E's defaults where v1 is
silent (sequence numbers 0; ``schemas``/``partition-specs``/``sort-orders`` built from the deprecated
single-value fields). Serialising goes back to the file's own version: v1 files keep their required
``schema`` and ``partition-spec`` and never gain sequence numbers.

Fields this model does not name (a newer spec's additions) are kept and written back untouched, so
rewriting a table's metadata never drops what another writer recorded. Which operations may write
which format version: :meth:`TableMetadata.check_writable` (v3: expiry, orphan removal, manifest
rewrites and compaction, each keeping row lineage).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any, Literal, get_args
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lakeops.errors import CorruptFile, ProtocolError, UnsupportedFeature, VersionNotFound
from lakeops.iceberg.partitioning import PARTITION_DATA_ID_START, UNSORTED, PartitionSpec, SortOrder
from lakeops.iceberg.types import Schema
from lakeops.integer_types import Long

__all__ = [
    "LONG_MAX",
    "MAIN_BRANCH",
    "SUPPORTED_READ_VERSIONS",
    "TABLE_OPERATIONS",
    "BlobMetadata",
    "MetadataLogEntry",
    "PartitionStatisticsFile",
    "Snapshot",
    "SnapshotLogEntry",
    "SnapshotRef",
    "StatisticsFile",
    "TableMetadata",
    "TableOperation",
    "parse_metadata",
    "serialize_metadata",
]

MAIN_BRANCH = "main"
SUPPORTED_READ_VERSIONS = (1, 2, 3)

_FROZEN = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")
#: Open to fields a newer spec adds, so they survive a rewrite.
_OPEN = ConfigDict(frozen=True, populate_by_name=True, extra="allow")


#: What lakeops does to an Iceberg table: reading (inspect, scans), each operation that writes or
#: deletes, and ``cdc`` (reading rows into a change table); ``commit`` is any other metadata commit
#: (a generic change, not reported by ``inspect``).
TableOperation = Literal["read", "compact", "checkpoint", "expire", "orphans", "cdc", "commit"]
TABLE_OPERATIONS: tuple[TableOperation, ...] = get_args(TableOperation)

#: Column types lakeops parses and copies byte for byte (manifests, expiry, orphans) but cannot read
#: into rows or write ("Primitive Types", "Semi-structured Types": ``variant`` and the geospatial
#: types have no Arrow mapping here; ``unknown`` is never stored in data files), and the operations
#: that decode rows and so refuse them.
_OPAQUE_TYPES = ("variant", "geometry", "geography", "unknown")
#: The largest ``long`` ("Primitive Types"): sequence numbers and row ids are longs.
LONG_MAX = 2**63 - 1
_DECODES_ROWS: tuple[TableOperation, ...] = ("compact", "cdc")

_ROW_LINEAGE = (
    "row lineage (https://iceberg.apache.org/spec/#row-lineage): a new snapshot must assign first-row-id "
    "and next-row-id, and rows copied into new files must keep _row_id and _last_updated_sequence_number"
)
#: Per format version, the operations that cannot honour its rules yet and why. On v3, expiry
#: only removes snapshots (the fields it does not name are kept), orphans only deletes what no
#: snapshot reaches (Puffin deletion vectors included), a manifest rewrite or compaction assigns the
#: row ids of its snapshot and compaction copies the rows' lineage into the files it writes. Another
#: commit (adding files or deletes) would have to write deletion vectors, not position delete files.
_REFUSED: dict[int, dict[TableOperation, str]] = {
    3: {"commit": _ROW_LINEAGE + "; deletes must be written as deletion vectors"},
}


class Snapshot(BaseModel):
    model_config = _OPEN

    snapshot_id: Long = Field(alias="snapshot-id")
    parent_snapshot_id: Long | None = Field(default=None, alias="parent-snapshot-id")
    sequence_number: Long = Field(default=0, alias="sequence-number")  # Appendix E: 0 when reading v1
    timestamp_ms: Long = Field(alias="timestamp-ms")
    manifest_list: str | None = Field(default=None, alias="manifest-list")
    manifests: tuple[str, ...] | None = None  # v1 only, instead of a manifest list
    summary: dict[str, str] | None = None
    schema_id: int | None = Field(default=None, alias="schema-id")
    #: v3 "Snapshot Row IDs": the first row id of the snapshot's manifests and how many it assigned;
    #: both unset on snapshots written before a table's upgrade to v3.
    first_row_id: Long | None = Field(default=None, alias="first-row-id", ge=0)
    added_rows: Long | None = Field(default=None, alias="added-rows", ge=0)

    @property
    def operation(self) -> str | None:
        return (self.summary or {}).get("operation")


class SnapshotRef(BaseModel):
    """A branch or tag with its optional retention fields ("Snapshot References")."""

    model_config = _OPEN

    snapshot_id: Long = Field(alias="snapshot-id")
    type: Literal["branch", "tag"]
    min_snapshots_to_keep: int | None = Field(default=None, alias="min-snapshots-to-keep", gt=0)
    max_snapshot_age_ms: Long | None = Field(default=None, alias="max-snapshot-age-ms", gt=0)
    max_ref_age_ms: Long | None = Field(default=None, alias="max-ref-age-ms", gt=0)


class SnapshotLogEntry(BaseModel):
    model_config = _FROZEN

    snapshot_id: Long = Field(alias="snapshot-id")
    timestamp_ms: Long = Field(alias="timestamp-ms")


class MetadataLogEntry(BaseModel):
    model_config = _FROZEN

    metadata_file: str = Field(alias="metadata-file")
    timestamp_ms: Long = Field(alias="timestamp-ms")


class BlobMetadata(BaseModel):
    model_config = _OPEN

    type: str
    snapshot_id: Long = Field(alias="snapshot-id")
    sequence_number: Long = Field(alias="sequence-number")
    fields: tuple[int, ...]
    properties: dict[str, str] | None = None


class StatisticsFile(BaseModel):
    """A Puffin statistics file of one snapshot ("Table Statistics")."""

    model_config = _OPEN

    snapshot_id: Long = Field(alias="snapshot-id")
    statistics_path: str = Field(alias="statistics-path")
    file_size_in_bytes: Long = Field(alias="file-size-in-bytes")
    file_footer_size_in_bytes: Long = Field(alias="file-footer-size-in-bytes")
    key_metadata: str | None = Field(default=None, alias="key-metadata")
    blob_metadata: tuple[BlobMetadata, ...] = Field(default=(), alias="blob-metadata")


class PartitionStatisticsFile(BaseModel):
    """Partition statistics of one snapshot (added to the spec after v2; PyIceberg writes the list)."""

    model_config = _OPEN

    snapshot_id: Long = Field(alias="snapshot-id")
    statistics_path: str = Field(alias="statistics-path")
    file_size_in_bytes: Long = Field(alias="file-size-in-bytes")


class TableMetadata(BaseModel):
    """A table's metadata file, read as v2 (Appendix E) whatever its version."""

    model_config = _OPEN

    format_version: int = Field(alias="format-version")
    table_uuid: UUID | None = Field(default=None, alias="table-uuid")
    location: str
    last_sequence_number: Long = Field(default=0, alias="last-sequence-number")
    last_updated_ms: Long = Field(alias="last-updated-ms")
    last_column_id: int = Field(alias="last-column-id")
    schemas: tuple[Schema, ...]
    current_schema_id: int = Field(alias="current-schema-id")
    partition_specs: tuple[PartitionSpec, ...] = Field(alias="partition-specs")
    default_spec_id: int = Field(alias="default-spec-id")
    last_partition_id: int = Field(alias="last-partition-id")
    properties: dict[str, str] = {}
    current_snapshot_id: Long | None = Field(default=None, alias="current-snapshot-id")
    snapshots: tuple[Snapshot, ...] = ()
    snapshot_log: tuple[SnapshotLogEntry, ...] = Field(default=(), alias="snapshot-log")
    metadata_log: tuple[MetadataLogEntry, ...] = Field(default=(), alias="metadata-log")
    sort_orders: tuple[SortOrder, ...] = Field(default=(UNSORTED,), alias="sort-orders")
    default_sort_order_id: int = Field(default=0, alias="default-sort-order-id")
    refs: dict[str, SnapshotRef] = {}
    statistics: tuple[StatisticsFile, ...] = ()
    partition_statistics: tuple[PartitionStatisticsFile, ...] = Field(default=(), alias="partition-statistics")
    #: v3 "Row Lineage": the next row id a commit may assign (0 on an upgraded table); None before v3.
    next_row_id: Long | None = Field(default=None, alias="next-row-id", ge=0)

    @model_validator(mode="before")
    @classmethod
    def _as_v2(cls, data: Any) -> Any:
        """Appendix E "Reading v1 metadata for v2": fill the v2 fields from the deprecated ones."""
        if not isinstance(data, dict):
            return data
        # Each step applies only to the shapes it knows; anything else is left for the fields'
        # validation to reject with a message (a type error here would escape as a crash).
        data = dict(data)
        schema = data.get("schema")
        if "schemas" not in data and isinstance(schema, dict):
            schema = {"schema-id": 0, **schema}
            data["schemas"] = [schema]
            data.setdefault("current-schema-id", schema["schema-id"])
        v1_fields = data.get("partition-spec")
        if (
            "partition-specs" not in data
            and isinstance(v1_fields, list)
            and all(isinstance(f, dict) for f in v1_fields)
        ):
            spec = PartitionSpec.from_v1_fields(v1_fields)
            data["partition-specs"] = [spec.to_json()]
            data.setdefault("default-spec-id", spec.spec_id)
        specs = data.get("partition-specs")
        if "last-partition-id" not in data and isinstance(specs, list):
            fields = [
                f for s in specs if isinstance(s, dict) and isinstance(s.get("fields"), list) for f in s["fields"]
            ]
            ids = [f["field-id"] for f in fields if isinstance(f, dict) and type(f.get("field-id")) is int]
            data["last-partition-id"] = max(ids, default=PARTITION_DATA_ID_START - 1)
        if data.get("current-snapshot-id") == -1:  # old Java writers' "no snapshot"
            data["current-snapshot-id"] = None
        # "There is always a main branch reference pointing to the current-snapshot-id."
        refs = data.get("refs") or {}
        if isinstance(refs, dict):
            refs = dict(refs)
            if MAIN_BRANCH not in refs and data.get("current-snapshot-id") is not None:
                refs[MAIN_BRANCH] = {"snapshot-id": data["current-snapshot-id"], "type": "branch"}
            data["refs"] = refs
        return data

    @model_validator(mode="after")
    def _consistent(self) -> TableMetadata:
        if self.current_schema_id not in {s.schema_id for s in self.schemas}:
            raise ValueError(f"current-schema-id {self.current_schema_id} is not in schemas")
        if self.default_spec_id not in {s.spec_id for s in self.partition_specs}:
            raise ValueError(f"default-spec-id {self.default_spec_id} is not in partition-specs")
        main = self.refs.get(MAIN_BRANCH)
        if main is not None and main.snapshot_id != self.current_snapshot_id:
            raise ValueError(
                f"refs.main points at {main.snapshot_id} but current-snapshot-id is {self.current_snapshot_id}"
            )
        known = {s.snapshot_id for s in self.snapshots}
        for name, ref in self.refs.items():
            if ref.snapshot_id not in known:
                raise ValueError(f"ref {name!r} points at snapshot {ref.snapshot_id}, which is not in snapshots")
        return self

    # --- lookups ------------------------------------------------------------------------------

    def current_schema(self) -> Schema:
        return self.schema_by_id(self.current_schema_id)

    def schema_by_id(self, schema_id: int) -> Schema:
        for schema in self.schemas:
            if schema.schema_id == schema_id:
                return schema
        raise ProtocolError(f"{self.location}: no schema with id {schema_id}")

    def schemas_newest_first(self) -> list[Schema]:
        """The current schema, then the others newest first: how a dropped column is still typed."""
        others = sorted((s for s in self.schemas if s.schema_id != self.current_schema_id), key=lambda s: -s.schema_id)
        return [self.current_schema(), *others]

    def spec_by_id(self, spec_id: int) -> PartitionSpec:
        for spec in self.partition_specs:
            if spec.spec_id == spec_id:
                return spec
        raise ProtocolError(f"{self.location}: no partition spec with id {spec_id}")

    def default_spec(self) -> PartitionSpec:
        return self.spec_by_id(self.default_spec_id)

    def sort_order_by_id(self, order_id: int) -> SortOrder:
        for order in self.sort_orders:
            if order.order_id == order_id:
                return order
        raise ProtocolError(f"{self.location}: no sort order with id {order_id}")

    def default_sort_order(self) -> SortOrder:
        return self.sort_order_by_id(self.default_sort_order_id)

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot:
        for snapshot in self.snapshots:
            if snapshot.snapshot_id == snapshot_id:
                return snapshot
        raise VersionNotFound(f"{self.location}: no snapshot {snapshot_id} (expired, or never existed)")

    def current_snapshot(self) -> Snapshot | None:
        return None if self.current_snapshot_id is None else self.snapshot_by_id(self.current_snapshot_id)

    def snapshot_for_ref(self, name: str) -> Snapshot | None:
        """The snapshot a branch or tag points at; None for ``main`` of an empty table."""
        ref = self.refs.get(name)
        if ref is None:
            if name == MAIN_BRANCH:
                return None
            raise VersionNotFound(f"{self.location}: no branch or tag named {name!r}")
        return self.snapshot_by_id(ref.snapshot_id)

    def ancestors(self, snapshot_id: int) -> Iterator[Snapshot]:
        """The snapshot and its parents, newest first, as far as they are still in the metadata."""
        by_id = {s.snapshot_id: s for s in self.snapshots}
        current = by_id.get(snapshot_id)
        seen: set[int] = set()
        while current is not None and current.snapshot_id not in seen:
            seen.add(current.snapshot_id)
            yield current
            current = by_id.get(current.parent_snapshot_id) if current.parent_snapshot_id is not None else None

    def int_property(self, name: str, default: int) -> int:
        raw = self.properties.get(name)
        if raw is None:
            return default
        try:
            return int(raw)
        except ValueError:
            raise ProtocolError(f"{self.location}: table property {name}={raw!r} is not an integer") from None

    def supported_operations(self) -> list[TableOperation]:
        """The operations lakeops runs on this table (``inspect`` reports them)."""
        return [op for op in TABLE_OPERATIONS if op != "commit" and self._refusal(op) is None]

    def refused_operations(self) -> dict[str, str]:
        """Each operation lakeops refuses on this table, with the refusal it raises (for ``inspect``)."""
        refused: dict[str, str] = {}
        for operation in TABLE_OPERATIONS:
            if operation == "commit":  # not an operation of its own: the commits above check their own
                continue
            try:
                self.check_writable(operation)
            except UnsupportedFeature as exc:
                refused[operation] = str(exc)
        return refused

    def next_sequence_number(self) -> int:
        """The sequence number of the next snapshot ("Sequence Numbers": one past
        ``last-sequence-number``, a long; 0 in format version 1, which has none). Past the largest long
        there is none: refused naming the table."""
        if self.format_version < 2:
            return 0
        if self.last_sequence_number >= LONG_MAX:
            raise ProtocolError(
                f"{self.location}: last-sequence-number is {self.last_sequence_number}: no later snapshot can "
                f"have a sequence number (a long, at most {LONG_MAX})"
            )
        return self.last_sequence_number + 1

    def check_writable(self, operation: TableOperation) -> None:
        """Refuse ``operation`` where it cannot follow the table's rules yet: a format version's
        (naming the version and the missing feature) or a column type's (naming the column)."""
        why = self._refusal(operation)
        if why is not None:
            raise UnsupportedFeature(f"{self.location}: lakeops {operation} does not support {why}")

    def _refusal(self, operation: TableOperation) -> str | None:
        if self.format_version not in SUPPORTED_READ_VERSIONS:
            return f"Iceberg format-version {self.format_version}"
        why = _REFUSED.get(self.format_version, {}).get(operation)
        if why is not None:
            return f"Iceberg format-version {self.format_version} tables yet: {why}"
        if operation in _DECODES_ROWS:
            for path, _, type_, _ in self.current_schema().walk():
                kind = str(type_).split("(")[0]
                if kind in _OPAQUE_TYPES:
                    return f"columns of type {kind} yet ({'.'.join(path)} is {type_}; it reads and writes no such rows)"
        return None

    # --- serialisation ------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The metadata JSON for this table's format version (Appendix C and E)."""
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        if self.format_version == 1:
            data.pop("last-sequence-number", None)
            for snapshot in data.get("snapshots", []):
                snapshot.pop("sequence-number", None)
            data["schema"] = self.current_schema().to_json()
            data["partition-spec"] = self.default_spec().fields_json()
        else:
            for snapshot in data.get("snapshots", []):
                snapshot.pop("manifests", None)
        return data


def parse_metadata(payload: bytes, location: str) -> TableMetadata:
    """Decode a metadata file (plain or gzip-compressed JSON); every failure names ``location``."""
    if payload[:2] == b"\x1f\x8b":
        try:
            payload = gzip.decompress(payload)
        except (OSError, EOFError) as exc:
            raise CorruptFile(f"{location}: corrupt gzip-compressed metadata file ({exc})") from exc
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError) as exc:  # also over-long integers and too deep nesting
        raise CorruptFile(f"{location}: not a JSON metadata file ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise CorruptFile(f"{location}: metadata is a JSON {type(data).__name__}, not an object")
    version = data.get("format-version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ProtocolError(f"{location}: format-version is missing or not an integer ({version!r})")
    if version not in SUPPORTED_READ_VERSIONS:
        raise UnsupportedFeature(
            f"{location}: Iceberg format-version {version} is not supported (lakeops reads "
            f"{', '.join(map(str, SUPPORTED_READ_VERSIONS))})"
        )
    try:
        return TableMetadata.model_validate(data)
    except ValidationError as exc:  # a field the spec's types do not hold (a snapshot id past a long, ...)
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()[:5]
        )
        raise CorruptFile(f"{location}: invalid table metadata: {problems}") from None
    except (ProtocolError, ValueError) as exc:
        raise ProtocolError(f"{location}: invalid table metadata: {exc}") from None


def serialize_metadata(metadata: TableMetadata) -> bytes:
    """The bytes of a metadata file (the operation was checked by its commit)."""
    return json.dumps(metadata.to_json(), separators=(",", ":")).encode()
