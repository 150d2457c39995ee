"""Manifests: the Avro files that list a snapshot's data and delete files with their partition
tuples, metrics and tracking fields ("Manifests" with its key-value metadata and notes, "Manifest
Entry Fields", "Sequence Number Inheritance"; Appendix A "Avro"; Appendix E for v1).

Reading applies inheritance exactly as the spec states it, because delete files are matched to
data files by these numbers and a wrong one silently resurrects or hides rows: a null snapshot id
takes the manifest's ``added_snapshot_id``; null sequence numbers take the manifest's sequence
number *only* on ADDED entries, and an EXISTING or DELETED entry without them is a
:class:`ProtocolError`; a v1 manifest (no sequence number column) reads 0 for both.

Writing follows Appendix E per version: v1 writes no sequence numbers, content or equality ids but
the deprecated ``block_size_in_bytes``; v2 writes ADDED entries with a null file sequence number
(and a null data sequence number unless the caller gives an older one) so both are inherited from
the manifest list at commit, and EXISTING/DELETED entries with both numbers explicit; v3 adds the
row-lineage and deletion-vector fields, a data file's ``first_row_id`` written as read (inherited)
on EXISTING/DELETED entries and null on ADDED ones ("First Row ID Inheritance"). The returned
:class:`ManifestFile` leaves the manifest's sequence number unassigned for the list writer.
Partition summaries cover every entry, deleted ones too, as the reference writers compute them:
readers of a snapshot's deletions prune manifests with the same summaries.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from enum import IntEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lakeops.errors import InvalidArgument, LakeopsError, NotFound, ProtocolError, UnsupportedFeature
from lakeops.iceberg.avro_schema import (
    AvroFile,
    avro_schema,
    field_schema,
    from_avro,
    read_avro,
    struct_from_avro,
    to_avro,
    write_avro,
)
from lakeops.iceberg.manifest_list import (
    ManifestContent,
    ManifestFile,
    PartitionFieldSummary,
    field_json,
    read_manifest_list,
)
from lakeops.iceberg.metadata import Snapshot
from lakeops.iceberg.partitioning import PARTITION_DATA_ID_START, PartitionSpec
from lakeops.iceberg.single_values import to_bytes
from lakeops.iceberg.types import Schema, StructType
from lakeops.storage import Storage

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DataFile",
    "DeletionVectorRef",
    "EntryStatus",
    "FileContent",
    "ManifestEntry",
    "ManifestMetadata",
    "data_file_type",
    "inline_manifest_file",
    "iter_manifest",
    "manifest_entry_type",
    "partition_type_of",
    "manifests_of",
    "read_manifest",
    "with_counts",
    "write_manifest",
]

#: What v1 writers put in the deprecated, required ``block_size_in_bytes`` (the reference's 64 MB).
DEFAULT_BLOCK_SIZE = 64 * 1024 * 1024

_MODEL = ConfigDict(frozen=True, populate_by_name=True, ser_json_bytes="base64", val_json_bytes="base64")


class EntryStatus(IntEnum):
    EXISTING = 0
    ADDED = 1
    DELETED = 2


class FileContent(IntEnum):
    DATA = 0
    POSITION_DELETES = 1
    EQUALITY_DELETES = 2


class DataFile(BaseModel):
    """The ``data_file`` struct: a data or delete file with its partition tuple (keyed by partition
    field name, canonical values) and metrics keyed by column field id."""

    model_config = _MODEL

    content: FileContent = FileContent.DATA
    file_path: str
    file_format: str
    partition: dict[str, Any] = Field(default_factory=dict)
    record_count: int
    file_size_in_bytes: int
    column_sizes: dict[int, int] | None = None
    value_counts: dict[int, int] | None = None
    null_value_counts: dict[int, int] | None = None
    nan_value_counts: dict[int, int] | None = None
    distinct_counts: dict[int, int] | None = None
    lower_bounds: dict[int, bytes] | None = None
    upper_bounds: dict[int, bytes] | None = None
    key_metadata: bytes | None = None
    split_offsets: list[int] | None = None
    equality_ids: list[int] | None = None
    sort_order_id: int | None = None
    #: v3 "First Row ID Inheritance": read with the inherited value filled in (None for delete
    #: files and for files of manifests without a first_row_id).
    first_row_id: int | None = None
    #: v3 "Deletion Vectors": the data file a DV (or a single-file position delete file) applies to,
    #: and the DV blob's offset and length in its Puffin file.
    referenced_data_file: str | None = None
    content_offset: int | None = None
    content_size_in_bytes: int | None = None

    @property
    def key(self) -> tuple[str, int | None]:
        """What tells apart the files of a snapshot: the path, and a DV's blob offset (one Puffin
        file holds the deletion vectors of many data files, each its own manifest entry)."""
        return self.file_path, self.content_offset

    def deletion_vector(self) -> DeletionVectorRef | None:
        """Where this file's DV blob is, if it is a deletion vector (a position delete file in
        Puffin format, "Deletion Vectors"); a DV without its location fields is a ProtocolError."""
        if self.content != FileContent.POSITION_DELETES or self.file_format.upper() != "PUFFIN":
            return None
        if self.referenced_data_file is None or self.content_offset is None or self.content_size_in_bytes is None:
            raise ProtocolError(
                f"{self.file_path}: a deletion vector needs referenced_data_file, content_offset and "
                "content_size_in_bytes"
            )
        return DeletionVectorRef(
            file_path=self.file_path,
            referenced_data_file=self.referenced_data_file,
            content_offset=self.content_offset,
            content_size_in_bytes=self.content_size_in_bytes,
            record_count=self.record_count,
        )


class DeletionVectorRef(BaseModel):
    """One deletion vector as its delete manifest entry locates it: the Puffin file, the data file
    it applies to, the blob's offset and length, and how many positions it deletes."""

    model_config = ConfigDict(frozen=True)

    file_path: str
    referenced_data_file: str
    content_offset: int = Field(ge=0)
    content_size_in_bytes: int = Field(ge=0)
    record_count: int = Field(ge=0)


