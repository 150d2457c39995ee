"""Reading checkpoint parquet files into actions ("Checkpoints", "Checkpoint Format", "Checkpoint Schema").

Each row holds one action in its own struct column. ``stats`` may be absent when a writer only stored
``stats_parsed`` (``delta.checkpoint.writeStatsAsJson=false``); the JSON form is then rebuilt from the
struct so everything downstream sees one representation.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import ValidationError

from lakeops.delta.actions import Add, Metadata, Protocol, Remove, Txn
from lakeops.errors import CorruptFile
from lakeops.storage import Storage

_COLUMNS = ("protocol", "metaData", "txn", "add", "remove")
_MAP_FIELDS = {"partitionValues", "tags", "configuration", "options"}
_DROP_FIELDS = {"stats_parsed", "partitionValues_parsed"}


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


def read_checkpoint_part(storage: Storage, path: str) -> Iterator[Protocol | Metadata | Txn | Add | Remove]:
    """Every action in one checkpoint part file, in file order."""
    try:
        parquet = pq.ParquetFile(io.BytesIO(storage.read(path)))
        present = [c for c in _COLUMNS if c in parquet.schema_arrow.names]
        table = parquet.read(columns=present)
    except (pa.ArrowException, OSError) as exc:
        raise CorruptFile(f"{path}: checkpoint is not a readable parquet file ({exc})") from exc
    builders: dict[str, type[Protocol | Metadata | Txn | Add | Remove]] = {
        "protocol": Protocol,
        "metaData": Metadata,
        "txn": Txn,
        "add": Add,
        "remove": Remove,
    }
    for column in present:
        values = table.column(column)
        try:
            rows = values.filter(pc.is_valid(values)).to_pylist()
        except (pa.ArrowException, UnicodeDecodeError) as exc:  # pyarrow lets invalid UTF-8 into string columns
            raise CorruptFile(f"{path}: checkpoint column {column} cannot be decoded ({exc})") from exc
        model = builders[column]
        for row in rows:
            try:
                action = model.model_validate(_action_fields(column, row))
            except ValidationError as exc:
                raise CorruptFile(f"{path}: invalid {column} action in checkpoint: {exc.errors()[0]['msg']}") from exc
            except (TypeError, ValueError, AttributeError) as exc:  # a writer stored other types than the schema's
                raise CorruptFile(f"{path}: {column} column of the checkpoint has an unexpected type ({exc})") from exc
            yield action


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
