"""Encoding actions into checkpoint parquet ("Checkpoints", "V1 Spec", Appendix "Checkpoint Schema").

One row per action, each action kind in its own struct column (``metaData``, ``protocol``, ``txn``,
``add``, ``remove``). The column types follow the appendix and what delta-rs and Delta Spark write:
``int`` reader/writer versions, ``readerFeatures``/``writerFeatures`` always present (null before
table features), ``map<string,string>`` for ``partitionValues``/``tags``/``configuration``/
``options``, and the deletion vector as ``struct<storageType, pathOrInlineDv, offset int,
sizeInBytes int, cardinality long>``. Required protocol fields are non-nullable inside their
(nullable) struct, as delta-rs writes them.

Nothing an action carries is lost: ``baseRowId``, ``defaultRowCommitVersion`` and
``clusteringProvider`` are always columns of ``add`` (``remove`` has the first two); any other
field a newer writer recorded (on an action or its deletion vector) becomes a column of the type
its values have, or a JSON string when they disagree.

Table properties: ``delta.checkpoint.writeStatsAsJson`` (default true) keeps ``add.stats``; when
false that column is left out. ``delta.checkpoint.writeStatsAsStruct`` (default false) adds
``add.stats_parsed`` (typed per the schema: ``numRecords``, ``minValues``, ``maxValues``,
``nullCount``, ``tightBounds`` — the key real writers use, not the appendix's ``nullCounts``) and,
for partitioned tables, ``add.partitionValues_parsed``; both keyed by physical names under column
mapping.

The Arrow schema is decided once (on the driver) from every action, so all parts of a multi-part
checkpoint share it; :func:`schema_to_text` carries it to the Spark tasks.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from itertools import accumulate
from operator import attrgetter, itemgetter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from lakeops.delta.actions import (
    KEY_OF,
    Add,
    CheckpointMetadata,
    DeletionVectorDescriptor,
    DomainMetadata,
    Metadata,
    Protocol,
    Remove,
    Txn,
)
from lakeops.delta.partitions import parse_partition_value, partition_arrow_type
from lakeops.delta.properties import CHECKPOINT_WRITE_STATS_AS_JSON, CHECKPOINT_WRITE_STATS_AS_STRUCT
from lakeops.delta.schema import (
    DecimalType,
    PrimitiveType,
    column_mapping_mode,
    from_arrow_type,
    parse_schema,
    physical_name,
    to_arrow_type,
    type_to_json,
)
from lakeops.delta.stats import BOUNDED_TYPES, DataSkippingConfig, indexed_columns
from lakeops.errors import LakeopsError, ProtocolError

__all__ = [
    "CheckpointAction",
    "checkpoint_bytes",
    "checkpoint_schema",
    "encode_actions",
    "schema_from_text",
    "schema_to_text",
    "writes_stats_as_json",
    "writes_stats_as_struct",
]

CheckpointAction = Protocol | Metadata | Txn | Add | Remove | DomainMetadata | CheckpointMetadata


def _map(*, values_nullable: bool = True) -> pa.DataType:
    return pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", pa.string(), values_nullable))


def _strings() -> pa.DataType:
    return pa.list_(pa.field("element", pa.string(), nullable=False))


_DV_FIELDS = [
    pa.field("storageType", pa.string(), nullable=False),
    pa.field("pathOrInlineDv", pa.string(), nullable=False),
    pa.field("offset", pa.int32()),
    pa.field("sizeInBytes", pa.int32(), nullable=False),
    pa.field("cardinality", pa.int64(), nullable=False),
]
_PROTOCOL = pa.struct(
    [
        pa.field("minReaderVersion", pa.int32(), nullable=False),
        pa.field("minWriterVersion", pa.int32(), nullable=False),
        pa.field("readerFeatures", _strings()),
        pa.field("writerFeatures", _strings()),
    ]
)
_METADATA_FIELDS = [
    pa.field("id", pa.string(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("description", pa.string()),
    pa.field(
        "format",
        pa.struct(
            [pa.field("provider", pa.string(), nullable=False), pa.field("options", _map(values_nullable=False))]
        ),
        nullable=False,
    ),
    pa.field("schemaString", pa.string(), nullable=False),
    pa.field("partitionColumns", _strings(), nullable=False),
    pa.field("createdTime", pa.int64()),
    pa.field("configuration", _map(values_nullable=False), nullable=False),
]
_TXN_FIELDS = [
    pa.field("appId", pa.string(), nullable=False),
    pa.field("version", pa.int64(), nullable=False),
    pa.field("lastUpdated", pa.int64()),
]
_DOMAIN_FIELDS = [
    pa.field("domain", pa.string(), nullable=False),
    pa.field("configuration", pa.string(), nullable=False),
    pa.field("removed", pa.bool_(), nullable=False),
]
_CHECKPOINT_METADATA_FIELDS = [pa.field("version", pa.int64(), nullable=False), pa.field("tags", _map())]
_ROW_TRACKING_FIELDS = [pa.field("baseRowId", pa.int64()), pa.field("defaultRowCommitVersion", pa.int64())]
#: Fields newer writers add that lakeops' models keep as extras: their type is known, not guessed.
_KNOWN_EXTRA_TYPES: dict[str, pa.DataType] = {
    "baseRowId": pa.int64(),
    "defaultRowCommitVersion": pa.int64(),
    "clusteringProvider": pa.string(),
    "maxRowIndex": pa.int64(),
}
_PARSED = ("partitionValues_parsed", "stats_parsed")


# --------------------------------------------------------------------------------------------
# Table properties
# --------------------------------------------------------------------------------------------


def _flag(metadata: Metadata, key: str, default: bool) -> bool:
    value = metadata.configuration.get(key)
    return default if value is None else value.strip().lower() == "true"


def writes_stats_as_json(metadata: Metadata) -> bool:
    """``delta.checkpoint.writeStatsAsJson`` (default true)."""
    return _flag(metadata, CHECKPOINT_WRITE_STATS_AS_JSON, True)


def writes_stats_as_struct(metadata: Metadata) -> bool:
    """``delta.checkpoint.writeStatsAsStruct`` (default false)."""
    return _flag(metadata, CHECKPOINT_WRITE_STATS_AS_STRUCT, False)


# --------------------------------------------------------------------------------------------
# Schema
# --------------------------------------------------------------------------------------------


def _storable(t: pa.DataType) -> bool:
    """Whether Parquet can hold ``t``: no null-typed leaf, no struct without fields."""
    if pa.types.is_null(t):
        return False
    if pa.types.is_struct(t):
        return t.num_fields > 0 and all(_storable(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _storable(t.value_type)
    return True


def _infer_type(values: list[Any]) -> pa.DataType:
    """The Arrow type of an unknown field's values; a JSON string when they have no common type or
    one Parquet cannot store (``{}``, ``[]``)."""
    try:
        inferred = pa.array(values).type
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return pa.string()
    return inferred if _storable(inferred) else pa.string()


def _extra_fields(models: Iterable[BaseModel | None], declared: Iterable[str]) -> list[pa.Field]:
    """Columns for fields the models do not declare (kept as pydantic extras), in first-seen order."""
    skip = set(declared) | set(_PARSED)
    values: dict[str, list[Any]] = {}
    extras = [model.__pydantic_extra__ for model in models if model is not None]
    for extra in filter(None, extras):  # most actions have none
        for name, value in extra.items():
            if value is None or name in skip:
                continue
            seen = values.setdefault(name, [])
            if name not in _KNOWN_EXTRA_TYPES:
                seen.append(value)
    return [pa.field(name, _KNOWN_EXTRA_TYPES.get(name) or _infer_type(seen)) for name, seen in values.items()]


def _declared(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def _tree_to_struct(tree: dict[str, Any]) -> pa.StructType:
    return pa.struct(
        [pa.field(name, _tree_to_struct(node) if isinstance(node, dict) else node) for name, node in tree.items()]
    )


def _put(tree: dict[str, Any], path: tuple[str, ...], leaf: pa.DataType) -> None:
    for name in path[:-1]:
        tree = tree.setdefault(name, {})
    tree[path[-1]] = leaf


def stats_struct_type(metadata: Metadata, protocol: Protocol) -> pa.StructType:
    """``add.stats_parsed``: the statistics of the columns the table indexes (``delta.dataSkipping*``),
    typed by the schema and keyed by physical names: bounds for orderable types, a null count for
    every column; empty groups are left out (Parquet cannot store a struct without fields)."""
    schema = parse_schema(metadata.schema_string)
    mode = column_mapping_mode(metadata, protocol)
    config = DataSkippingConfig.from_configuration(metadata)
    bounds: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for leaf in indexed_columns(schema, metadata.partition_columns, config):
        dtype = leaf[-1].type
        if dtype == PrimitiveType("void"):
            continue
        path = tuple(physical_name(f, mode) for f in leaf)
        _put(nulls, path, pa.int64())  # arrays and maps too, as Delta Spark records them
        if isinstance(dtype, DecimalType) or (isinstance(dtype, PrimitiveType) and dtype.name in BOUNDED_TYPES):
            _put(bounds, path, to_arrow_type(dtype, include_metadata=False))
    fields = [pa.field("numRecords", pa.int64())]
    if bounds:
        fields += [pa.field("minValues", _tree_to_struct(bounds)), pa.field("maxValues", _tree_to_struct(bounds))]
    if nulls:
        fields.append(pa.field("nullCount", _tree_to_struct(nulls)))
    fields.append(pa.field("tightBounds", pa.bool_()))
    return pa.struct(fields)


def partition_values_struct_type(metadata: Metadata, protocol: Protocol) -> pa.StructType | None:
    """``add.partitionValues_parsed``: one typed field per partition column (physical names); None
    for an unpartitioned table."""
    if not metadata.partition_columns:
        return None
    schema = parse_schema(metadata.schema_string)
    mode = column_mapping_mode(metadata, protocol)
    fields = []
    for name in metadata.partition_columns:
        column = schema.get(name)
        if column is None:
            raise ProtocolError(f"partition column {name!r} is not in the table schema")
        fields.append(pa.field(physical_name(column, mode), partition_arrow_type(str(type_to_json(column.type)))))
    return pa.struct(fields)


def checkpoint_schema(
    protocol: Protocol,
    metadata: Metadata,
    *,
    txns: Sequence[Txn] = (),
    adds: Sequence[Add] = (),
    removes: Sequence[Remove] = (),
    domains: Sequence[DomainMetadata] = (),
    v2: bool = False,
) -> pa.Schema:
    """The checkpoint's Arrow schema for this table state (its properties and every action's fields);
    ``v2``: a V2 spec checkpoint, with its ``checkpointMetadata`` column
    (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#v2-spec)."""
    dvs: list[DeletionVectorDescriptor | None] = [a.deletion_vector for a in adds] + [
        r.deletion_vector for r in removes
    ]
    dv = pa.struct(_DV_FIELDS + _extra_fields(dvs, _declared(DeletionVectorDescriptor)))
    add_fields = [
        pa.field("path", pa.string(), nullable=False),
        pa.field("partitionValues", _map(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("modificationTime", pa.int64(), nullable=False),
        pa.field("dataChange", pa.bool_(), nullable=False),
    ]
    if writes_stats_as_json(metadata):
        add_fields.append(pa.field("stats", pa.string()))
    add_fields.append(pa.field("tags", _map()))
    if writes_stats_as_struct(metadata):
        parsed_partitions = partition_values_struct_type(metadata, protocol)
        if parsed_partitions is not None:
            add_fields.append(pa.field("partitionValues_parsed", parsed_partitions))
        add_fields.append(pa.field("stats_parsed", stats_struct_type(metadata, protocol)))
    add_fields += [pa.field("deletionVector", dv), *_ROW_TRACKING_FIELDS, pa.field("clusteringProvider", pa.string())]
    add_fields += _extra_fields(adds, [f.name for f in add_fields] + _declared(Add))
    remove_fields = [
        pa.field("path", pa.string(), nullable=False),
        pa.field("deletionTimestamp", pa.int64()),
        pa.field("dataChange", pa.bool_(), nullable=False),
        pa.field("extendedFileMetadata", pa.bool_()),
        pa.field("partitionValues", _map()),
        pa.field("size", pa.int64()),
        pa.field("stats", pa.string()),
        pa.field("tags", _map()),
        pa.field("deletionVector", dv),
        *_ROW_TRACKING_FIELDS,
    ]
    remove_fields += _extra_fields(removes, [f.name for f in remove_fields])
    metadata_fields = _METADATA_FIELDS + _extra_fields([metadata], _declared(Metadata))
    protocol_type = pa.struct(list(_PROTOCOL) + _extra_fields([protocol], _declared(Protocol)))
    txn_fields = _TXN_FIELDS + _extra_fields(txns, _declared(Txn))
    fields = [
        pa.field("metaData", pa.struct(metadata_fields)),
        pa.field("protocol", protocol_type),
        pa.field("txn", pa.struct(txn_fields)),
        pa.field("add", pa.struct(add_fields)),
        pa.field("remove", pa.struct(remove_fields)),
    ]
    if domains:
        domain_fields = _DOMAIN_FIELDS + _extra_fields(domains, _declared(DomainMetadata))
        fields.append(pa.field("domainMetadata", pa.struct(domain_fields)))
    if v2:
        fields.append(pa.field("checkpointMetadata", pa.struct(_CHECKPOINT_METADATA_FIELDS)))
    return pa.schema(fields)


def schema_to_text(schema: pa.Schema) -> str:
    """The schema as text (base64 Arrow IPC), so a JSON plan unit can carry it to a Spark task."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def schema_from_text(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


# --------------------------------------------------------------------------------------------
# Typed statistics and partition values
# --------------------------------------------------------------------------------------------

Converter = Callable[[Any], Any]


def _parsed_or_none(delta_type: str) -> Converter:
    def convert(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
            return None
        try:
            return parse_partition_value(str(value), delta_type)
        except LakeopsError:
            return None

    return convert


def _integer(bits: int) -> Converter:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def convert(value: Any) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            return None
        return value

    return convert


def _floating(value: Any) -> float | None:
    return None if isinstance(value, bool) or not isinstance(value, int | float | Decimal) else float(value)


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _boolean(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _converter(arrow_type: pa.DataType) -> Converter:
    """Turns a JSON statistics value into a Python value of ``arrow_type``, or None when it does not
    fit (a statistic that cannot be trusted is left out, which readers treat as unknown)."""
    t = arrow_type
    if pa.types.is_struct(t):
        children = [(t.field(i).name, _converter(t.field(i).type)) for i in range(t.num_fields)]

        def struct(value: Any) -> dict[str, Any] | None:
            if not isinstance(value, dict):
                return None
            return {name: convert(value.get(name)) for name, convert in children}

        return struct
    if pa.types.is_integer(t):
        return _integer(t.bit_width)
    if pa.types.is_floating(t):
        return _floating
    if pa.types.is_boolean(t):
        return _boolean
    if pa.types.is_string(t):
        return _string
    if pa.types.is_decimal(t) or pa.types.is_date(t) or pa.types.is_timestamp(t):
        return _parsed_or_none(str(type_to_json(from_arrow_type(t))))
    return lambda value: None


def _stats_parser(stats_type: pa.StructType) -> Callable[[str | None], dict[str, Any] | None]:
    convert = _converter(stats_type)

    def parse(stats: str | None) -> dict[str, Any] | None:
        if not stats:
            return None
        try:
            # Decimal keeps decimal statistics exact; floats are rounded from it once, correctly.
            parsed: dict[str, Any] | None = convert(json.loads(stats, parse_float=Decimal))
            return parsed
        except ValueError:
            return None

    return parse


def _partition_parser(struct_type: pa.StructType) -> Callable[[Add], dict[str, Any]]:
    columns = [
        (struct_type.field(i).name, str(type_to_json(from_arrow_type(struct_type.field(i).type))))
        for i in range(struct_type.num_fields)
    ]

    def parse(add: Add) -> dict[str, Any]:
        return {
            name: parse_partition_value(
                add.partition_values.get(name), delta_type, context=f"add {add.path} partition column {name}"
            )
            for name, delta_type in columns
        }

    return parse


# --------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------


def _json_extras(struct_type: pa.StructType, model: type[BaseModel]) -> list[str]:
    """Undeclared string columns: extra values that are not strings are stored as JSON text."""
    declared = set(_declared(model))
    return [
        struct_type.field(i).name
        for i in range(struct_type.num_fields)
        if struct_type.field(i).name not in declared and pa.types.is_string(struct_type.field(i).type)
    ]


def _as_json_text(row: dict[str, Any], names: list[str]) -> None:
    for name in names:
        value = row.get(name)
        if value is not None and not isinstance(value, str):
            row[name] = json.dumps(value, separators=(",", ":"))


def _field_type(struct_type: pa.StructType, name: str) -> pa.DataType | None:
    index = struct_type.get_field_index(name)
    return struct_type.field(index).type if index >= 0 else None


class _RowEncoder:
    """Per-kind row builders for one checkpoint schema."""

    def __init__(self, schema: pa.Schema) -> None:
        self.types: dict[str, pa.StructType] = {name: schema.field(name).type for name in schema.names}
        add_type = self.types["add"]
        self.json_extras = {
            kind: _json_extras(self.types[key], kind) for kind, key in KEY_OF.items() if key in self.types
        }
        dv_type = _field_type(add_type, "deletionVector")
        self.dv_json_extras = _json_extras(dv_type, DeletionVectorDescriptor) if dv_type is not None else []
        stats_type = _field_type(add_type, "stats_parsed")
        self.stats = _stats_parser(stats_type) if stats_type is not None else None
        partitions_type = _field_type(add_type, "partitionValues_parsed")
        self.partitions = _partition_parser(partitions_type) if partitions_type is not None else None

    def row(self, action: CheckpointAction) -> dict[str, Any]:
        row = action.to_json_dict()
        _as_json_text(row, self.json_extras[type(action)])
        dv = row.get("deletionVector")
        if dv is not None:
            _as_json_text(dv, self.dv_json_extras)
        if isinstance(action, Add):
            if self.stats is not None:
                row["stats_parsed"] = self.stats(action.stats)
            if self.partitions is not None:
                row["partitionValues_parsed"] = self.partitions(action)
        return row

    def file_column(self, kind: type[Add | Remove], actions: Sequence[Add | Remove], place: _Placement) -> pa.Array:
        """The ``add`` or ``remove`` column of a checkpoint whose rows ``place.positions`` hold ``actions``
        (all of ``kind``), built field by field: the same values :meth:`row` gives, without a dict per
        action (a checkpoint holds millions)."""
        struct_type = self.types[KEY_OF[kind]]
        attrs = {field.alias or name: name for name, field in kind.model_fields.items()}
        # Every declared field of every action at once, transposed into columns (C loops, no getattr);
        # ``path`` and ``dataChange`` are always among them, so the getter returns tuples.
        declared = [attrs[f.name] for f in struct_type if f.name in attrs]
        transposed = zip(*map(itemgetter(*declared), map(vars, actions)), strict=True)
        columns: dict[str, Sequence[Any]] = dict(zip(declared, transposed, strict=True))
        # Undeclared fields come from the model's JSON form, as in row(); only models that have them.
        extras = map(attrgetter("__pydantic_extra__"), actions)
        extra_rows = {i: self.row(actions[i]) for i, extra in enumerate(extras) if extra}
        children = []
        for field in struct_type:
            values: Sequence[Any]
            if field.name == "stats_parsed" and self.stats is not None:
                stats = columns["stats"] if "stats" in columns else [a.stats for a in actions]
                values = list(map(self.stats, stats))
            elif field.name == "partitionValues_parsed" and self.partitions is not None:
                values = [self.partitions(a) if isinstance(a, Add) else None for a in actions]
            elif field.name == "deletionVector":
                values = [None if dv is None else self._dv(dv) for dv in columns["deletion_vector"]]
            elif field.name in attrs:
                values = columns[attrs[field.name]]
            else:
                values = [extra_rows[i].get(field.name) if i in extra_rows else None for i in range(len(actions))]
            children.append(_child_array(place.place(values), field.type))
        return pa.StructArray.from_arrays(children, fields=list(struct_type), mask=place.absent())

    def _dv(self, dv: DeletionVectorDescriptor | None) -> dict[str, Any] | None:
        if dv is None:
            return None
        row = dv.to_json_dict()
        _as_json_text(row, self.dv_json_extras)
        return row


class _Placement:
    """The rows of a checkpoint that one action column fills (``positions``, ascending) among ``rows``.

    The column's children are built at full length: the slots of other rows (null in the column)
    repeat the first member's value rather than hold nulls, because Parquet refuses a null in a
    non-nullable child field even under a null parent. Members usually form one run (every add
    after the table's rows), which is placed with one slice assignment.
    """

    def __init__(self, positions: list[int], rows: int) -> None:
        self.positions = positions
        self.rows = rows
        self.full = len(positions) == rows
        self.run = bool(positions) and positions[-1] - positions[0] + 1 == len(positions)

    def place(self, values: Sequence[Any], filler: Any = None) -> Sequence[Any]:
        """``values`` (one per member) at the members' rows; the other slots hold ``filler``, by
        default the first value."""
        if self.full:
            return values
        placed = [values[0] if filler is None else filler] * self.rows
        if self.run:
            placed[self.positions[0] : self.positions[-1] + 1] = values
        else:
            for position, value in zip(self.positions, values, strict=True):
                placed[position] = value
        return placed

    def absent(self) -> pa.Array | None:
        """The column's validity: null where another kind of action fills the row."""
        return None if self.full else pa.array(self.place([False] * len(self.positions), True), type=pa.bool_())


def _child_array(values: Sequence[Any], arrow_type: pa.DataType) -> pa.Array:
    """``pa.array``, with ``map<string,string>`` columns without a null map built from their flat keys
    and items (the generic conversion of a dict per row is the slowest part of a checkpoint's add)."""
    if pa.types.is_map(arrow_type) and values and all(map(_is_dict, values)):
        offsets = list(accumulate(map(len, values), initial=0))
        keys = [key for mapping in values for key in mapping]
        items = [item for mapping in values for item in mapping.values()]
        return pa.MapArray.from_arrays(
            pa.array(offsets, type=pa.int32()),
            pa.array(keys, type=arrow_type.key_type),
            pa.array(items, type=arrow_type.item_type),
            type=arrow_type,
        )
    return pa.array(values, type=arrow_type)


def _is_dict(value: Any) -> bool:
    return type(value) is dict


def encode_actions(actions: Sequence[CheckpointAction], schema: pa.Schema) -> pa.Table:
    """The checkpoint rows of ``actions``, in order, as an Arrow table of ``schema``
    (from :func:`checkpoint_schema`)."""
    encoder = _RowEncoder(schema)
    positions: dict[str, list[int]] = {name: [] for name in schema.names}
    for index, action in enumerate(actions):
        key = KEY_OF[type(action)]
        if key not in positions:
            raise ProtocolError(f"the checkpoint schema has no {key} column for a {key} action")
        positions[key].append(index)
    arrays = []
    try:
        for name in schema.names:
            members = [actions[i] for i in positions[name]]
            if name in ("add", "remove") and members:
                files = [a for a in members if isinstance(a, Add | Remove)]
                place = _Placement(positions[name], len(actions))
                arrays.append(encoder.file_column(Add if name == "add" else Remove, files, place))
            else:
                rows: list[dict[str, Any] | None] = [None] * len(actions)
                for index, action in zip(positions[name], members, strict=True):
                    rows[index] = encoder.row(action)
                arrays.append(pa.array(rows, type=encoder.types[name]))
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"cannot encode checkpoint actions into the checkpoint schema ({exc})") from exc
    return pa.Table.from_arrays(arrays, schema=schema)


def checkpoint_bytes(table: pa.Table) -> bytes:
    """The Parquet file of a checkpoint table (snappy, as the reference writers use)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    return bytes(sink.getvalue().to_pybytes())
