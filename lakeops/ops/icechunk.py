"""The Icechunk side of the format-neutral operations: plans by repository kind, and their reports.

``lakeops/ops/{expiry,orphans,compaction,cdc,inspect}.py`` hand an Icechunk location to this module.
Seed-format repositories (docs/architecture.md, "Specifications") are maintained by :mod:`lakeops.icechunk.maintenance`
(expiry, garbage collection, packing, diffs); repositories in the ``icechunk`` package's newer
format are detected and their expiry and garbage collection delegated to that package
(:mod:`lakeops.icechunk.maintenance.delegated`); the other operations refuse them by name.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta

from lakeops.deletion import BatchResult
from lakeops.delta.writer import require_writable_location
from lakeops.errors import CommitConflict, InvalidArgument, UnsupportedFeature, UsageError
from lakeops.icechunk.maintenance import delegated, diff, expiry, gc, packing
from lakeops.icechunk.maintenance.delegated import DelegatedOutcome, DelegatedPlan
from lakeops.icechunk.maintenance.diff import DiffOptions, DiffPlan, DiffResult
from lakeops.icechunk.maintenance.expiry import IcechunkExpiryPlan
from lakeops.icechunk.maintenance.gc import GcPlan
from lakeops.icechunk.maintenance.packing import PackingPlan, PackResult
from lakeops.icechunk.maintenance.summary import RepositorySummary, summarize
from lakeops.ops.report import InspectionReport, Report, TableState, version_text
from lakeops.storage import Storage, StorageOptions, open_storage
from lakeops.units import format_duration, instant

FORMAT = "icechunk"
#: How a package-format repository is named in reports.
PACKAGE_FORMAT = "icechunk (package format)"


def _iso(ms: int) -> str:
    return instant(ms).isoformat(timespec="seconds")


def _refuse_package_format(storage: Storage, location: str, operation: str) -> None:
    if delegated.is_package_format(storage, location):
        raise UnsupportedFeature(
            f"{location}: {operation} of repositories in the Icechunk 1.x/2.x format is not available; lakeops "
            "delegates only expire and orphans to the icechunk package for them"
        )


# --- expire ----------------------------------------------------------------------------------------


class IcechunkExpiryReport(Report):
    """Branch files removed (or, with ``dry_run``, that would be) and the snapshots they released."""

    operation: str = "expire"
    retention: str = ""
    cutoff: str = ""
    branches: int = 0
    tags: int = 0
    branch_files: int = 0
    deleted_branch_files: int = 0
    deleted_bytes: int = 0
    snapshots_expired: int = 0
    snapshots_retained: int = 0
    delegated_to: str | None = None
    paths: list[str] = []


def plan_expiry(
    location: str,
    storage: Storage,
    storage_options: StorageOptions,
    *,
    retention: timedelta | None,
    force: bool,
    now_ms: int,
) -> IcechunkExpiryPlan | DelegatedPlan:
    if delegated.is_package_format(storage, location):
        return delegated.plan_delegated(
            storage, location, storage_options, operation="expire", retention=retention, force=force, now_ms=now_ms
        )
    return expiry.plan_expiry(storage, location, retention=retention, force=force, now_ms=now_ms)


def _delegated_expiry_report(
    plan: DelegatedPlan, outcome: DelegatedOutcome, started: float, dry_run: bool
) -> IcechunkExpiryReport:
    return IcechunkExpiryReport(
        format=PACKAGE_FORMAT,
        table=plan.table_root,
        dry_run=dry_run,
        retention=format_duration(plan.retention),
        cutoff=_iso(plan.cutoff_ms),
        snapshots_expired=outcome.snapshots_expired,
        delegated_to=f"icechunk {plan.package_version}",
        duration_s=time.monotonic() - started,
    )


def expiry_report(
    plan: IcechunkExpiryPlan | DelegatedPlan,
    started: float,
    *,
    dry_run: bool,
    storage_options: StorageOptions | None = None,
    quarantine_run: str | None = None,
) -> IcechunkExpiryReport:
    """Run (unless ``dry_run``) and report the expiry ``plan``; ``quarantine_run`` moves the files to
    that trash run instead of deleting them (refused for the package format: the package deletes)."""
    if isinstance(plan, DelegatedPlan):
        if quarantine_run is not None and not dry_run:
            raise UsageError(
                f"{plan.table_root}: --quarantine is not available for repositories in the Icechunk package's "
                "format: the icechunk package deletes the files itself"
            )
        outcome = delegated.expire_snapshots(plan, dry_run=dry_run)
        return _delegated_expiry_report(plan, outcome, started, dry_run)
    if not dry_run:
        expiry.execute_expiry(plan, open_storage(plan.table_root, storage_options), quarantine_run=quarantine_run)
    return IcechunkExpiryReport(
        format=FORMAT,
        table=plan.table_root,
        dry_run=dry_run,
        retention=format_duration(plan.retention),
        cutoff=_iso(plan.cutoff_ms),
        branches=len(plan.branch_tips),
        tags=len(plan.tags),
        branch_files=plan.branch_files,
        deleted_branch_files=len(plan.files),
        deleted_bytes=plan.bytes,
        snapshots_expired=len(plan.expired_snapshots),
        snapshots_retained=len(plan.retained_snapshots),
        paths=[f.path for f in plan.files] if dry_run else [],
        duration_s=time.monotonic() - started,
        quarantine_run=None if dry_run else quarantine_run,
    )


# --- orphans (garbage collection) ------------------------------------------------------------------


class IcechunkGcReport(Report):
    """Objects deleted (or, with ``dry_run``, that would be) by kind, and what the scan saw."""

    operation: str = "orphans"
    retention: str = ""
    cutoff: str = ""
    retained_snapshots: int = 0
    objects_scanned: int = 0
    objects_reachable: int = 0
    files_too_recent: int = 0
    unrecognised_files: int = 0
    batches: int = 0
    deleted_snapshots: int = 0
    deleted_manifests: int = 0
    deleted_attribute_files: int = 0
    deleted_chunks: int = 0
    deleted_transaction_logs: int = 0
    #: Abandoned lakeops temporary files (a local write killed before its rename).
    deleted_temp_files: int = 0
    deleted_files: int = 0
    deleted_bytes: int = 0
    delegated_to: str | None = None
    paths: list[str] = []


def plan_gc(
    location: str,
    storage: Storage,
    storage_options: StorageOptions,
    *,
    retention: timedelta | None,
    force: bool,
    batch_size: int,
    now_ms: int,
) -> GcPlan | DelegatedPlan:
    if delegated.is_package_format(storage, location):
        return delegated.plan_delegated(
            storage, location, storage_options, operation="orphans", retention=retention, force=force, now_ms=now_ms
        )
    return gc.plan_gc(
        storage, location, storage_options, retention=retention, force=force, now_ms=now_ms, batch_size=batch_size
    )


def gc_report(plan: GcPlan | DelegatedPlan, started: float, *, dry_run: bool) -> IcechunkGcReport:
    """The report of ``plan`` (a delegated plan runs here: the package deletes on its own)."""
    if isinstance(plan, DelegatedPlan):
        outcome = delegated.garbage_collect(plan, dry_run=dry_run)
        deleted = (
            outcome.snapshots_deleted
            + outcome.manifests_deleted
            + outcome.chunks_deleted
            + outcome.attributes_deleted
            + outcome.transaction_logs_deleted
        )
        return IcechunkGcReport(
            format=PACKAGE_FORMAT,
            table=plan.table_root,
            dry_run=dry_run,
            retention=format_duration(plan.retention),
            cutoff=_iso(plan.cutoff_ms),
            deleted_snapshots=outcome.snapshots_deleted,
            deleted_manifests=outcome.manifests_deleted,
            deleted_attribute_files=outcome.attributes_deleted,
            deleted_chunks=outcome.chunks_deleted,
            deleted_transaction_logs=outcome.transaction_logs_deleted,
            deleted_files=deleted,
            deleted_bytes=outcome.bytes_deleted,
            delegated_to=f"icechunk {plan.package_version}",
            duration_s=time.monotonic() - started,
        )
    kinds = Counter(c.kind for c in plan.candidates)
    return IcechunkGcReport(
        format=FORMAT,
        table=plan.table_root,
        dry_run=dry_run,
        retention=format_duration(plan.retention),
        cutoff=_iso(plan.cutoff_ms),
        retained_snapshots=len(plan.roots),
        objects_scanned=plan.objects_scanned,
        objects_reachable=plan.objects_reachable,
        files_too_recent=plan.objects_too_recent,
        unrecognised_files=plan.unrecognised_files,
        batches=len(plan.batches),
        deleted_snapshots=kinds["snapshot"],
        deleted_manifests=kinds["manifest"],
        deleted_attribute_files=kinds["attributes"],
        deleted_chunks=kinds["chunk"],
        deleted_temp_files=kinds[gc.TEMP_KIND],
        deleted_files=len(plan.candidates),
        deleted_bytes=sum(c.size for c in plan.candidates),
        paths=[c.path for c in plan.candidates] if dry_run else [],
        duration_s=time.monotonic() - started,
    )


def recheck_gc(plan: GcPlan, storage_options: StorageOptions) -> GcPlan:
    """The plan re-validated just before deleting (:func:`lakeops.icechunk.maintenance.gc.recheck`)."""
    return gc.recheck(plan, open_storage(plan.table_root, storage_options))


def gc_finish(plan: GcPlan, results: list[BatchResult], started: float) -> IcechunkGcReport:
    """The report of a run whose every batch was deleted (``results`` one per batch)."""
    if sorted(r.batch_id for r in results) != [b.batch_id for b in plan.batches]:
        raise InvalidArgument(f"{plan.table_root}: delete results do not match the plan's batches")
    return gc_report(plan, started, dry_run=False)


# --- compact (packing) -----------------------------------------------------------------------------


class IcechunkCompactionReport(Report):
    """Chunk objects packed (``files_*``: chunk objects) and the snapshot committed."""

    operation: str = "compact"
    branch: str = "main"
    base_snapshot: str = ""
    committed_snapshot: str | None = None
    target_file_size: int = 0
    arrays: int = 0
    arrays_compacted: int = 0
    native_chunks: int = 0
    chunks_packed: int = 0
    live_files_before: int = 0
    live_bytes_before: int = 0
    candidate_files: int = 0
    groups: int = 0
    files_removed: int = 0
    bytes_removed: int = 0
    files_added: int = 0
    bytes_added: int = 0
    live_files_after: int = 0
    commit_attempts: int = 0

    @property
    def state_version(self) -> str | None:
        """The snapshot committed, else the one the plan read."""
        return version_text(self.committed_snapshot or self.base_snapshot)


def plan_packing(
    location: str,
    storage: Storage,
    storage_options: StorageOptions,
    *,
    branch: str,
    target_file_size: int | None,
    min_input_files: int,
) -> PackingPlan:
    _refuse_package_format(storage, location, "compaction")
    return packing.plan_packing(
        storage,
        location,
        storage_options,
        branch=branch,
        target_file_size=target_file_size,
        min_input_files=min_input_files,
    )


def packing_report(plan: PackingPlan, started: float, *, dry_run: bool) -> IcechunkCompactionReport:
    return IcechunkCompactionReport(
        format=FORMAT,
        table=plan.table_root,
        dry_run=dry_run,
        read_version=plan.read_version,
        branch=plan.branch,
        base_snapshot=plan.base_snapshot,
        target_file_size=plan.target_file_size,
        arrays=plan.arrays,
        arrays_compacted=plan.arrays_compacted,
        native_chunks=plan.native_chunks,
        chunks_packed=sum(len(u.chunks) for u in plan.groups),
        live_files_before=plan.live_files,
        live_bytes_before=plan.live_bytes,
        candidate_files=plan.candidate_files,
        groups=len(plan.groups),
        files_removed=plan.input_files,
        bytes_removed=plan.input_bytes,
        live_files_after=plan.live_files,
        duration_s=time.monotonic() - started,
    )


def discard_packs(plan: PackingPlan, results: list[PackResult], storage_options: StorageOptions) -> int:
    """Delete the chunk files this attempt wrote (never anything else, never outside the root)."""
    paths = packing.written_locations(results)
    return open_storage(plan.table_root, storage_options).delete_many(paths) if paths else 0


def commit_packing(
    plan: PackingPlan, results: list[PackResult], storage_options: StorageOptions, started: float
) -> IcechunkCompactionReport:
    """Commit the packed chunks. On a definite conflict the new chunk files are deleted and the error
    re-raised; on any other failure nothing is deleted (``orphans`` removes them past its floor)."""
    report = packing_report(plan, started, dry_run=False)
    if not plan.groups:
        return report
    try:
        outcome = packing.commit_packing(plan, results, open_storage(plan.table_root, storage_options))
    except CommitConflict:
        discard_packs(plan, results, storage_options)
        raise
    return report.model_copy(
        update={
            "committed_version": outcome.sequence,
            "committed_snapshot": outcome.snapshot_id,
            "commit_attempts": outcome.attempts,
            "files_added": len(results),
            "bytes_added": sum(r.size for r in results),
            "live_files_after": plan.live_files - plan.input_files + len(results),
            "duration_s": time.monotonic() - started,
        }
    )


# --- cdc (snapshot diffs) --------------------------------------------------------------------------


class IcechunkCdcReport(Report):
    """``read_version``/``from_depth``/``to_depth`` are snapshot depths (ancestors counted from the root)."""

    operation: str = "cdc"
    output: str = ""
    from_snapshot: str = ""
    to_snapshot: str = ""
    requested_from_depth: int = 0
    from_depth: int = 0
    to_depth: int = 0
    already_extracted: bool = False
    output_created: bool = False
    snapshots_extracted: int = 0
    units: int = 0
    rows_added: int = 0
    rows_removed: int = 0
    rows_modified: int = 0
    rows_metadata_changed: int = 0
    rows_written: int = 0
    files_written: int = 0
    bytes_written: int = 0
    commit_attempts: int = 0

    @property
    def state_version(self) -> str | None:
        """The source snapshot extracted up to (``committed_version`` is the output's)."""
        return version_text(self.to_snapshot)

    @property
    def row_count(self) -> int | None:
        return self.rows_written


def plan_diff(location: str, storage: Storage, options: DiffOptions, storage_options: StorageOptions) -> DiffPlan:
    _refuse_package_format(storage, location, "change capture")
    return diff.plan_diff(location, options, storage_options)


def diff_report(plan: DiffPlan, started: float, *, dry_run: bool) -> IcechunkCdcReport:
    return IcechunkCdcReport(
        format=FORMAT,
        table=plan.table_root,
        dry_run=dry_run,
        read_version=plan.to_version,
        output=plan.output_root,
        from_snapshot=plan.from_snapshot,
        to_snapshot=plan.to_snapshot,
        requested_from_depth=plan.requested_from,
        from_depth=plan.from_version,
        to_depth=plan.to_version,
        already_extracted=plan.already_extracted,
        output_created=plan.output_version is None and not dry_run and not plan.already_extracted,
        snapshots_extracted=plan.snapshots,
        units=len(plan.units),
        duration_s=time.monotonic() - started,
    )


def require_output_writable(plan: DiffPlan, storage_options: StorageOptions) -> None:
    """Refuse, before any Spark work, an output location this process cannot write."""
    require_writable_location(open_storage(plan.output_root, storage_options), plan.output_root)


def discard_diff(plan: DiffPlan, results: list[DiffResult], storage_options: StorageOptions) -> int:
    """Delete the files this attempt wrote (never anything else, never outside the output table)."""
    paths = diff.written_locations(results)
    return open_storage(plan.output_root, storage_options).delete_many(paths) if paths else 0


def commit_diff(
    plan: DiffPlan, results: list[DiffResult], storage_options: StorageOptions, started: float
) -> IcechunkCdcReport:
    """Commit the extracted files. On a definite conflict the new files are deleted and the error
    re-raised; on any other failure nothing is deleted."""
    try:
        outcome = diff.commit_diff(plan, results, storage_options)
    except CommitConflict:
        discard_diff(plan, results, storage_options)
        raise
    rows: Counter[str] = Counter()
    for r in results:
        rows.update(r.rows_by_change)
    written = [w for r in results for w in r.written]
    return diff_report(plan, started, dry_run=False).model_copy(
        update={
            "committed_version": outcome.version if outcome else None,
            "commit_attempts": outcome.attempts if outcome else 0,
            "rows_added": rows["added"],
            "rows_removed": rows["removed"],
            "rows_modified": rows["modified"],
            "rows_metadata_changed": rows["metadata-changed"],
            "rows_written": sum(w.rows for w in written),
            "files_written": len(written),
            "bytes_written": sum(int(w.add["size"]) for w in written),
            "duration_s": time.monotonic() - started,
        }
    )


# --- inspect ---------------------------------------------------------------------------------------


class IcechunkInspectReport(RepositorySummary, InspectionReport):
    """:class:`RepositorySummary` as a report; the human table names the branches and tags too."""

    @property
    def state_version(self) -> str:
        """The snapshot id at the tip of ``branch``."""
        return self.snapshot

    def table_state(self) -> TableState:
        """Chunk objects stand for files: packing merges them as compaction merges small files."""
        return TableState(
            format="icechunk",
            small_files=self.packable_chunk_objects,
            live_files=self.chunk_objects,
            snapshots=self.snapshots,
            oldest_snapshot_age_s=self.oldest_snapshot_age_s,
            reclaimable_bytes=self.reclaimable_bytes,
        )

    def summary_lines(self) -> list[tuple[str, str]]:
        refs = [("branches", ", ".join(self.branches)), ("tags", ", ".join(self.tags) or "-")]
        return [*super().summary_lines()[:4], *refs, *super().summary_lines()[4:]]


def inspect_repository(location: str, storage: Storage, started: float) -> IcechunkInspectReport:
    _refuse_package_format(storage, location, "inspecting")
    summary = summarize(storage, location, now_ms=int(time.time() * 1000))
    return IcechunkInspectReport(
        format=FORMAT, table=location, duration_s=time.monotonic() - started, **summary.model_dump()
    )