class ManifestEntry(BaseModel):
    """A ``manifest_entry``; read entries carry their inherited snapshot id and sequence numbers."""

    model_config = _MODEL

    status: EntryStatus
    snapshot_id: int | None = None
    sequence_number: int | None = None
    file_sequence_number: int | None = None
    data_file: DataFile


class ManifestMetadata(BaseModel):
    """The manifest's Avro key-value metadata (the "Manifests" table), parsed."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    table_schema: Schema = Field(alias="schema")
    schema_id: int = Field(alias="schema-id")
    spec: PartitionSpec = Field(alias="partition-spec")
    format_version: int = Field(alias="format-version")
    content: Literal["data", "deletes"] = "data"

    @classmethod
    def from_avro_metadata(cls, metadata: Mapping[str, str], what: str) -> ManifestMetadata:
        """Parse the key-value metadata of ``what``; v1's optional keys default as Appendix E says."""
        try:
            schema = Schema.model_validate(json.loads(metadata["schema"]))
            spec = PartitionSpec.from_v1_fields(
                json.loads(metadata["partition-spec"]), int(metadata.get("partition-spec-id", "0"))
            )
            return cls.model_validate(
                {
                    "schema": schema,
                    "schema-id": int(metadata.get("schema-id", schema.schema_id)),
                    "partition-spec": spec,
                    "format-version": int(metadata.get("format-version", "1")),
                    "content": metadata.get("content", "data"),
                }
            )
        except KeyError as exc:
            raise ProtocolError(f"{what} has no {exc} key-value metadata") from None
        except (ValueError, TypeError, AttributeError, RecursionError, LakeopsError) as exc:  # JSON of other shapes
            raise ProtocolError(f"{what} has invalid key-value metadata ({type(exc).__name__}: {exc})") from None

    def to_avro_metadata(self) -> dict[str, str]:
        metadata = {
            "schema": json.dumps(self.table_schema.to_json(), separators=(",", ":")),
            "schema-id": str(self.schema_id),
            "partition-spec": json.dumps(self.spec.fields_json(), separators=(",", ":")),
            "partition-spec-id": str(self.spec.spec_id),
            "format-version": str(self.format_version),
        }
        if self.format_version >= 2:
            metadata["content"] = self.content
        return metadata


def _metrics(field_id: int, name: str, key_id: int, value_id: int, value: str = "long") -> dict[str, Any]:
    type_ = {
        "type": "map",
        "key-id": key_id,
        "key": "int",
        "value-id": value_id,
        "value-required": True,
        "value": value,
    }
    return field_json(field_id, name, type_, False)


