"""Reading Iceberg Parquet data and delete files by field id ("Column Projection", "Default values",
"Schema Evolution" type promotions, Appendix C "Name Mapping Serialization").

Why by id: a table's column names and order change after a file is written (renames, drops, re-adds
with a new id), so names in a file mean nothing; the Parquet field id at every nesting level does.
What a reader must do, and this module does:

* select file columns whose id is in the projection, at every level (struct fields, list elements,
  map keys and values), and only those (leaf pushdown: other columns are never read);
* read a projected field absent from the file as its ``initial-default`` (v3, a JSON single value)
  or null; a required field that is absent without a default makes the file unreadable
  (:class:`~lakeops.errors.ProtocolError`);
* widen values by the allowed promotions (int→long, float→double, decimal(P,S)→decimal(P',S),
  P'>P); any other mismatch between a file column and its projected type is a ProtocolError, never a
  silent cast;
* give files written without ids (imported files) ids from the table's name mapping, or refuse them
  (:class:`~lakeops.errors.UnsupportedFeature`);
* keep row order, so a row's position in the output is its position in the file (position deletes).

Bytes come through :class:`lakeops.storage.Storage` range reads and row groups are streamed, so memory
is bounded by a row group of the projected columns while callers iterate.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from lakeops.errors import CorruptFile, InvalidArgument, ProtocolError, UnsupportedFeature
from lakeops.iceberg.arrow_schema import FIELD_ID_KEY, field_id, to_arrow_schema, to_arrow_type
from lakeops.iceberg.properties import DEFAULT_NAME_MAPPING
from lakeops.iceberg.single_values import from_json
from lakeops.iceberg.types import IcebergType, ListType, MapType, NestedField, StructType
from lakeops.storage import Storage
from lakeops.storage.uri import normalize

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "MappedField",
    "ParquetDataFile",
    "iter_parquet",
    "parse_name_mapping",
    "read_parquet",
]

DEFAULT_BATCH_ROWS = 65_536


class MappedField(BaseModel):
    """One field mapping of a name mapping: the names a field had in imported files, and its id."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    field_id: int | None = Field(default=None, alias="field-id")
    names: tuple[str, ...]
    fields: tuple[MappedField, ...] = ()


_MAPPING = TypeAdapter(tuple[MappedField, ...])


def parse_name_mapping(value: str | Sequence[Any]) -> tuple[MappedField, ...]:
    """A name mapping from the property's JSON text or its parsed list; malformed is InvalidArgument."""
    try:
        parsed = json.loads(value) if isinstance(value, str) else value
        return _MAPPING.validate_python(parsed)
    except (ValueError, ValidationError) as exc:
        raise InvalidArgument(f"table property {DEFAULT_NAME_MAPPING} is not a valid name mapping: {exc}") from exc


class _StorageFile(io.RawIOBase):
    """A read-only, seekable file over :meth:`Storage.read_range`, for pyarrow's Parquet reader."""

    def __init__(self, storage: Storage, path: str, size: int) -> None:
        super().__init__()
        self._storage, self._path, self._size, self._pos = storage, path, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        length = min(len(view), self._size - self._pos)
        if length <= 0:
            return 0
        data = self._storage.read_range(self._path, self._pos, length)
        view[: len(data)] = data
        self._pos += len(data)
        return len(data)


def _with_ids(fields: Sequence[pa.Field], mapping: Sequence[MappedField]) -> list[pa.Field]:
    """``fields`` with the ids the name mapping gives their names; unmapped fields get no id."""
    by_name = {name: mapped for mapped in mapping for name in mapped.names}
    return [_mapped_field(f, by_name.get(f.name)) for f in fields]


