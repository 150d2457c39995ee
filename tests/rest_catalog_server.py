"""An Iceberg REST catalog for the tests, on 127.0.0.1, over PyIceberg's ``SqlCatalog`` (SQLite).

It serves what lakeops and PyIceberg's ``RestCatalog`` call: ``GET /v1/config`` (with a ``prefix``
override, so clients must honour it), ``POST /v1/oauth/tokens`` (client credentials), namespaces, and
create / load / commit table. Every request and every response is validated against the OpenAPI
document of the specification (``tests/data/openapi/iceberg-rest-catalog-open-api.yaml``): the
operation must exist, its query parameters be declared, its JSON bodies match their schemas. A request
that does not is answered 400; every violation is recorded in :attr:`RestCatalogServer.violations`,
which the fixture requires to be empty, so the server cannot drift from the specification.

Faults for the tests, the answers real servers and gateways give: :attr:`RestCatalogServer.commit_faults`
takes one fault per commit request, in order. The commit is applied and then answered 503 (``"503"``),
with a dropped connection (``"drop"``), with 409 (``"409"``: a gateway that re-sent a request which had
already been applied, so the requirement no longer holds), or with 200 naming the metadata the table
had before it (``"stale-200"``); or it is answered 503 without being applied (``"503-unapplied"``); or
its ``remove-snapshots`` updates are dropped, the rest applied and answered 200 with the metadata
really written (``"drop-removals"``). :attr:`RestCatalogServer.echo_token` refuses every load
(``"load"``) or commit (``"commit"``) with a 403 whose message quotes the request's ``Authorization``
header, as a careless gateway does. :attr:`RestCatalogServer.answers` records every
``(method, path, status)``, :attr:`RestCatalogServer.commits` the update actions of every commit request.

Vended credentials: :attr:`RestCatalogServer.vend` gives the S3 settings (``s3.access-key-id``, ...)
to vend with a table, by its identifier, to every load or create that asks for them
(``X-Iceberg-Access-Delegation: vended-credentials``), as a ``storage-credentials`` entry for the
table location, or in ``config`` with :attr:`RestCatalogServer.vend_in_config`;
:attr:`RestCatalogServer.delegations` records each load's header. ``properties`` configure the
server's own ``SqlCatalog`` (its FileIO: an S3 endpoint and keys).
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml
from openapi_schema_validator import OAS31Validator
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException, NamespaceAlreadyExistsError, NoSuchTableError
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest, Table
from pyiceberg.table.sorting import SortOrder
from pyiceberg_tables import SCHEMA, batch
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

SPEC_PATH = Path(__file__).parent / "data" / "openapi" / "iceberg-rest-catalog-open-api.yaml"
_SPEC_URI = "urn:iceberg-rest-catalog"
PREFIX = "lakeops-tests"


@cache
def _spec() -> dict[str, Any]:
    # Through JSON: YAML reads status codes (``200:``) as integers; JSON pointers name them as strings.
    return json.loads(json.dumps(yaml.safe_load(SPEC_PATH.read_text())))


@cache
def _registry() -> Registry:
    return Registry().with_resource(_SPEC_URI, Resource.from_contents(_spec(), default_specification=DRAFT202012))


def _pointer(*parts: str) -> str:
    return "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def _deref(node: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A response or request body object, following its ``$ref``; and its JSON pointer."""
    pointer = ""
    while "$ref" in node:
        pointer = node["$ref"].removeprefix("#")
        node = _spec()
        for part in pointer.strip("/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node, pointer


class OpenApiDocument:
    """Finds each request's operation in the document and validates bodies against its schemas."""

    def __init__(self) -> None:
        self.routes = [
            (re.compile("^" + re.sub(r"\{[^}]+\}", "([^/]+)", path) + "$"), path) for path in _spec()["paths"]
        ]

    def operation(self, method: str, path: str) -> tuple[str, dict[str, Any]]:
        for pattern, template in self.routes:
            if pattern.match(path) and method.lower() in _spec()["paths"][template]:
                return template, _spec()["paths"][template][method.lower()]
        raise LookupError(f"{method} {path}: no such operation in the OpenAPI document")

    def check_request(self, request: Request, template: str, operation: dict[str, Any]) -> list[str]:
        problems = []
        declared = {
            _deref(p)[0]["name"]
            for p in [*_spec()["paths"][template].get("parameters", []), *operation.get("parameters", [])]
        }
        problems += [f"query parameter {name!r} is not declared" for name in request.args if name not in declared]
        body = operation.get("requestBody")
        if body is not None:
            media = _deref(body)[0]["content"]
            if request.mimetype not in media:
                return [*problems, f"content type {request.mimetype} is not one of {sorted(media)}"]
            form = request.mimetype == "application/x-www-form-urlencoded"
            instance = request.form.to_dict() if form else request.get_json(silent=True)
            where = ("paths", template, request.method.lower(), "requestBody", "content", request.mimetype, "schema")
            problems += self._schema_errors(instance, _pointer(*where), body, request.mimetype)
        return problems

    def check_response(self, template: str, method: str, status: int, body: Any) -> list[str]:
        responses = _spec()["paths"][template][method.lower()]["responses"]
        key = next((k for k in (str(status), f"{status // 100}XX", "default") if k in responses), None)
        if key is None:
            return [f"{method} {template}: status {status} is not a documented response"]
        response, pointer = _deref(responses[key])
        content = response.get("content", {}).get("application/json")
        if content is None:
            return [] if body is None else [f"{method} {template} {status}: a body where none is documented"]
        if not pointer:
            pointer = "/" + _pointer("paths", template, method.lower(), "responses", str(key))
        return self._schema_errors(body, f"{pointer.lstrip('/')}/content/application~1json/schema", None)

    def _schema_errors(
        self, instance: Any, pointer: str, body: dict[str, Any] | None, media: str = "application/json"
    ) -> list[str]:
        if body is not None and "$ref" in body:  # a shared request body
            pointer = body["$ref"].removeprefix("#/") + f"/content/{_pointer(media)}/schema"
        validator = OAS31Validator({"$ref": f"{_SPEC_URI}#/{pointer}"}, registry=_registry())
        return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(instance)]


