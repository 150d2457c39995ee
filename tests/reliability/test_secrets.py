"""Credentials never leak (issue 10, "Secrets"; issue 19, secrets inside URIs: see the second half;
issue 34, every credential lakeops obtains masked by value: the last part).

Operations run against the moto S3 endpoint with sentinel values in ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY`` and ``AWS_SESSION_TOKEN`` (moto accepts any): ``lakeops`` commands with
``--json`` on a Delta table, an Iceberg table (an expiry that commits new metadata) and an Icechunk
repository, failing commands (a missing table, a corrupt ``_last_checkpoint``, a missing
bucket), and one Dagster materialization with the keys given to the storage resource through
``dagster.EnvVar``. Everything they produce is searched for the sentinels: stdout and stderr, log
records (INFO and above, what a deployment keeps; botocore's own DEBUG logging of request headers
is not lakeops output and is off unless a user turns it on), reports, exception messages with their
whole cause chain, Dagster's event log and metadata, and every object written under the table roots
and the catalog database. No Spark session starts: each operation here runs on the driver.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from icechunk_repos import build_history
from pyiceberg_tables import small_file_table
from reliability.hostile import EXAMPLES, FUZZ
from run_events import own_materializations
from sqlalchemy.engine import make_url

from lakeops.errors import InvalidArgument, LakeopsError
from lakeops.iceberg.sql_catalog import sql_engine
from lakeops.redaction import mask_data, mask_text
from lakeops.registry import parse_registry
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage import s3 as s3_module
from lakeops.storage.s3 import S3Keys, S3Storage, clear_client_cache
from orchestration.assets import operation_key
from orchestration.registry_definitions import build_definitions
from orchestration.resources import SparkResource, StorageResource
from spark_jobs.cli import main as lakeops
from spark_jobs.operations import run_operation
from spark_jobs.spark_settings import SparkSettings

SENTINELS = {
    "AWS_ACCESS_KEY_ID": "AKIASENTINELKEY4242",
    "AWS_SECRET_ACCESS_KEY": "sentinel-secret-7f3a9c1e-do-not-print",
    "AWS_SESSION_TOKEN": "sentinel-session-token-b6d2e8f0-do-not-print",
}


def _leaks(text: str) -> list[str]:
    return [name for name, value in SENTINELS.items() if value in text]


@pytest.fixture
def sentinel_env(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The sentinel credentials in the environment (fresh S3 clients pick them up); the endpoint URL."""
    for name, value in SENTINELS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint_url)
    clear_client_cache()
    yield str(s3_server.endpoint_url)
    clear_client_cache()


class Output:
    """Everything the run produced, to search for the sentinels at the end."""

    def __init__(self) -> None:
        self.texts: list[tuple[str, str]] = []

    def add(self, where: str, text: str) -> None:
        self.texts.append((where, text))

    def leaks(self) -> list[tuple[str, list[str]]]:
        return [(where, found) for where, text in self.texts if (found := _leaks(text))]


def _cli(output: Output, capsys: pytest.CaptureFixture[str], *argv: str) -> int:
    code = lakeops([*argv, "--json"])
    captured = capsys.readouterr()
    output.add(f"lakeops {' '.join(argv)}: stdout", captured.out)
    output.add(f"lakeops {' '.join(argv)}: stderr", captured.err)
    return code


def _failure(output: Output, name: str, table: str, options: dict[str, Any], storage: StorageOptions) -> None:
    """Run an operation that must fail; record its message, repr and whole cause chain."""
    with pytest.raises(LakeopsError) as caught:
        run_operation(name, table, options, storage_options=storage)
    error: BaseException | None = caught.value
    while error is not None:
        output.add(f"{name} {table}: {type(error).__name__}", f"{error}\n{error!r}\n{error.args!r}")
        error = error.__cause__ or error.__context__


def _objects(root: str, storage: StorageOptions) -> Iterator[tuple[str, bytes]]:
    store = open_storage(root, storage)
    for info in store.list(root):
        yield info.path, store.read(info.path)


