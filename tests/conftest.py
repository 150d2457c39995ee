"""Shared storage fixtures: a real S3 HTTP endpoint (moto) and a storage root per backend.

Tests that touch S3 go through moto's threaded server over HTTP on 127.0.0.1, not moto's
in-process mocks, so boto3's real request path (signing, retries, conditional headers, range
reads) is exercised exactly as against AWS. Mark such tests ``pytest.mark.s3``.

One deliberate change to moto: its ``If-None-Match: *`` check is check-then-act without a lock
(moto 5.2.5 ``S3Response.put_object``, and the CompleteMultipartUpload branch of
``_key_response_post``), so two racing creates can both succeed, which AWS S3 never allows. The
session serialises both handlers under one lock so race tests see AWS semantics. Likewise moto's
Glue ``UpdateTable`` ignores ``VersionId``: ``glue_endpoint`` adds AWS's check.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
from absent_modules import ENV as _WITHOUT_HEAVY_LAYERS
from absent_modules import install as _make_heavy_layers_absent

from lakeops.storage import Storage, StorageOptions, open_storage
from lakeops.storage.s3 import clear_client_cache, shared_client

if os.environ.get(_WITHOUT_HEAVY_LAYERS):
    _make_heavy_layers_absent()

_TESTS = Path(__file__).parent
#: The markers of the tests under a path of tests/ (a glob), so that ``-m orchestration`` selects all of
#: tests/orchestration and the Dagster assets run on Spark, and ``-m "not spark"`` skips all of tests/spark,
#: whatever each module declares.
MARKERS_BY_PATH = {
    "orchestration/*": "orchestration",
    "spark/*": "spark",
    "spark/test_orchestration_*": "orchestration",
    "integration/*": "integration",
    "airflow/*": "airflow",
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(item.path)
        relative = path.relative_to(_TESTS).as_posix() if _TESTS in path.parents else ""
        for pattern, marker in MARKERS_BY_PATH.items():
            if fnmatch(relative, pattern):
                item.add_marker(marker)


_FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "lakeops-test",
    "AWS_SECRET_ACCESS_KEY": "lakeops-test-secret",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    # Keep a developer's real profile, files and endpoints out of the test session.
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    "AWS_EC2_METADATA_DISABLED": "true",
}
_CLEARED_ENV = ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


@dataclass(frozen=True)
class S3Server:
    """A running moto S3 endpoint."""

    endpoint_url: str

    @property
    def options(self) -> StorageOptions:
        return StorageOptions(endpoint_url=self.endpoint_url)


@dataclass(frozen=True)
class S3Bucket:
    """A fresh, empty bucket: its ``s3://bucket`` URI and the options that reach it."""

    uri: str
    name: str
    options: StorageOptions


_CREATE_LOCK = threading.Lock()


def _serialised(handler: Callable[..., Any]) -> Callable[..., Any]:
    """``handler`` under the one create lock: makes moto's conditional creates atomic, as on AWS."""

    def locked(*args: Any, **kwargs: Any) -> Any:
        with _CREATE_LOCK:
            return handler(*args, **kwargs)

    return locked


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 over HTTP on 127.0.0.1 with fake credentials in the environment for the session."""
    from moto.s3.responses import S3Response
    from moto.server import ThreadedMotoServer

    env = pytest.MonkeyPatch()
    env.setattr(S3Response, "put_object", _serialised(S3Response.put_object))
    env.setattr(S3Response, "_key_response_post", _serialised(S3Response._key_response_post))
    for name, value in _FAKE_ENV.items():
        env.setenv(name, value)
    for name in _CLEARED_ENV:
        env.delenv(name, raising=False)
    clear_client_cache()
    werkzeug_log = logging.getLogger("werkzeug")
    env.setattr(werkzeug_log, "level", logging.WARNING)  # one INFO line per request drowns failures
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)  # port 0: OS picks a free one
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield S3Server(endpoint_url=f"http://{host}:{port}")
    finally:
        server.stop()
        clear_client_cache()
        env.undo()


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> S3Bucket:
    """A uniquely named bucket, so tests never see each other's objects."""
    name = f"lakeops-test-{uuid.uuid4().hex[:16]}"
    shared_client(endpoint_url=s3_server.endpoint_url).create_bucket(Bucket=name)
    return S3Bucket(uri=f"s3://{name}", name=name, options=s3_server.options)


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def any_storage_root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Storage]:
    """``(root_uri, storage)`` for an empty root on local disk or on S3, to run one contract twice."""
    if request.param == "local":
        root = str(tmp_path_factory.mktemp("storage") / "root")
        return root, open_storage(root)
    bucket: S3Bucket = request.getfixturevalue("s3_bucket")
    root = f"{bucket.uri}/root"
    return root, open_storage(root, bucket.options)


def _version_checked(update_table: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """moto's ``UpdateTable`` with AWS's optimistic check: a ``VersionId`` that is not the table's
    current version is refused with ``ConcurrentModificationException``."""
    from moto.core.exceptions import JsonRESTError

    lock = threading.Lock()

    def checked(self: Any) -> Any:
        with lock:
            version = self.parameters.get("VersionId")
            table = self.glue_backend.get_table(self.parameters["DatabaseName"], self.parameters["TableInput"]["Name"])
            if version is not None and table.as_dict()["VersionId"] != version:
                raise JsonRESTError("ConcurrentModificationException", f"table version {version} is not current")
            return update_table(self)

    return checked


@pytest.fixture(scope="module")
def glue_endpoint(s3_server: Any) -> Iterator[str]:
    """moto's server (Glue and S3 on one endpoint) with Glue's ``VersionId`` check."""
    from moto.glue.responses import GlueResponse

    patch = pytest.MonkeyPatch()
    patch.setattr(GlueResponse, "update_table", _version_checked(GlueResponse.update_table))
    yield s3_server.endpoint_url
    patch.undo()