def _mapped_field(field: pa.Field, mapped: MappedField | None, name: str | None = None) -> pa.Field:
    """One field with its mapped id; list elements and map parts are looked up by their spec names
    (``element``, ``key``, ``value``) whatever the file calls them."""
    if name is not None:
        mapped = next((m for m in (mapped.fields if mapped else ()) if name in m.names), None)
    children = mapped.fields if mapped else ()
    type_ = field.type
    if pa.types.is_struct(type_):
        type_ = pa.struct(_with_ids(list(type_), children))
    elif pa.types.is_map(type_):
        type_ = pa.map_(_mapped_field(type_.key_field, mapped, "key"), _mapped_field(type_.item_field, mapped, "value"))
    elif pa.types.is_list(type_) or pa.types.is_large_list(type_):
        element = _mapped_field(type_.value_field, mapped, "element")
        type_ = pa.list_(element) if pa.types.is_list(type_) else pa.large_list(element)
    metadata = {FIELD_ID_KEY: str(mapped.field_id).encode()} if mapped and mapped.field_id is not None else None
    return pa.field(field.name, type_, nullable=field.nullable, metadata=metadata)


def _children(type_: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(type_):
        return list(type_)
    if pa.types.is_map(type_):
        return [type_.key_field, type_.item_field]
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return [type_.value_field]
    return []


def _leaf_count(type_: pa.DataType) -> int:
    children = _children(type_)
    return sum(_leaf_count(c.type) for c in children) if children else 1


def _all_ids(fields: Sequence[pa.Field]) -> Iterator[int]:
    for f in fields:
        if (fid := field_id(f)) is not None:
            yield fid
        yield from _all_ids(_children(f.type))


def _target_children(type_: IcebergType) -> dict[int, IcebergType]:
    """Child field id → type of a nested Iceberg type (struct fields, list element, map key/value)."""
    if isinstance(type_, StructType):
        return {f.id: f.type for f in type_.fields}
    if isinstance(type_, ListType):
        return {type_.element_id: type_.element}
    if isinstance(type_, MapType):
        return {type_.key_id: type_.key, type_.value_id: type_.value}
    return {}


def _select_leaves(file_type: pa.DataType, target: IcebergType, first: int) -> list[int]:
    """Parquet leaf indices under a file field that the projection ``target`` needs.

    A nested field keeps at least one leaf, so its own nulls (struct, list, map validity) are known
    even when none of its projected children are in the file.
    """
    wanted = _target_children(target)
    children = _children(file_type)
    if not children or not wanted:
        return list(range(first, first + _leaf_count(file_type)))
    selected: list[int] = []
    index = first
    for child in children:
        child_id = field_id(child)
        if child_id in wanted:
            selected += _select_leaves(child.type, wanted[child_id], index)
        index += _leaf_count(child.type)
    return selected or [first]


def _readable_as(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether file values of Arrow type ``source`` are values of ``target`` (same type, an allowed
    promotion, or another Arrow spelling of the same Parquet type)."""
    if source == target:
        return True
    if target == pa.uuid():
        return bool(source == pa.binary(16))
    # (what kind of target, whether the source is readable as it)
    checks: tuple[tuple[Callable[[pa.DataType], bool], Callable[[], bool]], ...] = (
        (pa.types.is_integer, lambda: pa.types.is_signed_integer(source) and source.bit_width <= target.bit_width),
        (pa.types.is_floating, lambda: pa.types.is_floating(source) and source.bit_width <= target.bit_width),
        (
            pa.types.is_decimal,
            lambda: (
                pa.types.is_decimal(source) and source.scale == target.scale and source.precision <= target.precision
            ),
        ),
        (pa.types.is_timestamp, lambda: pa.types.is_timestamp(source) and (source.tz is None) == (target.tz is None)),
        (pa.types.is_time, lambda: pa.types.is_time(source)),
        (pa.types.is_string, lambda: pa.types.is_large_string(source) or pa.types.is_string_view(source)),
        (pa.types.is_binary, lambda: pa.types.is_large_binary(source) or pa.types.is_binary_view(source)),
    )
    return any(is_kind(target) and accepts() for is_kind, accepts in checks)


def _offsets(lengths: pa.Array) -> pa.Array:
    """List offsets (from 0) for the given per-row lengths, nulls counting as empty."""
    ends = pc.cumulative_sum(pc.fill_null(lengths, 0)).cast(pa.int32())
    return pa.concat_arrays([pa.array([0], pa.int32()), ends])


class ParquetDataFile:
    """One Parquet data or delete file, opened for reading by field id.

    Opening reads the footer only. :attr:`field_ids` are the ids found at every level (from the file,
    or from ``name_mapping`` when the file has none). Raises :class:`~lakeops.errors.NotFound` when
    the file is missing, :class:`~lakeops.errors.CorruptFile` when it is not Parquet, and
    :class:`~lakeops.errors.UnsupportedFeature` when it has no ids and no mapping is given.
    """

    def __init__(self, storage: Storage, path: str, *, name_mapping: Sequence[Any] | None = None) -> None:
        self.path = path
        location = normalize(path, literal=True)  # an Iceberg path: never percent-decoded
        size = storage.stat(location).size
        try:
            self._file = pq.ParquetFile(_StorageFile(storage, location, size))
            file_fields = list(self._file.schema_arrow)
        except (pa.ArrowException, OSError) as exc:
            raise CorruptFile(f"{path}: not a readable Parquet file ({exc})") from exc
        if not any(field_id(f) is not None for f in file_fields):
            if name_mapping is None:
                raise UnsupportedFeature(
                    f"{path}: the Parquet file has no field ids and the table has no name mapping "
                    f"({DEFAULT_NAME_MAPPING}), so its columns cannot be identified"
                )
            file_fields = _with_ids(file_fields, parse_name_mapping(name_mapping))
        self._fields = file_fields
        self.field_ids: frozenset[int] = frozenset(_all_ids(file_fields))

    @property
    def num_rows(self) -> int:
        return int(self._file.metadata.num_rows)

    def iter_batches(self, projection: StructType, *, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """The file's rows in order, as batches of at most ``batch_rows`` rows in exactly
        ``to_arrow_schema(projection)``; only the projected columns are read."""
        if batch_rows < 1:
            raise InvalidArgument(f"batch_rows must be positive, got {batch_rows}")
        schema = to_arrow_schema(projection)
        by_id: dict[int, tuple[pa.Field, int]] = {}
        first = 0
        for f in self._fields:
            if (fid := field_id(f)) is not None:
                by_id[fid] = (f, first)
            first += _leaf_count(f.type)
        matched = {t.id: by_id[t.id] for t in projection.fields if t.id in by_id}
        leaves = [
            leaf
            for t in projection.fields
            if t.id in matched
            for leaf in _select_leaves(matched[t.id][0].type, t.type, matched[t.id][1])
        ]
        for batch in self._raw_batches(sorted(set(leaves)), batch_rows):
            columns = []
            for target in projection.fields:
                if target.id in matched:
                    source = matched[target.id][0]
                    columns.append(self._convert(batch.column(source.name), source, target.type, target.name))
                else:
                    columns.append(self._missing(target, batch.num_rows, target.name))
            yield pa.RecordBatch.from_arrays(columns, schema=schema)

    def _raw_batches(self, leaves: list[int], batch_rows: int) -> Iterator[pa.RecordBatch]:
        metadata = self._file.metadata
        try:
            if leaves:
                row_groups = list(range(metadata.num_row_groups))
                yield from self._file.reader.iter_batches(batch_rows, row_groups, column_indices=leaves)
                return
            # Nothing projected is in the file: only the row counts matter.
            for group in range(metadata.num_row_groups):
                rows = metadata.row_group(group).num_rows
                for start in range(0, rows, batch_rows):
                    yield pa.RecordBatch.from_arrays([pa.nulls(min(batch_rows, rows - start))], names=["rows"])
        except (pa.ArrowException, OSError) as exc:
            raise CorruptFile(f"{self.path}: cannot read Parquet data ({exc})") from exc

    def _missing(self, field: NestedField, rows: int, path: str) -> pa.Array:
        """A column for a projected field the file lacks: its initial-default, else nulls."""
        arrow_type = to_arrow_type(field.type)
        if field.initial_default is not None:
            value = from_json(field.type, field.initial_default)
            return pa.repeat(pa.scalar(value, arrow_type), rows)
        if field.required:
            raise ProtocolError(
                f"{self.path}: required field {path} (id {field.id}) is not in the file and has no initial-default"
            )
        return pa.nulls(rows, arrow_type)

    def _convert(self, values: pa.Array, source: pa.Field, target: IcebergType, path: str) -> pa.Array:
        """File values of ``source`` (an id-annotated file field) as values of the projected type."""
        arrow_type = to_arrow_type(target)
        actual = values.type
        if isinstance(target, StructType) and pa.types.is_struct(actual):
            present = {actual.field(i).name: i for i in range(actual.num_fields)}
            by_id = {field_id(f): f for f in source.type if f.name in present}
            children = [
                self._convert(values.field(present[by_id[f.id].name]), by_id[f.id], f.type, f"{path}.{f.name}")
                if f.id in by_id
                else self._missing(f, len(values), f"{path}.{f.name}")
                for f in target.fields
            ]
            return pa.StructArray.from_arrays(children, fields=list(arrow_type), mask=values.is_null())
        if isinstance(target, MapType) and pa.types.is_map(actual):
            entry = pa.field("entries", pa.struct([actual.key_field, actual.item_field]), nullable=False)
            entries = values.cast(pa.list_(entry))
            flat = entries.flatten()
            keys, items = self._parts(source, target, [flat.field(0), flat.field(1)], path)
            offsets = _offsets(pc.list_value_length(entries))
            return pa.MapArray.from_arrays(offsets, keys, items, type=arrow_type, mask=values.is_null())
        if isinstance(target, ListType) and (pa.types.is_list(actual) or pa.types.is_large_list(actual)):
            (elements,) = self._parts(source, target, [values.flatten()], path)
            offsets = _offsets(pc.list_value_length(values))
            return pa.ListArray.from_arrays(offsets, elements, type=arrow_type, mask=values.is_null())
        if not _readable_as(actual, arrow_type):
            raise ProtocolError(
                f"{self.path}: column {path} (id {field_id(source)}) holds {source.type}, "
                f"which cannot be read as {target}"
            )
        try:
            return values.cast(arrow_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ProtocolError(f"{self.path}: column {path} (id {field_id(source)}) as {target}: {exc}") from exc

    def _parts(self, source: pa.Field, target: ListType | MapType, arrays: list[pa.Array], path: str) -> list[pa.Array]:
        """A list's elements or a map's keys and values, converted; their ids must be the projection's."""
        parts = _children(source.type)
        wanted = _target_children(target)
        found = [field_id(p) for p in parts]
        if found != list(wanted):
            raise ProtocolError(
                f"{self.path}: column {path} has element/key/value ids {found}, the projection expects {list(wanted)}"
            )
        return [
            self._convert(array, part, wanted[fid], f"{path}.{part.name}")
            for array, part, fid in zip(arrays, parts, list(wanted), strict=True)
        ]


def iter_parquet(
    storage: Storage,
    path: str,
    projection: StructType,
    *,
    name_mapping: Sequence[Any] | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """Stream a data file's rows in ``to_arrow_schema(projection)``, batch by batch, in file order."""
    yield from ParquetDataFile(storage, path, name_mapping=name_mapping).iter_batches(projection, batch_rows=batch_rows)


def read_parquet(
    storage: Storage, path: str, projection: StructType, *, name_mapping: Sequence[Any] | None = None
) -> pa.Table:
    """A whole data file in ``to_arrow_schema(projection)`` (row index = position in the file)."""
    batches = list(iter_parquet(storage, path, projection, name_mapping=name_mapping))
    return pa.Table.from_batches(batches, schema=to_arrow_schema(projection))