def _ints(field_id: int, name: str, element_id: int, element: str) -> dict[str, Any]:
    type_ = {"type": "list", "element-id": element_id, "element-required": True, "element": element}
    return field_json(field_id, name, type_, False)


def data_file_type(format_version: int, partition_type: StructType, *, reading: bool = False) -> StructType:
    """The ``data_file`` struct of a format version around a partition tuple type.

    ``distinct_counts`` (111) is only read (``reading=True``): the reference implementation no longer
    writes it and PyIceberg cannot read a manifest that has it, so lakeops drops it when writing.
    """
    v2 = format_version >= 2
    fields = [field_json(134, "content", "int")] if v2 else []
    fields += [
        field_json(100, "file_path", "string"),
        field_json(101, "file_format", "string"),
        field_json(102, "partition", partition_type),
        field_json(103, "record_count", "long"),
        field_json(104, "file_size_in_bytes", "long"),
    ]
    if not v2:
        fields.append(field_json(105, "block_size_in_bytes", "long"))
    fields += [
        _metrics(108, "column_sizes", 117, 118),
        _metrics(109, "value_counts", 119, 120),
        _metrics(110, "null_value_counts", 121, 122),
        _metrics(137, "nan_value_counts", 138, 139),
        *([_metrics(111, "distinct_counts", 123, 124)] if reading else []),
        _metrics(125, "lower_bounds", 126, 127, "binary"),
        _metrics(128, "upper_bounds", 129, 130, "binary"),
        field_json(131, "key_metadata", "binary", False),
        _ints(132, "split_offsets", 133, "long"),
    ]
    if v2:
        fields.append(_ints(135, "equality_ids", 136, "int"))
    fields.append(field_json(140, "sort_order_id", "int", False))
    if format_version >= 3:
        fields += [
            field_json(142, "first_row_id", "long", False),
            field_json(143, "referenced_data_file", "string", False),
            field_json(144, "content_offset", "long", False),
            field_json(145, "content_size_in_bytes", "long", False),
        ]
    return StructType.model_validate({"type": "struct", "fields": fields})


def manifest_entry_type(format_version: int, partition_type: StructType, *, reading: bool = False) -> StructType:
    """The ``manifest_entry`` struct of a format version (v2: optional snapshot id, sequence numbers);
    ``reading``: the fields a reader projects any version's file onto."""
    v2 = format_version >= 2
    fields = [field_json(0, "status", "int"), field_json(1, "snapshot_id", "long", not v2)]
    if v2:
        fields += [
            field_json(3, "sequence_number", "long", False),
            field_json(4, "file_sequence_number", "long", False),
        ]
    fields.append(field_json(2, "data_file", data_file_type(format_version, partition_type, reading=reading)))
    return StructType.model_validate({"type": "struct", "fields": fields})


# --- reading -----------------------------------------------------------------------------------


def _partition_names(metadata: Mapping[str, str]) -> dict[int, str]:
    """Partition field id → name from the ``partition-spec`` metadata (Avro names may be escaped)."""
    try:
        fields = json.loads(metadata.get("partition-spec", "[]"))
    except (ValueError, RecursionError):
        return {}
    if not isinstance(fields, list):
        return {}
    names: dict[int, str] = {}
    for i, f in enumerate(fields):
        if not isinstance(f, dict):
            continue
        field_id, name = f.get("field-id", PARTITION_DATA_ID_START + i), f.get("name")
        if isinstance(field_id, int) and isinstance(name, str):  # a hostile spec may hold any JSON here
            names[field_id] = name
    return names


def partition_type_of(avro: AvroFile, what: str) -> StructType:
    """The partition tuple type a manifest file declares, with the spec's field names."""
    data_file = field_schema(avro.schema, 2, avro.named)
    partition = None if data_file is None else field_schema(data_file, 102, avro.named)
    if partition is None:
        raise ProtocolError(f"{what} has no data_file.partition field (field ids 2 and 102) in its Avro schema")
    names = _partition_names(avro.metadata)
    declared = struct_from_avro(partition, avro.named, what)
    return StructType(fields=tuple(f.model_copy(update={"name": names.get(f.id, f.name)}) for f in declared.fields))


def _validation_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    return f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"


