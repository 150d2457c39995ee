"""Version checksum files (``n.crc``): reading one and checking it against the replayed state.

Implements https://github.com/delta-io/delta/blob/master/PROTOCOL.md#version-checksum-file,
"Version Checksum File Schema" and "State Validation": the file is optional; when present its
required fields (``tableSizeBytes``, ``numFiles``, ``numMetadata``, ``numProtocol``, ``metadata``,
``protocol``) and whichever optional ones it records (``setTransactions``, ``domainMetadata``,
``allFiles``, ``numDeletionVectorsOpt``, ``numDeletedRecordsOpt``) must equal what Action
Reconciliation gives; any difference means the log was modified in a way the append-only rule forbids.

lakeops commits never write one (the protocol lets writers omit it), so a version lakeops creates
has no checksum rather than a possibly wrong one; log expiry deletes checksums with their commits.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lakeops.delta.actions import Add, DomainMetadata, Long, Metadata, Protocol, Txn
from lakeops.delta.log_segment import LOG_DIR
from lakeops.delta.snapshot import DeltaSnapshot
from lakeops.errors import CorruptFile, NotFound
from lakeops.storage import Storage
from lakeops.storage.uri import join

__all__ = [
    "ChecksumCheck",
    "VersionChecksum",
    "check_version_checksum",
    "checksum_file_name",
    "read_version_checksum",
]


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
    """The outcome for one version: ``absent`` (no file), ``matches``, or ``mismatch`` with each field
    that differs as ``field: recorded X, replayed Y``."""

    version: int
    status: Literal["absent", "matches", "mismatch"]
    mismatches: list[str] = []


def read_version_checksum(storage: Storage, table_root: str, version: int) -> VersionChecksum | None:
    """The checksum file of ``version``, or None when the writer wrote none."""
    location = join(table_root, LOG_DIR, checksum_file_name(version))
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


def _as_json(model: BaseModel) -> Any:
    return json.loads(model.model_dump_json(by_alias=True, exclude_none=True))


def _replayed(snapshot: DeltaSnapshot) -> dict[str, Any]:
    files = list(snapshot.files.values())
    dvs = [a.deletion_vector for a in files if a.deletion_vector is not None]
    return {
        "tableSizeBytes": sum(a.size for a in files),
        "numFiles": len(files),
        "numMetadata": 1,
        "numProtocol": 1,
        "metadata": _as_json(snapshot.metadata),
        "protocol": _as_json(snapshot.protocol),
        "setTransactions": sorted((t.app_id, t.version) for t in snapshot.txns.values()),
        "domainMetadata": sorted((d.domain, d.configuration) for d in snapshot.domains.values()),
        "allFiles": sorted(a.key for a in files),
        "numDeletionVectorsOpt": len(dvs),
        "numDeletedRecordsOpt": sum(dv.cardinality for dv in dvs),
    }


def _recorded(crc: VersionChecksum) -> dict[str, Any]:
    recorded: dict[str, Any] = {
        "tableSizeBytes": crc.table_size_bytes,
        "numFiles": crc.num_files,
        "numMetadata": crc.num_metadata,
        "numProtocol": crc.num_protocol,
        "metadata": _as_json(crc.metadata),
        "protocol": _as_json(crc.protocol),
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
    """Compare the checksum file of the snapshot's version, if any, with the replayed state."""
    crc = read_version_checksum(storage, snapshot.table_root, snapshot.version)
    if crc is None:
        return ChecksumCheck(version=snapshot.version, status="absent")
    replayed = _replayed(snapshot)
    mismatches = [
        f"{name} differs" if isinstance(value, dict | list) else f"{name}: recorded {value}, replayed {replayed[name]}"
        for name, value in _recorded(crc).items()
        if value != replayed[name]
    ]
    return ChecksumCheck(
        version=snapshot.version, status="mismatch" if mismatches else "matches", mismatches=mismatches
    )
