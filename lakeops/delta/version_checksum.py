"""Version checksum files (``n.crc``): writing one after a lakeops commit, reading one, and checking
it against the replayed state.

Implements https://github.com/delta-io/delta/blob/master/PROTOCOL.md#version-checksum-file,
"Version Checksum File Schema", "State Validation" and "Writer Requirements". The file is optional;
when present its required fields (``tableSizeBytes``, ``numFiles``, ``numMetadata``, ``numProtocol``,
``metadata``, ``protocol``) and whichever optional ones it records (``inCommitTimestampOpt``,
``setTransactions``, ``domainMetadata``, ``allFiles``, ``numDeletionVectorsOpt``,
``numDeletedRecordsOpt``) must equal what Action Reconciliation gives; any difference means the log
was modified in a way the append-only rule forbids.

Writing policy (:func:`write_version_checksum`, called by every lakeops Delta commit once
``n.json`` is durably written): the state recorded is the replay of the committed version itself
(its checkpoint and the commits after it, ours last), so it is exact whether or not the commit was
rebased over other writers' versions, and never derived from an earlier ``.crc`` that could be
wrong. Recorded: the required fields, ``txnId`` (the commit's), ``inCommitTimestampOpt`` (if and
only if the version is dated by its in-commit timestamp), ``setTransactions`` (unless the table
expires them by ``delta.setTransactionRetentionDuration``: then liveness depends on the clock, not
the log, and the field is neither written nor checked), ``domainMetadata``
(live ones), ``numDeletionVectorsOpt`` and ``numDeletedRecordsOpt``. Not recorded: ``allFiles`` (it
repeats every live ``add`` with its statistics: as large as a checkpoint, for tables of any size) and
the histograms. The file is put-if-absent, never overwritten: an existing one is kept (and said so
when it disagrees with the replay). A checksum is an optimisation: when the replay or the write
fails, the commit stands and the failure is returned as a warning for the operation's report. Log
expiry deletes checksums with their commits.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Literal

import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lakeops.delta.actions import Add, DomainMetadata, Metadata, Protocol, Txn
from lakeops.delta.commit_time import ict_enablement_version
from lakeops.delta.live_files import FileKey, LiveFiles
from lakeops.delta.log_segment import LOG_DIR
from lakeops.delta.properties import SET_TRANSACTION_RETENTION_DURATION
from lakeops.delta.snapshot import DeltaSnapshot, load_snapshot
from lakeops.errors import AlreadyExists, CorruptFile, LakeopsError, NotFound
from lakeops.integer_types import Long
from lakeops.storage import Storage
from lakeops.storage.uri import join

__all__ = [
    "ChecksumCheck",
    "VersionChecksum",
    "check_version_checksum",
    "checksum_file_name",
    "read_version_checksum",
    "version_checksum_of",
    "write_version_checksum",
]

_log = logging.getLogger(__name__)


def checksum_file_name(version: int) -> str:
    return f"{version:020d}.crc"


class VersionChecksum(BaseModel):
    """The fields of a ``n.crc`` file lakeops checks (the others, histograms included, are kept)."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="allow")

    txn_id: str | None = Field(alias="txnId", default=None)
    table_size_bytes: Long = Field(alias="tableSizeBytes")
    num_files: Long = Field(alias="numFiles")
    num_metadata: Long = Field(alias="numMetadata")
    num_protocol: Long = Field(alias="numProtocol")
    in_commit_timestamp_opt: Long | None = Field(alias="inCommitTimestampOpt", default=None)
    set_transactions: list[Txn] | None = Field(alias="setTransactions", default=None)
    domain_metadata: list[DomainMetadata] | None = Field(alias="domainMetadata", default=None)
    metadata: Metadata
    protocol: Protocol
    all_files: list[Add] | None = Field(alias="allFiles", default=None)
    num_deleted_records_opt: Long | None = Field(alias="numDeletedRecordsOpt", default=None)
    num_deletion_vectors_opt: Long | None = Field(alias="numDeletionVectorsOpt", default=None)


