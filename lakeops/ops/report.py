"""Operation reports: what a run did, for people (CLI table, Dagster Markdown) and machines (JSON,
numeric Dagster metadata that plots over time).

Every rendering masks secrets (:mod:`lakeops.redaction`) and keeps file names that are not UTF-8
(:mod:`lakeops.jsontext`).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict

from lakeops.jsontext import dumps, printable
from lakeops.redaction import mask_data, mask_text
from lakeops.units import format_seconds, format_size

__all__ = ["Report", "readable", "to_json"]


def readable(name: str, value: int | float) -> str | None:
    """``value`` of the report field ``name`` with its unit, for people; None when the field has no
    unit. Fields name their unit: bytes (``*_bytes``, ``bytes_*``, ``*_size``), seconds (``*_s``)."""
    if "bytes" in name.split("_") or name.endswith("_size"):
        return format_size(int(value))
    if name.endswith("_s"):
        return format_seconds(value)
    return None


def _finite(value: Any) -> Any:
    """``value`` with non-finite floats as None, as pydantic's JSON has them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def to_json(data: Any) -> str:
    """One line of JSON of ``data`` (from ``model_dump(mode="json")``) as lakeops prints and records
    it: secrets masked, non-finite floats as null (as pydantic writes them), and file names that are
    not UTF-8 kept (:func:`lakeops.jsontext.dumps`)."""
    return dumps(_finite(mask_data(data)))


class Report(BaseModel):
    """Common fields of every report; subclasses add the operation's own metrics as numeric fields."""

    model_config = ConfigDict(frozen=True)

    operation: str
    format: str
    table: str
    dry_run: bool = False
    read_version: int | None = None
    committed_version: int | None = None
    duration_s: float = 0.0
    #: Set when the run moved its files into this trash run (``lakeops restore TABLE RUN``) instead of deleting.
    quarantine_run: str | None = None

    def metrics(self) -> dict[str, int | float]:
        """The numeric fields, for plotting (Dagster metadata) and benchmarks."""
        return {
            name: value
            for name, value in self.model_dump().items()
            if isinstance(value, int | float) and not isinstance(value, bool) and value is not None
        }

    def summary_lines(self) -> list[tuple[str, str]]:
        """(label, value) rows for the human table; bytes and seconds with their units (:func:`readable`)."""
        rows: list[tuple[str, str]] = []
        for name, value in self.model_dump().items():
            if value is None or isinstance(value, list | dict):
                continue
            unit = readable(name, value) if isinstance(value, int | float) and not isinstance(value, bool) else None
            text = unit or (f"{value:.2f}" if isinstance(value, float) else str(value))
            rows.append((name.replace("_", " "), printable(mask_text(text))))
        return rows

    def to_json(self) -> str:
        """The report as one line of JSON (:func:`to_json`): what ``--json`` prints."""
        return to_json(self.model_dump(mode="json"))

    def markdown(self) -> str:
        lines = ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in self.summary_lines()]
        return "\n".join(lines)
