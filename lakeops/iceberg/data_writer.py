"""Writing Iceberg Parquet data and delete files with their metrics ("Manifests": ``data_file`` fields
104-132 and their notes, "Delete File Stats", Appendix A "Parquet", Appendix D binary single values).

Why the metrics matter: scan planning prunes files by ``lower_bounds``/``upper_bounds`` and counts, so
a wrong bound loses rows. They come from the Parquet footer (:func:`lakeops.parquet.file_statistics`,
which already refuses untrustworthy footer bounds) plus NaN counts from the rows written, since
footers cannot say whether NaN was present. Rules, as the spec and Java Iceberg apply them:

* metrics modes per column from the table properties ``write.metadata.metrics.default`` (default
  ``truncate(16)``) and ``write.metadata.metrics.column.<name>``: ``none`` (nothing, not even the
  column size), ``counts``, ``truncate(N)``, ``full``. Without an explicit default, a table with more
  than ``write.metadata.metrics.max-inferred-column-defaults`` (100) top-level columns gets default
  metrics on the first 100 columns only;
* value, null and NaN counts for every leaf (NaN counts for float/double); bounds only for primitive
  leaves outside lists and maps (a bound on a repeated value bounds no row);
* NaN is never a bound; a zero float minimum is ``-0.0`` and a zero maximum ``+0.0`` (note 2);
* string and binary bounds are truncated to N characters/bytes (a prefix below, an incremented prefix
  above, no upper bound when none exists); nanosecond timestamps get bounds widened to the
  microsecond, which still bound every value.

The Parquet layout follows Appendix A (see :mod:`lakeops.iceberg.arrow_schema`) and the table's
``write.parquet.*`` properties. A file is stored once, complete, with put-if-absent: an existing path
is never overwritten. :class:`ParquetDataWriter` writes row groups as they fill, so memory holds one
row group of Arrow data plus the encoded file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from lakeops.errors import InvalidArgument, UnsupportedFeature
from lakeops.iceberg.arrow_schema import to_arrow_schema
from lakeops.iceberg.manifest import DataFile, FileContent
from lakeops.iceberg.properties import (
    DEFAULT_WRITE_METRICS_MODE,
    METRICS_MAX_INFERRED_COLUMN_DEFAULTS,
    METRICS_MODE_COLUMN_CONF_PREFIX,
    PARQUET_COMPRESSION,
    PARQUET_COMPRESSION_LEVEL,
    PARQUET_PAGE_SIZE_BYTES,
    PARQUET_ROW_GROUP_SIZE_BYTES,
)
from lakeops.iceberg.single_values import canonical, to_bytes, truncate_lower, truncate_upper
from lakeops.iceberg.types import IcebergType, ListType, MapType, PrimitiveType, StructType
from lakeops.parquet.statistics import ColumnStatistics, file_statistics, nan_counts
from lakeops.storage import Storage
from lakeops.storage.uri import normalize

__all__ = [
    "MetricsMode",
    "ParquetDataWriter",
    "WrittenFile",
    "metrics_modes",
    "parse_metrics_mode",
    "write_parquet",
]


_ROW_GROUP_BYTES = 128 * 1024 * 1024
_CODECS = {"zstd": "zstd", "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "brotli": "brotli", "uncompressed": "none"}
_TRUNCATE = re.compile(r"truncate\((\d+)\)")
_FLOATS = frozenset({"float", "double"})


class WrittenFile(BaseModel):
    """A data or delete file written but not yet committed, with the ``data_file`` metrics a manifest
    needs (maps keyed by field id; bounds are Appendix D binary single values)."""

    model_config = ConfigDict(frozen=True, ser_json_bytes="base64", val_json_bytes="base64")

    location: str
    file_format: Literal["parquet"] = "parquet"
    record_count: int
    file_size_in_bytes: int
    column_sizes: dict[int, int]
    value_counts: dict[int, int]
    null_value_counts: dict[int, int]
    nan_value_counts: dict[int, int]
    lower_bounds: dict[int, bytes]
    upper_bounds: dict[int, bytes]
    split_offsets: list[int]

    def data_file(
        self,
        partition: dict[str, Any],
        *,
        content: FileContent = FileContent.DATA,
        equality_ids: list[int] | None = None,
        sort_order_id: int | None = None,
    ) -> DataFile:
        """The manifest's ``data_file`` for this file in ``partition`` (partition field name ->
        canonical value)."""
        return DataFile(
            content=content,
            file_path=self.location,
            file_format=self.file_format.upper(),
            partition=partition,
            record_count=self.record_count,
            file_size_in_bytes=self.file_size_in_bytes,
            column_sizes=self.column_sizes,
            value_counts=self.value_counts,
            null_value_counts=self.null_value_counts,
            nan_value_counts=self.nan_value_counts,
            lower_bounds=self.lower_bounds,
            upper_bounds=self.upper_bounds,
            split_offsets=self.split_offsets,
            equality_ids=equality_ids,
            sort_order_id=sort_order_id,
        )


@dataclass(frozen=True)
class MetricsMode:
    """One column's metrics mode; ``length`` is the truncation width of ``truncate(N)``."""

    kind: Literal["none", "counts", "truncate", "full"]
    length: int | None = None


