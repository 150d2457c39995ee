"""A manifest's entries as Arrow columns of what planning reads, for tables of millions of files
(https://iceberg.apache.org/spec/#manifests, "Manifest Entry Fields", "Sequence Number
Inheritance", "First Row ID Inheritance").

:func:`~lakeops.iceberg.manifest.iter_manifest` builds a validated :class:`ManifestEntry` per entry,
every metric included: right for the files an operation acts on, but at 10 million entries those
objects alone outgrow a driver. Planning decides from a few fields: which files are referenced,
their size, partition and sequence number. This module decodes only those fields (the Avro reader
skips the others, metrics maps included, without building them) and returns one Arrow batch per
manifest, so no Python object per entry outlives its manifest. The inheritance rules are the same
as :mod:`lakeops.iceberg.manifest` applies: a null data sequence number is the manifest's only on
ADDED entries (an EXISTING or DELETED entry without one is a :class:`ProtocolError`), a v1
manifest reads 0, and a data file without a ``first_row_id`` inherits the running one.

The ``partition`` column is the partition tuple as JSON text, each value in its single-value JSON
form (Appendix D), in the spec's field order: a compact, exact key to group and compare by.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from lakeops.errors import ProtocolError
from lakeops.iceberg.avro_schema import field_schema, from_avro, read_avro
from lakeops.iceberg.manifest import EntryStatus, FileContent, partition_type_of
from lakeops.iceberg.manifest_list import ManifestFile
from lakeops.iceberg.single_values import to_json
from lakeops.storage import Storage

__all__ = ["PATHS", "PLANNING_COLUMNS", "PLANNING_SCHEMA", "read_planning_columns"]

PLANNING_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), nullable=False),
        pa.field("status", pa.int8(), nullable=False),
        pa.field("content", pa.int8(), nullable=False),
        pa.field("file_format", pa.string(), nullable=False),
        pa.field("record_count", pa.int64(), nullable=False),
        pa.field("file_size_in_bytes", pa.int64(), nullable=False),
        pa.field("data_sequence_number", pa.int64()),
        pa.field("first_row_id", pa.int64()),
        pa.field("spec_id", pa.int32(), nullable=False),
        pa.field("partition", pa.string(), nullable=False),
    ]
)
PLANNING_COLUMNS = tuple(PLANNING_SCHEMA.names)
#: What reachability needs: which files the entries name.
PATHS = ("file_path", "status")

# Field ids ("Manifest Entry Fields"): manifest_entry, then data_file's.
_STATUS, _SNAPSHOT_ID, _DATA_FILE, _SEQUENCE, _FILE_SEQUENCE = 0, 1, 2, 3, 4
_DATA_FIELDS = {
    "content": 134,
    "file_path": 100,
    "file_format": 101,
    "partition": 102,
    "record_count": 103,
    "file_size_in_bytes": 104,
    "first_row_id": 142,
}
#: Columns and the data_file fields they are computed from (the sequence number needs no data_file field).
_NEEDS = {
    "file_path": ("file_path",),
    "status": (),
    "content": ("content",),
    "file_format": ("file_format",),
    "record_count": ("record_count",),
    "file_size_in_bytes": ("file_size_in_bytes",),
    "data_sequence_number": (),
    "first_row_id": ("content", "first_row_id", "record_count"),
    "spec_id": (),
    "partition": ("partition",),
}


def _field_ids(record: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    return {f["field-id"]: f for f in record["fields"] if isinstance(f, dict) and "field-id" in f}


def _projection(data_ids: set[int]) -> Any:
    """The reader schema keeping ``status``, the sequence number and ``data_file``'s ``data_ids``."""

    def project(schema: dict[str, Any]) -> dict[str, Any]:
        kept = []
        for f in schema["fields"]:
            fid = f.get("field-id")
            if fid == _DATA_FILE:
                inner = f["type"]
                if isinstance(inner, dict) and inner.get("type") == "record":
                    inner = {**inner, "fields": [g for g in inner["fields"] if g.get("field-id") in data_ids]}
                kept.append({**f, "type": inner})
            elif fid in (_STATUS, _SEQUENCE):
                kept.append(f)
        return {**schema, "fields": kept}

    return project