def _entry(values: dict[str, Any], manifest: ManifestFile, *, v1: bool, what: str) -> ManifestEntry:
    data = values["data_file"]
    if data["content"] is None:
        data["content"] = FileContent.DATA  # Appendix E: v1 files are data files
    try:
        data_file = DataFile.model_validate(data)
        status = EntryStatus(values["status"])
    except ValidationError as exc:
        raise ProtocolError(f"{what}: invalid entry for {data.get('file_path')} ({_validation_problem(exc)})") from None
    except ValueError:
        raise ProtocolError(f"{what}: entry for {data_file.file_path} has unknown status {values['status']}") from None
    sequence_number: int | None = 0
    file_sequence_number: int | None = 0
    if not v1:
        sequence_number, file_sequence_number = values["sequence_number"], values["file_sequence_number"]
        if status == EntryStatus.ADDED:
            sequence_number = manifest.sequence_number if sequence_number is None else sequence_number
            file_sequence_number = manifest.sequence_number if file_sequence_number is None else file_sequence_number
        elif sequence_number is None or file_sequence_number is None:
            raise ProtocolError(
                f"{what}: {status.name} entry for {data_file.file_path} has no sequence_number or "
                "file_sequence_number; only ADDED entries may inherit them"
            )
    snapshot_id = values["snapshot_id"]
    return ManifestEntry(
        status=status,
        snapshot_id=manifest.added_snapshot_id if snapshot_id is None else snapshot_id,
        sequence_number=sequence_number,
        file_sequence_number=file_sequence_number,
        data_file=data_file,
    )


def _entries(
    avro: AvroFile, partition_type: StructType, manifest: ManifestFile, *, include_deleted: bool, what: str
) -> Iterator[ManifestEntry]:
    entry_type = manifest_entry_type(3, partition_type, reading=True)
    # A v1 manifest has no sequence numbers (Appendix E: read as 0), whatever columns its writer
    # added: iceberg_v1_repro's upgraded table has a v1 manifest with a null sequence_number column.
    v1 = field_schema(avro.schema, 3, avro.named) is None or avro.metadata.get("format-version") == "1"
    next_row_id = manifest.first_row_id
    for record in avro.records:
        try:
            values = from_avro(entry_type, avro.schema, record, avro.named)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProtocolError(f"{what}: an entry does not match the manifest's Avro schema ({exc!r})") from None
        data = values["data_file"]
        if next_row_id is not None and data["content"] in (None, FileContent.DATA) and data["first_row_id"] is None:
            data["first_row_id"] = next_row_id  # "First Row ID Inheritance": deleted entries count too
            next_row_id += data["record_count"]
        if values["status"] == EntryStatus.DELETED and not include_deleted:
            continue
        yield _entry(values, manifest, v1=v1, what=what)


def iter_manifest(
    storage: Storage, manifest: ManifestFile, *, include_deleted: bool = False
) -> Iterator[ManifestEntry]:
    """The entries of a manifest, one at a time, with inherited fields filled in; DELETED entries
    only if ``include_deleted``. A manifest whose sequence number is still unassigned (written but
    not committed) leaves the inherited sequence numbers of its ADDED entries None."""
    what = manifest.describe()
    avro = read_avro(storage, manifest.manifest_path, what)
    yield from _entries(avro, partition_type_of(avro, what), manifest, include_deleted=include_deleted, what=what)


def read_manifest(storage: Storage, manifest: ManifestFile, *, include_deleted: bool = False) -> list[ManifestEntry]:
    """Every entry of a manifest (see :func:`iter_manifest`)."""
    return list(iter_manifest(storage, manifest, include_deleted=include_deleted))


_COUNT_FIELDS = tuple(f"{s.name.lower()}_{unit}_count" for s in EntryStatus for unit in ("files", "rows"))


def _counts(entries: Iterable[ManifestEntry]) -> dict[str, int]:
    """The manifest list's file and row counts per status."""
    counts = {f"{s.name.lower()}_{unit}_count": 0 for s in EntryStatus for unit in ("files", "rows")}
    for entry in entries:
        counts[f"{entry.status.name.lower()}_files_count"] += 1
        counts[f"{entry.status.name.lower()}_rows_count"] += entry.data_file.record_count
    return counts


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _total_order(value: Any) -> Any:
    """Sort key putting -0.0 before +0.0, as the summaries' note 2 requires."""
    return (value, math.copysign(1.0, value)) if isinstance(value, float) else value


