"""Manifest lists: the manifests of one snapshot with their counts and partition summaries ("Manifest
Lists", "Snapshots" for v1's inline ``manifests``, "Sequence Number Inheritance"; Appendix E for
what v1 lacks).

A manifest's sequence number is the one of the snapshot that added it, known only once that
snapshot commits. A freshly written :class:`ManifestFile` therefore leaves it ``None`` and
:func:`write_manifest_list` assigns the committing snapshot's number, so a manifest is written once
and serves every commit retry; only the list is rewritten. Reading applies Appendix E's v1 defaults
(content 0, sequence numbers 0); null file and row counts stay ``None``, which the spec defines as
"unknown, assume non-zero".
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lakeops.errors import InvalidArgument, NotFound, ProtocolError, UnsupportedFeature
from lakeops.iceberg.avro_schema import avro_schema, from_avro, read_avro, to_avro, write_avro
from lakeops.iceberg.metadata import Snapshot
from lakeops.iceberg.types import StructType
from lakeops.storage import Storage

__all__ = [
    "ManifestContent",
    "ManifestFile",
    "PartitionFieldSummary",
    "assign_first_row_ids",
    "field_json",
    "manifest_file_type",
    "manifest_paths_of",
    "read_manifest_list",
    "write_manifest_list",
]

#: The manifest_file field ``manifest_path`` ("Manifest Lists").
_MANIFEST_PATH_ID = 500

_MODEL = ConfigDict(frozen=True, populate_by_name=True, ser_json_bytes="base64", val_json_bytes="base64")

_COUNTS = (
    "added_files_count",
    "existing_files_count",
    "deleted_files_count",
    "added_rows_count",
    "existing_rows_count",
    "deleted_rows_count",
)
#: Field ids of the v2-only columns and the value Appendix E gives them when reading a v1 list.
_V1_DEFAULTS = {517: ("content", 0), 515: ("sequence_number", 0), 516: ("min_sequence_number", 0)}


class ManifestContent(IntEnum):
    DATA = 0
    DELETES = 1


class PartitionFieldSummary(BaseModel):
    """``field_summary`` (508): nulls, NaNs and Appendix D bounds of one partition field's values."""

    model_config = _MODEL

    contains_null: bool
    contains_nan: bool | None = None
    lower_bound: bytes | None = None
    upper_bound: bytes | None = None


class ManifestFile(BaseModel):
    """One ``manifest_file`` record (fields 500-519) of a manifest list."""

    model_config = _MODEL

    manifest_path: str
    manifest_length: int
    partition_spec_id: int
    content: ManifestContent = ManifestContent.DATA
    #: None until the manifest list of the snapshot that adds the manifest assigns it.
    sequence_number: int | None = None
    min_sequence_number: int | None = None
    added_snapshot_id: int
    added_files_count: int | None = None
    existing_files_count: int | None = None
    deleted_files_count: int | None = None
    added_rows_count: int | None = None
    existing_rows_count: int | None = None
    deleted_rows_count: int | None = None
    partitions: list[PartitionFieldSummary] | None = None
    key_metadata: bytes | None = None
    #: v3 (field 520, "First Row ID Assignment"): the first row id its data files inherit from;
    #: always None for delete manifests and for manifests of snapshots before a v3 upgrade.
    first_row_id: int | None = None
    #: Where this record was read (a manifest list, or a v1 snapshot), for error messages; not a
    #: field of the spec's record and never written.
    listed_in: str | None = Field(default=None, exclude=True)

    def describe(self) -> str:
        """The manifest as error messages name it: path and who lists (or added) it."""
        where = self.listed_in or f"added by snapshot {self.added_snapshot_id}"
        return f"manifest {self.manifest_path} ({where})"


def field_json(field_id: int, name: str, type_: Any, required: bool = True) -> dict[str, Any]:
    """A struct field as Appendix C spells it, for building the metadata files' own schemas."""
    return {"id": field_id, "name": name, "required": required, "type": type_}


