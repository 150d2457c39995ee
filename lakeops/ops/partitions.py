"""A table's partitions as keys an orchestrator can run per partition, with the small files of each.

A key is ``name=value/name2=value2`` in partition order: values percent-encoded (a ``/`` or ``=``
inside a value never splits it, and the characters Dagster refuses in partition keys never appear),
NULL as :data:`NULL_VALUE`. :func:`partition_where` turns a key back into the ``--where`` predicate
(:mod:`lakeops.predicate`) that selects exactly that partition, so compaction can run on one.

* Delta ("Partition Value Serialization"): a file's ``partitionValues`` hold each partition column's
  value as a string (``null`` for NULL), keyed by physical name under column mapping ("Column
  Mapping"); keys use display names, the names ``--where`` takes, and the serialized value, which the
  predicate coerces to the column's type.
* Iceberg ("Partitioning", "Partition Transforms", Appendix C): the current (default) spec's fields by
  name, each value as its transform's human form (``2026``, ``2026-11``, ``2026-11-01``,
  ``2026-11-01-13``, identity values as written in partition paths). ``--where`` on an Iceberg table
  compares a partition field's *result* value, which for year, month and hour is a count since 1970,
  so those are converted back; that is why :func:`partition_where` reads the table's spec. Files
  written under an older spec cannot be selected by the current spec's fields (compaction's filter
  skips them), so they belong to no key.
* Icechunk has no partitions; neither has an unpartitioned table: ``[]``.

A file is small below the size compaction rewrites (Delta: the target file size; Iceberg: the
minimum file size, 75% of the target) and mergeable when its partition has at least compaction's
default ``min_input_files`` small files, i.e. when compacting that partition would rewrite them.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, unquote

from pydantic import BaseModel, ConfigDict

from lakeops.delta.maintenance.compaction import effective_target_size
from lakeops.delta.maintenance.options import DeltaCompactionOptions
from lakeops.delta.schema import column_mapping_mode, parse_schema, physical_name
from lakeops.errors import InvalidArgument, ProtocolError, UnsupportedFeature
from lakeops.iceberg.maintenance.compaction import size_bounds
from lakeops.iceberg.maintenance.options import IcebergCompactionOptions
from lakeops.iceberg.manifest import FileContent
from lakeops.iceberg.metadata import TableMetadata
from lakeops.iceberg.partitioning import PartitionField
from lakeops.iceberg.scan import plan_scan
from lakeops.iceberg.transforms import (
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    YearTransform,
    parse_transform,
)
from lakeops.iceberg.types import FixedType, IcebergType, PrimitiveType
from lakeops.ops.table import Table, handle_of
from lakeops.ops.target import DeltaTarget, IcebergTarget, IcechunkTarget, Target
from lakeops.predicate import parse_predicate
from lakeops.storage import StorageOptions

__all__ = ["NULL_VALUE", "PartitionHealth", "partition_health", "partition_key", "partition_where"]

#: Stands for a NULL partition value in a key.
NULL_VALUE = "__NULL__"
_EPOCH = dt.date(1970, 1, 1)


class PartitionHealth(BaseModel):
    """One partition: its key, live data files and bytes, files below the size compaction rewrites,
    and how many of those compacting the partition would merge."""

    model_config = ConfigDict(frozen=True)

    key: str
    files: int
    bytes: int
    small_files: int
    mergeable_small_files: int


def partition_key(values: Iterable[tuple[str, str | None]]) -> str:
    """The key of ``(name, human value)`` pairs in partition order."""
    return "/".join(f"{quote(name, safe='')}={NULL_VALUE if v is None else quote(v, safe='')}" for name, v in values)


def _segments(key: str) -> list[tuple[str, str | None]]:
    segments: list[tuple[str, str | None]] = []
    for part in key.split("/"):
        name, sep, value = part.partition("=")
        if not sep or not name:
            raise InvalidArgument(f"partition key {key!r}: expected name=value segments separated by '/', got {part!r}")
        column = unquote(name)
        if "`" in column:
            raise InvalidArgument(f"partition key {key!r}: column name {column!r} cannot be quoted in a predicate")
        segments.append((column, None if value == NULL_VALUE else unquote(value)))
    return segments


def _literal(value: Any) -> str:
    return str(value) if isinstance(value, int) else "'" + str(value).replace("'", "''") + "'"


def partition_where(table: Table | Target, key: str, *, storage_options: StorageOptions | None = None) -> str:
    """The ``--where`` predicate selecting exactly partition ``key`` of ``table`` (Iceberg reads the
    table's current spec, with ``storage_options``; a handle's loaded metadata is reused)."""
    segments = _segments(key)
    handle = handle_of(table, storage_options or StorageOptions())
    target = handle.target
    match target:
        case IcebergTarget():
            metadata = handle.iceberg_table().metadata
            segments_typed = _iceberg_literals(metadata, key, segments)
        case DeltaTarget():
            segments_typed = [(name, None if v is None else _literal(v)) for name, v in segments]
        case IcechunkTarget():
            raise UnsupportedFeature(f"{target}: {target.format} tables have no partitions")
    where = " AND ".join(f"`{name}` IS NULL" if v is None else f"`{name}` = {v}" for name, v in segments_typed)
    parse_predicate(where)  # fails here, naming the key, rather than in a Spark job later
    return where


def _iceberg_literals(
    metadata: TableMetadata, key: str, segments: list[tuple[str, str | None]]
) -> list[tuple[str, str | None]]:
    fields = {f.name: f for f in metadata.default_spec().fields}
    if sorted(name for name, _ in segments) != sorted(fields):
        raise InvalidArgument(
            f"{metadata.location}: partition key {key!r} must name every partition field of the current spec "
            f"({', '.join(fields) or 'none: the table is not partitioned'}) once"
        )
    return [(name, None if text is None else _iceberg_literal(metadata, fields[name], text)) for name, text in segments]


def _iceberg_literal(metadata: TableMetadata, field: PartitionField, text: str) -> str:
    """The ``--where`` literal of a partition value's human form: what the partition filter compares."""
    transform = parse_transform(field.transform)
    source = _source_type(metadata, field)
    try:
        if isinstance(transform, YearTransform):
            return str(int(text) - 1970)
        if isinstance(transform, MonthTransform):
            year, month = (int(part) for part in text.split("-"))
            return str((year - 1970) * 12 + month - 1)
        if isinstance(transform, HourTransform):
            return str((dt.date.fromisoformat(text[:10]) - _EPOCH).days * 24 + int(text[11:]))
    except ValueError as exc:
        raise InvalidArgument(f"{metadata.location}: {text!r} is not a {transform} value of {field.name}") from exc
    if isinstance(transform, IdentityTransform | TruncateTransform) and not _comparable(source):
        raise UnsupportedFeature(f"{metadata.location}: --where cannot select {source} partition values ({field.name})")
    return _literal(text)