DEFAULT_MODE = MetricsMode("truncate", 16)
_NONE = MetricsMode("none")


def parse_metrics_mode(text: str, source: str) -> MetricsMode:
    """``none``, ``counts``, ``truncate(N)`` (N > 0) or ``full``; anything else is InvalidArgument."""
    value = text.strip().lower()
    if value in ("none", "counts", "full"):
        return MetricsMode(value)  # type: ignore[arg-type]
    match = _TRUNCATE.fullmatch(value)
    if match and int(match[1]) > 0:
        return MetricsMode("truncate", int(match[1]))
    raise InvalidArgument(f"{source}: {text!r} is not a metrics mode (none, counts, truncate(N) with N > 0, full)")


def _int_property(properties: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    raw = properties.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise InvalidArgument(f"table property {name}={raw!r} must be an integer >= {minimum}")
    return value


@dataclass(frozen=True)
class _Leaf:
    """A primitive leaf of the schema: its id, type, Iceberg column name, Parquet path, and whether it
    is inside a list or map."""

    field_id: int
    type: IcebergType
    name: str
    parquet_path: tuple[str, ...]
    repeated: bool
    top_level: int


def _leaves(
    type_: IcebergType, names: tuple[str, ...], path: tuple[str, ...], repeated: bool, top: int
) -> Iterator[_Leaf]:
    """Leaves under a nested type; Parquet paths name lists ``list.element`` and maps ``key_value.*``."""
    children: list[tuple[str, int, IcebergType, tuple[str, ...]]]
    if isinstance(type_, StructType):
        children = [(f.name, f.id, f.type, (f.name,)) for f in type_.fields]
    elif isinstance(type_, ListType):
        children = [("element", type_.element_id, type_.element, ("list", "element"))]
    elif isinstance(type_, MapType):
        children = [
            ("key", type_.key_id, type_.key, ("key_value", "key")),
            ("value", type_.value_id, type_.value, ("key_value", "value")),
        ]
    else:
        return
    inner = repeated or isinstance(type_, ListType | MapType)
    for name, fid, child, parts in children:
        if isinstance(child, StructType | ListType | MapType):
            yield from _leaves(child, (*names, name), (*path, *parts), inner, top)
        else:
            yield _Leaf(fid, child, ".".join((*names, name)), (*path, *parts), inner, top)


def _schema_leaves(schema: StructType) -> list[_Leaf]:
    leaves: list[_Leaf] = []
    for index, field in enumerate(schema.fields):
        leaves += _leaves(StructType(fields=(field,)), (), (), False, index)
    return leaves


def metrics_modes(schema: StructType, properties: Mapping[str, str]) -> dict[int, MetricsMode]:
    """The metrics mode of every primitive leaf, by field id, from the table properties."""
    leaves = _schema_leaves(schema)
    explicit = properties.get(DEFAULT_WRITE_METRICS_MODE)
    limit = _int_property(properties, METRICS_MAX_INFERRED_COLUMN_DEFAULTS, 100, 0)
    assert limit is not None
    modes: dict[int, MetricsMode] = {}
    for leaf in leaves:
        if explicit is not None:
            mode = parse_metrics_mode(explicit, f"table property {DEFAULT_WRITE_METRICS_MODE}")
        else:
            mode = DEFAULT_MODE if len(schema.fields) <= limit or leaf.top_level < limit else _NONE
        override = properties.get(METRICS_MODE_COLUMN_CONF_PREFIX + leaf.name)
        if override is not None:
            mode = parse_metrics_mode(override, f"table property {METRICS_MODE_COLUMN_CONF_PREFIX}{leaf.name}")
        modes[leaf.field_id] = mode
    return modes


def _bound(leaf: _Leaf, value: Any, mode: MetricsMode, upper: bool) -> bytes | None:
    """The Appendix D bytes of a footer bound in ``mode``; ``None`` when no upper bound exists."""
    value = canonical(leaf.type, value)
    if mode.kind == "truncate":
        assert mode.length is not None
        value = (
            truncate_upper(leaf.type, value, mode.length) if upper else truncate_lower(leaf.type, value, mode.length)
        )
    return None if value is None else to_bytes(leaf.type, value)


def _column_metrics(
    leaf: _Leaf, mode: MetricsMode, stats: ColumnStatistics, nans: int, out: dict[str, dict[int, Any]]
) -> None:
    fid = leaf.field_id
    out["value_counts"][fid] = stats.value_count
    if stats.null_count is not None:
        out["null_value_counts"][fid] = stats.null_count
    if isinstance(leaf.type, PrimitiveType) and leaf.type.name in _FLOATS:
        out["nan_value_counts"][fid] = nans
    if mode.kind == "counts" or leaf.repeated or stats.min is None or stats.max is None:
        return
    lower, upper = _bound(leaf, stats.min, mode, False), _bound(leaf, stats.max, mode, True)
    if lower is not None:
        out["lower_bounds"][fid] = lower
    if upper is not None:
        out["upper_bounds"][fid] = upper


def _metrics(
    footer: pq.FileMetaData, schema: StructType, modes: dict[int, MetricsMode], nans: dict[tuple[str, ...], int]
) -> dict[str, Any]:
    stats = file_statistics(footer)
    sizes: dict[int, int] = {}
    for group in range(footer.num_row_groups):
        row_group = footer.row_group(group)
        for column in stats:
            if column.column.field_id is not None:
                chunk = row_group.column(column.column.index)
                sizes[column.column.field_id] = sizes.get(column.column.field_id, 0) + chunk.total_compressed_size
    out: dict[str, dict[int, Any]] = {
        k: {}
        for k in (
            "column_sizes",
            "value_counts",
            "null_value_counts",
            "nan_value_counts",
            "lower_bounds",
            "upper_bounds",
        )
    }
    for leaf in _schema_leaves(schema):
        mode = modes[leaf.field_id]
        found = stats.get_by_field_id(leaf.field_id)
        if mode.kind == "none" or found is None:
            continue
        out["column_sizes"][leaf.field_id] = sizes.get(leaf.field_id, 0)
        _column_metrics(leaf, mode, found, nans.get(leaf.parquet_path, 0), out)
    return out


def _split_offsets(footer: pq.FileMetaData) -> list[int]:
    """Each row group's first byte: its first column chunk's dictionary page, else its first data page."""
    offsets = []
    for group in range(footer.num_row_groups):
        chunk = footer.row_group(group).column(0)
        start = chunk.data_page_offset
        if chunk.has_dictionary_page and chunk.dictionary_page_offset is not None:
            start = min(start, chunk.dictionary_page_offset)
        offsets.append(int(start))
    return sorted(offsets)


def _writer_options(properties: Mapping[str, str]) -> dict[str, Any]:
    codec_name = properties.get(PARQUET_COMPRESSION, "zstd").strip().lower()
    if codec_name not in _CODECS:
        raise UnsupportedFeature(
            f"table property {PARQUET_COMPRESSION}={codec_name!r}: lakeops writes {sorted(_CODECS)}"
        )
    options: dict[str, Any] = {"compression": _CODECS[codec_name]}
    level = properties.get(PARQUET_COMPRESSION_LEVEL)
    if level is not None and codec_name not in ("uncompressed", "snappy", "lz4"):
        options["compression_level"] = _int_property(properties, PARQUET_COMPRESSION_LEVEL, None, -(2**31))
    page = _int_property(properties, PARQUET_PAGE_SIZE_BYTES, None, 1)
    if page is not None:
        options["data_page_size"] = page
    return options


class ParquetDataWriter:
    """Writes one Parquet file of ``schema`` batch by batch; :meth:`finish` stores it and returns its
    metrics, :meth:`abort` drops it. Row groups are flushed as they reach
    ``write.parquet.row-group-size-bytes`` of Arrow data, so memory holds at most one row group of
    input plus the encoded file. Input columns are matched to the schema by top-level name."""

    def __init__(
        self, storage: Storage, location: str, schema: StructType, *, properties: Mapping[str, str] | None = None
    ) -> None:
        props = dict(properties or {})
        self.location = location
        self._storage = storage
        self._schema = schema
        self._arrow_schema = to_arrow_schema(schema)
        self._modes = metrics_modes(schema, props)
        row_group_bytes = _int_property(props, PARQUET_ROW_GROUP_SIZE_BYTES, _ROW_GROUP_BYTES, 1)
        assert row_group_bytes is not None
        self._row_group_bytes = row_group_bytes
        self._sink = pa.BufferOutputStream()
        self._writer: pq.ParquetWriter | None = pq.ParquetWriter(
            self._sink,
            self._arrow_schema,
            store_decimal_as_integer=True,
            store_schema=False,
            use_compliant_nested_type=True,
            write_statistics=True,
            **_writer_options(props),
        )
        self._pending: list[pa.Table] = []
        self._pending_bytes = 0
        self._rows = 0
        self._nans: dict[tuple[str, ...], int] = {}

    @property
    def rows(self) -> int:
        """Rows accepted so far (written or waiting for their row group)."""
        return self._rows

    def _open_writer(self) -> pq.ParquetWriter:
        if self._writer is None:
            raise InvalidArgument(f"{self.location}: the writer is already finished or aborted")
        return self._writer

    def _conform(self, data: pa.Table | pa.RecordBatch) -> pa.Table:
        table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
        missing = [name for name in self._arrow_schema.names if name not in table.column_names]
        if missing:
            raise InvalidArgument(f"cannot write {self.location}: the data lacks column(s) {missing}")
        try:
            return table.select(self._arrow_schema.names).cast(self._arrow_schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError) as exc:
            # pyarrow raises ValueError when a required (non-nullable) column holds nulls
            raise InvalidArgument(
                f"cannot write {self.location}: the data does not fit the table schema ({exc})"
            ) from exc

    def write(self, data: pa.Table | pa.RecordBatch) -> None:
        """Add rows; a full row group is encoded at once."""
        self._open_writer()
        table = self._conform(data)
        for path, count in nan_counts(table).items():
            self._nans[path] = self._nans.get(path, 0) + count
        self._pending.append(table)
        self._pending_bytes += table.nbytes
        self._rows += table.num_rows
        if self._pending_bytes >= self._row_group_bytes:
            self._flush(final=False)

    def _flush(self, *, final: bool) -> None:
        writer = self._open_writer()
        table = pa.concat_tables(self._pending) if self._pending else self._arrow_schema.empty_table()
        self._pending, self._pending_bytes = [], 0
        if not table.num_rows:
            return
        per_row = max(1, table.nbytes // table.num_rows)
        group_rows = max(1, self._row_group_bytes // per_row)
        full = table.num_rows if final else table.num_rows - table.num_rows % group_rows
        try:
            for start in range(0, full, group_rows):
                chunk = table.slice(start, min(group_rows, full - start))
                writer.write_table(chunk, row_group_size=chunk.num_rows)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise InvalidArgument(f"cannot write {self.location}: {exc}") from exc
        if full < table.num_rows:
            rest = table.slice(full)
            self._pending, self._pending_bytes = [rest], rest.nbytes

    def finish(self) -> WrittenFile:
        """Write the last row group and the footer, store the file (never over an existing one)."""
        self._flush(final=True)
        writer = self._open_writer()
        writer.close()
        self._writer = None
        payload = self._sink.getvalue()
        footer = pq.ParquetFile(pa.BufferReader(payload)).metadata
        metrics = _metrics(footer, self._schema, self._modes, self._nans)
        # ``location`` is recorded as the file's Iceberg path, which readers take literally
        self._storage.put_if_absent(normalize(self.location, literal=True), payload.to_pybytes())
        return WrittenFile(
            location=self.location,
            record_count=footer.num_rows,
            file_size_in_bytes=payload.size,
            split_offsets=_split_offsets(footer),
            **metrics,
        )

    def abort(self) -> None:
        """Drop everything written; nothing was stored. Safe to call more than once."""
        if self._writer is not None:
            self._writer.close()
        self._writer = None
        self._pending, self._pending_bytes, self._sink = [], 0, pa.BufferOutputStream()


def write_parquet(
    storage: Storage,
    location: str,
    table: pa.Table,
    schema: StructType,
    *,
    properties: Mapping[str, str] | None = None,
) -> WrittenFile:
    """Write ``table`` as one Parquet file of ``schema`` at ``location`` and return its metrics."""
    writer = ParquetDataWriter(storage, location, schema, properties=properties)
    try:
        writer.write(table)
        return writer.finish()
    except BaseException:
        writer.abort()
        raise
