"""A small client of the Iceberg REST catalog protocol: only the calls lakeops makes
(https://github.com/apache/iceberg/blob/main/open-api/rest-catalog-open-api.yaml).

- ``GET /v1/config``: the server's ``defaults`` under the client's settings under its ``overrides``;
  ``prefix`` (and ``uri``) from the merged configuration place every later call.
- ``POST /v1/oauth/tokens`` (the ``OAuth2`` security scheme, ``client_credentials`` grant) when a
  client credential ``client_id:client_secret`` is given, else a bearer token as given; both only from
  the environment variables the address names, both re-read once on a 401.
- ``GET .../namespaces/{namespace}/tables/{table}`` (``LoadTableResult``), asking for vended
  credentials (``X-Iceberg-Access-Delegation: vended-credentials``, the ``data-access`` parameter)
  unless the settings turn that off, and ``POST`` to the same path (``CommitTableRequest`` →
  ``CommitTableResponse``).

Why not PyIceberg's ``RestCatalog``: PyIceberg is no runtime dependency of lakeops, and its commit
path takes its own ``Table`` and update objects, while lakeops builds the new metadata itself and only
needs the four calls above (docs/architecture.md, "Catalogs"). HTTP through urllib3, which boto3
already brings. Secrets never leave the request headers and form body: no message, log line or model
here holds one.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
from urllib3.exceptions import HTTPError

from lakeops.errors import CommitConflict, InvalidArgument, LakeopsError, NotATable, StorageError
from lakeops.iceberg.catalog import TableIdentifier

__all__ = ["CatalogUnavailable", "RestClient", "RestRefused", "RestSettings", "check_settings", "rest_client"]

#: Connect and read timeouts of every call, in seconds.
TIMEOUT = urllib3.Timeout(connect=10.0, read=120.0)
#: The separator of namespace levels in a path ("namespace" parameter of the specification).
_NAMESPACE_SEPARATOR = "\x1f"


class CatalogUnavailable(StorageError):
    """The catalog gave no answer (a timeout, a reset connection) or a 5xx one: the request's outcome
    is unknown."""


class RestRefused(LakeopsError):
    """The catalog refused a request (a 4xx other than a commit conflict): nothing changed."""


@dataclass(frozen=True)
class RestSettings:
    """How to reach one REST catalog: the non-secret settings of a table address."""

    uri: str
    warehouse: str | None = None
    credential_env: str | None = None
    token_env: str | None = None
    prefix: str | None = None
    vended_credentials: bool = True


def check_settings(settings: RestSettings, option: str) -> None:
    """Refuse a REST address that cannot work, before any request: no http(s) URL, or a secret's
    environment variable that is not set."""
    if not settings.uri.startswith(("http://", "https://")):
        raise InvalidArgument(f"{option} {settings.uri!r}: a REST catalog URI is an http:// or https:// URL")
    for name in (settings.credential_env, settings.token_env):
        if name is not None and not os.environ.get(name):
            raise InvalidArgument(
                f"{option}: the environment variable {name} that should hold the catalog's secret is not set"
            )


@dataclass
class RestClient:
    """One catalog's client: its configuration and token fetched once, shared by every table of it."""

    settings: RestSettings
    _pool: urllib3.PoolManager = field(default_factory=lambda: urllib3.PoolManager(retries=False, timeout=TIMEOUT))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _token: str | None = None
    _base: str | None = None

    # --- the calls ----------------------------------------------------------------------------

    def load_table(self, identifier: TableIdentifier) -> dict[str, Any]:
        """``LoadTableResult`` of ``identifier``; :class:`NotATable` on a 404."""
        delegation = {"X-Iceberg-Access-Delegation": "vended-credentials"} if self.settings.vended_credentials else {}
        status, body = self._call("GET", self._table_path(identifier), headers=delegation)
        if status == 404:
            raise NotATable(
                f"{identifier}: no such table in the REST catalog at {self.settings.uri} ({_message(body)})"
            )
        return self._ok(status, body, f"loading table {identifier}")

    def commit_table(self, identifier: TableIdentifier, requirements: list[Any], updates: list[Any]) -> dict[str, Any]:
        """``CommitTableResponse``; :class:`CommitConflict` on a 409 (a requirement failed: nothing
        changed), :class:`CatalogUnavailable` when the outcome is unknown (a 5xx, no answer)."""
        request = {
            "identifier": {"namespace": identifier.namespace.split("."), "name": identifier.name},
            "requirements": requirements,
            "updates": updates,
        }
        status, body = self._call("POST", self._table_path(identifier), body=request)
        if status == 409:
            raise CommitConflict(f"{identifier}: the REST catalog refused the commit: {_message(body)}")
        return self._ok(status, body, f"committing to table {identifier}")

    # --- plumbing -----------------------------------------------------------------------------

    def _table_path(self, identifier: TableIdentifier) -> str:
        namespace = quote(_NAMESPACE_SEPARATOR.join(identifier.namespace.split(".")), safe="")
        return f"{self._prefix_path()}/namespaces/{namespace}/tables/{quote(identifier.name, safe='')}"

    def _prefix_path(self) -> str:
        with self._lock:
            if self._base is None:
                self._base = self._configure()
            return self._base

    def _configure(self) -> str:
        """``/v1`` plus the ``prefix`` of the merged configuration (``GET /v1/config``)."""
        query = f"?{urlencode({'warehouse': self.settings.warehouse})}" if self.settings.warehouse else ""
        status, body = self._send("GET", f"/v1/config{query}", None, self._auth_unlocked())
        config = self._ok(status, body, "reading its configuration")
        given = {"prefix": self.settings.prefix} if self.settings.prefix else {}
        merged = {**(config.get("defaults") or {}), **given, **(config.get("overrides") or {})}
        prefix = merged.get("prefix")
        return f"/v1/{quote(prefix, safe='/')}" if prefix else "/v1"

    def _call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        with self._lock:
            auth = self._auth_unlocked()
        status, answer = self._send(method, path, body, {**auth, **(headers or {})})
        if status == 401 and self._renewable():
            with self._lock:
                self._token = None
                auth = self._auth_unlocked()
            status, answer = self._send(method, path, body, {**auth, **(headers or {})})
        return status, answer

    def _renewable(self) -> bool:
        return self.settings.credential_env is not None or self.settings.token_env is not None

    def _auth_unlocked(self) -> dict[str, str]:
        if self._token is None:
            self._token = self._fetch_token()
        return {"Authorization": f"Bearer {self._token}"} if self._token else {}

    def _fetch_token(self) -> str | None:
        """The bearer token: an OAuth2 client-credentials exchange when a credential is named, else
        the token variable as it is; None without either (an open catalog)."""
        if self.settings.credential_env is not None:
            client_id, _, secret = _secret(self.settings.credential_env).rpartition(":")
            form = {"grant_type": "client_credentials", "client_secret": secret, "scope": "catalog"}
            form |= {"client_id": client_id} if client_id else {}
            try:
                response = self._pool.request(
                    "POST",
                    f"{self.settings.uri}/v1/oauth/tokens",
                    body=urlencode(form),
                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                )
            except HTTPError as exc:
                raise CatalogUnavailable(
                    f"REST catalog {self.settings.uri}: no answer to the token request ({type(exc).__name__})"
                ) from None
            if response.status != 200:
                raise RestRefused(
                    f"REST catalog {self.settings.uri}: the client credential in ${self.settings.credential_env} "
                    f"was refused (HTTP {response.status})"
                )
            return str(json.loads(response.data)["access_token"])
        if self.settings.token_env is not None:
            return _secret(self.settings.token_env)
        return None

    def _send(self, method: str, path: str, body: Any, extra: dict[str, str]) -> tuple[int, Any]:
        headers = {"Accept": "application/json", **extra}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            response = self._pool.request(method, f"{self.settings.uri}{path}", body=payload, headers=headers)
        except HTTPError as exc:  # timeouts, resets, refused connections: the exception names no secret
            raise CatalogUnavailable(
                f"REST catalog {self.settings.uri}: no answer to {method} {path} ({type(exc).__name__}: {exc})"
            ) from None
        try:
            answer = json.loads(response.data) if response.data else None
        except ValueError:
            answer = None
        return response.status, answer

    def _ok(self, status: int, body: Any, doing: str) -> dict[str, Any]:
        if 200 <= status < 300 and isinstance(body, dict):
            return body
        where = f"REST catalog {self.settings.uri}"
        if status >= 500 or 200 <= status < 300:
            raise CatalogUnavailable(f"{where}: HTTP {status} {doing}: {_message(body)}")
        raise RestRefused(f"{where}: HTTP {status} {doing}: {_message(body)}")


def _message(body: Any) -> str:
    """The ``ErrorModel`` message of an error answer."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return f"{error.get('type', 'error')}: {error.get('message', '')}"
    return "no error message"


def _secret(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise InvalidArgument(f"the environment variable {name} that should hold the REST catalog's secret is not set")
    return value


_CLIENTS: dict[RestSettings, RestClient] = {}
_CLIENTS_LOCK = threading.Lock()


def rest_client(settings: RestSettings) -> RestClient:
    """The process's client of a catalog (one per settings: one configuration, one token)."""
    with _CLIENTS_LOCK:
        if settings not in _CLIENTS:
            _CLIENTS[settings] = RestClient(settings)
        return _CLIENTS[settings]
