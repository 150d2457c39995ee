"""The S3 credentials an Iceberg REST catalog vends with a table (``LoadTableResult``
``storage-credentials`` and ``config``,
https://github.com/apache/iceberg/blob/main/open-api/rest-catalog-open-api.yaml) sign every request
lakeops makes under the table's prefix, and no other.

Tables live on moto's S3. lakeops reaches it through a recording proxy of the same moto backend
(:class:`SigningRecorder`) that notes the access key id and session token of every request, so each
test can say which identity signed what; the REST server and PyIceberg's writes use the plain endpoint
or the vended keys. The process's own identity (the AWS chain) is ``lakeops-test`` (tests/conftest.py).
"""

from __future__ import annotations

import io
import logging
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from conftest import S3Bucket, S3Server
from pyiceberg.catalog.rest import RestCatalog as PyIcebergRestCatalog
from pyiceberg_tables import rows_of
from rest_catalog_server import RestCatalogServer, appended_table, serve
from werkzeug.serving import make_server

from lakeops import api, audit
from lakeops.errors import ProtocolError
from lakeops.iceberg.rest_credentials import vended_s3
from lakeops.ops.options import CompactionOptions, ExpiryOptions
from lakeops.ops.target import CatalogOptions
from lakeops.redaction import mask_text
from lakeops.storage import StorageOptions
from lakeops.storage.s3 import using_keys
from lakeops.storage.s3_leases import S3Keys, VendedS3, lease_for, lease_scope, lend

pytestmark = pytest.mark.s3

DEFAULT_KEY = "lakeops-test"  # the AWS chain's key id in the test session
SECRET = "sentinel-vended-secret-0c41"
SESSION_TOKEN = "sentinel-vended-session-token-93be"
CLIENT_SECRET = "sentinel-client-secret-b7e2"
_CREDENTIAL = re.compile(r"Credential=([^/]+)/")


@dataclass
class Signed:
    key_id: str | None
    session_token: str | None
    method: str
    path: str  # s3://bucket/key


