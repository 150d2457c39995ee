"""The audit log: one record per run of a table-changing command — who, what, when, the plan, the outcome.

Issue 10: every run (CLI or Dagster) leaves a record under the table root, so "who deleted these
files, with which options, and what happened" can be answered from the table itself, and a
quarantine run can be traced back to its command (``quarantine_run`` in the report part).

What is recorded: every run of a table-changing command (compact, checkpoint, expire, orphans, cdc,
restore, purge-trash) that is not a dry run, succeeded or failed; read-only commands (inspect) and dry
runs write nothing, so they work with read-only credentials. A run is recorded under the table it
changes: a ``cdc`` run under its *output* (the Delta change table it appends to; the source may be
read-only to the maintainers), naming the source in ``source`` and ``source_root`` and the range
extracted in ``plan`` (``from_version``/``to_version``, Iceberg's ``from_snapshot_id``/``to_snapshot_id``,
Icechunk's ``from_snapshot``/``to_snapshot``). Records written before those fields existed read with
them empty.

Layout: ``<root>/_lakeops_audit/<UTC timestamp>-<run id>.json``, one object per run, written with
put-if-absent. Where tables are written with credentials the maintainers should not hold, or records
must outlive the table, an *audit location* moves them out of the table: ``$LAKEOPS_AUDIT_LOCATION``,
else the registry's top-level ``audit_location``; records then go to
``<audit location>/<table's last path segment>-<hash of its root>/`` (the hash keeps two tables
named alike apart; the name keeps the folder recognisable).

Not an appended ``.jsonl`` per month: object stores cannot append, and a read-modify-write of a
shared log object loses records when two runs finish together. One object per record is
concurrent-safe on every storage and sorts by time; read them with :func:`read_records`.

What is never recorded: secrets. Options whose name says secret (password, token, credential,
secret) are replaced by ``"***"``, and in every string (options, the error message) a URL's password
(``postgresql://u:pw@host``, ``u:pa/ss@host``), secret query parameters (``?password=``,
``X-Amz-Signature``) and every secret lakeops holds (a catalog's token quoted back in its refusal,
vended keys) are masked, by :mod:`lakeops.redaction`. Storage credentials are never options (they come
from the AWS chain, or are lent), so they cannot reach a record as one.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict
from rich.console import Console

from lakeops.errors import CorruptFile, LakeopsError
from lakeops.ops.report import Report, to_json
from lakeops.ops.table import Table
from lakeops.quarantine import AUDIT_DIR, new_run_id
from lakeops.redaction import mask_data, mask_exception, mask_text
from lakeops.registry import registry_audit_location
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import is_within, join, normalize

__all__ = [
    "ACTOR_ENV",
    "AUDIT_LOCATION_ENV",
    "AuditRecord",
    "Actor",
    "audit_dir",
    "audited",
    "read_records",
    "record_run",
    "redact",
]

#: Who acts, as the orchestrator knows it (a Dagster run's owner, a ticket); the OS user is recorded too.
ACTOR_ENV = "LAKEOPS_ACTOR"
#: Where records go instead of the table root (a local path or ``s3://`` URI).
AUDIT_LOCATION_ENV = "LAKEOPS_AUDIT_LOCATION"


class Actor(BaseModel):
    model_config = ConfigDict(frozen=True)

    os_user: str
    #: ``$LAKEOPS_ACTOR`` when set.
    actor: str | None = None


class AuditRecord(BaseModel):
    """One run: its id, who ran it, the command and its (redacted) options, when, and the outcome.
    ``table`` and ``table_root``: the table the run changes, which holds the record."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    who: Actor
    command: str
    table: str
    table_root: str
    options: dict[str, Any]
    started_at: str
    finished_at: str
    duration_s: float
    status: Literal["succeeded", "failed"]
    #: The plan as the report summarises it (operation, format, dry run, versions, quarantine run).
    plan: dict[str, Any] = {}
    #: The report's numeric metrics (files, bytes, ...); empty on failure.
    metrics: dict[str, int | float] = {}
    #: ``{"type": ..., "message": ...}`` of the error that ended a failed run.
    error: dict[str, str] | None = None
    #: The table a run read when it changes another (``cdc``: its source, as given); None otherwise.
    source: str | None = None
    #: ``source``'s root (None when it could not be resolved, e.g. a run that failed finding it).
    source_root: str | None = None


