"""Reading checkpoint parquet files into actions ("Checkpoints", "V1 Spec", "Checkpoint Schema").

Each row holds one action in its own struct column. ``stats`` may be absent when a writer only stored
``stats_parsed`` (``delta.checkpoint.writeStatsAsJson=false``); the JSON form is then rebuilt from the
struct so everything downstream sees one representation.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import repeat
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import ValidationError

from lakeops.delta.actions import (
    Add,
    CheckpointMetadata,
    DeletionVectorDescriptor,
    DomainMetadata,
    Metadata,
    Protocol,
    Remove,
    Sidecar,
    Txn,
    bulk_load,
    trusted,
)
from lakeops.errors import CorruptFile
from lakeops.storage import Storage

_COLUMNS = ("checkpointMetadata", "protocol", "metaData", "txn", "domainMetadata", "sidecar", "add", "remove")
_MAP_FIELDS = {"partitionValues", "tags", "configuration", "options"}
#: Any action a checkpoint row can hold (V2 checkpoints add the last three).
CheckpointRowAction = Protocol | Metadata | Txn | Add | Remove | DomainMetadata | Sidecar | CheckpointMetadata
_DROP_FIELDS = {"stats_parsed", "partitionValues_parsed"}
#: ``add`` rows decoded at a time when their stats are cut to row counts as they are read.
_CUT_ROWS = 65_536


def _maps_to_dicts(value: Any) -> Any:
    """pyarrow renders map columns as lists of (key, value) tuples; the models want dicts."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in _MAP_FIELDS and isinstance(item, list):
                out[key] = dict(item)
            else:
                out[key] = _maps_to_dicts(item)
        return out
    return value


def _json_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items() if v is not None}
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat(timespec="milliseconds") + "Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value) if value != value.to_integral_value() else int(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def stats_json_from_struct(parsed: dict[str, Any]) -> str:
    """Render a ``stats_parsed`` struct as the JSON ``stats`` string a writer would have written."""
    return json.dumps(_json_value(parsed), separators=(",", ":"))


def read_checkpoint_part(
    storage: Storage, path: str, wanted: tuple[str, ...] = _COLUMNS
) -> Iterator[CheckpointRowAction]:
    """Every action in one checkpoint part file, in file order of each column (``checkpointMetadata``,
    ``protocol``, ``metaData``, ``txn``, ``domainMetadata``, ``sidecar``, ``add``, ``remove``);
    ``wanted``: only the actions of those columns."""
    for item in _read_part(storage, path, keep_adds=False, wanted=wanted):
        if isinstance(item, AddColumn):  # pragma: no cover - keep_adds=False never yields one
            yield from item.build(0, len(item))
        else:
            yield item


def read_checkpoint_part_columnar(
    storage: Storage, path: str, *, counts_only: bool = False, keys_only: bool = False
) -> Iterator[CheckpointRowAction | AddColumn]:
    """As :func:`read_checkpoint_part`, but the ``add`` rows stay one :class:`AddColumn` when they
    can (see :func:`_lazy_adds`): a large table's snapshot then holds no object per file.
    ``counts_only``: their stats cut to ``numRecords`` (:func:`row_counts_only`) as they are read, a
    row group at a time, so the part's whole stats are never decoded at once. ``keys_only``: they
    keep only their path and row number in the file (:func:`key_rows`), when every row could be an
    :class:`AddColumn` row; the rest is read again from ``path`` when written back (a checkpoint)."""
    return _read_part(storage, path, keep_adds=True, counts_only=counts_only, keys_only=keys_only)


def _read_part(
    storage: Storage,
    path: str,
    *,
    keep_adds: bool,
    wanted: tuple[str, ...] = _COLUMNS,
    counts_only: bool = False,
    keys_only: bool = False,
) -> Iterator[CheckpointRowAction | AddColumn]:
    columns, keyed = _read_columns(storage, path, wanted, counts_only, keys_only)
    for column in list(columns):
        values = columns.pop(column)  # a column built into objects is not kept alive meanwhile
        try:
            valid = _valid_rows(values)
            if keyed is not None and column == "add":
                yield AddColumn(_single_chunk(valid), source=KeySource(path, keyed))
                continue
            if keep_adds and column == "add" and (lazy := _lazy_adds(valid)) is not None:
                yield lazy
                continue
            fast = _columnar_actions(column, valid)
            if fast is not None:
                yield from fast
                continue
            rows = valid.to_pylist()
        except (pa.ArrowException, UnicodeDecodeError) as exc:  # pyarrow lets invalid UTF-8 into string columns
            raise CorruptFile(f"{path}: checkpoint column {column} cannot be decoded ({exc})") from exc
        model = _BUILDERS[column]
        for row in rows:
            try:
                action = model.model_validate(_action_fields(column, row))
            except ValidationError as exc:
                raise CorruptFile(f"{path}: invalid {column} action in checkpoint: {exc.errors()[0]['msg']}") from exc
            except (TypeError, ValueError, AttributeError) as exc:  # a writer stored other types than the schema's
                raise CorruptFile(f"{path}: {column} column of the checkpoint has an unexpected type ({exc})") from exc
            yield action