def _delta_rs(endpoint: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}


def test_sentinel_credentials_appear_in_no_output_report_error_or_file(
    sentinel_env: str,
    s3_bucket: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    output = Output()
    options = StorageOptions(endpoint_url=sentinel_env)
    delta = f"{s3_bucket.uri}/events"
    for version in range(3):
        write_deltalake(delta, pa.table({"id": [version]}), mode="append", storage_options=_delta_rs(sentinel_env))
    iceberg = small_file_table(tmp_path, appends=3, rows=5, s3=(s3_bucket.uri, sentinel_env))
    icechunk = f"{s3_bucket.uri}/arrays"
    build_history(open_storage(icechunk, options), icechunk, commits=3)
    broken = f"{s3_bucket.uri}/broken"
    for version in range(2):
        write_deltalake(broken, pa.table({"id": [version]}), mode="append", storage_options=_delta_rs(sentinel_env))
    open_storage(broken, options).write(f"{broken}/_delta_log/_last_checkpoint", b'{"version": 1, "size": ')

    ok = [
        ("inspect", delta),
        ("expire", delta, "--older-than", "1s", "--force"),
        ("orphans", delta, "--dry-run"),
        ("inspect", icechunk),
        ("orphans", icechunk, "--dry-run"),
        ("inspect", iceberg.identifier, "--catalog-uri", iceberg.catalog_uri),
        ("expire", iceberg.identifier, "--retain-last", "1", "--older-than", "0d", "--force"),
    ]
    for argv in ok:
        extra = (
            ("--catalog-uri", iceberg.catalog_uri)
            if argv[1] == iceberg.identifier and "--catalog-uri" not in argv
            else ()
        )
        assert _cli(output, capsys, *argv, *extra) == 0, output.texts[-1]
    assert _cli(output, capsys, "inspect", f"{s3_bucket.uri}/missing") != 0
    assert _cli(output, capsys, "expire", broken, "--older-than", "1s", "--force") != 0
    _failure(output, "inspect", broken, {}, options)
    _failure(output, "inspect", f"s3://lakeops-no-such-bucket-{s3_bucket.name[-8:]}/t", {}, options)

    for record in caplog.records:
        output.add(f"log {record.name}", record.getMessage())
    output.add("S3Storage repr", repr(S3Storage(endpoint_url=sentinel_env)) + repr(options))
    for root in (delta, icechunk, broken, f"{s3_bucket.uri}/warehouse"):
        for path, data in _objects(root, options):
            output.add(path, data.decode("latin-1"))
    output.add("catalog database", (tmp_path / "catalog.db").read_bytes().decode("latin-1"))

    assert len(output.texts) > 30
    assert output.leaks() == []
    # The operations really ran with the sentinels: the shared client signs with them.
    credentials = S3Storage(endpoint_url=sentinel_env).client._request_signer._credentials.get_frozen_credentials()
    assert (credentials.access_key, credentials.secret_key, credentials.token) == tuple(SENTINELS.values())


def test_dagster_materialization_with_keys_from_env_vars_records_no_secret(
    sentinel_env: str, s3_bucket: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SENTINELS.items():
        monkeypatch.setenv(f"LAKEOPS_TEST_{name}", value)
    location = f"{s3_bucket.uri}/events"
    for version in range(3):
        write_deltalake(location, pa.table({"id": [version]}), mode="append", storage_options=_delta_rs(sentinel_env))
    registry = parse_registry(f"tables:\n  - name: events\n    location: {location}\n")
    storage = StorageResource(
        endpoint_url=sentinel_env,
        access_key_id=dg.EnvVar("LAKEOPS_TEST_AWS_ACCESS_KEY_ID"),
        secret_access_key=dg.EnvVar("LAKEOPS_TEST_AWS_SECRET_ACCESS_KEY"),
    )
    defs = build_definitions(registry)
    instance = dg.DagsterInstance.ephemeral()
    key = operation_key(registry.table("events"), "expiry")

    result = dg.materialize(
        list(defs.assets or []),
        selection=[key],
        resources={"spark": SparkResource(master="local[1]"), "storage": storage},
        instance=instance,
    )

    assert result.success
    (materialization,) = own_materializations(result, "events__expiry")
    assert materialization.metadata, "the expiry recorded no metadata"
    texts = [repr(event) for event in result.all_events]
    texts += [repr(record) for record in instance.get_records_for_run(result.run_id).records]
    texts.append(json.dumps(result.dagster_run.run_config, default=str))
    texts.append(repr(storage))
    assert [(i, found) for i, text in enumerate(texts) if (found := _leaks(text))] == []


# -- secrets inside URIs (issue 19) -----------------------------------------------------------------
#
# A catalog URI, an S3 endpoint, an audit location or a registry entry can carry a password or a
# signed query parameter. Generated secrets hold MARK, which occurs nowhere else: MARK anywhere in
# what a run prints or records is (part of) a secret. The oracle of each generator is the parser that
# consumes the URI (SQLAlchemy for catalogs, RFC 3986 as botocore reads endpoints), so a generated
# password is exactly what that parser would send.

MARK = "Zq7mark"

#: Password characters: every reserved character a parser reads as part of a password (plus "%").
_CATALOG_PASSWORD = "abcXYZ09/:?#%!$&'()*+,;=~-._"  # SQLAlchemy: anything but "@" (it must be %40)
_ENDPOINT_PASSWORD = "abcXYZ09:@%!$&'()*+,;=~-._"  # RFC 3986: the authority ends at "/", "?" or "#"
_QUERY_VALUE = "abcXYZ09/:?@%!$'()*+,;=~-._"
SECRET_PARAMETERS = [
    "password",
    "sslpassword",
    "X-Amz-Signature",
    "X-Amz-Credential",
    "X-Amz-Security-Token",
    "AWSAccessKeyId",
    "sig",
    "token",
    "secret_key",
    "access_key",
    "api_key",
    "client_secret",
    "credential",
]


@st.composite
def _secret(draw: st.DrawFn, alphabet: str) -> str:
    text = st.text(alphabet=alphabet, max_size=6)
    return draw(text) + MARK + draw(text)


@st.composite
def _secret_parameter(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(SECRET_PARAMETERS))
    name = "".join(
        c.upper() if up else c.lower()
        for c, up in zip(name, draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name))), strict=True)
    )
    return f"{name}={draw(_secret(_QUERY_VALUE))}"


