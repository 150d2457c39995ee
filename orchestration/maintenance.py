"""Running one maintenance operation from Dagster: its :mod:`lakeops.api` function, called directly on
the run's table handle with typed options (:mod:`orchestration.operations`) and the executor the
``spark`` resource sets, with progress lines in the run's log and the report turned into asset metadata.

Metadata: every numeric field of the report as a number (so the asset's plots show files, bytes,
rows and durations over time; seconds rounded to 10 ms) with a readable twin ``<field>_readable``
for byte counts and durations of a minute or more (Dagster has no byte unit: ``live_bytes
134217728`` and ``live_bytes_readable 128.0 MiB``), ``dagster/row_count`` where the operation has
one, the table's version after the run (``state_version``) and a short Markdown summary. Lists
(deleted paths, partitions) are not metadata: they can be long, and the run log holds them.
"""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg

from lakeops import api
from lakeops.jsontext import printable
from lakeops.ops.report import InspectionReport, Report, readable
from lakeops.ops.table import Table
from lakeops.ops.target import CatalogOptions
from lakeops.redaction import mask_text
from lakeops.registry import TableEntry
from orchestration import runs
from orchestration.resources import SparkResource, StorageResource

__all__ = ["inspect", "number_metadata", "open_entry", "report_metadata", "run_maintenance"]


def open_entry(entry: TableEntry, storage: StorageResource) -> Table:
    """A handle on the table ``entry`` names (:func:`lakeops.ops.table.open_table`), for everything
    one sensor tick or observation reads of it: the table is detected and read once."""
    return runs.open_entry(entry, storage.options())


def inspect(entry: TableEntry, storage: StorageResource, table: Table | None = None) -> InspectionReport:
    """``lakeops inspect`` of ``entry`` (:func:`lakeops.api.inspect` of ``table``, else of a handle
    opened here): what its observation records and the sensors decide on."""
    with storage.credentials():
        return api.inspect(table or open_entry(entry, storage))


def run_maintenance(
    context: dg.AssetExecutionContext | dg.OpExecutionContext,
    entry: TableEntry,
    command: str,
    run: Callable[..., Report],
    table: Table,
    options: CatalogOptions,
    spark: SparkResource,
    storage: StorageResource,
) -> Report:
    """``lakeops <command>`` of ``entry``: ``run`` (its :mod:`lakeops.api` function) on ``table`` with
    ``options``, its units on the executor ``spark`` sets, its progress in the run's log; raises its
    ``LakeopsError`` (the run fails with the operation's own message)."""
    given = options.model_dump(exclude_defaults=True, exclude=set(CatalogOptions.model_fields), mode="json")
    context.log.info(mask_text(f"lakeops {command} {entry.address} {given}"))
    progress = runs.progress_console(context.log.info)
    with storage.credentials():
        return run(table, options, executor=spark.run_executor(), progress=progress)


def number_metadata(name: str, value: int | float) -> dict[str, dg.MetadataValue]:
    """``value`` as a number that plots, and its readable twin when its unit makes the number hard to
    read (:func:`lakeops.ops.report.readable`: bytes from 1 KiB, seconds from a minute)."""
    number = dg.MetadataValue.int(value) if isinstance(value, int) else dg.MetadataValue.float(round(value, 2))
    text = readable(name, value)
    small = abs(value) < (60 if name.endswith("_s") else 1024)
    return {name: number} | ({} if text is None or small else {f"{name}_readable": dg.MetadataValue.text(text)})


def report_metadata(report: Report) -> dict[str, dg.MetadataValue]:
    """Numeric metrics (with readable twins), the row count, the state version and a Markdown
    summary of ``report``."""
    metadata: dict[str, dg.MetadataValue] = {}
    for name, value in report.metrics().items():
        metadata |= number_metadata(name, value)
    if report.row_count is not None:
        metadata["dagster/row_count"] = dg.MetadataValue.int(report.row_count)
    if report.state_version is not None:
        metadata["state_version"] = dg.MetadataValue.text(report.state_version)
    table = printable(mask_text(report.table))
    title = f"**{report.operation}** of `{table}` ({report.format})" + (" — dry run" if report.dry_run else "")
    metadata["summary"] = dg.MetadataValue.md(f"{title}\n\n{report.markdown()}")
    return metadata
