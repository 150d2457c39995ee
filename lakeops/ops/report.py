"""Operation reports: what a run did, for people (CLI table, Dagster Markdown) and machines (JSON,
numeric Dagster metadata that plots over time).

Every rendering masks secrets (:mod:`lakeops.redaction`) and keeps file names that are not UTF-8
(:mod:`lakeops.jsontext`).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Any

from pydantic import BaseModel, ConfigDict
from rich.console import Console

from lakeops.jsontext import dumps, printable
from lakeops.ops.detect import TableFormat
from lakeops.redaction import mask_data, mask_text
from lakeops.units import format_seconds, format_size

__all__ = [
    "SHOWN_PATHS",
    "InspectionReport",
    "Report",
    "TableState",
    "label",
    "readable",
    "shown",
    "show_paths",
    "to_json",
    "version_text",
]

#: Paths a dry run echoes to the progress console; its report (``--json``) lists them all.
SHOWN_PATHS = 20


def readable(name: str, value: int | float) -> str | None:
    """``value`` of the report field ``name`` with its unit, for people; None when the field has no
    unit. Fields name their unit: bytes (``*_bytes``, ``bytes_*``, ``*_size``), seconds (``*_s``)."""
    if "bytes" in name.split("_") or name.endswith("_size"):
        return format_size(int(value))
    if name.endswith("_s"):
        return format_seconds(value)
    return None


#: Fields whose numbers are names (a version, an id), shown as they are: no thousands separators.
_IDENTIFIERS = ("version", "id", "sequence")


def label(name: str) -> str:
    """A report field's label for people: its words, without the unit the value shows
    (``duration_s`` is "duration" beside "0.18 s", ``small_file_threshold_bytes`` "small file threshold")."""
    words = name.split("_")
    unit = words[-1] == "s" or (words[-1] == "bytes" and words[-2:-1] in (["threshold"], ["size"], ["target"]))
    return " ".join(words[:-1] if len(words) > 1 and unit else words)


def shown(name: str, value: Any) -> str:
    """A report field's value for people (:func:`label` names it)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        unit = readable(name, value)
        if unit is not None:
            return unit
        if isinstance(value, float):
            return f"{value:,.2f}"
        if any(word in _IDENTIFIERS for word in name.split("_")):
            return str(value)
        return f"{value:,}"
    return str(value)


def _finite(value: Any) -> Any:
    """``value`` with non-finite floats as None, as pydantic's JSON has them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def version_text(version: int | str | None) -> str | None:
    """A table version as a report states it: its text, or None when there is none (never "None")."""
    return None if version is None or version == "" else str(version)


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
    #: What went wrong without failing the run (a committed Delta version left without its checksum file).
    warnings: list[str] = []

    @property
    def state_version(self) -> str | None:
        """The table's version after the run, as an id to compare (a sensor's cursor, a run key): the
        version the run committed, else the one it read; None when it read none. Reports whose
        format names versions otherwise (Iceberg and Icechunk snapshot ids) or whose committed
        version is another table's (CDC: the output's) say which."""
        return version_text(self.committed_version if self.committed_version is not None else self.read_version)

    @property
    def row_count(self) -> int | None:
        """The rows the run leaves in or writes to its table (Dagster's ``dagster/row_count``); None
        for operations that count no rows."""
        return None

    def metrics(self) -> dict[str, int | float]:
        """The numeric fields, for plotting (Dagster metadata) and benchmarks."""
        return {
            name: value
            for name, value in self.model_dump().items()
            if isinstance(value, int | float) and not isinstance(value, bool) and value is not None
        }

    def summary_lines(self) -> list[tuple[str, str]]:
        """(label, value) rows for the human table: bytes and seconds with their units (:func:`readable`)
        and labels without them, counts with thousands separators, switches as yes/no. ``dry_run``
        is left out: the title says "(dry run)"."""
        rows: list[tuple[str, str]] = []
        for name, value in self.model_dump().items():
            if value is None or isinstance(value, list | dict) or name == "dry_run":
                continue
            rows.append((label(name), printable(mask_text(shown(name, value)))))
        return rows + [("warning", printable(mask_text(w))) for w in self.warnings]

    def columns(self) -> tuple[list[str], list[list[str]]] | None:
        """A report of many rows of the same kind (one per table) as a header and rows, which a
        terminal shows as a table of columns; None: :meth:`summary_lines` says it all."""
        return None

    def to_json(self) -> str:
        """The report as one line of JSON (:func:`to_json`): what ``--json`` prints."""
        return to_json(self.model_dump(mode="json"))

    def markdown(self) -> str:
        lines = ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in self.summary_lines()]
        return "\n".join(lines)


class TableState(BaseModel):
    """Where a table stands, in the same terms for every format: what maintenance would act on.
    None: the format has no such number (Icechunk has no checkpoints, only Iceberg has manifests)."""

    model_config = ConfigDict(frozen=True)

    format: TableFormat
    #: Files compaction would merge (Icechunk: chunk objects packing would pack).
    small_files: int
    #: Live data files (Icechunk: chunk objects).
    live_files: int
    #: Commits since the last checkpoint (Delta), snapshots since the last manifest rewrite (Iceberg).
    checkpoint_lag: int | None = None
    manifests: int | None = None
    #: Versions kept: Delta log versions, Iceberg or Icechunk snapshots.
    snapshots: int | None = None
    #: Age of the oldest version kept: how far back time travel reaches (expiry's horizon).
    oldest_snapshot_age_s: float | None = None
    #: Bytes orphan removal (VACUUM, garbage collection) would free.
    reclaimable_bytes: int | None = None

    @property
    def small_file_ratio(self) -> float:
        """Small files' share of live files (0 for a table without files)."""
        return self.small_files / self.live_files if self.live_files else 0.0


class InspectionReport(Report):
    """An ``inspect`` report of any format: its table's state version is always known, and its
    numbers read the same way whatever the format (:meth:`table_state`)."""

    operation: str = "inspect"

    @property
    @abstractmethod
    def state_version(self) -> str:
        """The version inspected (Delta version, Iceberg or Icechunk snapshot id)."""

    @abstractmethod
    def table_state(self) -> TableState:
        """The report's numbers as :class:`TableState`."""


def show_paths(progress: Console, paths: list[str]) -> None:
    """Echo the first :data:`SHOWN_PATHS` paths a dry run would delete to ``progress``."""
    for path in paths[:SHOWN_PATHS]:
        progress.print(f"  would delete {path}", soft_wrap=True, highlight=False)
    if len(paths) > SHOWN_PATHS:
        progress.print(f"  ... and {len(paths) - SHOWN_PATHS} more (--json lists them all)")