@st.composite
def catalog_uris(draw: st.DrawFn, bases: Sequence[str]) -> str:
    """A SQLAlchemy URL built on one of ``bases`` (``{userinfo}`` marks where ``user:password@`` goes)
    with a secret password, a secret query parameter, or both."""
    base = draw(st.sampled_from(bases))
    shape = draw(st.sampled_from(["password", "query", "both"]))
    password = draw(_secret(_CATALOG_PASSWORD)) if shape != "query" and "{userinfo}" in base else None
    uri = base.format(userinfo=f"lakeops:{password}@" if password is not None else "")
    if shape != "password" or password is None:
        uri += ("&" if "?" in uri else "?") + draw(_secret_parameter())
    try:
        parsed = make_url(uri)
    except ValueError:  # a port SQLAlchemy cannot read: the URI is refused, quoting what was meant as a password
        return uri
    assume(password is None or parsed.password == unquote(password))
    assume(password is not None or any(MARK in str(v) for v in parsed.query.values()))
    return uri


@st.composite
def endpoint_urls(draw: st.DrawFn, host: str) -> str:
    """An endpoint URL of ``host`` with a secret in its user info or its query string."""
    if draw(st.booleans()):
        password = draw(_secret(_ENDPOINT_PASSWORD))
        url = f"http://key:{password}@{host}"
        assume(urlsplit(url).password == password)
        return url
    return f"http://{host}/?{draw(_secret_parameter())}"