_FIELD_SUMMARY = {
    "type": "struct",
    "fields": [
        field_json(509, "contains_null", "boolean"),
        field_json(518, "contains_nan", "boolean", False),
        field_json(510, "lower_bound", "binary", False),
        field_json(511, "upper_bound", "binary", False),
    ],
}


def manifest_file_type(format_version: int) -> StructType:
    """The ``manifest_file`` struct of a format version: v1 has no content or sequence numbers and
    optional counts; v2 requires them all; v3 adds ``first_row_id``."""
    v2 = format_version >= 2
    fields = [
        field_json(_MANIFEST_PATH_ID, "manifest_path", "string"),
        field_json(501, "manifest_length", "long"),
        field_json(502, "partition_spec_id", "int"),
    ]
    if v2:
        fields += [
            field_json(517, "content", "int"),
            field_json(515, "sequence_number", "long"),
            field_json(516, "min_sequence_number", "long"),
        ]
    fields += [
        field_json(503, "added_snapshot_id", "long"),
        field_json(504, "added_files_count", "int", v2),
        field_json(505, "existing_files_count", "int", v2),
        field_json(506, "deleted_files_count", "int", v2),
        field_json(512, "added_rows_count", "long", v2),
        field_json(513, "existing_rows_count", "long", v2),
        field_json(514, "deleted_rows_count", "long", v2),
        field_json(
            507,
            "partitions",
            {"type": "list", "element-id": 508, "element-required": True, "element": _FIELD_SUMMARY},
            False,
        ),
        field_json(519, "key_metadata", "binary", False),
    ]
    if format_version >= 3:
        fields.append(field_json(520, "first_row_id", "long", False))
    return StructType.model_validate({"type": "struct", "fields": fields})


_READ_TYPE = manifest_file_type(3)


def read_manifest_list(storage: Storage, location: str) -> list[ManifestFile]:
    """The manifests a manifest list names, columns resolved by field id, v1 lists read as v2."""
    what = f"manifest list {location}"
    avro = read_avro(storage, location, what)
    present = {f.get("field-id") for f in avro.schema.get("fields", ())}
    manifests = []
    for record in avro.records:
        values = from_avro(_READ_TYPE, avro.schema, record, avro.named)
        for field_id, (name, default) in _V1_DEFAULTS.items():
            if field_id not in present:
                values[name] = default
        try:
            manifests.append(ManifestFile.model_validate({**values, "listed_in": what}))
        except ValidationError as exc:
            raise ProtocolError(f"{what}: invalid manifest_file record ({exc.errors()[0]['msg']})") from None
    return manifests


def manifest_paths_of(storage: Storage, snapshot: Snapshot) -> list[str]:
    """Only the manifest paths a snapshot lists (field 500), without converting its records: what
    reachability needs of the many snapshots whose other manifest fields it never reads, at a
    seventh of the cost of :func:`~lakeops.iceberg.manifest.manifests_of`."""
    if snapshot.manifest_list is None:
        if snapshot.manifests is None:
            raise ProtocolError(f"snapshot {snapshot.snapshot_id} has neither a manifest-list nor manifests")
        return list(snapshot.manifests)
    what = f"manifest list {snapshot.manifest_list}"
    try:
        avro = read_avro(storage, snapshot.manifest_list, what)
    except NotFound as exc:
        raise NotFound(f"snapshot {snapshot.snapshot_id}: {exc}") from exc
    fields = avro.schema.get("fields") if isinstance(avro.schema, dict) else None
    names = [
        f["name"]
        for f in fields or ()
        if isinstance(f, dict) and f.get("field-id") == _MANIFEST_PATH_ID and isinstance(f.get("name"), str)
    ]
    if len(names) != 1:
        raise ProtocolError(f"{what}: its schema has no manifest_path field (field id {_MANIFEST_PATH_ID})")
    paths = []
    for record in avro.records:
        path = record.get(names[0]) if isinstance(record, dict) else None
        if not isinstance(path, str):
            raise ProtocolError(f"{what}: a manifest_file record has no manifest_path string")
        paths.append(path)
    return paths