class ChecksumCheck(BaseModel):
    """The outcome for one version: ``absent`` (no file), ``matches``, ``mismatch`` with each field
    that differs as ``field: recorded X, replayed Y``, or ``invalid`` (a file that is not a checksum:
    the reason in ``mismatches``)."""

    version: int
    status: Literal["absent", "matches", "mismatch", "invalid"]
    mismatches: list[str] = []


def _location(table_root: str, version: int) -> str:
    return join(table_root, LOG_DIR, checksum_file_name(version))


def read_version_checksum(storage: Storage, table_root: str, version: int) -> VersionChecksum | None:
    """The checksum file of ``version``, or None when the writer wrote none."""
    location = _location(table_root, version)
    try:
        raw = storage.read(location)
    except NotFound:
        return None
    try:
        return VersionChecksum.model_validate_json(raw)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        field = ".".join(str(part) for part in error["loc"])
        raise CorruptFile(f"{location}: version checksum file is invalid: {error['msg']} at {field!r}") from exc


def _in_commit_timestamp(snapshot: DeltaSnapshot) -> int | None:
    """The snapshot version's in-commit timestamp, when the table dates that version by one."""
    enablement = ict_enablement_version(snapshot.protocol, snapshot.metadata)
    return snapshot.timestamp_ms if enablement is not None and snapshot.version >= enablement else None


def _table_size(files: Mapping[FileKey, Add]) -> int:
    """The sum of the live files' sizes; checkpoint rows kept as Arrow are summed as a column, not
    built into a million ``Add`` objects."""
    if not isinstance(files, LiveFiles):
        return sum(a.size for a in files.values())
    columnar = sum(pc.sum(c.struct.field("size")).as_py() or 0 for c in files.columns)
    return columnar + sum(a.size for a in files.objects.values())


def _txns_expire(snapshot: DeltaSnapshot) -> bool:
    """Whether the table expires transaction identifiers (``delta.setTransactionRetentionDuration``):
    which are live then depends on the clock of whoever asks, not on the log alone, so lakeops
    neither records nor checks ``setTransactions`` there."""
    return SET_TRANSACTION_RETENTION_DURATION in snapshot.metadata.configuration


def version_checksum_of(snapshot: DeltaSnapshot, txn_id: str | None = None) -> VersionChecksum:
    """The checksum of the replayed state (without ``allFiles``: see the module docstring)."""
    files = snapshot.files
    # Checkpoint rows kept as Arrow have no deletion vector (:class:`~lakeops.delta.checkpoint_reader.AddColumn`).
    held = files.objects.values() if isinstance(files, LiveFiles) else files.values()
    dvs = [a.deletion_vector for a in held if a.deletion_vector is not None]
    return VersionChecksum(
        txnId=txn_id,
        tableSizeBytes=_table_size(files),
        numFiles=len(files),
        numMetadata=1,
        numProtocol=1,
        inCommitTimestampOpt=_in_commit_timestamp(snapshot),
        setTransactions=None if _txns_expire(snapshot) else sorted(snapshot.txns.values(), key=lambda t: t.app_id),
        domainMetadata=sorted(snapshot.domains.values(), key=lambda d: d.domain),
        metadata=snapshot.metadata,
        protocol=snapshot.protocol,
        numDeletionVectorsOpt=len(dvs),
        numDeletedRecordsOpt=sum(dv.cardinality for dv in dvs),
    )


def write_version_checksum(storage: Storage, table_root: str, version: int, txn_id: str) -> str | None:
    """Write ``version.crc`` for the version a lakeops commit (``txn_id``) has just created; returns a
    warning for the report when none was written or an existing one disagrees, else None. Never raises
    a :class:`~lakeops.errors.LakeopsError`: the commit stands whatever happens here."""
    location = _location(table_root, version)
    try:
        snapshot = load_snapshot(storage, table_root, version=version)
        crc = version_checksum_of(snapshot, txn_id).model_dump_json(by_alias=True, exclude_none=True)
        try:
            storage.put_if_absent(location, crc.encode("utf-8"))
        except AlreadyExists:
            return _kept(storage, snapshot, location)
        except LakeopsError:
            if not _landed(storage, table_root, version, txn_id):
                raise
    except LakeopsError as exc:
        return _warn(f"{location}: version {version} is committed but its version checksum file was not written: {exc}")
    return None


