"""S3 keys lent to this process for a location prefix: how the credentials an Iceberg REST catalog
vends for a table (``LoadTableResult`` ``storage-credentials`` and ``config``,
https://github.com/apache/iceberg/blob/main/open-api/rest-catalog-open-api.yaml) sign every request
under the table's prefix, and no other.

A request to a path is signed with the lease of the longest prefix holding the path (compared by
whole segments, as the specification's ``StorageCredential.prefix`` asks: "the most specific
prefix"); a path under no lease keeps the storage's own identity (the AWS chain, or the keys
:func:`lakeops.storage.s3.using_keys` lends for an endpoint). So two tables with different keys on
one endpoint are served concurrently in one process. Leases made inside a :func:`lease_scope` (one
per :mod:`lakeops.api` call) end with it; a lease made outside any scope lasts as long as the process.
Nothing here reaches ``os.environ``, a :class:`~lakeops.storage.StorageOptions`, a plan or a Spark
executor, and no repr shows a secret; every key is registered with the redaction layer when it is made
(:class:`S3Keys`), so botocore's DEBUG records of each request (its headers and canonical request,
which carry the session token), or a message that quotes one, have it masked.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from lakeops.redaction import register_secrets
from lakeops.storage import uri

__all__ = ["Lease", "S3Keys", "VendedS3", "lease_for", "lease_scope", "leased_keys", "lend"]


@dataclass(frozen=True)
class S3Keys:
    """An access key pair (with a session token for temporary credentials) lent to this process's S3
    clients; the secrets never show in a repr, so a client-cache key or a traceback's locals cannot
    print them, and are masked by value wherever else they appear. The key id is not secret (it names
    the principal), and on S3-compatible stores people choose it, often a word their bucket names share."""

    access_key_id: str = field(repr=False)
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        register_secrets(self.secret_access_key, self.session_token)


@dataclass(frozen=True)
class VendedS3:
    """Keys for one prefix and where to use them: ``endpoint_url`` and ``region`` (None: the storage's
    own), ``expires_at_ms`` when the keys stop working (None: unknown)."""

    keys: S3Keys
    endpoint_url: str | None = None
    region: str | None = None
    expires_at_ms: int | None = None

    def expired(self) -> bool:
        return self.expires_at_ms is not None and self.expires_at_ms <= time.time() * 1000


#: Loads fresh keys for a lease's prefix (a REST catalog reloads the table); None: none vended now.
Refresh = Callable[[], VendedS3 | None]


class Lease:
    """The keys lent for one prefix, renewed in place by ``refresh`` when they expire."""

    def __init__(self, prefix: str, credentials: VendedS3, refresh: Refresh | None) -> None:
        self.prefix = prefix
        self._credentials = credentials
        self._refresh = refresh
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Lease({self.prefix!r})"

    @property
    def credentials(self) -> VendedS3:
        return self._credentials

    def replace(self, credentials: VendedS3, refresh: Refresh | None) -> None:
        with self._lock:
            self._credentials, self._refresh = credentials, refresh

    def renew(self, stale: VendedS3) -> VendedS3:
        """Fresh keys in place of ``stale``: refreshed once however many threads find them stale at
        once (later callers get the keys the first one loaded); the stale keys stay when the refresh
        vends none."""
        with self._lock:
            if self._credentials is stale and self._refresh is not None:
                self._credentials = self._refresh() or stale
            return self._credentials


_scope: contextvars.ContextVar[dict[str, Lease] | None] = contextvars.ContextVar("lakeops_s3_leases", default=None)
#: Leases made outside any scope: they last as long as the process.
_process_leases: dict[str, Lease] = {}
#: Every live lease by prefix, newest last (the one in force).
_leases: dict[str, list[Lease]] = {}
_lock = threading.Lock()


def _prefix(location: str) -> str:
    return uri.normalize(location)


def lend(prefix: str, credentials: VendedS3, refresh: Refresh | None = None) -> Lease:
    """Sign this process's S3 requests under ``prefix`` with ``credentials`` until the current
    :func:`lease_scope` ends (or, outside one, for the process's life). Lending again for a prefix in
    the same scope replaces the keys in place."""
    prefix = _prefix(prefix)
    scope = _scope.get()
    owner = _process_leases if scope is None else scope
    with _lock:
        lease = owner.get(prefix)
        if lease is not None:
            lease.replace(credentials, refresh)
            return lease
        lease = owner[prefix] = Lease(prefix, credentials, refresh)
        _leases.setdefault(prefix, []).append(lease)
        return lease


@contextlib.contextmanager
def lease_scope() -> Iterator[None]:
    """Leases made in this block (on this thread, or in contexts copied from it) end with it; the
    requests they sign may run on any thread meanwhile."""
    owned: dict[str, Lease] = {}
    token = _scope.set(owned)
    try:
        yield
    finally:
        _scope.reset(token)
        with _lock:
            for prefix, lease in owned.items():
                remaining = [held for held in _leases[prefix] if held is not lease]
                if remaining:
                    _leases[prefix] = remaining
                else:
                    del _leases[prefix]


def lease_for(path: str) -> Lease | None:
    """The lease of the longest prefix holding ``path`` (whole segments), if any."""
    if not _leases:
        return None
    location = _prefix(path)
    while True:
        held = _leases.get(location)
        if held:
            return held[-1]
        parent = location.rsplit("/", 1)[0]
        if parent == "s3:/" or parent == location:
            return None
        location = parent


def leased_keys() -> set[S3Keys]:
    """The keys some live lease holds now (clients built for others can go)."""
    with _lock:
        return {held.credentials.keys for leases in _leases.values() for held in leases}