@dataclass
class SigningRecorder:
    """moto's S3 (the session's backend) behind a WSGI middleware that records who signed each request,
    and answers ``403 ExpiredToken`` for the key ids in :attr:`expired`."""

    app: Callable[..., Any]
    requests: list[Signed] = field(default_factory=list)
    expired: set[str] = field(default_factory=set)
    url: str = ""

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        match = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
        key_id = match.group(1) if match else None
        token, method = environ.get("HTTP_X_AMZ_SECURITY_TOKEN"), environ["REQUEST_METHOD"]
        self.requests += [Signed(key_id, token, method, path) for path in _paths(environ)]
        if key_id in self.expired:
            body = b"<Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message></Error>"
            start_response("403 Forbidden", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
            return [body]
        return self.app(environ, start_response)

    def under(self, prefix: str) -> list[Signed]:
        return [r for r in self.requests if r.path == prefix or r.path.startswith(prefix + "/")]


def _paths(environ: dict[str, Any]) -> list[str]:
    """The objects a request names: its path's, a listing's prefix, or the keys a DeleteObjects deletes
    (its body is read and put back)."""
    bucket_or_object = "s3:/" + environ.get("PATH_INFO", "")
    query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    if "delete" in query:
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(body)
        return [f"{bucket_or_object}/{key}" for key in re.findall(r"<Key>([^<]*)</Key>", body.decode())]
    if "prefix" in query:
        return [f"{bucket_or_object}/{query['prefix'][0]}".rstrip("/")]
    return [bucket_or_object]


@pytest.fixture(scope="module")
def recorder_server(s3_server: S3Server) -> Iterator[SigningRecorder]:
    from moto.server import DomainDispatcherApplication, create_backend_app

    recorder = SigningRecorder(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, recorder, threaded=True)
    recorder.url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield recorder
    server.shutdown()
    thread.join()


@pytest.fixture
def recorder(recorder_server: SigningRecorder) -> SigningRecorder:
    recorder_server.requests.clear()
    recorder_server.expired.clear()
    return recorder_server


def vended(key_id: str, endpoint: str, **extra: str) -> dict[str, str]:
    return {
        "s3.access-key-id": key_id,
        "s3.secret-access-key": SECRET,
        "s3.session-token": SESSION_TOKEN,
        "s3.endpoint": endpoint,
        "s3.region": "us-east-1",
        **extra,
    }


@dataclass
class Lake:
    server: RestCatalogServer
    pyiceberg: PyIcebergRestCatalog
    recorder: SigningRecorder
    warehouse: str
    options: dict[str, Any]

    def location(self, identifier: str) -> str:
        return f"{self.warehouse}/{identifier.replace('.', '/')}"

    def rows(self, identifier: str) -> list[dict[str, Any]]:
        return rows_of(self.pyiceberg.load_table(identifier).scan().to_arrow())


@pytest.fixture
def lake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_server: S3Server, s3_bucket: S3Bucket, recorder: SigningRecorder
) -> Iterator[Lake]:
    """A REST catalog whose tables live in ``s3_bucket``; it vends each table a key id of its own
    (``vended-<table>``) on the recording endpoint, and writes its metadata files as ``catalog-server``."""
    monkeypatch.setenv("LAKEOPS_TEST_CREDENTIAL", f"lakeops:{CLIENT_SECRET}")
    server_io = {
        "s3.endpoint": s3_server.endpoint_url,
        "s3.access-key-id": "catalog-server",
        "s3.secret-access-key": "catalog-server-secret",
        "s3.region": "us-east-1",
    }
    for server in serve(
        tmp_path, client_id="lakeops", client_secret=CLIENT_SECRET, token="sentinel-bearer", properties=server_io
    ):
        server.vend = lambda name: vended(f"vended-{name.split('.')[-1]}", recorder.url)
        options = {
            "catalog_type": "rest",
            "catalog_uri": server.url,
            "catalog_credential_env": "LAKEOPS_TEST_CREDENTIAL",
        }
        lake = Lake(server, None, recorder, f"{s3_bucket.uri}/warehouse", options)  # type: ignore[arg-type]
        for name in ("events", "events-archive"):
            lake.pyiceberg, _ = appended_table(server, f"db.{name}", 4, lake.location(f"db.{name}"))
        recorder.requests.clear()  # PyIceberg's appends
        yield lake


def on(recorder: SigningRecorder) -> StorageOptions:
    """lakeops' storage settings: the recording endpoint, the AWS chain's identity."""
    return StorageOptions(endpoint_url=recorder.url)