class _Quiet(WSGIRequestHandler):
    """No access log: :attr:`RestCatalogServer.answers` records the requests."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


class LocalServer:
    """A WSGI ``app`` served by threads on 127.0.0.1 at a free port, until :meth:`close`; ``url`` is its
    base URI."""

    def __init__(self, app: Any) -> None:
        self._server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=_Quiet)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join()


class RestCatalogServer(LocalServer):
    """The server; ``url`` is its base URI, ``token`` the bearer token it issues and requires."""

    def __init__(
        self, root: Path, *, client_id: str, client_secret: str, token: str, properties: dict[str, str] | None = None
    ) -> None:
        self.catalog = SqlCatalog(
            "default",
            uri=f"sqlite:///{root / 'catalog.db'}",
            warehouse=f"file://{root / 'warehouse'}",
            **(properties or {}),
        )
        self.client = (client_id, client_secret)
        self.token = token
        self.document = OpenApiDocument()
        self.violations: list[str] = []
        self.answers: list[tuple[str, str, int]] = []
        self.commits: list[list[str]] = []
        self.commit_faults: list[str] = []
        self.before_commit: Callable[[], None] | None = None
        self.echo_token: str | None = None
        self.vend: Callable[[str], dict[str, str] | None] | None = None
        self.vend_in_config = False
        self.delegations: list[str | None] = []
        super().__init__(self._app)

    # --- WSGI ---------------------------------------------------------------------------------

    def _app(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        try:
            template, operation = self.document.operation(request.method, request.path)
        except LookupError as exc:
            self.violations.append(str(exc))
            return Response(status=404)(environ, start_response)
        problems = self.document.check_request(request, template, operation)
        if problems:
            self.violations += [f"{request.method} {request.path} request: {p}" for p in problems]
            status, body = 400, _error(400, "BadRequestException", "; ".join(problems))
        else:
            status, body = self._handle(request, operation["operationId"])
        self.answers.append((request.method, request.path, status))
        if status == 0:  # a lost answer: the connection closes without a response
            environ["werkzeug.socket"].shutdown(socket.SHUT_RDWR)
            return iter(())
        self.violations += [
            f"{request.method} {request.path} response {status}: {p}"
            for p in self.document.check_response(template, request.method, status, body)
        ]
        return Response(None if body is None else json.dumps(body), status=status, mimetype="application/json")(
            environ, start_response
        )

    def _handle(self, request: Request, operation: str) -> tuple[int, Any]:
        if operation == "getToken":
            return self._get_token(request)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return 401, _error(401, "NotAuthorizedException", "a valid bearer token is required")
        names = [unquote(p) for p in request.path.split("/")]
        if (self.echo_token, operation) in (("load", "loadTable"), ("commit", "updateTable")):
            authorization = request.headers["Authorization"]
            return 403, _error(403, "ForbiddenException", f"{authorization!r} may not {self.echo_token} {names[6]}")
        match operation:
            case "getConfig":
                return 200, {"defaults": {}, "overrides": {"prefix": PREFIX}}
            case "listNamespaces":
                return 200, {"namespaces": [list(n) for n in self.catalog.list_namespaces()]}
            case "createNamespace":
                payload = request.get_json()
                try:
                    self.catalog.create_namespace(tuple(payload["namespace"]), payload.get("properties", {}))
                except NamespaceAlreadyExistsError as exc:
                    return 409, _error(409, "AlreadyExistsException", str(exc))
                return 200, {"namespace": payload["namespace"], "properties": payload.get("properties", {})}
            case "loadNamespaceMetadata":
                namespace = tuple(names[4].split("\x1f"))
                return 200, {
                    "namespace": list(namespace),
                    "properties": self.catalog.load_namespace_properties(namespace),
                }
            case "createTable":
                return self._create_table(names[4], request.get_json(), self._delegated(request))
            case "loadTable":
                self.delegations.append(request.headers.get("X-Iceberg-Access-Delegation"))
                return self._load_table(names[4], names[6], self._delegated(request))
            case "updateTable":
                return self._commit(names[4], names[6], request.get_json())
        return 406, _error(406, "UnsupportedOperationException", f"{operation} is not served by the test catalog")

    def _get_token(self, request: Request) -> tuple[int, Any]:
        form = request.form
        if (form.get("client_id"), form.get("client_secret")) != self.client:
            return 401, {"error": "invalid_client", "error_description": "unknown client"}
        return 200, {"access_token": self.token, "token_type": "bearer", "expires_in": 3600}

    def _identifier(self, namespace: str, table: str) -> tuple[str, ...]:
        return (*namespace.split("\x1f"), table)

    def _delegated(self, request: Request) -> bool:
        return "vended-credentials" in request.headers.get("X-Iceberg-Access-Delegation", "").split(",")

    def _access(self, table: Table, delegated: bool) -> dict[str, Any]:
        """The ``config`` and ``storage-credentials`` of a ``LoadTableResult`` for ``table``."""
        vended = self.vend(".".join(table.name())) if delegated and self.vend is not None else None
        if vended is None:
            return {"config": {}}
        if self.vend_in_config:
            return {"config": vended}
        return {"config": {}, "storage-credentials": [{"prefix": table.location(), "config": vended}]}

    def _load_table(self, namespace: str, name: str, delegated: bool) -> tuple[int, Any]:
        try:
            table = self.catalog.load_table(self._identifier(namespace, name))
        except NoSuchTableError as exc:
            return 404, _error(404, "NoSuchTableException", str(exc))
        return 200, _load_result(table.metadata_location, table.metadata) | self._access(table, delegated)

    def _create_table(self, namespace: str, payload: dict[str, Any], delegated: bool) -> tuple[int, Any]:
        extra: dict[str, Any] = {}
        if "partition-spec" in payload:
            extra["partition_spec"] = PartitionSpec.model_validate(payload["partition-spec"])
        if "write-order" in payload:
            extra["sort_order"] = SortOrder.model_validate(payload["write-order"])
        table = self.catalog.create_table(
            self._identifier(namespace, payload["name"]),
            Schema.model_validate(payload["schema"]),
            location=payload.get("location"),
            properties=payload.get("properties", {}),
            **extra,
        )
        return 200, _load_result(table.metadata_location, table.metadata) | self._access(table, delegated)

    def _commit(self, namespace: str, name: str, payload: dict[str, Any]) -> tuple[int, Any]:
        if self.before_commit is not None:
            hook, self.before_commit = self.before_commit, None
            hook()
        self.commits.append([u["action"] for u in payload["updates"]])
        fault = self.commit_faults.pop(0) if self.commit_faults else None
        if fault == "503-unapplied":
            return 503, _error(503, "SlowDownException", "the commit was not applied")
        if fault == "drop-removals":
            payload = {**payload, "updates": [u for u in payload["updates"] if u["action"] != "remove-snapshots"]}
        commit = CommitTableRequest.model_validate(payload)
        try:
            table = self.catalog.load_table(self._identifier(namespace, name))
        except NoSuchTableError as exc:
            return 404, _error(404, "NoSuchTableException", str(exc))
        try:
            response = self.catalog.commit_table(table, commit.requirements, commit.updates)
        except CommitFailedException as exc:
            return 409, _error(409, "CommitFailedException", str(exc))
        match fault:
            case "drop":
                return 0, None
            case "503":
                return 503, _error(503, "SlowDownException", "the answer was lost (the commit landed)")
            case "409":
                return 409, _error(409, "CommitFailedException", "Requirement failed: branch main has changed")
            case "stale-200":
                return 200, _load_result(table.metadata_location, table.metadata)
        return 200, _load_result(response.metadata_location, response.metadata)


def _load_result(location: str, metadata: Any) -> dict[str, Any]:
    return {"metadata-location": location, "metadata": json.loads(metadata.model_dump_json())}


def _error(code: int, kind: str, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code}}


def appended_table(
    server: RestCatalogServer, identifier: str, appends: int, location: str | None = None
) -> tuple[RestCatalog, Table]:
    """A table PyIceberg's ``RestCatalog`` creates through ``server`` (at ``location``, else in the
    warehouse) and grows by ``appends`` appends of 10 rows (one small file each), signed in with the
    server's client credential."""
    catalog = RestCatalog("rest", uri=server.url, credential=":".join(server.client))
    namespace = identifier.rsplit(".", 1)[0]
    if (namespace,) not in catalog.list_namespaces():
        catalog.create_namespace(namespace)
    table = catalog.create_table(identifier, SCHEMA, location=location)
    for i in range(appends):
        table.append(batch(i * 10, 10))
    return catalog, table


def serve(root: Path, **settings: Any) -> Iterator[RestCatalogServer]:
    """The server for one test; fails the test on any violation of the OpenAPI document."""
    server = RestCatalogServer(root, **settings)
    try:
        yield server
    finally:
        server.close()
    assert server.violations == [], server.violations