def _read_columns(
    storage: Storage, path: str, wanted: tuple[str, ...], counts_only: bool = False, keys_only: bool = False
) -> tuple[dict[str, pa.ChunkedArray], frozenset[str] | None]:
    """The ``wanted`` action columns of one part, in ``_COLUMNS`` order (``counts_only``: the ``add``
    column read a row group at a time, its stats cut to row counts; ``keys_only``: cut to
    :func:`key_rows`), and when the ``add`` column was cut to keys (every batch could be) the fields
    its rows set; the file's bytes are released on return."""
    keyed: frozenset[str] | None = None
    try:
        parquet = pq.ParquetFile(pa.BufferReader(storage.read(path)))
        present = [c for c in _COLUMNS if c in wanted and c in parquet.schema_arrow.names]
        cut = (counts_only or keys_only) and "add" in present
        table = parquet.read(columns=[c for c in present if not cut or c != "add"])
        columns = {name: table.column(name) for name in table.column_names}
        if cut and keys_only:
            keys = _key_batches(parquet)
            if keys is not None:
                columns["add"], keyed = keys
            else:
                columns["add"] = parquet.read(columns=["add"]).column("add")
        elif cut:
            adds = [row_counts_only(b.column(0)) for b in parquet.iter_batches(columns=["add"], batch_size=_CUT_ROWS)]
            columns["add"] = pa.chunked_array(
                adds, type=adds[0].type if adds else parquet.schema_arrow.field("add").type
            )
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:  # column names that are not UTF-8 too
        raise CorruptFile(f"{path}: checkpoint is not a readable parquet file ({exc})") from exc
    return {name: columns[name] for name in present}, keyed


def _key_batches(parquet: pq.ParquetFile) -> tuple[pa.ChunkedArray, frozenset[str]] | None:
    """The ``add`` column cut to :func:`key_rows` a row group at a time, and the names of the fields
    its rows set; None when a batch has rows an :class:`AddColumn` cannot hold (they are then read
    whole, as objects)."""
    keys: list[pa.StructArray] = []
    offset, fields = 0, frozenset[str]()
    for batch in parquet.iter_batches(columns=["add"], batch_size=_CUT_ROWS):
        cut = key_rows(batch.column(0), offset)
        if cut is None:
            return None
        keys.append(cut[0])
        fields |= cut[1]
        offset += batch.num_rows
    return pa.chunked_array(keys, type=KEY_TYPE), fields


@dataclass(frozen=True)
class KeySource:
    """Where rows cut to keys come from: the file whose ``add`` column holds them, and the fields
    its rows set (a checkpoint takes the two-pass route only when its schema has room for them)."""

    location: str
    fields: frozenset[str]


#: The ``add`` rows of a keys-only read: the path and the row's number in its file's ``add`` column.
KEY_TYPE = pa.struct([pa.field("path", pa.string()), pa.field("row", pa.int64())])


def key_rows(adds: pa.Array, offset: int) -> tuple[pa.StructArray, frozenset[str]] | None:
    """``add`` rows as their reconciliation key and where they are (``offset`` + their position),
    and the names of the fields the rows set: a checkpoint replays these and reads the winners'
    full rows again, so it never holds every file's stats ("Action Reconciliation": a row without
    a deletion vector is keyed by its path). None when a valid row could not be an
    :class:`AddColumn` row (:func:`fits_add_column`), or the column is not one of paths."""
    if not pa.types.is_struct(adds.type) or "path" not in adds.type.names:
        return None  # read whole: the validating path reports what it is
    valid = _single_chunk(_valid_rows(pa.chunked_array([adds], type=adds.type)))
    if len(valid) and not fits_add_column(valid):
        return None
    fields = frozenset(f.name for i, f in enumerate(valid.type) if valid.field(i).null_count < len(valid))
    rows = pa.array(range(offset, offset + len(adds)), type=pa.int64())
    absent = pc.invert(adds.is_valid()) if adds.null_count else None
    paths = adds.field("path").cast(pa.string())
    return pa.StructArray.from_arrays([paths, rows], fields=list(KEY_TYPE), mask=absent), fields