def _no_mark(where: str, text: str) -> None:
    assert MARK not in text, f"a secret leaked into {where}:\n{text}"


@FUZZ
@given(
    uri=st.one_of(
        catalog_uris(
            ["postgresql+psycopg2://{userinfo}db.example:5432/catalog", "sqlite:////tmp/c.db", "mysql://{userinfo}h/db"]
        ),
        endpoint_urls("minio.example:9000"),
    ),
    before=st.sampled_from(["", "'", "(", "at ", "uri=", '"', "\n", "`"]),
    after=st.sampled_from(["", "'", ")", ": (OperationalError) refused", '"', ",", "\n", "`: x@y"]),
)
def test_every_generated_uri_secret_is_masked_in_text_and_records(uri: str, before: str, after: str) -> None:
    text = f"cannot read the catalog at {before}{uri}{after} (see the log)"
    masked = mask_text(text)
    _no_mark("mask_text", masked)
    assert "example" in masked or "/tmp/c.db" in masked or "h/db" in masked, masked  # the host still shows
    _no_mark("mask_data", json.dumps(mask_data({"catalog_uri": uri, "nested": [text]})))
    _no_mark("an error", repr(InvalidArgument(text)))


#: Catalog URIs that fail fast: refused connection, missing driver, bad SQLite URL, unknown dialect,
#: a database without the catalog's tables (SQLite creates the empty file).
FAILING_CATALOGS = [
    f"sqlite:///{tempfile.gettempdir()}/lakeops-secrets-no-catalog.db",
    "postgresql+psycopg2://{userinfo}127.0.0.1:1/catalog",
    "postgresql+pg8000://{userinfo}127.0.0.1:1/catalog",
    "mysql://{userinfo}127.0.0.1:1/catalog",
    "sqlite://{userinfo}/tmp/lakeops-catalog.db",
    "nosuchdialect://{userinfo}h/db",
]