def redact(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` without secrets (:func:`lakeops.redaction.mask_data`): secret-named keys masked,
    URL passwords and secret parameters masked in every string, recursively."""
    masked: dict[str, Any] = mask_data(options)
    return masked


def _who() -> Actor:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers with an arbitrary uid)
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return Actor(os_user=user, actor=os.environ.get(ACTOR_ENV) or None)


#: What a cdc report says of the range it extracted (versions or sequence numbers; Iceberg's snapshot ids;
#: Icechunk's snapshots).
_RANGE = ("from_version", "to_version", "from_snapshot_id", "to_snapshot_id", "from_snapshot", "to_snapshot")


def _plan(report: Report) -> dict[str, Any]:
    fields = (
        "operation",
        "format",
        "table",
        "dry_run",
        "read_version",
        "committed_version",
        "quarantine_run",
        *_RANGE,
    )
    dumped = report.model_dump()
    return {name: dumped[name] for name in fields if dumped.get(name) is not None}


def audit_dir(table_root: str, audit_location: str | None = None) -> str:
    """The folder holding ``table_root``'s records: under ``audit_location`` (else
    ``$LAKEOPS_AUDIT_LOCATION``, else the registry's ``audit_location``) when one is set, else the
    table's own ``_lakeops_audit``."""
    root = normalize(table_root)
    location = audit_location or os.environ.get(AUDIT_LOCATION_ENV) or registry_audit_location()
    if not location:
        return join(root, AUDIT_DIR)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", root.rstrip("/").rsplit("/", 1)[-1]) or "table"
    return join(normalize(location), f"{name}-{hashlib.sha256(root.encode()).hexdigest()[:12]}")


def record_run(
    table_root: str,
    *,
    command: str,
    table: str,
    options: Mapping[str, Any],
    started: datetime,
    storage_options: StorageOptions | None = None,
    report: Report | None = None,
    error: BaseException | None = None,
    run_id: str | None = None,
    audit_location: str | None = None,
    source: str | None = None,
    source_root: str | None = None,
) -> AuditRecord:
    """Write the record of one finished run (``report`` on success, ``error`` on failure) into
    :func:`audit_dir` and return it; ``source``, ``source_root``: the table it read, when another
    than ``table``."""
    root = normalize(table_root)
    finished = datetime.now(UTC)
    run = run_id or (report.quarantine_run if report is not None else None) or new_run_id(started)
    record = AuditRecord(
        run_id=run,
        who=_who(),
        command=command,
        table=table,
        table_root=root,
        options=redact(options),
        started_at=started.isoformat(),
        finished_at=finished.isoformat(),
        duration_s=(finished - started).total_seconds(),
        status="failed" if error is not None else "succeeded",
        plan=_plan(report) if report is not None else {},
        metrics=report.metrics() if report is not None else {},
        error=({"type": type(error).__name__, "message": mask_text(str(error))} if error is not None else None),
        source=source,
        source_root=source_root,
    )
    name = f"{finished.strftime('%Y%m%dT%H%M%S')}{finished.microsecond:06d}Z-{run}.json"
    folder = audit_dir(root, audit_location)
    # Confined to the table root (or the audit location), not to the folder: a folder that is a symlink
    # out of the table would pass a check rooted at itself.
    home = root if is_within(root, folder) else folder.rsplit("/", 1)[0]
    document = to_json(record.model_dump(mode="json")).encode()
    open_storage(home, storage_options).put_if_absent(join(folder, name), document)
    return record


ReportT = TypeVar("ReportT", bound=Report)


def audited(
    command: str,
    table: Table,
    options: BaseModel,
    call: Callable[[], ReportT],
    *,
    record: bool,
    flags: Mapping[str, bool] | None = None,
    output: str | None = None,
    progress: Console,
) -> ReportT:
    """``call()``, one run of ``command`` on ``table``, leaving an audit record of its outcome when
    ``record`` (a table-changing run, not a dry run: a read-only run writes nothing into the table, so
    it works with read-only credentials). The record goes under the handle's root (the table is not
    found or detected again for it); a run that reads ``table`` and changes another, ``output`` (cdc's
    change table), is recorded under ``output``, naming ``table`` as its source. The record's options
    are ``options`` and the run's ``flags`` (``dry_run``, ``quarantine``). Every :mod:`lakeops.api`
    function runs through here, so the CLI, ``spark-submit`` and Dagster are all audited, once. A
    record that cannot be written is a warning on ``progress``, never the run's outcome. An exception
    leaves with its whole chain masked (:func:`lakeops.redaction.mask_exception`): a driver's or an S3
    client's own error may quote the URI it was given, and tracebacks and Dagster's error report show
    the chain."""
    started = datetime.now(UTC)
    recorded = {**options.model_dump(mode="json"), **(flags or {})}
    try:
        report = call()
    except Exception as exc:
        mask_exception(exc)
        if record:
            _record(command, table, recorded, started, progress, output, error=exc)
        raise
    if record:
        _record(command, table, recorded, started, progress, output, report=report)
    return report


def _record(
    command: str,
    table: Table,
    recorded: Mapping[str, Any],
    started: datetime,
    progress: Console,
    output: str | None,
    *,
    report: Report | None = None,
    error: Exception | None = None,
) -> None:
    source: str | None = None
    source_root: str | None = None
    try:
        if output is None:
            root, changed = table.root, table.address
        else:
            root, changed, source, source_root = output, output, table.address, _source_root(table)
        record_run(
            root,
            command=command,
            table=changed,
            options=recorded,
            started=started,
            storage_options=table.storage_options,
            report=report,
            error=error,
            source=source,
            source_root=source_root,
        )
    except LakeopsError as exc:
        progress.print(
            f"warning: {output or table}: no audit record written for lakeops {command}: {exc}", soft_wrap=True
        )


def _source_root(table: Table) -> str | None:
    """The root of the table a run read, None when it cannot be resolved (a run that failed finding
    it is still recorded under the table it would have changed, naming ``table`` as given)."""
    try:
        return table.root
    except LakeopsError:
        return None


def read_records(
    table_root: str, storage_options: StorageOptions | None = None, *, audit_location: str | None = None
) -> list[AuditRecord]:
    """Every audit record of the table, oldest first (from :func:`audit_dir`)."""
    root = normalize(table_root)
    folder = audit_dir(root, audit_location)
    storage = open_storage(folder, storage_options)
    records = []
    for info in storage.list(folder):
        if info.path.endswith(".json"):
            try:
                records.append(AuditRecord.model_validate(json.loads(storage.read(info.path))))
            except ValueError as exc:
                raise CorruptFile(f"{root}: audit record {info.path} is unreadable: {exc}") from None
    return records
