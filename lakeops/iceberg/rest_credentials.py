"""The S3 credentials a REST catalog vends with a table
(https://github.com/apache/iceberg/blob/main/open-api/rest-catalog-open-api.yaml, ``LoadTableResult``:
"AWS Configurations" and "Storage Credentials"), as the prefixes and keys to lend this process's S3
clients (:mod:`lakeops.storage.s3_leases`).

The specification says clients check ``storage-credentials`` first, and ``config`` only when no entry
serves the table; of several entries, "the most specific prefix" serves a path. So: every S3 entry
whose ``prefix`` holds the table location is lent for the table location (the longest one's keys; a
prefix wider than the table never signs another table's requests), every entry under the table
location for its own prefix; without an entry holding the table, the ``config`` keys are lent for the
table location. ``s3.endpoint`` and ``s3.region`` (else ``client.region``) say where to send them,
``s3.session-token-expires-at-ms`` when to reload them. Entries for other prefixes or stores are
ignored.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lakeops.errors import ProtocolError
from lakeops.storage.s3_leases import S3Keys, VendedS3
from lakeops.storage.uri import S3, is_within_normalized, normalize, scheme

__all__ = ["LoadTableCredentials", "StorageCredential", "vended_s3"]


class StorageCredential(BaseModel):
    """``StorageCredential``: the ``config`` that serves paths under ``prefix``."""

    model_config = ConfigDict(frozen=True)

    prefix: str
    config: dict[str, str]


class LoadTableCredentials(BaseModel):
    """The fields of ``LoadTableResult`` that carry storage access."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")

    config: dict[str, str] = Field(default_factory=dict)
    storage_credentials: list[StorageCredential] = Field(default_factory=list, alias="storage-credentials")


def _s3(config: Mapping[str, str], fallback: Mapping[str, str]) -> VendedS3 | None:
    """The keys in ``config``, sent where ``config`` (else ``fallback``, the table's ``config``) says."""
    if not config.get("s3.access-key-id") or not config.get("s3.secret-access-key"):
        return None

    def setting(*names: str) -> str | None:
        return next((source[n] for source in (config, fallback) for n in names if source.get(n)), None)

    expires = config.get("s3.session-token-expires-at-ms")
    return VendedS3(
        keys=S3Keys(config["s3.access-key-id"], config["s3.secret-access-key"], config.get("s3.session-token")),
        endpoint_url=setting("s3.endpoint"),
        region=setting("s3.region", "client.region"),
        expires_at_ms=int(expires) if expires and expires.isdigit() else None,
    )


def vended_s3(table_name: str, result: Mapping[str, object]) -> dict[str, VendedS3]:
    """Prefix → credentials to lend for the table a ``LoadTableResult`` describes (empty when it
    vends no S3 keys, or the table is not on S3). A malformed ``config`` or ``storage-credentials``
    is a :class:`ProtocolError` naming the field, never its value (it may be a secret)."""
    metadata = result.get("metadata")
    location = metadata.get("location") if isinstance(metadata, Mapping) else None
    if not isinstance(location, str) or scheme(location) != S3:
        return {}
    table = normalize(location)
    try:
        access = LoadTableCredentials.model_validate(result)
    except ValidationError as exc:
        fields = ", ".join(".".join(map(str, e["loc"])) for e in exc.errors())
        raise ProtocolError(
            f"{table_name}: the REST catalog's LoadTableResult for {location} has malformed {fields} "
            "(a map of strings expected)"
        ) from None
    lent: dict[str, VendedS3] = {}
    covering: VendedS3 | None = None
    for entry in sorted(access.storage_credentials, key=lambda e: len(e.prefix)):
        if scheme(entry.prefix) != S3 or (credentials := _s3(entry.config, access.config)) is None:
            continue
        prefix = normalize(entry.prefix)
        if is_within_normalized(prefix, table):
            covering = credentials  # sorted by length: the longest holding prefix comes last
        elif is_within_normalized(table, prefix):
            lent[prefix] = credentials
    covering = covering or _s3(access.config, access.config)
    return lent | ({table: covering} if covering is not None else {})
