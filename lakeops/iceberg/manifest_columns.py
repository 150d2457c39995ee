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
import pyarrow.compute as pc

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
    wanted = {"content", *(name for c in columns for name in _NEEDS[c])}
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
    records = list(avro.records)  # this manifest's only: dropped when its batch is built
    statuses = [r[status_name] for r in records]
    data = [r[data_name] for r in records]
    v1 = _SEQUENCE not in entry_fields or avro.metadata.get("format-version") == "1"
    sequences = None if v1 else [r[entry_fields[_SEQUENCE]["name"]] for r in records]
    del records
    unknown_status = next((i for i, s in enumerate(statuses) if s not in (0, 1, 2)), None)
    if unknown_status is not None:
        path = data[unknown_status].get(names.get("file_path", ""))
        raise ProtocolError(f"{what}: entry for {path} has unknown status {statuses[unknown_status]}")
    status = pa.array(statuses, pa.int8())
    content_name = names.get("content")
    contents = [FileContent.DATA if content_name is None or d[content_name] is None else d[content_name] for d in data]
    arrays: dict[str, pa.Array] = {"status": status, "content": pa.array(contents, pa.int8())}
    for column in ("file_path", "file_format", "record_count", "file_size_in_bytes"):
        if column in columns:
            name = names[column]
            arrays[column] = pa.array([d[name] for d in data], PLANNING_SCHEMA.field(column).type)
    if "data_sequence_number" in columns:
        arrays["data_sequence_number"] = _sequence_numbers(sequences, manifest, status, data, names, what)
    if "first_row_id" in columns:
        arrays["first_row_id"] = _first_row_ids(manifest, contents, data, names)
    if "spec_id" in columns:
        arrays["spec_id"] = pa.array([manifest.partition_spec_id] * len(data), pa.int32())
    if "partition" in columns:
        ptype = partition_type_of(avro, what)
        partition_schema = field_schema(data_schema, _DATA_FIELDS["partition"], avro.named)
        texts: dict[tuple[Any, ...], str] = {}  # a manifest's entries share few partitions

        def text(datum: dict[str, Any]) -> str:
            key = tuple(datum.values())
            if key not in texts:
                values = from_avro(ptype, partition_schema, datum, avro.named)
                texts[key] = json.dumps([to_json(f.type, values.get(f.name)) for f in ptype.fields])
            return texts[key]

        name = names["partition"]
        arrays["partition"] = pa.array([text(d[name]) for d in data], pa.string())
    batch = pa.record_batch([arrays[c] for c in columns], schema=pa.schema([PLANNING_SCHEMA.field(c) for c in columns]))
    return batch if include_deleted else batch.filter(pc.not_equal(status, EntryStatus.DELETED))


def _sequence_numbers(
    sequences: list[int | None] | None,
    manifest: ManifestFile,
    status: pa.Array,
    data: Sequence[dict[str, Any]],
    names: Mapping[str, str],
    what: str,
) -> pa.Array:
    """Each entry's data sequence number: 0 in a v1 manifest, else as written, a null inherited from
    the manifest by ADDED entries only."""
    if sequences is None:  # v1 (Appendix E: read as 0), whatever columns its writer added
        return pa.array([0] * len(data), pa.int64())
    written = pa.array(sequences, pa.int64())
    orphaned = pc.and_(written.is_null(), pc.not_equal(status, EntryStatus.ADDED))
    if pc.any(orphaned).as_py():
        row = pc.index(orphaned, True).as_py()
        raise ProtocolError(
            f"{what}: {EntryStatus(status[row].as_py()).name} entry for {data[row].get(names.get('file_path', ''))} "
            "has no sequence_number; only ADDED entries may inherit it"
        )
    return pc.fill_null(written, pa.scalar(manifest.sequence_number, pa.int64()))


def _first_row_ids(
    manifest: ManifestFile, contents: Sequence[int], data: Sequence[dict[str, Any]], names: Mapping[str, str]
) -> pa.Array:
    """Each data file's ``first_row_id``, a null one inherited from the running count of rows from the
    manifest's (deleted entries count too); null for delete files and without a manifest first row id."""
    own = names.get("first_row_id")
    written = [None if own is None else d[own] for d in data]
    next_row_id = manifest.first_row_id
    if next_row_id is None:
        return pa.array(written, pa.int64())
    counts = names["record_count"]
    found = []
    for content, value, d in zip(contents, written, data, strict=True):
        if content == FileContent.DATA and value is None:
            value = next_row_id
            next_row_id += d[counts]
        found.append(value)
    return pa.array(found, pa.int64())
