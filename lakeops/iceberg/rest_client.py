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
already brings.

Secrets never leave the request headers and form body, and each is registered with the redaction layer
the moment it is read or received (:func:`lakeops.redaction.register_secrets`): the client credential,
the token (again on every request, so the registry keeps it), and every secret setting of a
configuration or a ``LoadTableResult`` (vended keys), so a catalog that quotes one back is masked.
An answer lakeops cannot use (not JSON, a field missing or of the wrong type) is a
:class:`RestAnswerInvalid` naming the catalog, the request and the field, never a field's value; after
a commit it is a :class:`CatalogUnavailable`, since the commit may have been applied.
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
from urllib3.exceptions import HTTPError

from lakeops.errors import CommitConflict, InvalidArgument, LakeopsError, NotATable, ProtocolError, StorageError
from lakeops.iceberg.catalog import TableIdentifier
from lakeops.redaction import register_secret_settings, register_secrets

__all__ = [
    "CatalogUnavailable",
    "RestAnswerInvalid",
    "RestClient",
    "RestRefused",
    "RestSettings",
    "check_settings",
    "rest_client",
]

#: Connect and read timeouts of every call, in seconds.
TIMEOUT = urllib3.Timeout(connect=10.0, read=120.0)
#: The separator of namespace levels in a path ("namespace" parameter of the specification).
_NAMESPACE_SEPARATOR = "\x1f"
_TOKEN_PATH = "/v1/oauth/tokens"
#: What a token must be to travel in an ``Authorization`` header: visible ASCII, no spaces.
_TOKEN = re.compile(r"[\x21-\x7e]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class CatalogUnavailable(StorageError):
    """The catalog gave no answer (a timeout, a reset connection) or a 5xx one: the request's outcome
    is unknown."""


class RestRefused(LakeopsError):
    """The catalog refused a request (a 4xx other than a commit conflict): nothing changed."""


class RestAnswerInvalid(ProtocolError):
    """The catalog answered a read (configuration, token, table) with a body lakeops cannot use."""


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
        """``LoadTableResult`` of ``identifier``, with a ``metadata-location`` and a ``metadata``
        object; :class:`NotATable` on a 404."""
        delegation = {"X-Iceberg-Access-Delegation": "vended-credentials"} if self.settings.vended_credentials else {}
        request = _Request("GET", self._table_path(identifier), f"loading table {identifier}")
        status, body = self._call(request, headers=delegation)
        if status == 404:
            raise NotATable(
                f"{identifier}: no such table in the REST catalog at {self.settings.uri} ({_message(body)})"
            )
        result = self._ok(status, body, request)
        credentials = result.get("storage-credentials")
        for entry in [result, *(credentials if isinstance(credentials, list) else [])]:
            if isinstance(entry, dict) and isinstance(entry.get("config"), dict):
                register_secret_settings(entry["config"])
        return self._table_result(result, request, "LoadTableResult")

    def commit_table(self, identifier: TableIdentifier, requirements: list[Any], updates: list[Any]) -> dict[str, Any]:
        """``CommitTableResponse``; :class:`CommitConflict` on a 409 (a requirement failed: nothing
        changed), :class:`CatalogUnavailable` when the outcome is unknown (a 5xx, no answer, an answer
        without the metadata written)."""
        body = {
            "identifier": {"namespace": identifier.namespace.split("."), "name": identifier.name},
            "requirements": requirements,
            "updates": updates,
        }
        request = _Request("POST", self._table_path(identifier), f"committing to table {identifier}")
        status, answer = self._call(request, body=body)
        if status == 409:
            raise CommitConflict(
                f"{identifier}: the REST catalog at {self.settings.uri} refused the commit (HTTP 409 to "
                f"{request.method} {request.path}): {_message(answer)}"
            )
        try:
            return self._table_result(self._ok(status, answer, request), request, "CommitTableResponse")
        except RestAnswerInvalid as exc:
            raise CatalogUnavailable(f"{exc}; whether the commit was applied is unknown") from None

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
        """``/v1`` plus the ``prefix`` of the merged configuration (``GET /v1/config``: ``defaults`` and
        ``overrides`` are maps of strings)."""
        query = f"?{urlencode({'warehouse': self.settings.warehouse})}" if self.settings.warehouse else ""
        request = _Request("GET", f"/v1/config{query}", "reading its configuration")
        status, body = self._send(request, None, self._auth_unlocked())
        config = self._ok(status, body, request)
        layers: dict[str, dict[str, Any]] = {}
        for name in ("defaults", "overrides"):
            layer = config.get(name)
            if not isinstance(layer, dict | None):
                raise self._invalid(request, f"{name} that are {_kind(layer)}, not an object")
            if layer and "prefix" in layer and not isinstance(layer["prefix"], str):
                raise self._invalid(request, f"{name} whose prefix is {_kind(layer['prefix'])}, not a string")
            register_secret_settings(layer or {})
            layers[name] = layer or {}
        given = {"prefix": self.settings.prefix} if self.settings.prefix else {}
        prefix = {**layers["defaults"], **given, **layers["overrides"]}.get("prefix")
        try:
            return f"/v1/{quote(prefix, safe='/')}" if prefix else "/v1"
        except UnicodeEncodeError:  # a lone surrogate, which JSON can spell
            raise self._invalid(request, "a prefix that is not valid Unicode") from None

    def _call(self, request: _Request, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        with self._lock:
            auth = self._auth_unlocked()
        status, answer = self._send(request, body, {**auth, **(headers or {})})
        if status == 401 and self._renewable():
            with self._lock:
                self._token = None
                auth = self._auth_unlocked()
            status, answer = self._send(request, body, {**auth, **(headers or {})})
        return status, answer

    def _renewable(self) -> bool:
        return self.settings.credential_env is not None or self.settings.token_env is not None

    def _auth_unlocked(self) -> dict[str, str]:
        if self._token is None:
            self._token = self._fetch_token()
        register_secrets(self._token)  # again on every request: the registry keeps what is in use
        return {"Authorization": f"Bearer {self._token}"} if self._token else {}

    def _fetch_token(self) -> str | None:
        """The bearer token: an OAuth2 client-credentials exchange when a credential is named, else
        the token variable as it is; None without either (an open catalog)."""
        if self.settings.credential_env is not None:
            return self._exchange(self.settings.credential_env)
        if self.settings.token_env is not None:
            token = _secret(self.settings.token_env)
            register_secrets(token)
            if not _TOKEN.fullmatch(token):
                raise InvalidArgument(
                    f"the environment variable {self.settings.token_env} holds no bearer token for the REST "
                    f"catalog at {self.settings.uri}: a token is visible ASCII characters without spaces"
                )
            return token
        return None

    def _exchange(self, variable: str) -> str:
        """The token the catalog's token endpoint issues for the client credential in ``$variable``
        (``client_id:client_secret``, or a bare secret)."""
        credential = _secret(variable)
        client_id, _, secret = credential.rpartition(":")
        register_secrets(credential, secret)
        form = {"grant_type": "client_credentials", "client_secret": secret, "scope": "catalog"}
        form |= {"client_id": client_id} if client_id else {}
        request = _Request("POST", _TOKEN_PATH, f"signing in with the client credential in ${variable}")
        try:
            response = self._pool.request(
                request.method,
                f"{self.settings.uri}{request.path}",
                body=urlencode(form),
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
        except HTTPError as exc:
            raise CatalogUnavailable(
                f"REST catalog {self.settings.uri}: no answer to {request} ({type(exc).__name__})"
            ) from None
        if response.status >= 500:
            raise CatalogUnavailable(f"REST catalog {self.settings.uri}: HTTP {response.status} to {request}")
        if not 200 <= response.status < 300:
            raise RestRefused(
                f"REST catalog {self.settings.uri}: the client credential in ${variable} was refused "
                f"(HTTP {response.status} to {request.method} {request.path})"
            )
        token = self._object(request, _json(response.data)).get("access_token")
        if not isinstance(token, str):
            raise self._invalid(request, f"a body whose {_unusable('access_token', token, 'a string')}")
        register_secrets(token)
        if not _TOKEN.fullmatch(token):
            raise self._invalid(request, "a body whose access_token is empty or holds spaces or non-ASCII characters")
        return token

    def _send(self, request: _Request, body: Any, extra: dict[str, str]) -> tuple[int, Any]:
        headers = {"Accept": "application/json", **extra}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            response = self._pool.request(
                request.method, f"{self.settings.uri}{request.path}", body=payload, headers=headers
            )
        except HTTPError as exc:  # timeouts, resets, refused connections: the exception names no secret
            raise CatalogUnavailable(
                f"REST catalog {self.settings.uri}: no answer to {request} ({type(exc).__name__}: {exc})"
            ) from None
        return response.status, _json(response.data)

    def _ok(self, status: int, body: Any, request: _Request) -> dict[str, Any]:
        """The JSON object of a successful answer to ``request``; a failure says what the catalog said."""
        if 200 <= status < 300:
            return self._object(request, body)
        where = f"REST catalog {self.settings.uri}: HTTP {status} to {request}"
        if status >= 500:
            raise CatalogUnavailable(f"{where}: {_message(body)}")
        raise RestRefused(f"{where}: {_message(body)}")

    def _object(self, request: _Request, body: Any) -> dict[str, Any]:
        if isinstance(body, dict):
            return body
        shape = "empty or not JSON" if body is None else _kind(body)
        raise self._invalid(request, f"a body that is {shape}, not a JSON object")

    def _table_result(self, result: dict[str, Any], request: _Request, model: str) -> dict[str, Any]:
        """``result`` (a ``LoadTableResult`` or ``CommitTableResponse``) if it names the metadata file
        and holds the metadata, which is all lakeops reads from it."""
        location, metadata = result.get("metadata-location"), result.get("metadata")
        if not isinstance(location, str) or not location:
            raise self._invalid(request, f"a {model} whose {_unusable('metadata-location', location, 'a location')}")
        if _CONTROL.search(location):  # no file system or object store names a file so
            raise self._invalid(request, f"a {model} whose metadata-location holds control characters")
        if not isinstance(metadata, dict):
            raise self._invalid(request, f"a {model} whose {_unusable('metadata', metadata, 'an object')}")
        return result

    def _invalid(self, request: _Request, problem: str) -> RestAnswerInvalid:
        return RestAnswerInvalid(f"REST catalog {self.settings.uri}: {request} was answered with {problem}")


@dataclass(frozen=True)
class _Request:
    """One request, as messages name it: the method, the path and what it was for."""

    method: str
    path: str
    doing: str

    def __str__(self) -> str:
        return f"{self.method} {self.path} ({self.doing})"


def _json(data: bytes) -> Any:
    """The JSON document of an answer's body; None when it is empty or not JSON (too deep included)."""
    try:
        return json.loads(data) if data else None
    except (ValueError, RecursionError):
        return None


def _kind(value: Any) -> str:
    """What a JSON value is, for a message that must not quote it (it may be a secret)."""
    if isinstance(value, str):
        return "an empty string" if not value else "a string"
    kinds = {bool: "a boolean", int: "a number", float: "a number", list: "an array", dict: "an object"}
    return kinds.get(type(value), "null")


def _unusable(field: str, value: Any, expected: str) -> str:
    """Why a field's value cannot be used, without quoting it."""
    return f"{field} is missing" if value is None else f"{field} is {_kind(value)}, not {expected}"


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