@settings(FUZZ, max_examples=max(5, EXAMPLES // 10))
@given(uri=catalog_uris(FAILING_CATALOGS), command=st.sampled_from(["inspect", "compact", "expire", "orphans"]))
def test_failing_runs_with_a_secret_catalog_uri_print_and_record_no_secret(
    uri: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = lakeops([command, "ns.t", "--catalog-uri", uri, "--json"])
    captured = capsys.readouterr()
    assert code in (1, 2), captured
    _no_mark("stdout", captured.out)
    _no_mark("stderr", captured.err)
    assert captured.err.strip() and "Traceback" not in captured.err


@pytest.fixture
def unreachable_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fake credentials and one attempt per request: a refused connection fails at once."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setattr(s3_module, "MAX_ATTEMPTS", 1)
    clear_client_cache()
    yield
    clear_client_cache()


@settings(FUZZ, max_examples=max(5, EXAMPLES // 10))
@given(url=endpoint_urls("127.0.0.1:1"), via=st.sampled_from(["option", "AWS_ENDPOINT_URL", "registry"]))
def test_failing_runs_with_a_secret_endpoint_print_no_secret(
    url: str, via: str, unreachable_s3: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, extra, env = "s3://lakeops-bucket/t", [], {}
    if via == "option":
        extra = ["--endpoint-url", url]
    elif via == "AWS_ENDPOINT_URL":
        env = {"AWS_ENDPOINT_URL": url}
    else:  # a registry name whose catalog is fine but whose table files are behind the endpoint
        registry = tmp_path / "lakeops.yaml"
        registry.write_text(f"tables:\n  - name: t\n    location: {table}\n")
        table, extra, env = "t", ["--endpoint-url", url], {"LAKEOPS_REGISTRY": str(registry)}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        code = lakeops(["compact", table, *extra, "--json"])
    clear_client_cache()
    captured = capsys.readouterr()
    assert code in (1, 2), captured
    _no_mark("stdout", captured.out)
    _no_mark("stderr", captured.err)


def _all_text(root: Path) -> str:
    return "\n".join(p.read_bytes().decode("latin-1") for p in sorted(root.rglob("*")) if p.is_file())


@pytest.mark.parametrize(
    "parameter", ["password=pa/ss" + MARK, "X-Amz-Signature=" + MARK, "sig=a@" + MARK, "PassWord='" + MARK + "'"]
)
def test_successful_runs_with_a_secret_catalog_uri_print_and_record_no_secret(
    parameter: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """SQLite ignores query parameters it does not know (with a warning): the runs succeed, commit
    and write audit records, through the option and through a registry entry."""
    table = small_file_table(tmp_path, appends=3, rows=5)
    uri = f"{table.catalog_uri}?{parameter}"
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(
        f'tables:\n  - name: events\n    catalog: {{uri: "{uri}"}}\n    identifier: {table.identifier}\n'
    )
    monkeypatch.setenv("LAKEOPS_REGISTRY", str(registry))
    audit_location = tmp_path / "audit"
    monkeypatch.setenv("LAKEOPS_AUDIT_LOCATION", str(audit_location))
    runs = [
        ["inspect", table.identifier, "--catalog-uri", uri],
        ["expire", table.identifier, "--catalog-uri", uri, "--retain-last", "2", "--older-than", "0d", "--force"],
        ["orphans", "events", "--older-than", "0d", "--force"],
        ["orphans", table.identifier, "--catalog-uri", uri, "--dry-run"],
    ]
    for argv in runs:
        code = lakeops([*argv, "--json"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        _no_mark(f"lakeops {argv[0]}: stdout", captured.out)
        _no_mark(f"lakeops {argv[0]}: stderr", captured.err)
    assert len(list(audit_location.rglob("*.json"))) == 2
    _no_mark("the audit records", _all_text(audit_location))
    _no_mark("the table's files", _all_text(Path(table.location)))


def test_successful_runs_with_a_secret_endpoint_and_audit_location_print_and_record_no_secret(
    s3_bucket: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The moto server behind an endpoint URL with user info (botocore strips it), by option and by
    ``$AWS_ENDPOINT_URL``, and an audit location that cannot be written (a warning quoting it)."""
    endpoint = s3_bucket.options.endpoint_url.replace("http://", f"http://key:pa@ss{MARK}@")
    delta = f"{s3_bucket.uri}/events"
    for version in range(3):
        write_deltalake(
            delta, pa.table({"id": [version]}), mode="append", storage_options=_delta_rs(s3_bucket.options.endpoint_url)
        )
    runs = [
        ({}, ["expire", delta, "--older-than", "1s", "--force", "--endpoint-url", endpoint]),
        ({"AWS_ENDPOINT_URL": endpoint}, ["orphans", delta, "--older-than", "8d"]),
        (
            {"LAKEOPS_AUDIT_LOCATION": f"http://user:{MARK}@audit.example/records"},
            ["orphans", str(_local_delta(tmp_path))],
        ),
        (
            {"LAKEOPS_AUDIT_LOCATION": f"{s3_bucket.uri}/audit?X-Amz-Signature={MARK}"},
            ["orphans", delta, "--endpoint-url", endpoint],
        ),
    ]
    for env, argv in runs:
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            clear_client_cache()
            code = lakeops([*argv, "--json"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        _no_mark(f"lakeops {argv[0]}: stdout", captured.out)
        _no_mark(f"lakeops {argv[0]}: stderr", captured.err)
    clear_client_cache()
    for path, data in _objects(s3_bucket.uri, s3_bucket.options):
        _no_mark(path, data.decode("latin-1"))
    _no_mark("the local table", _all_text(tmp_path))


def _local_delta(tmp_path: Path) -> Path:
    location = tmp_path / "local"
    for version in range(2):
        write_deltalake(str(location), pa.table({"id": [version]}), mode="append")
    return location


def _dagster_texts(result: Any, instance: dg.DagsterInstance) -> list[str]:
    texts = [repr(event) for event in result.all_events]
    texts += [repr(record) for record in instance.get_records_for_run(result.run_id).records]
    return texts


@pytest.mark.parametrize("case", ["succeeds", "catalog unreachable", "driver missing", "endpoint unreachable"])
def test_dagster_runs_with_secret_uris_log_no_secret(
    case: str, unreachable_s3: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registry's catalog URI and storage endpoint with secrets: the materialization's events,
    metadata, run log and failure (with its whole cause chain) hold none."""
    monkeypatch.setenv("LAKEOPS_AUDIT_LOCATION", str(tmp_path / "audit"))
    table = small_file_table(tmp_path, appends=3, rows=5)
    uri = {
        "succeeds": f"{table.catalog_uri}?password={MARK}",
        "catalog unreachable": f"postgresql+psycopg2://lakeops:p/a{MARK}@127.0.0.1:1/catalog?sslpassword={MARK}",
        "driver missing": f"mysql://lakeops:{MARK}@127.0.0.1:1/catalog",
        "endpoint unreachable": table.catalog_uri,
    }[case]
    entry = f'  - name: events\n    catalog: {{uri: "{uri}"}}\n    identifier: {table.identifier}\n'
    storage = f'storage:\n  endpoint_url: "http://key:{MARK}@127.0.0.1:1"\n' if case == "endpoint unreachable" else ""
    if case == "endpoint unreachable":  # a Delta table on the unreachable store
        entry = "  - name: events\n    location: s3://lakeops-bucket/events\n"
    registry = parse_registry(f"tables:\n{entry}{storage}")
    defs = build_definitions(registry)
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(
        list(defs.assets or []),
        selection=[operation_key(registry.table("events"), "expiry")],
        resources={"spark": SparkResource(master="local[1]"), "storage": defs.resources["storage"]},
        instance=instance,
        raise_on_error=False,
    )
    assert result.success == (case == "succeeds")
    texts = _dagster_texts(result, instance)
    assert len(texts) > 5
    for i, text in enumerate(texts):
        _no_mark(f"Dagster event {i}", text)
    _no_mark("the audit records", _all_text(tmp_path / "audit") if (tmp_path / "audit").exists() else "")


# -- secrets masked by value (issue 34) -------------------------------------------------------------


def test_every_credential_lakeops_obtains_is_masked_by_value(s3_server: Any) -> None:
    """Each place a secret enters lakeops registers it: afterwards the value is masked in any text,
    however it got there (the REST client's token, credential and vended keys: ``tests/unit/iceberg``)."""
    secret = {name: f"{name}-{uuid.uuid4().hex}" for name in ("lent", "session", "endpoint", "sql", "conf", "connect")}
    S3Keys("lent-key-id", secret["lent"], secret["session"])  # as a REST catalog's vended keys are made
    open_storage("s3://lakeops-bucket/t", StorageOptions(endpoint_url=f"http://key:{secret['endpoint']}@127.0.0.1:1"))
    with contextlib.suppress(LakeopsError):  # the URI need not work: it is registered before it is tried
        sql_engine(f"postgresql+psycopg2://lakeops:{quote(secret['sql'], safe='')}@127.0.0.1:1/catalog")
    SparkSettings(
        master=f"sc://spark.example:15002/;user_id=lakeops;token={secret['connect']}",
        conf={"spark.hadoop.fs.s3a.secret.key": secret["conf"], "spark.hadoop.fs.s3a.access.key": "visible-key-id"},
    )
    dagster_secret = f"dagster-{uuid.uuid4().hex}"
    with StorageResource(
        endpoint_url=s3_server.endpoint_url, access_key_id="k", secret_access_key=dagster_secret
    ).credentials():
        pass

    echoed = mask_text(" ".join([*secret.values(), dagster_secret, "visible-key-id lent-key-id"]))
    assert echoed == " ".join(["***"] * (len(secret) + 1) + ["visible-key-id lent-key-id"])  # key ids are no secrets