def _source_type(metadata: TableMetadata, field: PartitionField) -> IcebergType:
    found = metadata.current_schema().fields_by_id().get(field.source_id)
    if found is None:
        raise ProtocolError(f"{metadata.location}: partition field {field.name} has no source column")
    return found[1]


def _comparable(source: IcebergType) -> bool:
    """Whether ``--where`` can compare the human form: not bytes (base64), not ``time`` (an int there)."""
    return not isinstance(source, FixedType) and not (
        isinstance(source, PrimitiveType) and source.name in ("binary", "time")
    )


def partition_health(table: Table | Target, storage_options: StorageOptions | None = None) -> list[PartitionHealth]:
    """Every partition of the latest version with its file counts, sorted by key (module docs); a
    handle's state is reused."""
    handle = handle_of(table, storage_options or StorageOptions())
    match handle.target:
        case IcechunkTarget():
            return []
        case IcebergTarget():
            return _iceberg_health(handle)
        case DeltaTarget(location=location):
            return _delta_health(location, handle)


def _delta_health(location: str, handle: Table) -> list[PartitionHealth]:
    snapshot = handle.delta_snapshot()
    if not snapshot.partition_columns:
        return []
    schema = parse_schema(snapshot.metadata.schema_string)
    mode = column_mapping_mode(snapshot.metadata, snapshot.protocol)
    columns: list[tuple[str, str]] = []
    for name in snapshot.partition_columns:
        found = schema.get(name)
        if found is None:
            raise ProtocolError(f"{location}: partition column {name!r} is not in the table schema")
        columns.append((name, physical_name(found, mode)))
    sizes: dict[str, list[int]] = defaultdict(list)
    for add in snapshot.files.values():
        values = [
            (name, add.partition_values.get(physical, add.partition_values.get(name))) for name, physical in columns
        ]
        sizes[partition_key(values)].append(add.size)
    return _health(
        sizes, effective_target_size(snapshot, DeltaCompactionOptions()), DeltaCompactionOptions().min_input_files
    )


def _iceberg_health(handle: Table) -> list[PartitionHealth]:
    table = handle.iceberg_table()
    metadata = table.metadata
    spec = metadata.default_spec()
    if spec.is_unpartitioned:
        return []
    transforms = [(f, parse_transform(f.transform), _source_type(metadata, f)) for f in spec.fields]
    sizes: dict[str, list[int]] = defaultdict(list)
    for task in plan_scan(table.storage, metadata, metadata.current_snapshot()).tasks:
        live = task.file
        if live.spec_id != spec.spec_id or live.content != FileContent.DATA:
            continue
        partition = live.entry.data_file.partition
        values = [
            (f.name, None if partition.get(f.name) is None else transform.to_human(source, partition[f.name]))
            for f, transform, source in transforms
        ]
        sizes[partition_key(values)].append(live.file_size)
    defaults = IcebergCompactionOptions()
    return _health(sizes, size_bounds(metadata, defaults)[1], defaults.min_input_files)


def _health(sizes: dict[str, list[int]], small_below: int, min_input_files: int) -> list[PartitionHealth]:
    result = []
    for key in sorted(sizes):
        small = sum(1 for size in sizes[key] if size < small_below)
        result.append(
            PartitionHealth(
                key=key,
                files=len(sizes[key]),
                bytes=sum(sizes[key]),
                small_files=small,
                mergeable_small_files=small if small >= max(2, min_input_files) else 0,
            )
        )
    return result
