"""``lakeops health --html FILE``: the registry's health as one self-contained HTML page — the verdict
table, then per table its runs over time drawn by matplotlib (small and live files around each
compaction, commits caught up by each checkpoint, run durations, bytes rewritten and deleted), each
series ending with the observation just made. The plots are inline SVG: the file opens offline, in any
browser, with nothing fetched. matplotlib comes with the extra ``report``."""

from __future__ import annotations

import contextlib
import html
import io
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakeops.errors import InvalidArgument
from lakeops.jsontext import printable
from lakeops.redaction import mask_text
from lakeops.units import format_utc
from spark_jobs.extras import require

if TYPE_CHECKING:
    from lakeops.planning.registry_health import RegistryHealth, TableHealth

__all__ = ["render", "write_report"]

require("matplotlib", extra="report", needed_for="lakeops health --html (its plots)")

_COLOURS = {"ok": "#2e7d32", "warn": "#ef6c00", "error": "#c62828"}


def _when(iso: str) -> datetime:
    return datetime.fromisoformat(iso)


def _at(iso: str) -> str:
    return format_utc(_when(iso).timestamp())


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # the element only: no XML prolog inside the page


def _plots(table: TableHealth) -> str:
    """Three panels over time: files, run durations, bytes moved; each says so when nothing ran yet."""
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    from matplotlib import dates, pyplot

    runs = sorted(table.runs, key=lambda r: r.finished_at)
    # The observation ends every series; its time has whole seconds, so it never sorts before a run.
    now = max([_when(table.observed_at), *(_when(r.finished_at) for r in runs)])
    figure, (files, durations, moved) = pyplot.subplots(1, 3, figsize=(13, 3.2))
    try:
        compactions = [r for r in runs if r.operation == "compaction" and r.files_before is not None]
        times = [*(_when(r.finished_at) for r in compactions), now]
        files.plot(times, [*(r.files_before for r in compactions), table.live_files], "o-", label="live files")
        files.plot(times, [*(r.small_files for r in compactions), table.small_files], "s--", label="small files")
        checkpoints = [r for r in runs if r.checkpoint_lag is not None]
        if checkpoints or table.checkpoint_lag is not None:
            points = [(_when(r.finished_at), r.checkpoint_lag) for r in checkpoints]
            if table.checkpoint_lag is not None:
                points.append((now, table.checkpoint_lag))
            files.plot([t for t, _ in points], [lag for _, lag in points], "^:", label="checkpoint lag (commits)")
        files.set_title("files before each compaction, and now")
        files.legend(fontsize="small")
        for operation in sorted({r.operation for r in runs}):
            done = [r for r in runs if r.operation == operation]
            durations.plot([_when(r.finished_at) for r in done], [r.duration_s for r in done], "o", label=operation)
        durations.set_title("run duration (s)")
        moved.plot(
            [_when(r.finished_at) for r in runs], [r.bytes_rewritten / 2**20 for r in runs], "o", label="rewritten"
        )
        moved.plot([_when(r.finished_at) for r in runs], [r.bytes_deleted / 2**20 for r in runs], "x", label="deleted")
        reclaimable = (table.reclaimable_bytes or 0) / 2**20
        moved.set_title(f"MiB per run (reclaimable now: {reclaimable:,.1f} MiB)")
        for axis in (durations, moved):
            if runs:
                axis.legend(fontsize="small")
            else:
                axis.text(0.5, 0.5, "no runs recorded yet", ha="center", va="center", transform=axis.transAxes)
                axis.set_xticks([])
                axis.set_yticks([])
        for axis in (files, durations, moved) if runs else (files,):
            locator = dates.AutoDateLocator()
            axis.xaxis.set_major_locator(locator)
            axis.xaxis.set_major_formatter(dates.ConciseDateFormatter(locator))
        return _svg(figure)
    finally:
        pyplot.close(figure)


def _text(value: object) -> str:
    return html.escape(printable(mask_text(str(value))))


def render(health: RegistryHealth) -> str:
    """The page: a verdict per table, worst first, then each table's plots."""
    rows = []
    for t in health.tables:
        colour = _COLOURS.get(t.severity, "#555")
        worst = t.worst_text()
        last = ", ".join(f"{op} {_at(at) if at else 'never'}" for op, at in t.last_runs.items())
        rows.append(
            f'<tr><td><a href="#{_text(t.table)}">{_text(t.table)}</a></td><td>{_text(t.format)}</td>'
            f'<td style="color:{colour}"><b>{_text(t.status)}</b></td><td>{_text(worst)}</td>'
            f"<td>{_text(last)}</td><td>{_text(_at(t.observed_at))}</td></tr>"
        )
    sections = []
    for t in health.tables:
        body = f"<p>{_text(t.error)}</p>" if t.error else _plots(t)
        sections.append(f'<section id="{_text(t.table)}"><h2>{_text(t.table)}</h2>{body}</section>')
    return (
        "<!doctype html>\n<html><head><meta charset='utf-8'>"
        f"<title>lakeops health: {_text(health.table)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}</style></head><body>"
        f"<h1>lakeops health</h1><p>{_text(health.table)}, observed {_text(_at(health.observed_at))}: "
        f"{health.healthy} healthy, {health.warn} warn, {health.error} error</p>"
        "<table><tr><th>table</th><th>format</th><th>status</th><th>worst signal</th>"
        "<th>last runs</th><th>observed</th></tr>" + "".join(rows) + "</table>" + "".join(sections) + "</body></html>\n"
    )


def write_report(health: RegistryHealth, path: Path, *, named: str = "--html") -> None:
    """:func:`render` into ``path``: written whole beside it, then moved into place, so a reader never
    sees half a page; a path that cannot be written is an error naming it (and the option or registry
    key that gave it, ``named``), leaving nothing behind."""
    page = render(health)
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(page, encoding="utf-8")
        partial.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # a parent that is a file fails the unlink too (NotADirectoryError)
            partial.unlink(missing_ok=True)
        raise InvalidArgument(f"{named} {path}: cannot write the report ({exc.strerror or exc})") from None