def _summaries(partition_type: StructType, entries: list[ManifestEntry]) -> list[PartitionFieldSummary]:
    summaries = []
    for field in partition_type.fields:
        values = [e.data_file.partition.get(field.name) for e in entries]
        bounded = sorted((v for v in values if v is not None and not _is_nan(v)), key=_total_order)
        summaries.append(
            PartitionFieldSummary(
                contains_null=any(v is None for v in values),
                contains_nan=any(_is_nan(v) for v in values),
                lower_bound=to_bytes(field.type, bounded[0]) if bounded else None,
                upper_bound=to_bytes(field.type, bounded[-1]) if bounded else None,
            )
        )
    return summaries


def inline_manifest_file(storage: Storage, path: str, *, snapshot_id: int) -> ManifestFile:
    """The manifest-list record of a manifest a v1 snapshot lists inline (it has no manifest list):
    spec id and content from the manifest's metadata, counts and summaries from its entries,
    sequence numbers 0 (Appendix E), added by ``snapshot_id``."""
    listed_in = f"listed in snapshot {snapshot_id}"
    what = f"manifest {path} ({listed_in})"
    avro = read_avro(storage, path, what)
    raw_spec_id = avro.metadata.get("partition-spec-id", "0")
    try:
        spec_id = int(raw_spec_id)
    except ValueError:
        raise ProtocolError(f"{what}: partition-spec-id {raw_spec_id!r} is not an integer") from None
    content = ManifestContent.DELETES if avro.metadata.get("content") == "deletes" else ManifestContent.DATA
    manifest = ManifestFile(
        manifest_path=path,
        manifest_length=avro.length,
        partition_spec_id=spec_id,
        content=content,
        sequence_number=0,
        min_sequence_number=0,
        added_snapshot_id=snapshot_id,
        listed_in=listed_in,
    )
    partition_type = partition_type_of(avro, what)
    entries = list(_entries(avro, partition_type, manifest, include_deleted=True, what=what))
    return manifest.model_copy(update={**_counts(entries), "partitions": _summaries(partition_type, entries)})


def with_counts(storage: Storage, manifests: Iterable[ManifestFile]) -> list[ManifestFile]:
    """The manifests, those a v1 manifest list left without file or row counts ("when null this is
    assumed to be non-zero") counted from their entries: a v2 or v3 list requires the counts, and
    row ids are assigned by them ("First Row ID Assignment")."""
    counted = []
    for manifest in manifests:
        if any(getattr(manifest, name) is None for name in _COUNT_FIELDS):
            manifest = manifest.model_copy(update=_counts(read_manifest(storage, manifest, include_deleted=True)))
        counted.append(manifest)
    return counted


def manifests_of(storage: Storage, snapshot: Snapshot) -> list[ManifestFile]:
    """The manifests of a snapshot: its manifest list, or the manifests a v1 snapshot lists inline
    (each read for its partition spec id and counts; Appendix E: sequence numbers 0)."""
    if snapshot.manifest_list is not None:
        try:
            return read_manifest_list(storage, snapshot.manifest_list)
        except NotFound as exc:
            raise NotFound(f"snapshot {snapshot.snapshot_id}: {exc}") from exc
    if snapshot.manifests is None:
        raise ProtocolError(f"snapshot {snapshot.snapshot_id} has neither a manifest-list nor manifests")
    return [inline_manifest_file(storage, path, snapshot_id=snapshot.snapshot_id) for path in snapshot.manifests]


# --- writing -----------------------------------------------------------------------------------

_CONTENTS = {
    "data": {FileContent.DATA},
    "deletes": {FileContent.POSITION_DELETES, FileContent.EQUALITY_DELETES},
}


