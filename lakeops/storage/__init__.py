"""Storage adapters: one protocol (:class:`Storage`), a local and an S3 implementation.

:func:`open_storage` picks the implementation from a location's scheme and confines it to that
location (:mod:`lakeops.storage.confined`): every delete, move and write through it is refused outside
the root, symlinks resolved. Open a table's storage at the table's root. Connection settings
travel as :class:`StorageOptions`, a small JSON-serialisable model the driver ships to Spark
executors inside a plan; secrets are deliberately not part of it and come from each process's
standard AWS credential chain, or are keys an Iceberg REST catalog vended for a table, lent to this
process's clients (:mod:`lakeops.storage.s3_leases`; docs/architecture.md, "Storage").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, field_validator

from lakeops.errors import InvalidArgument
from lakeops.storage.base import FileInfo, Storage
from lakeops.storage.confined import ConfinedStorage
from lakeops.storage.local import LocalStorage
from lakeops.storage.uri import (
    endpoint_problem,
    is_within,
    join,
    normalize,
    relative_to,
    require_within,
    scheme,
    storage_location,
)

if TYPE_CHECKING:
    from lakeops.storage.s3 import S3Storage

__all__ = [
    "ConfinedStorage",
    "FileInfo",
    "LocalStorage",
    "S3Storage",
    "Storage",
    "StorageOptions",
    "is_within",
    "join",
    "normalize",
    "open_storage",
    "relative_to",
    "require_within",
    "scheme",
]


class StorageOptions(BaseModel):
    """Non-secret connection settings; unset fields fall back to the standard AWS environment.

    ``endpoint_url`` targets an S3-compatible store (else ``AWS_ENDPOINT_URL_S3`` /
    ``AWS_ENDPOINT_URL``); ``region`` else ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` / the profile;
    ``force_path_style`` defaults to path-style addressing exactly when an endpoint is set.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint_url: str | None = None
    region: str | None = None
    force_path_style: bool | None = None

    @field_validator("endpoint_url")
    @classmethod
    def _http_endpoint(cls, value: str | None) -> str | None:
        if value is not None and (problem := endpoint_problem(value)):
            raise ValueError(f"endpoint_url {value!r} {problem}")
        return value


_LOCAL = LocalStorage()


def __getattr__(name: str) -> Any:
    """``S3Storage`` on first use: boto3 takes a tenth of a second to import, which a command on a local
    table should not pay."""
    if name == "S3Storage":
        from lakeops.storage.s3 import S3Storage

        return S3Storage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_storage(location: str, options: StorageOptions | None = None, *, also: Iterable[str] = ()) -> ConfinedStorage:
    """The storage for ``location``'s scheme (local paths and ``file://``, or ``s3``/``s3a``/``s3n``),
    confined to ``location`` and the roots in ``also``: a delete, move or write anywhere else raises
    :class:`~lakeops.errors.OutsideRoot`, so open a table's storage at its root.

    Cheap to call repeatedly: S3 clients are shared per settings within a process.
    Raises :class:`~lakeops.errors.InvalidArgument` naming an unsupported scheme.
    """
    kind = scheme(location)
    inner: Storage
    if kind == "file":
        storage_location(location)  # rejects remote-host and ambiguous file URIs and empty locations early
        inner = _LOCAL
    elif kind == "s3":
        normalize(location)
        from lakeops.storage.s3 import S3Storage

        opts = options or StorageOptions()
        inner = S3Storage(endpoint_url=opts.endpoint_url, region=opts.region, force_path_style=opts.force_path_style)
    else:
        raise InvalidArgument(
            f"cannot open storage for {location!r}: unsupported scheme {kind!r} (supported: paths, file://, s3://)"
        )
    return ConfinedStorage(inner, location, also=also)
