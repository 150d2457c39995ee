"""A faulty gateway in front of the test REST catalog (``tests/rest_catalog_server.py``), for answers
the catalog itself never gives: the server checks its own answers against the OpenAPI document, a
gateway (or a buggy catalog) does not.

Every request is forwarded, except that :attr:`FaultyGateway.answers` replaces the answer of an
endpoint with a ``(status, body)`` of its own: ``"token"`` (``POST /v1/oauth/tokens``), ``"config"``
(``GET /v1/config``) and ``"load"`` (loading a table) are answered without asking the catalog;
``"commit"`` is forwarded first, so the commit is applied, and then answered. A table path outside the
catalog's prefix (a faulty configuration moved it) is answered 404, as a catalog would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import urllib3
from rest_catalog_server import PREFIX, LocalServer, RestCatalogServer
from werkzeug.wrappers import Request, Response

_TABLE = re.compile(r"^/v1/(?:(.*)/)?namespaces/[^/]+/tables/[^/]+$")
_FORWARDED_HEADERS = ("Authorization", "Content-Type", "Accept", "X-Iceberg-Access-Delegation")


class FaultyGateway(LocalServer):
    """The gateway; ``url`` is its base URI."""

    def __init__(self, upstream: RestCatalogServer) -> None:
        self.upstream = upstream
        self.answers: dict[str, tuple[int, bytes]] = {}
        self._pool = urllib3.PoolManager(retries=False)
        super().__init__(self._app)

    def _app(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        kind = self._kind(request)
        if kind in ("token", "config", "load") and kind in self.answers:
            status, body = self.answers[kind]
        elif kind == "elsewhere":
            status, body = 404, b'{"error": {"message": "no such prefix", "type": "NoSuchTableException", "code": 404}}'
        else:
            status, body = self._forward(request, environ["RAW_URI"])
            if kind in self.answers:  # "commit": applied, then answered wrongly
                status, body = self.answers[kind]
        return Response(body, status=status, mimetype="application/json")(environ, start_response)

    def _kind(self, request: Request) -> str | None:
        if request.path == "/v1/oauth/tokens":
            return "token"
        if request.path == "/v1/config":
            return "config"
        table = _TABLE.match(request.path)
        if table is None:
            return None
        if table[1] != PREFIX:
            return "elsewhere"
        return "load" if request.method == "GET" else "commit"

    def _forward(self, request: Request, target: str) -> tuple[int, bytes]:
        """The catalog's answer to ``request`` (``target``: its path and query as sent, still encoded)."""
        headers = {name: request.headers[name] for name in _FORWARDED_HEADERS if name in request.headers}
        response = self._pool.request(
            request.method, f"{self.upstream.url}{target}", body=request.get_data(), headers=headers
        )
        return response.status, response.data


def load_result(upstream: RestCatalogServer, namespace: str, table: str) -> dict[str, Any]:
    """The catalog's own ``LoadTableResult`` of ``namespace.table``, as it answers now."""
    answer = urllib3.request(
        "GET",
        f"{upstream.url}/v1/{PREFIX}/namespaces/{namespace}/tables/{table}",
        headers={"Authorization": f"Bearer {upstream.token}"},
    )
    result: dict[str, Any] = json.loads(answer.data)
    return result


def gateway(upstream: RestCatalogServer) -> Iterator[FaultyGateway]:
    """A gateway in front of ``upstream`` for one test or module."""
    faulty = FaultyGateway(upstream)
    try:
        yield faulty
    finally:
        faulty.close()
