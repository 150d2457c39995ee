"""Operation reports: what a run did, for people (CLI table, Dagster Markdown) and machines (JSON,
numeric Dagster metadata that plots over time)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from lakeops.units import format_size


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
        """(label, value) rows for the human table; byte counts rendered with units."""
        rows: list[tuple[str, str]] = []
        for name, value in self.model_dump().items():
            if value is None or isinstance(value, list | dict):
                continue
            text = format_size(value) if name.endswith("bytes") and isinstance(value, int) else str(value)
            if isinstance(value, float):
                text = f"{value:.2f}"
            rows.append((name.replace("_", " "), text))
        return rows

    def markdown(self) -> str:
        lines = ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in self.summary_lines()]
        return "\n".join(lines)
