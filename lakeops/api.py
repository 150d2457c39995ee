"""The Python API: one typed function per maintenance operation, for any table format.

Each function resolves ``table`` (a location, a registry name, or with ``options.catalog_uri`` an
Iceberg catalog identifier), detects its format, plans, runs the plan's units on ``executor``,
commits and returns the operation's typed report::

    from lakeops import api
    from lakeops.ops.checkpoint import CheckpointOptions

    report = api.checkpoint("s3://lake/events", CheckpointOptions(), dry_run=True)
    print(report.status, report.actions)

Without an ``executor`` the units run in threads of this process
(:class:`~lakeops.execution.ThreadExecutor`); ``spark_jobs.operations.SparkSettings`` runs them as
Spark tasks, which is how the ``lakeops`` command line and the Dagster assets call these functions.
Progress lines go to ``progress`` (default: discarded). Errors are
:class:`~lakeops.errors.LakeopsError` subclasses naming the table, the file and the problem.

Operations whose driver still lives in ``spark_jobs`` (compaction, change capture, expiry, orphan
removal, restore, purge-trash) join this module as their loops move into :mod:`lakeops.ops`.
"""

from __future__ import annotations

from datetime import datetime

from rich.console import Console

from lakeops.execution import Executor, ThreadExecutor
from lakeops.ops import checkpoint as checkpoint_op
from lakeops.ops.checkpoint import CheckpointOptions, CheckpointReport
from lakeops.ops.icechunk.inspect import IcechunkInspectReport
from lakeops.ops.inspect import InspectReport, inspect_table
from lakeops.ops.target import CatalogOptions
from lakeops.storage import StorageOptions

__all__ = ["checkpoint", "inspect"]


def inspect(
    table: str,
    catalog: CatalogOptions | None = None,
    *,
    version: int | None = None,
    snapshot_id: int | None = None,
    timestamp: datetime | None = None,
    storage_options: StorageOptions | None = None,
) -> InspectReport | IcechunkInspectReport:
    """A table's health numbers at its latest version, or at ``version`` (Delta), ``snapshot_id``
    (Iceberg) or the version current at ``timestamp``: live and small files, rows hidden by deletes,
    tombstones or snapshots, log length, checkpoint or manifest lag, reclaimable bytes. Icechunk
    repositories are inspected at their branch tips. Reads metadata only; changes nothing."""
    return inspect_table(
        table, storage_options, version=version, snapshot_id=snapshot_id, timestamp=timestamp, catalog=catalog
    )


def checkpoint(
    table: str,
    options: CheckpointOptions | None = None,
    *,
    dry_run: bool = False,
    storage_options: StorageOptions | None = None,
    executor: Executor | None = None,
    progress: Console | None = None,
) -> CheckpointReport:
    """Make the table's metadata fast to read again.

    Delta: write a checkpoint of the latest version (``options.version`` for another; multi-part
    above ``options.part_size`` actions) and point ``_last_checkpoint`` at it; an existing complete
    checkpoint is kept unless ``options.force``. Iceberg: merge the current snapshot's small
    manifests into manifests of ``options.target_manifest_size`` (``rewrite_manifests``), committed
    as a ``replace`` snapshot. Icechunk has no checkpoints: the report says "not applicable".
    ``dry_run`` plans and reports what would be written.

    Returns the status (``written``, ``committed``, ``already checkpointed``, ``planned``, ...) and
    what the checkpoint holds: actions, files and tombstones (Delta), manifests before and after and
    entries moved (Iceberg).
    """
    return checkpoint_op.execute(
        table,
        options or CheckpointOptions(),
        storage_options or StorageOptions(),
        dry_run=dry_run,
        executor=executor or ThreadExecutor(),
        progress=progress or Console(quiet=True),
    )