def read_planning_columns(
    storage: Storage,
    manifest: ManifestFile,
    *,
    include_deleted: bool = False,
    columns: Sequence[str] = PLANNING_COLUMNS,
) -> pa.RecordBatch:
    """The manifest's entries (DELETED ones only if ``include_deleted``) as one batch of ``columns``
    of :data:`PLANNING_SCHEMA`, inherited fields filled in as the module docstring says."""
    unknown = [c for c in columns if c not in _NEEDS]
    if unknown:
        raise ValueError(f"unknown planning columns {unknown}")
    wanted = {name for c in columns for name in _NEEDS[c]}
    what = manifest.describe()
    avro = read_avro(
        storage,
        manifest.manifest_path,
        what,
        project=_projection({_DATA_FIELDS[n] for n in wanted}),
    )
    entry_fields = _field_ids(avro.schema)
    data_schema = field_schema(avro.schema, _DATA_FILE, avro.named)
    if _STATUS not in entry_fields or not isinstance(data_schema, dict) or data_schema.get("type") != "record":
        raise ProtocolError(f"{what}: its Avro schema has no manifest_entry status or data_file record")
    data_fields = _field_ids(data_schema)
    names = {n: data_fields[i]["name"] for n, i in _DATA_FIELDS.items() if i in data_fields}
    for required in ("file_path", "file_format", "record_count", "file_size_in_bytes", "partition"):
        if required in wanted and required not in names:
            raise ProtocolError(f"{what}: its data_file has no {required} (field id {_DATA_FIELDS[required]})")
    status_name, data_name = entry_fields[_STATUS]["name"], entry_fields[_DATA_FILE]["name"]
    v1 = _SEQUENCE not in entry_fields or avro.metadata.get("format-version") == "1"
    sequence_name = None if v1 else entry_fields[_SEQUENCE]["name"]
    if "partition" in wanted:
        ptype = partition_type_of(avro, what)
        partition_schema = field_schema(data_schema, _DATA_FIELDS["partition"], avro.named)
    out: dict[str, list[Any]] = {c: [] for c in columns}
    next_row_id = manifest.first_row_id
    content_name, path_name = names.get("content"), names.get("file_path")
    for record in avro.records:
        status = record[status_name]
        data = record[data_name]
        content = data.get(content_name) if content_name else None
        content = FileContent.DATA if content is None else content
        if "first_row_id" in out:
            first_row_id = data.get(names["first_row_id"]) if "first_row_id" in names else None
            if next_row_id is not None and content == FileContent.DATA and first_row_id is None:
                first_row_id = next_row_id  # deleted entries count too
                next_row_id += data[names["record_count"]]
        if status == EntryStatus.DELETED and not include_deleted:
            continue
        if status not in (0, 1, 2):
            raise ProtocolError(f"{what}: entry for {data.get(path_name)} has unknown status {status}")
        for column in columns:
            if column == "file_path":
                value: Any = data[path_name]
            elif column == "status":
                value = status
            elif column == "content":
                value = content
            elif column == "data_sequence_number":
                value = 0 if sequence_name is None else record[sequence_name]
                if value is None:
                    if status != EntryStatus.ADDED:
                        raise ProtocolError(
                            f"{what}: {EntryStatus(status).name} entry for {data.get(path_name)} has no "
                            "sequence_number; only ADDED entries may inherit it"
                        )
                    value = manifest.sequence_number
            elif column == "first_row_id":
                value = first_row_id
            elif column == "spec_id":
                value = manifest.partition_spec_id
            elif column == "partition":
                values = from_avro(ptype, partition_schema, data[names["partition"]], avro.named)
                value = json.dumps([to_json(f.type, values.get(f.name)) for f in ptype.fields])
            else:
                value = data[names[column]]
            out[column].append(value)
    return pa.record_batch(
        [pa.array(out[c], PLANNING_SCHEMA.field(c).type) for c in columns],
        schema=pa.schema([PLANNING_SCHEMA.field(c) for c in columns]),
    )