def _valid_rows(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """The rows of an action column that hold an action: a zero-copy slice when they are one run (the
    usual layout: table actions first, then files), else a filtered copy."""
    if not values.null_count:
        return values
    valid = pc.is_valid(values)
    count = pc.sum(valid).as_py() or 0
    if not count:
        return values.slice(0, 0)
    first = pc.index(valid, True).as_py()
    if pc.all(valid.slice(first, count)).as_py():
        return values.slice(first, count)
    return values.filter(valid)


_BUILDERS: dict[str, type[CheckpointRowAction]] = {
    "checkpointMetadata": CheckpointMetadata,
    "protocol": Protocol,
    "metaData": Metadata,
    "txn": Txn,
    "domainMetadata": DomainMetadata,
    "sidecar": Sidecar,
    "add": Add,
    "remove": Remove,
}


def _action_fields(column: str, row: Any) -> dict[str, Any]:
    """One row of an action column as the model's input: maps as dicts, JSON stats, no parsed copies."""
    if not isinstance(row, dict):
        raise TypeError(f"the {column} column holds {type(row).__name__} values, not structs")
    row = _maps_to_dicts(row)
    if column == "add":
        parsed = row.get("stats_parsed")
        if row.get("stats") is None and parsed:
            row["stats"] = stats_json_from_struct(parsed)
    for name in _DROP_FIELDS:
        row.pop(name, None)
    return {k: v for k, v in row.items() if v is not None}


# --- the columnar path: add and remove columns whose types are the protocol's --------------------

#: The kind of Arrow type each declared file-action field must have for the columnar path.
_KINDS: dict[type[Add | Remove], dict[str, str]] = {
    Add: {
        "path": "string",
        "partitionValues": "map",
        "size": "integer",
        "modificationTime": "integer",
        "dataChange": "boolean",
        "stats": "string",
        "tags": "map",
        "deletionVector": "struct",
    },
    Remove: {
        "path": "string",
        "deletionTimestamp": "integer",
        "dataChange": "boolean",
        "extendedFileMetadata": "boolean",
        "partitionValues": "map",
        "size": "integer",
        "stats": "string",
        "tags": "map",
        "deletionVector": "struct",
    },
}


def _has_kind(t: pa.DataType, kind: str) -> bool:
    if kind == "string":
        return bool(pa.types.is_string(t) or pa.types.is_large_string(t))
    if kind == "integer":
        return bool(pa.types.is_integer(t))
    if kind == "boolean":
        return bool(pa.types.is_boolean(t))
    if kind == "map":
        return bool(pa.types.is_map(t) and _has_kind(t.key_type, "string") and _has_kind(t.item_type, "string"))
    return bool(pa.types.is_struct(t))


def _shared_strings(array: pa.Array) -> list[str | None]:
    """A string column's values with one ``str`` object per distinct value (partition values repeat)."""
    encoded = array.dictionary_encode()
    distinct = encoded.dictionary.to_pylist()
    return [None if i is None else distinct[i] for i in encoded.indices.to_pylist()]


def map_values(array: pa.MapArray) -> list[dict[str, str | None] | None]:
    """A ``map<string,string>`` column as dicts, built from its flat keys and items."""
    offsets = array.offsets.to_pylist()
    keys = cast(list[str], _shared_strings(array.keys))  # map keys are never null
    items = _shared_strings(array.items)
    rows = len(array)
    if array.null_count == 0 and offsets[0] == 0 and offsets[-1] == rows == len(keys):
        return [{key: item} for key, item in zip(keys, items, strict=True)]  # one entry each: the usual case
    valid = array.is_valid().to_pylist()
    return [
        dict(zip(keys[offsets[i] : offsets[i + 1]], items[offsets[i] : offsets[i + 1]], strict=True))
        if valid[i]
        else None
        for i in range(rows)
    ]


def _column_values(name: str, kind: str | None, array: pa.Array) -> list[Any]:
    """One field of every row as the model holds it (None where absent)."""
    if kind == "map":
        return map_values(array)
    values: list[Any] = array.to_pylist()
    if kind == "struct":  # deletionVector: rare, and its own fields are validated by its model
        return [None if v is None else DeletionVectorDescriptor.model_validate(_maps_to_dicts(v)) for v in values]
    if kind is None:  # an undeclared field: kept as the validating path keeps it
        return [None if v is None else _maps_to_dicts({name: v})[name] for v in values]
    return values


def _stats_from_parsed(struct: pa.StructArray, stats: list[Any] | None) -> list[Any] | None:
    """``stats`` with the rows that only have ``stats_parsed`` filled from it."""
    names = [struct.type.field(i).name for i in range(struct.type.num_fields)]
    if "stats_parsed" not in names:
        return stats
    parsed_column = struct.field("stats_parsed")
    stats = stats if stats is not None else [None] * len(struct)
    for index, parsed in enumerate(parsed_column.to_pylist()):
        if stats[index] is None and parsed:
            stats[index] = stats_json_from_struct(_maps_to_dicts({"stats_parsed": parsed})["stats_parsed"])
    return stats


def _columnar_actions(column: str, array: pa.ChunkedArray) -> list[Add | Remove] | None:
    """The ``add``/``remove`` rows built column by column, or None to leave them to the validating path
    (another column kind, a field of a type the protocol does not give it, a required field null).

    Why building without validation is safe here: every declared field's Arrow type was checked to be
    one whose Python values are exactly the model's (``string`` -> str, integer -> int, ``boolean``
    -> bool, ``map<string,string>`` -> dict[str, str | None]), required fields to have no nulls, and
    deletion vectors are still validated by their model; validation would return the same values.
    """
    model = _BUILDERS[column]
    if model is not Add and model is not Remove:
        return None
    struct = _single_chunk(array)
    if not _columnar_fits(model, struct):
        return None
    return _columnar_build(model, struct)


def _single_chunk(array: pa.ChunkedArray) -> pa.Array:
    return array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)