def _record(manifest: ManifestFile, *, format_version: int, snapshot_id: int, sequence_number: int) -> dict[str, Any]:
    record = manifest.model_dump()
    if format_version == 1:
        if manifest.content != ManifestContent.DATA:
            raise InvalidArgument(f"{manifest.describe()}: a v1 manifest list cannot hold delete manifests")
        return record
    if manifest.sequence_number is None:
        if manifest.added_snapshot_id != snapshot_id:
            raise InvalidArgument(
                f"{manifest.describe()} has no sequence number, but only manifests the committing snapshot "
                f"{snapshot_id} adds inherit one"
            )
        record["sequence_number"] = sequence_number
    if manifest.min_sequence_number is None:
        record["min_sequence_number"] = record["sequence_number"]
    missing = [name for name in _COUNTS if record[name] is None]
    if missing:
        raise InvalidArgument(f"{manifest.describe()}: a v2 manifest list requires {', '.join(missing)}")
    return record


def assign_first_row_ids(manifests: Sequence[ManifestFile], first_row_id: int) -> tuple[list[ManifestFile], int]:
    """v3 "First Row ID Assignment": every data manifest without a ``first_row_id`` gets the next one
    from ``first_row_id`` (the snapshot's ``first-row-id``), each advancing it by its
    ``added_rows_count`` + ``existing_rows_count`` (the spec's simple, valid estimate of the rows that
    inherit an id); existing assignments are preserved. Returns the manifests and the ids assigned
    (the snapshot's ``added-rows``)."""
    assigned: list[ManifestFile] = []
    next_id = first_row_id
    for manifest in manifests:
        if manifest.content == ManifestContent.DATA and manifest.first_row_id is None:
            if manifest.added_rows_count is None or manifest.existing_rows_count is None:
                raise InvalidArgument(f"{manifest.describe()}: row counts unknown, cannot assign first_row_id")
            assigned.append(manifest.model_copy(update={"first_row_id": next_id}))
            next_id += manifest.added_rows_count + manifest.existing_rows_count
        else:
            assigned.append(manifest)
    return assigned, next_id - first_row_id


def write_manifest_list(
    storage: Storage,
    location: str,
    manifests: Sequence[ManifestFile],
    *,
    format_version: int,
    snapshot_id: int,
    parent_snapshot_id: int | None,
    sequence_number: int,
) -> int:
    """Create the manifest list of snapshot ``snapshot_id`` (put-if-absent); returns its length.

    Manifests without a sequence number are this snapshot's new ones and get ``sequence_number``
    (and, if unknown, it as their minimum too). The file's key-value metadata is what the
    reference implementation writes: ``snapshot-id``, ``parent-snapshot-id`` (``"null"`` for none),
    ``sequence-number`` (v2) and ``format-version``. A v3 list needs every data manifest's
    ``first_row_id`` assigned first (:func:`assign_first_row_ids`).
    """
    if format_version not in (1, 2, 3):
        raise UnsupportedFeature(
            f"manifest list {location}: lakeops writes format versions 1 to 3, not {format_version}"
        )
    for m in manifests:
        # v3: data manifests carry their first_row_id (assign_first_row_ids), delete manifests none.
        if format_version >= 3 and (m.first_row_id is None) == (m.content == ManifestContent.DATA):
            raise InvalidArgument(
                f"manifest list {location}: {m.describe()} is a {m.content.name.lower()} manifest "
                f"with first_row_id {m.first_row_id}"
            )
    type_ = manifest_file_type(format_version)
    records = [
        to_avro(
            type_, _record(m, format_version=format_version, snapshot_id=snapshot_id, sequence_number=sequence_number)
        )
        for m in manifests
    ]
    metadata = {
        "snapshot-id": str(snapshot_id),
        "parent-snapshot-id": "null" if parent_snapshot_id is None else str(parent_snapshot_id),
    }
    if format_version >= 2:
        metadata["sequence-number"] = str(sequence_number)
    metadata["format-version"] = str(format_version)
    return write_avro(storage, location, avro_schema(type_, "manifest_file"), records, metadata)