def _entry_record(
    entry: ManifestEntry, *, format_version: int, content: str, snapshot_id: int, partition_names: set[str], what: str
) -> dict[str, Any]:
    """The entry as a ``manifest_entry`` value with the tracking fields its version and status call for."""
    data = entry.data_file
    where = f"{what}: {entry.status.name} entry for {data.file_path}"
    if data.content not in _CONTENTS[content]:
        raise InvalidArgument(f"{where}: a {content} manifest cannot hold a {data.content.name} file")
    if data.content == FileContent.EQUALITY_DELETES and not data.equality_ids:
        raise InvalidArgument(f"{where}: equality delete files need equality_ids")
    if set(data.partition) != partition_names:
        raise InvalidArgument(
            f"{where}: partition fields {sorted(data.partition)} are not the spec's {sorted(partition_names)}"
        )
    snapshot = entry.snapshot_id
    if entry.status == EntryStatus.ADDED:
        if snapshot not in (None, snapshot_id):
            raise InvalidArgument(
                f"{where}: added by snapshot {snapshot}, but snapshot {snapshot_id} writes this manifest "
                "(files of earlier snapshots are EXISTING)"
            )
        if entry.file_sequence_number is not None:
            raise InvalidArgument(f"{where}: an added file's file_sequence_number is assigned at commit, must be None")
        snapshot = snapshot_id
    elif entry.status == EntryStatus.DELETED:
        snapshot = snapshot_id if snapshot is None else snapshot
    elif snapshot is None:
        raise InvalidArgument(f"{where}: an EXISTING entry needs the id of the snapshot that added the file")
    if data.first_row_id is not None and (entry.status == EntryStatus.ADDED or data.content != FileContent.DATA):
        # "First Row ID Inheritance": new data files inherit theirs; delete files never have one.
        raise InvalidArgument(f"{where}: first_row_id must be null for added and delete files")
    explicit = entry.sequence_number is not None and entry.file_sequence_number is not None
    if format_version >= 2 and entry.status != EntryStatus.ADDED and not explicit:
        raise InvalidArgument(f"{where}: needs both sequence numbers; only ADDED entries inherit them")
    return {
        "status": entry.status,
        "snapshot_id": snapshot,
        "sequence_number": entry.sequence_number,
        "file_sequence_number": entry.file_sequence_number,
        "data_file": {**dict(data), "block_size_in_bytes": DEFAULT_BLOCK_SIZE},
    }


def write_manifest(
    storage: Storage,
    location: str,
    entries: Iterable[ManifestEntry],
    *,
    format_version: int,
    spec: PartitionSpec,
    schema: Schema,
    content: Literal["data", "deletes"],
    snapshot_id: int,
    partition_type: StructType | None = None,
) -> ManifestFile:
    """Create the manifest at ``location`` (put-if-absent: never replaces a file) for snapshot
    ``snapshot_id`` and return its manifest-list record, sequence number unassigned.

    ``partition_type`` defaults to ``spec.partition_type(schema)``; pass it when the spec's source
    columns are only in older schemas. Entries that break the spec's rules (an EXISTING entry without
    its numbers, a delete file in a data manifest, a partition tuple of other fields) are an
    :class:`InvalidArgument` naming the manifest and file, and nothing is written.
    """
    what = f"manifest {location}"
    if format_version not in (1, 2, 3):
        raise UnsupportedFeature(f"{what}: lakeops writes format versions 1 to 3, not {format_version}")
    if content not in _CONTENTS:
        raise InvalidArgument(f"{what}: content must be 'data' or 'deletes', not {content!r}")
    if format_version == 1 and content != "data":
        raise InvalidArgument(f"{what}: v1 tables have no delete files")
    ptype = spec.partition_type(schema) if partition_type is None else partition_type
    entry_type = manifest_entry_type(format_version, ptype)
    names = {f.name for f in ptype.fields}
    entries = list(entries)
    records = []
    for entry in entries:
        record = _entry_record(
            entry,
            format_version=format_version,
            content=content,
            snapshot_id=snapshot_id,
            partition_names=names,
            what=what,
        )
        try:
            records.append(to_avro(entry_type, record))
        except InvalidArgument as exc:
            raise InvalidArgument(f"{what}: entry for {entry.data_file.file_path}: {exc}") from exc
    metadata = ManifestMetadata.model_validate(
        {
            "schema": schema,
            "schema-id": schema.schema_id,
            "partition-spec": spec,
            "format-version": format_version,
            "content": content,
        }
    ).to_avro_metadata()
    try:
        length = write_avro(storage, location, avro_schema(entry_type, "manifest_entry"), records, metadata)
    except (ValueError, TypeError) as exc:
        raise InvalidArgument(f"{what}: an entry does not fit the manifest schema ({exc})") from exc
    live = [e.sequence_number for e in entries if e.status != EntryStatus.DELETED and e.sequence_number is not None]
    manifest = ManifestFile(
        manifest_path=location,
        manifest_length=length,
        partition_spec_id=spec.spec_id,
        content=ManifestContent.DATA if content == "data" else ManifestContent.DELETES,
        sequence_number=None,
        min_sequence_number=min(live) if format_version >= 2 and live else None,
        added_snapshot_id=snapshot_id,
        partitions=_summaries(ptype, entries),
    )
    return manifest.model_copy(update=_counts(entries))