def _columnar_fits(model: type[Add | Remove], struct: pa.Array) -> bool:
    """Whether ``struct`` (one action column, null rows dropped) can be built without validation."""
    if not pa.types.is_struct(struct.type) or struct.null_count:
        return False
    kinds = _KINDS[model]
    by_alias = {field.alias or name: name for name, field in model.model_fields.items()}
    required = {field.alias or name for name, field in model.model_fields.items() if field.is_required()}
    for i in range(struct.type.num_fields):
        name, child = struct.type.field(i).name, struct.field(i)
        if name in _DROP_FIELDS or name not in by_alias:
            continue
        kind = kinds.get(name)
        if kind is None or not _has_kind(child.type, kind) or (name in required and child.null_count):
            return False
    return required <= set(struct.type.names)


def _columnar_build(model: type[Add | Remove], struct: pa.StructArray) -> list[Add | Remove]:
    """The actions of ``struct``'s rows; the column passed :func:`_columnar_fits`."""
    kinds = _KINDS[model]
    by_alias = {field.alias or name: name for name, field in model.model_fields.items()}
    children = struct.flatten()
    names: list[str] = []
    columns: list[list[Any]] = []
    stats: list[Any] | None = None
    for i in range(struct.type.num_fields):
        name = struct.type.field(i).name
        if name in _DROP_FIELDS:
            continue
        values = _column_values(name, kinds.get(name), children[i])
        if name == "stats":
            stats = values
            continue
        names.append(name)
        columns.append(values)
    if model is Add:
        stats = _stats_from_parsed(struct, stats)
    if stats is not None:
        names.append("stats")
        columns.append(stats)
    return _build(model, by_alias, names, columns, len(struct))


def row_counts_only(adds: pa.StructArray) -> pa.StructArray:
    """``add`` rows with each ``stats`` cut to its ``numRecords``, for operations that read no other
    statistic (compaction and VACUUM planning): at 10 M files the stats strings are most of a
    snapshot's memory. Only stats whose one ``numRecords`` key opens the object with a plain JSON
    integer are cut; any other text stays as written, so ``Add.num_records`` (and its errors) read
    the same from every row ("Per-file Statistics")."""
    if not pa.types.is_struct(adds.type) or "stats" not in adds.type.names:
        return adds
    stats = adds.field("stats")
    if not pa.types.is_string(stats.type):
        return adds  # another type is the validating path's to report
    found = pc.extract_regex(stats, _LEADING_NUM_RECORDS)
    plain = pc.and_(found.is_valid(), pc.equal(pc.count_substring(stats, '"numRecords"'), 1))
    narrowed = pc.if_else(plain, pc.binary_join_element_wise('{"numRecords":', found.field("n"), "}", ""), stats)
    children = [narrowed if f.name == "stats" else adds.field(i) for i, f in enumerate(adds.type)]
    absent = pc.invert(adds.is_valid()) if adds.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(adds.type), mask=absent)


#: A stats object opening with ``"numRecords": N`` (N a JSON integer within the long range).
_LEADING_NUM_RECORDS = r'^\s*\{\s*"numRecords"\s*:\s*(?P<n>0|[1-9][0-9]{0,17})\s*[,}]'