def _landed(storage: Storage, table_root: str, version: int, txn_id: str) -> bool:
    """Whether a put whose answer was lost wrote our checksum after all (it names our ``txnId``)."""
    try:
        crc = read_version_checksum(storage, table_root, version)
    except LakeopsError:
        return False
    return crc is not None and crc.txn_id == txn_id


def _warn(warning: str) -> str:
    _log.warning(warning)
    return warning


def _kept(storage: Storage, snapshot: DeltaSnapshot, location: str) -> str | None:
    """An existing checksum file is never overwritten; a warning when it disagrees with the replay."""
    try:
        check = check_version_checksum(storage, snapshot)
    except LakeopsError as exc:
        check = ChecksumCheck(version=snapshot.version, status="mismatch", mismatches=[str(exc)])
    if check.status != "mismatch":
        return None
    return _warn(
        f"{location}: an existing version checksum file was kept (never overwritten) and disagrees with "
        f"version {snapshot.version}: {'; '.join(check.mismatches)}"
    )


def _as_json(model: BaseModel) -> Any:
    return json.loads(model.model_dump_json(by_alias=True, exclude_none=True))


def _replayed(snapshot: DeltaSnapshot) -> dict[str, Any]:
    return {
        **_recorded(version_checksum_of(snapshot)),
        "allFiles": sorted(a.key for a in snapshot.files.values()),
    }


def _recorded(crc: VersionChecksum) -> dict[str, Any]:
    recorded: dict[str, Any] = {
        "tableSizeBytes": crc.table_size_bytes,
        "numFiles": crc.num_files,
        "numMetadata": crc.num_metadata,
        "numProtocol": crc.num_protocol,
        "metadata": _as_json(crc.metadata),
        "protocol": _as_json(crc.protocol),
        "inCommitTimestampOpt": crc.in_commit_timestamp_opt,
        "numDeletionVectorsOpt": crc.num_deletion_vectors_opt,
        "numDeletedRecordsOpt": crc.num_deleted_records_opt,
    }
    if crc.set_transactions is not None:
        recorded["setTransactions"] = sorted((t.app_id, t.version) for t in crc.set_transactions)
    if crc.domain_metadata is not None:
        live = [d for d in crc.domain_metadata if not d.removed]
        recorded["domainMetadata"] = sorted((d.domain, d.configuration) for d in live)
    if crc.all_files is not None:
        recorded["allFiles"] = sorted(a.key for a in crc.all_files)
    return {name: value for name, value in recorded.items() if value is not None}


def check_version_checksum(storage: Storage, snapshot: DeltaSnapshot) -> ChecksumCheck:
    """Compare the checksum file of the snapshot's version, if any, with the replayed state. The file is
    optional and never read for the table's state, so one that is not a checksum is ``invalid``, not an
    error: readers skip it (the protocol's "Version Checksum File")."""
    try:
        crc = read_version_checksum(storage, snapshot.table_root, snapshot.version)
    except CorruptFile as exc:
        return ChecksumCheck(version=snapshot.version, status="invalid", mismatches=[str(exc)])
    if crc is None:
        return ChecksumCheck(version=snapshot.version, status="absent")
    replayed = _replayed(snapshot)
    recorded = _recorded(crc)
    if _txns_expire(snapshot):
        recorded.pop("setTransactions", None)
    mismatches = [
        f"{name} differs"
        if isinstance(value, dict | list)
        else f"{name}: recorded {value}, replayed {replayed.get(name)}"
        for name, value in recorded.items()
        if value != replayed.get(name)
    ]
    return ChecksumCheck(
        version=snapshot.version, status="mismatch" if mismatches else "matches", mismatches=mismatches
    )
