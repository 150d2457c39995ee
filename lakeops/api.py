"""The Python API: one typed function per maintenance operation, for any table format.

Each function takes ``table``: a handle from ``lakeops.open`` (:func:`lakeops.ops.table.open_table`),
or an address as the handle would take it (a location, a registry name, or with the options' catalog
(``catalog_uri``, ``catalog_type``) an Iceberg catalog identifier), from which one handle is opened
for the call. The handle finds the table, detects its format and reads its state once, for the plan,
the audit record and the run; the function plans, runs the plan's units on ``executor``, commits
(reading the table again, as every commit does) and returns the operation's typed report::

    import lakeops
    from lakeops import api
    from lakeops.ops.options import CompactionOptions

    events = lakeops.open("s3://lake/events")
    print(api.inspect(events).table_state().small_files)
    report = api.compact(events, CompactionOptions(target_file_size=256 << 20), dry_run=True)
    print(report.groups, report.candidate_files)

A handle keeps what it read across calls (dry runs and ``inspect`` of one handle read the table once);
a run that may have changed the table makes it forget (:meth:`~lakeops.ops.table.Table.refresh`). With
a handle, S3 keys a REST catalog vends for the table last as long as the caller's
:func:`~lakeops.storage.s3_leases.lease_scope` (the planner's: one table's pass); with an address,
they end with the call.

Without an ``executor`` the units run in threads of this process
(:class:`~lakeops.executors.ThreadExecutor`); ``spark_jobs.spark_settings.SparkSettings`` runs them as
Spark tasks, which is how the ``lakeops`` command line and the Dagster assets call these functions.
Progress lines go to ``progress`` (default: discarded). Errors are
:class:`~lakeops.errors.LakeopsError` subclasses naming the table, the file and the problem, with
secrets masked in the whole exception chain. Every run that changes a table (not a dry run), whether it
succeeds or fails, leaves an audit record (:mod:`lakeops.audit`) under the root of the table it changes
(a ``cdc`` run's: its output, the record naming the source and the range) or the configured audit
location; :func:`inspect` and dry runs write nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from rich.console import Console

from lakeops.audit import audited
from lakeops.errors import UsageError
from lakeops.executors import Executor, ThreadExecutor
from lakeops.ops.options import (
    CatalogOptions,
    CdcOptions,
    CheckpointOptions,
    CompactionOptions,
    ExpiryOptions,
    OrphansOptions,
    PurgeOptions,
    RestoreOptions,
)
from lakeops.ops.report import Report
from lakeops.ops.table import Table, open_table
from lakeops.ops.target import resolve_output
from lakeops.storage import StorageOptions
from lakeops.storage.s3_leases import lease_scope

if TYPE_CHECKING:
    from lakeops.ops.cdc import CdcReport
    from lakeops.ops.checkpoint import CheckpointReport
    from lakeops.ops.compaction import CompactionReport
    from lakeops.ops.expiry import ExpiryReport, SnapshotExpiryReport
    from lakeops.ops.icechunk.cdc import IcechunkCdcReport
    from lakeops.ops.icechunk.compaction import IcechunkCompactionReport
    from lakeops.ops.icechunk.expiry import IcechunkExpiryReport
    from lakeops.ops.icechunk.inspect import IcechunkInspectReport
    from lakeops.ops.icechunk.orphans import IcechunkGcReport
    from lakeops.ops.inspect import InspectReport
    from lakeops.ops.orphans import IcebergOrphansReport, OrphansReport
    from lakeops.ops.trash import PurgeReport, RestoreReport

__all__ = ["cdc", "checkpoint", "compact", "expire", "inspect", "orphans", "purge_trash", "restore"]

ReportT = TypeVar("ReportT", bound=Report)
OptionsT = TypeVar("OptionsT", bound=CatalogOptions)


def _handle(table: Table | str, options: OptionsT, storage_options: StorageOptions | None) -> tuple[Table, OptionsT]:
    """The handle the call uses for everything (a handle given as is; an address opened once, a
    registry name resolved as the CLI resolves it: :func:`lakeops.ops.table.open_table`), and
    ``options`` with its catalog (and a cdc ``output`` name as its location)."""
    if isinstance(table, Table):
        if storage_options is not None and storage_options != table.storage_options:
            raise UsageError(f"{table}: storage_options differ from the table handle's; give them to lakeops.open")
        handle = table
    else:
        handle = open_table(table, options, storage_options=storage_options)
    update = handle.catalog.catalog_fields()
    if isinstance(options, CdcOptions):
        update["output"] = resolve_output(options.output)
    return handle, options.model_copy(update=update)


def _run(
    command: str,
    table: Table | str,
    options: OptionsT,
    storage_options: StorageOptions | None,
    call: Callable[[Table, OptionsT], ReportT],
    *,
    changes_table: bool,
    flags: Mapping[str, bool],
    progress: Console | None,
) -> ReportT:
    """``call`` on the table's handle through :func:`lakeops.audit.audited`: recorded when it changes
    the table and is not a dry run, after which the handle forgets the state it read (the next call
    reads the changed table); a cdc run is recorded under its output. S3 keys lent during the call (a
    REST catalog's vended credentials) end with it when the call opened the table; a handle's last as
    long as its caller's lease scope."""
    handle, options = _handle(table, options, storage_options)
    record = changes_table and not flags.get("dry_run", False)
    # S3 keys a REST catalog vends for the table serve this call only
    with lease_scope() if not isinstance(table, Table) else contextlib.nullcontext():
        try:
            return audited(
                command,
                handle,
                options,
                lambda: call(handle, options),
                record=record,
                flags=flags,
                output=options.output if isinstance(options, CdcOptions) else None,
                progress=progress or Console(quiet=True),
            )
        finally:
            if record:
                handle.refresh()


def _execute(
    command: str,
    execute: Callable[..., ReportT],
    table: Table | str,
    options: CatalogOptions,
    *,
    storage_options: StorageOptions | None,
    executor: Executor | None,
    progress: Console | None,
    **flags: bool,
) -> ReportT:
    """A table-changing operation's ``execute(table, options, storage_options, **flags, executor=,
    progress=)`` (:mod:`lakeops.ops`) through :func:`_run`, on the call's handle; its ``flags``
    (``dry_run``, ``quarantine``) are recorded too. Each function below imports its operation's module
    when called, so that a program importing this API pays for the operations it runs only (and each of
    those for the formats it meets)."""
    return _run(
        command,
        table,
        options,
        storage_options,
        lambda handle, opts: execute(
            handle,
            opts,
            handle.storage_options,
            **flags,
            executor=executor or ThreadExecutor(),
            progress=progress or Console(quiet=True),
        ),
        changes_table=True,
        flags=flags,
        progress=progress,
    )


def inspect(
    table: Table | str,
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
    from lakeops.ops.inspect import inspect_table

    return _run(
        "inspect",
        table,
        catalog or CatalogOptions(),
        storage_options,
        lambda handle, _: inspect_table(handle, version=version, snapshot_id=snapshot_id, timestamp=timestamp),
        changes_table=False,
        flags={},
        progress=None,
    )


def compact(
    table: Table | str,
    options: CompactionOptions | None = None,
    *,
    dry_run: bool = False,
    storage_options: StorageOptions | None = None,
    executor: Executor | None = None,
    progress: Console | None = None,
) -> CompactionReport | IcechunkCompactionReport:
    """Bin-pack the table's small files into files of about ``options.target_file_size``.

    Delta (``OPTIMIZE``): files below the target in each partition are grouped and rewritten, rows
    hidden by deletion vectors dropped; files whose deletion vector hides more than
    ``options.dv_purge_ratio`` of their rows are rewritten too. Iceberg (``rewrite_data_files``):
    files outside ``min_file_size``..``max_file_size``, or with ``delete_file_threshold`` delete files,
    are rewritten with their deletes applied (sorted by the table's sort order with ``sort``). Delta
    and Iceberg: ``partial_progress`` commits every that many groups, each batch its own version or
    snapshot; a failure after some batches committed raises
    :class:`~lakeops.errors.PartiallyCommitted` with the report of those. Icechunk: small chunk objects of
    ``options.branch``'s tip are packed into shared chunk files. ``options.where`` limits the work to
    matching partitions. A commit that loses a race is rebased and retried, dropping only the groups
    the other writer invalidated. ``dry_run`` plans and reports, changing nothing.

    Returns the plan's figures (candidate files, groups, partitions) and the outcome: files and bytes
    removed and added, rows read and written, commits, retries and groups dropped by conflict.
    """
    from lakeops.ops import compaction

    return _execute(
        "compact",
        compaction.execute,
        table,
        options or CompactionOptions(),
        storage_options=storage_options,
        executor=executor,
        progress=progress,
        dry_run=dry_run,
    )


def checkpoint(
    table: Table | str,
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
    from lakeops.ops import checkpoint as checkpoint_op

    return _execute(
        "checkpoint",
        checkpoint_op.execute,
        table,
        options or CheckpointOptions(),
        storage_options=storage_options,
        executor=executor,
        progress=progress,
        dry_run=dry_run,
    )


def cdc(
    table: Table | str,
    options: CdcOptions,
    *,
    dry_run: bool = False,
    storage_options: StorageOptions | None = None,
    executor: Executor | None = None,
    progress: Console | None = None,
) -> CdcReport | IcechunkCdcReport:
    """Append the change rows of ``options.from_version``..``options.to_version`` to the Delta table
    ``options.output`` (created if absent), with ``_change_type``, ``_commit_version`` and
    ``_commit_timestamp`` columns.

    Delta: the change data feed (``_change_data`` files where a commit wrote them, else the rows of
    its added and removed files). Iceberg: the changelog of the snapshots after ``from_version`` (a
    snapshot id, branch or tag; ``0`` for every change since the table's creation), positional and
    equality deletes applied. Icechunk: the diff between two snapshots. A range the output already
    holds is not extracted twice. ``dry_run`` plans and reports, writing nothing. The run's audit
    record goes under the output (the source may be read-only), naming the source and the range.

    Returns the range extracted, the rows by change type, and the output version committed.
    """
    from lakeops.ops import cdc as cdc_op

    return _execute(
        "cdc",
        cdc_op.execute,
        table,
        options,
        storage_options=storage_options,
        executor=executor,
        progress=progress,
        dry_run=dry_run,
    )


def expire(
    table: Table | str,
    options: ExpiryOptions | None = None,
    *,
    dry_run: bool = False,
    quarantine: bool = False,
    storage_options: StorageOptions | None = None,
    executor: Executor | None = None,
    progress: Console | None = None,
) -> ExpiryReport | SnapshotExpiryReport | IcechunkExpiryReport:
    """Forget history older than the retention, and delete what only that history needed.

    Delta: delete log files older than ``options.older_than`` (default ``delta.logRetentionDuration``)
    that no retained version needs, keeping the checkpoint the oldest retained version reads.
    Iceberg: expire snapshots older than the retention of each branch (``older_than``,
    ``retain_last``, ``snapshot_id`` for named ones), commit, then delete the files only expired
    snapshots reached. Icechunk: expire snapshots older than the retention. ``keep_from_version`` keeps
    what a change-feed consumer has not extracted yet; a retention below the table's own needs
    ``force``. ``quarantine`` moves the files into the table's trash instead of deleting them
    (:func:`restore` puts them back). ``dry_run`` lists what would be deleted.

    Returns what was expired and deleted (files, bytes, snapshots or commits) and, for a dry run, the paths.
    """
    from lakeops.ops import expiry

    return _execute(
        "expire",
        expiry.execute,
        table,
        options or ExpiryOptions(),
        storage_options=storage_options,
        executor=executor,
        progress=progress,
        dry_run=dry_run,
        quarantine=quarantine,
    )


def orphans(
    table: Table | str,
    options: OrphansOptions | None = None,
    *,
    dry_run: bool = False,
    quarantine: bool = False,
    storage_options: StorageOptions | None = None,
    executor: Executor | None = None,
    progress: Console | None = None,
) -> OrphansReport | IcebergOrphansReport | IcechunkGcReport:
    """Delete files under the table's root that no retained version references and that are older
    than ``options.older_than``.

    Delta (``VACUUM``): tombstoned files past ``delta.deletedFileRetentionDuration`` and untracked data
    files. Iceberg: files no metadata file, snapshot, manifest or statistics entry reaches
    (``prefix_mismatch_mode`` for files named under another scheme or bucket). Icechunk: chunks,
    manifests and snapshots no retained snapshot reaches. The plan is re-checked against the table
    just before deleting. A retention below the table's own needs ``force_short_retention``.
    ``quarantine`` moves the files into the table's trash instead (:func:`restore` puts them back).
    ``dry_run`` lists what would be deleted.

    Returns files scanned, too recent, still needed, and deleted (files and bytes; paths for a dry run).
    """
    from lakeops.ops import orphans as orphans_op

    return _execute(
        "orphans",
        orphans_op.execute,
        table,
        options or OrphansOptions(),
        storage_options=storage_options,
        executor=executor,
        progress=progress,
        dry_run=dry_run,
        quarantine=quarantine,
    )


def restore(
    table: Table | str,
    options: RestoreOptions,
    *,
    storage_options: StorageOptions | None = None,
    progress: Console | None = None,
) -> RestoreReport:
    """Put back every file that the ``quarantine`` run ``options.run_id`` of :func:`expire` or
    :func:`orphans` moved into the table's trash. Nothing is restored if any of them exists again at
    its original path (the error names it). Runs in this process: a restore is one move per file."""
    from lakeops.ops import trash

    return _run(
        "restore",
        table,
        options,
        storage_options,
        lambda handle, opts: trash.restore(
            handle, opts, handle.storage_options, progress=progress or Console(quiet=True)
        ),
        changes_table=True,
        flags={},
        progress=progress,
    )


def purge_trash(
    table: Table | str,
    options: PurgeOptions | None = None,
    *,
    dry_run: bool = False,
    storage_options: StorageOptions | None = None,
    progress: Console | None = None,
) -> PurgeReport:
    """Delete the table's quarantine runs older than ``options.older_than`` (default 7 days), judged
    by when each run quarantined. ``dry_run`` lists the runs that would be purged."""
    from lakeops.ops import trash

    opts = options or PurgeOptions()
    return _run(
        "purge-trash",
        table,
        opts,
        storage_options,
        lambda handle, resolved: trash.purge(
            handle, resolved, handle.storage_options, dry_run=dry_run, progress=progress or Console(quiet=True)
        ),
        changes_table=True,
        flags={"dry_run": dry_run},
        progress=progress,
    )