class AddColumn:
    """A checkpoint part's ``add`` rows kept as Arrow, ``Add`` objects built only for the rows asked.

    Only columns for which building cannot fail are kept (:func:`_lazy_adds`), so a snapshot that
    holds one reports a broken checkpoint when it loads, as one holding objects does. Every row is
    a live file without a deletion vector: its key is ``(path, None)``.
    """

    def __init__(self, struct: pa.StructArray, source: KeySource | None = None) -> None:
        self.struct = struct
        #: Set for rows cut to :data:`KEY_TYPE`: where their full rows are.
        self.source = source

    def __len__(self) -> int:
        return len(self.struct)

    @property
    def paths(self) -> pa.Array:
        return self.struct.field("path")

    def build(self, start: int, stop: int) -> list[Add]:
        """``Add`` objects of rows ``[start, stop)``."""
        rows = self.struct.slice(start, max(0, min(stop, len(self)) - start))
        return cast(list[Add], _columnar_build(Add, rows))

    def with_row_counts_only(self) -> AddColumn:
        """These rows with each ``stats`` cut to its ``numRecords`` (:func:`row_counts_only`)."""
        return AddColumn(row_counts_only(self.struct))

    def without(self, paths: pa.Array) -> AddColumn:
        """The rows whose path is not in the string array ``paths`` (files a later commit removed or
        re-added)."""
        if not len(paths):
            return self
        return self.keep(pc.invert(pc.is_in(self.paths, value_set=paths.cast(self.paths.type))))

    def keep(self, rows: pa.Array | pa.ChunkedArray) -> AddColumn:
        """The rows where the boolean ``rows`` is true."""
        if isinstance(rows, pa.ChunkedArray):
            rows = rows.combine_chunks()
        return self if pc.all(rows).as_py() else AddColumn(self.struct.filter(rows), self.source)


def _lazy_adds(array: pa.ChunkedArray) -> AddColumn | None:
    """The ``add`` column as an :class:`AddColumn` when :func:`fits_add_column`; else None (built now,
    by the path that reports its errors)."""
    struct = _single_chunk(array)
    return AddColumn(struct) if fits_add_column(struct) else None


def fits_add_column(struct: pa.Array) -> bool:
    """Whether building ``Add`` objects of ``struct``'s rows later can neither fail nor differ from
    building them now: the columnar path applies, every value decodes (UTF-8), and no row carries a
    deletion vector (validated by its model) or only ``stats_parsed`` (rebuilt as JSON)."""
    if not _columnar_fits(Add, struct):
        return False
    names = struct.type.names
    for name in ("deletionVector", "stats_parsed"):
        if name in names and struct.field(name).null_count != len(struct):
            return False
    try:
        struct.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _build(
    model: type[Add | Remove], by_alias: dict[str, str], names: list[str], columns: list[list[Any]], rows: int
) -> list[Add | Remove]:
    """The models of ``rows`` rows from their field columns (protocol names, None where absent)."""
    nulls = [column.count(None) for column in columns]
    present = [(n, c, k) for n, c, k in zip(names, columns, nulls, strict=True) if k < rows]
    keys = [by_alias.get(name, name) for name, _, _ in present]
    extras = [name for name, _, _ in present if name not in by_alias]
    # Fields no row sets hold their defaults: constant columns, so each row's dict is built in one call.
    defaults = [attr for attr in by_alias.values() if attr not in keys]
    empty_maps = [a for a, f in model.model_fields.items() if f.default_factory is dict]
    fixups = [a for a, (_, _, k) in zip(keys, present, strict=True) if a in empty_maps and k] + [
        a for a in defaults if a in empty_maps
    ]
    # A row's fields set are its non-null fields: shared by all rows with the same nulls.
    varying = [i for i, (_, _, k) in enumerate(present) if k]
    always = {key for key, (_, _, k) in zip(keys, present, strict=True) if not k}
    fields_sets: dict[tuple[bool, ...], set[str]] = {}
    all_keys = keys + defaults
    source = zip(*(c for _, c, _ in present), *(repeat(None, rows) for _ in defaults), strict=True)
    actions: list[Add | Remove] = []
    with bulk_load():
        for row in source:
            values = dict(zip(all_keys, row, strict=True))
            fields_set = always
            if varying:
                pattern = tuple(row[i] is not None for i in varying)
                fields_set = fields_sets.get(pattern) or fields_sets.setdefault(
                    pattern, always | {keys[i] for i, p in zip(varying, pattern, strict=True) if p}
                )
            extra = {}
            for name in extras:
                value = values.pop(name)
                if value is not None:
                    extra[name] = value
            for attr in fixups:
                if values[attr] is None:
                    values[attr] = {}
            actions.append(trusted(model, values, fields_set, extra))
    return actions