def test_a_rest_table_is_compacted_and_expired_with_the_vended_keys_only(
    lake: Lake, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    rows = lake.rows("db.events")
    lake.recorder.requests.clear()  # PyIceberg's reads
    # Through lakeops.api, whose units always run in this process: the CLI would hand them to a Spark
    # session an earlier test left running, whose workers sign with their own identity (as documented).
    compacted = api.compact(
        "db.events", CompactionOptions(**lake.options, min_input_files=2), storage_options=on(lake.recorder)
    )
    assert compacted.files_removed >= 2, compacted
    print(compacted.model_dump_json())
    expired = api.expire(
        "db.events",
        ExpiryOptions(**lake.options, older_than="0d", retain_last=1, force=True),
        storage_options=on(lake.recorder),
    )

    assert expired.snapshots_expired >= 1, expired
    assert expired.deleted_data_files == 4 and expired.files_outside_location == 0, expired
    assert lake.server.delegations and set(lake.server.delegations) == {"vended-credentials"}
    table = lake.location("db.events")
    signed = lake.recorder.under(table)
    assert {"GET", "PUT", "POST"} <= {r.method for r in signed}  # reads, writes, DeleteObjects
    assert {(r.key_id, r.session_token) for r in signed} == {("vended-events", SESSION_TOKEN)}
    assert all(r.key_id != DEFAULT_KEY for r in lake.recorder.requests)
    records = audit.read_records(table, StorageOptions(endpoint_url=lake.recorder.url))
    assert [r.command for r in records] == ["compact", "expire"]
    assert lake.rows("db.events") == rows
    assert len(lake.pyiceberg.load_table("db.events").snapshots()) == 1

    output = capsys.readouterr()
    audit_text = "".join(r.model_dump_json() for r in records)
    for text in (output.out, output.err, caplog.text, audit_text, repr(expired), expired.to_json()):
        assert SECRET not in text and SESSION_TOKEN not in text
    assert mask_text(f"{SECRET} {SESSION_TOKEN}") == "*** ***"  # registered: masked whoever echoes them
    assert lease_for(table) is None  # the keys served the calls only


def test_tables_with_other_keys_on_one_endpoint_run_at_once(lake: Lake) -> None:
    """Two REST tables with keys of their own and a third whose catalog vends none, in one process
    at the same time, under keys lent for the whole endpoint as the Dagster storage resource lends them
    (:func:`using_keys`): each table's requests are signed by its own identity."""
    lake.pyiceberg, _ = appended_table(lake.server, "db.orders", 4, lake.location("db.orders"))
    signers = {"events": "vended-events", "events-archive": "vended-events-archive", "orders": "dagster-resource"}
    expected = {name: lake.rows(f"db.{name}") for name in signers}
    lake.recorder.requests.clear()  # PyIceberg's reads
    all_writing = threading.Barrier(len(signers), timeout=60)
    writers: set[str] = set()
    original = lake.recorder.app

    def rendezvous(environ: dict[str, Any], start_response: Any) -> Any:
        """Each table's first write waits for the others': every table's keys are in use at once."""
        match = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
        key_id = match.group(1) if match else None
        if environ["REQUEST_METHOD"] == "PUT" and key_id not in writers:
            writers.add(str(key_id))
            all_writing.wait()
        return original(environ, start_response)

    def compact(name: str) -> Any:
        delegation = False if name == "orders" else None  # None: ask for vended keys (the default)
        options = CompactionOptions(**lake.options, min_input_files=2, catalog_vended_credentials=delegation)
        return api.compact(f"db.{name}", options, storage_options=on(lake.recorder))

    lake.recorder.app = rendezvous
    try:
        resource_keys = S3Keys("dagster-resource", "resource-secret")
        with using_keys(resource_keys, endpoint_url=lake.recorder.url), ThreadPoolExecutor(len(signers)) as pool:
            reports = list(pool.map(compact, signers))
    finally:
        lake.recorder.app = original

    assert [r.files_added for r in reports] == [1, 1, 1] and writers == set(signers.values())
    for name, signer in signers.items():
        signed = lake.recorder.under(lake.location(f"db.{name}"))
        assert signed and {r.key_id for r in signed} == {signer}, name
        assert lake.rows(f"db.{name}") == expected[name]


def test_without_delegation_no_header_is_sent_and_the_process_identity_signs(lake: Lake) -> None:
    options = CatalogOptions(**lake.options, catalog_vended_credentials=False)

    report = api.inspect("db.events", options, storage_options=on(lake.recorder))

    assert report.format == "iceberg" and lake.server.delegations == [None]
    signed = lake.recorder.under(lake.location("db.events"))
    assert signed and {r.key_id for r in signed} == {DEFAULT_KEY}


def test_keys_vended_in_config_serve_when_no_storage_credential_does(lake: Lake) -> None:
    lake.server.vend_in_config = True

    api.inspect("db.events", CatalogOptions(**lake.options), storage_options=on(lake.recorder))

    signed = lake.recorder.under(lake.location("db.events"))
    assert signed and {r.key_id for r in signed} == {"vended-events"}


@pytest.mark.parametrize("expiry", ["by the clock", "by the store"])
def test_expired_keys_are_renewed_by_reloading_the_table_once(lake: Lake, expiry: str) -> None:
    rows = lake.rows("db.events")
    lake.recorder.requests.clear()  # PyIceberg's reads
    # The first load vends keys past their expiry time, or keys the store refuses as expired (403
    # ExpiredToken); every later load vends good keys.
    if expiry == "by the clock":
        first = vended("vended-stale", lake.recorder.url, **{"s3.session-token-expires-at-ms": "1000"})
    else:
        first = vended("vended-stale", lake.recorder.url)
        lake.recorder.expired.add("vended-stale")
    issued = iter([first])
    lake.server.vend = lambda name: next(issued, vended("vended-fresh", lake.recorder.url))

    report = api.compact(
        "db.events", CompactionOptions(**lake.options, min_input_files=2), storage_options=on(lake.recorder)
    )

    assert report.files_added == 1 and lake.rows("db.events") == rows
    key_ids = [r.key_id for r in lake.recorder.under(lake.location("db.events"))]
    refused = 1 if expiry == "by the store" else 0  # the clock: renewed before sending anything
    assert key_ids[:refused] == ["vended-stale"] * refused and set(key_ids[refused:]) == {"vended-fresh"}
    assert lake.server.delegations.count("vended-credentials") >= 2  # the renewal reloaded the table


def test_the_longest_prefix_serves_and_a_wider_one_is_scoped_to_the_table() -> None:
    keys = {"s3.access-key-id": "wide", "s3.secret-access-key": "s"}
    result = {
        "metadata": {"location": "s3://lake/wh/db/t"},
        "config": {"s3.endpoint": "http://store:9000", "client.region": "eu-west-1"},
        "storage-credentials": [
            {"prefix": "s3://lake", "config": keys},
            {"prefix": "s3a://lake/wh/db/t/", "config": {**keys, "s3.access-key-id": "table"}},
            {"prefix": "s3://lake/wh/db/t/data/x", "config": {**keys, "s3.access-key-id": "inner"}},
            {"prefix": "s3://lake/wh/db/other", "config": {**keys, "s3.access-key-id": "other"}},
            {"prefix": "gs://lake/wh/db/t", "config": {"gcs.oauth2.token": "t"}},
        ],
    }

    lent = vended_s3("db.t", result)

    assert {prefix: c.keys.access_key_id for prefix, c in lent.items()} == {
        "s3://lake/wh/db/t": "table",
        "s3://lake/wh/db/t/data/x": "inner",
    }
    assert (lent["s3://lake/wh/db/t"].endpoint_url, lent["s3://lake/wh/db/t"].region) == (
        "http://store:9000",
        "eu-west-1",
    )
    assert vended_s3("db.t", {**result, "metadata": {"location": "/local/t"}}) == {}
    malformed = {**result, "config": {"s3.secret-access-key": SECRET, "s3.session-token-expires-at-ms": 5}}
    with pytest.raises(
        ProtocolError, match=r"db\.t: .* has malformed config\.s3\.session-token-expires-at-ms"
    ) as error:
        vended_s3("db.t", malformed)
    assert SECRET not in str(error.value)


def test_a_lease_serves_whole_segments_under_its_prefix_until_its_scope_ends() -> None:
    outer = VendedS3(S3Keys("outer", SECRET))
    inner = VendedS3(S3Keys("inner", SECRET, SESSION_TOKEN))
    with lease_scope():
        lend("s3://lease-test/t", outer)
        lend("s3a://lease-test/t/data/", inner)
        found = {
            path: lease_for(path)
            for path in ("s3://lease-test/t/m.json", "s3://lease-test/t/data/f", "s3://lease-test/t2/f")
        }
        assert {p: (held.credentials.keys.access_key_id if held else None) for p, held in found.items()} == {
            "s3://lease-test/t/m.json": "outer",
            "s3://lease-test/t/data/f": "inner",
            "s3://lease-test/t2/f": None,
        }
        assert SECRET not in repr(found) and SESSION_TOKEN not in repr(inner)
    assert lease_for("s3://lease-test/t/m.json") is None
