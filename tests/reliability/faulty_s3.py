"""A fault-injecting HTTP proxy in front of the moto S3 endpoint (issue 10: storage faults).

Clients pointed at :attr:`FaultyS3.endpoint_url` reach moto through it; a test adds :class:`Rule`
objects at run time and each request that a rule picks gets that rule's :class:`Fault` instead of
(or, for ``DROP_ANSWER``, after) being forwarded. The faults are the ones object stores really
produce: 500 ``InternalError`` and 503 ``SlowDown`` with S3's XML error body, a stall past the
client's read timeout, a reset connection, and the ambiguous one -- the request is applied by the
store but its answer never reaches the client. Everything injected is counted, so a test can
prove its faults happened.

Random picks are reproducible across thread interleavings: a request's draw depends only on the
seed, the method, the path and how many times that method and path were seen before, not on
which thread got there first.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import re
import socket
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

import pytest

__all__ = ["Fault", "FaultyS3", "Injection", "Rule", "faulty_s3"]

#: Headers that describe one hop's connection, not the message: never forwarded.
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "expect"}
)


class Fault(StrEnum):
    INTERNAL_ERROR = "500"  # 500 InternalError, not forwarded
    SLOW_DOWN = "503"  # 503 SlowDown (throttling), not forwarded
    STALL = "stall"  # hold the request past the client's read timeout, then close; not forwarded
    RESET = "reset"  # close the connection with a TCP reset, without answering; not forwarded
    DROP_ANSWER = "drop-answer"  # forward, let the store apply it, then close without answering


_ERRORS = {
    Fault.INTERNAL_ERROR: (500, "InternalError", "We encountered an internal error. Please try again."),
    Fault.SLOW_DOWN: (503, "SlowDown", "Please reduce your request rate."),
}


@dataclass
class Rule:
    """Which requests get ``fault``: all of ``method`` (None: any), ``key`` (a regex searched in the
    URL-decoded path ``/bucket/key``) and ``query`` (a substring of the query string, e.g.
    ``"delete"`` for DeleteObjects) must match; of the matching requests, the ``nth`` ones (1-based
    occurrence numbers) or each with ``probability`` (draws from ``seed``), at most ``limit`` times.
    """

    fault: Fault
    method: str | None = None
    key: str = ""
    query: str | None = None
    nth: frozenset[int] | None = None
    probability: float = 0.0
    seed: int = 0
    limit: int | None = None
    seen: int = field(default=0, init=False)
    fired: int = field(default=0, init=False)

    def matches(self, method: str, path: str, query: str) -> bool:
        return (
            (self.method is None or self.method == method)
            and re.search(self.key, path) is not None
            and (self.query is None or self.query in query)
        )

    def picks(self, draw_key: str) -> bool:
        """Whether this (already matching) request gets the fault; counts the occurrence."""
        self.seen += 1
        if self.limit is not None and self.fired >= self.limit:
            return False
        if self.nth is not None:
            chosen = self.seen in self.nth
        else:
            digest = hashlib.sha256(f"{self.seed}|{draw_key}".encode()).digest()
            chosen = int.from_bytes(digest[:8], "big") / 2**64 < self.probability
        if chosen:
            self.fired += 1
        return chosen


@dataclass(frozen=True)
class Injection:
    """One injected fault: what, and on which request."""

    fault: Fault
    method: str
    path: str
    query: str


class FaultyS3:
    """The proxy: a threaded HTTP server on 127.0.0.1 forwarding to ``upstream`` (moto's endpoint).

    ``stall_s`` is how long a stalled request is held before its connection is closed: longer than
    the client's read timeout makes it a timeout; bounded so a client with a long timeout (e.g. a
    Spark worker started before the test lowered it) only waits, never hangs.
    """

    def __init__(self, upstream: str, *, stall_s: float = 1.5) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.stall_s = stall_s
        self.rules: list[Rule] = []
        self.injected: list[Injection] = []
        self.requests = 0
        self._lock = threading.Lock()
        self._seen: Counter[tuple[str, str, str]] = Counter()
        self._server = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self.failures: list[str] = []  # unexpected proxy errors (a test asserts there are none)
        self._server.failures = self.failures
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="faulty-s3", daemon=True)

    @property
    def endpoint_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FaultyS3:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def add(self, *rules: Rule) -> None:
        with self._lock:
            self.rules.extend(rules)

    def clear(self) -> None:
        """Remove every rule (counts stay)."""
        with self._lock:
            self.rules.clear()

    def counts(self) -> Counter[Fault]:
        with self._lock:
            return Counter(i.fault for i in self.injected)

    def injections(self, fault: Fault | None = None) -> list[Injection]:
        with self._lock:
            return [i for i in self.injected if fault is None or i.fault == fault]

    def decide(self, method: str, path: str, query: str) -> Fault | None:
        """The fault for this request, if any rule picks it (first matching rule that fires wins)."""
        with self._lock:
            self.requests += 1
            self._seen[(method, path, query)] += 1
            draw_key = f"{method} {path}?{query}#{self._seen[(method, path, query)]}"
            for rule in self.rules:
                if rule.matches(method, path, query) and rule.picks(draw_key):
                    self.injected.append(Injection(rule.fault, method, path, query))
                    return rule.fault
        return None

    def forward(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> http.client.HTTPResponse:
        """Send the request to the upstream store; the response is read completely."""
        connection = http.client.HTTPConnection(*self._upstream, timeout=60)
        connection.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for name, value in headers:
            connection.putheader(name, value)
        if body or method in ("PUT", "POST"):
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body or None)
        response = connection.getresponse()
        response.payload = b"" if method == "HEAD" else response.read()  # type: ignore[attr-defined]
        connection.close()
        return response


class _QuietServer(ThreadingHTTPServer):
    """Aborted connections are the point, not news; anything else is kept for the test to see."""

    failures: list[str]

    def handle_error(self, request: object, client_address: object) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            self.failures.append(repr(error))


def _handler_for(proxy: FaultyS3) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as botocore expects; Expect: 100-continue handled

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 -- the base class's name
            pass

        def _body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                chunks: list[bytes] = []
                while True:
                    size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _handle(self) -> None:
            body = self._body()  # read first: the client sent it whatever happens next
            parts = urlsplit(self.path)
            fault = proxy.decide(self.command, unquote(parts.path), parts.query)
            if fault in _ERRORS:
                self._error(*_ERRORS[fault], unquote(parts.path))
                return
            if fault is Fault.STALL:
                time.sleep(proxy.stall_s)
                self._abort()
                return
            if fault is Fault.RESET:
                self._abort()
                return
            headers = [(k, v) for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP]
            response = proxy.forward(self.command, self.path, headers, body)
            if fault is Fault.DROP_ANSWER:
                self._abort()
                return
            payload: bytes = response.payload  # type: ignore[attr-defined]
            self.send_response_only(response.status, response.reason)
            for name, value in response.getheaders():
                if name.lower() not in _HOP_BY_HOP and not (
                    name.lower() == "content-length" and self.command != "HEAD"
                ):
                    self.send_header(name, value)
            if self.command != "HEAD":
                self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _error(self, status: int, code: str, message: str, resource: str) -> None:
            payload = (
                '<?xml version="1.0" encoding="UTF-8"?>\n'
                f"<Error><Code>{code}</Code><Message>{message}</Message><Resource>{resource}</Resource>"
                "<RequestId>faulty-s3</RequestId></Error>"
            ).encode()
            self.send_response_only(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _abort(self) -> None:
            """Close without a word: SO_LINGER 0 makes the close a TCP reset."""
            self.close_connection = True
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
            except OSError:
                pass

        def finish(self) -> None:
            with contextlib.suppress(OSError):  # the connection was aborted on purpose
                super().finish()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle  # noqa: N815 -- http.server's names

    return Handler


@pytest.fixture
def faulty_s3(s3_server: object) -> Iterator[FaultyS3]:
    """A proxy in front of the session's moto server, with no rules yet; stopped after the test."""
    proxy = FaultyS3(s3_server.endpoint_url, stall_s=0.8).start()  # type: ignore[attr-defined]
    try:
        yield proxy
    finally:
        proxy.stop()
