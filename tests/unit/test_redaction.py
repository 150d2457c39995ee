"""Masking secrets in text and records: every URL password shape and secret parameter (issue 19), and
every secret registered by value, in its spellings, from any thread, in any log record (issue 34)."""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote, quote_plus

import pytest

from lakeops.errors import InvalidArgument, StorageError
from lakeops.redaction import (
    MIN_SECRET_LENGTH,
    is_secret_name,
    mask_data,
    mask_exception,
    mask_text,
    register_secret_settings,
    register_secrets,
)


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("postgresql+psycopg2://u:SECRET@host/db", "postgresql+psycopg2://u:***@host/db"),
        ("postgresql://u:pa/ss@host:5432/db", "postgresql://u:***@host:5432/db"),  # SQLAlchemy's password: "pa/ss"
        ("mysql://u:p:a?s#s@host/db", "mysql://u:***@host/db"),
        ("http://key:p@ss@minio:9000/bucket", "http://key:***@minio:9000/bucket"),  # RFC 3986: the last "@"
        ("redis://:SECRET@host:6379/0", "redis://:***@host:6379/0"),
        ("sqlite://u:SECRET@/tmp/c.db", "sqlite://u:***@/tmp/c.db"),
        ("postgresql://u:pw@h/db?email=a@b.c", "postgresql://u:***@h/db?email=a@b.c"),
        ("sqlite:////tmp/c.db?password=SECRET", "sqlite:////tmp/c.db?password=***"),
        ("sqlite:////tmp/c.db?mode=ro&PassWord=SECRET&uri=true", "sqlite:////tmp/c.db?mode=ro&PassWord=***&uri=true"),
        (
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2F2024&X-Amz-Signature=abc&X-Amz-Security-Token=t",
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Security-Token=***",
        ),
        (
            "https://acct.blob.core.windows.net/c?sv=2020&sig=SECRET",
            "https://acct.blob.core.windows.net/c?sv=2020&sig=***",
        ),
        ("host=db user=u password=SECRET dbname=x", "host=db user=u password=*** dbname=x"),
        ("--conf spark.hadoop.fs.s3a.secret.key=SECRET", "--conf spark.hadoop.fs.s3a.secret.key=***"),
        (
            "cannot read the catalog at 'postgresql://u:SECRET@h/db': (OperationalError) refused",
            "cannot read the catalog at 'postgresql://u:***@h/db': (OperationalError) refused",
        ),
    ],
)
def test_masks_every_shape(text: str, masked: str) -> None:
    assert mask_text(text) == masked
    assert mask_text(masked) == masked  # idempotent: masking twice changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "sqlite:////tmp/catalog.db",
        "s3://bucket/path/with@sign/part-0.parquet",
        "file:///data/t/s=a%20b/x=1/part-0.parquet",
        "--older-than 7d --target-file-size=128MB",
        "http://minio:9000",
        "where id=3 and design=new",
    ],
)
def test_leaves_text_without_secrets_alone(text: str) -> None:
    assert mask_text(text) == text


def test_secret_names() -> None:
    secret = [
        "password",
        "PGPASSWORD",
        "X-Amz-Signature",
        "x-amz-credential",
        "aws_secret_access_key",
        "sig",
        "api_key",
        "AccessKey",
        "sslpassword",
        "client_secret",
        "X-Amz-Security-Token",
        "pwd",
    ]
    plain = ["older_than", "catalog_uri", "endpoint_url", "signal", "design", "user", "host", "key"]
    assert [n for n in secret if not is_secret_name(n)] == []
    assert [n for n in plain if is_secret_name(n)] == []


def test_mask_data_walks_mappings_and_lists() -> None:
    data = {"catalog_uri": "postgresql://u:pw@h/db", "nested": [{"api_token": "t", "x": "a?sig=s"}], "n": 3}
    assert mask_data(data) == {
        "catalog_uri": "postgresql://u:***@h/db",
        "nested": [{"api_token": "***", "x": "a?sig=***"}],
        "n": 3,
    }


def test_lakeops_errors_mask_their_message() -> None:
    error = InvalidArgument("--catalog-uri 'mysql://u:SECRET@h/db': no driver")
    assert "SECRET" not in str(error) and "SECRET" not in repr(error)


def test_mask_exception_masks_the_whole_chain() -> None:
    try:
        try:
            raise ConnectionError("Could not connect to the endpoint URL: http://key:SECRET@h:1/b")
        except ConnectionError as exc:
            raise StorageError("cannot list s3://b/t") from exc
    except StorageError as exc:
        error = mask_exception(exc)
    assert error.__cause__ is not None and "SECRET" not in str(error.__cause__)


# -- secrets by value (issue 34) ---------------------------------------------------------------------


def _fresh(tag: str) -> str:
    """A value no other test registers: the registry is the process's."""
    return f"{tag}-{uuid.uuid4().hex}"


def test_a_registered_secret_is_masked_in_every_spelling() -> None:
    secret = _fresh("pa/ss+w=rd é\"'\\")
    register_secrets(secret)
    spellings = {
        "as is": secret,
        "a path segment": quote(secret, safe=""),
        "a path": quote(secret),
        "a form field": quote_plus(secret),
        "lower-case hex": re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), quote(secret, safe="")),
        "JSON": json.dumps(secret)[1:-1],
        "JSON, not ASCII": json.dumps(secret, ensure_ascii=False)[1:-1],
        "JSON, slashes escaped": json.dumps(secret)[1:-1].replace("/", "\\/"),
        "a Python repr": repr(secret)[1:-1],
    }
    for how, spelling in spellings.items():
        assert mask_text(f"the catalog said: {spelling}!") == "the catalog said: ***!", how
    documents = [
        json.dumps({"error": {"message": f"Authorization: Bearer {secret}"}}),
        repr({"Authorization": f"Bearer {secret}"}),
        f"http://h/v1/oauth/tokens?client_secret={quote_plus(secret)}&scope=catalog",
    ]
    for document in documents:
        assert secret.split("-")[-1] not in mask_text(document), document
    assert mask_data({"message": [f"echoed {secret}"]}) == {"message": ["echoed ***"]}
    assert str(InvalidArgument(f"refused {secret}")) == "refused ***"


def test_values_shorter_than_the_minimum_are_not_registered_but_bearer_tokens_are_masked() -> None:
    short, shortest_masked = "k7#Qz1!", "k7#Qz1!x"
    assert len(short) == MIN_SECRET_LENGTH - 1 == len(shortest_masked) - 1
    register_secrets(short, shortest_masked, None, "")
    assert mask_text(f"{short} and {short}x") == f"{short} and ***"  # "k7#Qz1!" alone would mangle all output
    assert mask_text(f"'Authorization': 'Bearer {short}' refused") == "'Authorization': 'Bearer ***' refused"
    assert mask_text("a valid bearer token is required") == "a valid bearer token is required"


def test_overlapping_and_repeated_secrets_are_all_masked() -> None:
    core = uuid.uuid4().hex
    left, right = f"left-{core[:20]}", f"{core[8:]}-right"  # the text holds both, overlapping
    register_secrets(left, right)
    assert mask_text(f"<left-{core}-right> <{right}> <{left}>") == "<***> <***> <***>"


def test_settings_whose_names_say_secret_are_registered_but_key_ids() -> None:
    values = {name: _fresh(name) for name in ("s3.secret-access-key", "token", "s3.access-key-id", "s3.region")}
    register_secret_settings({**values, "s3.session-token-expires-at-ms": 5})
    masked = {name: mask_text(value) for name, value in values.items()}
    assert masked == {**values, "s3.secret-access-key": "***", "token": "***"}


def test_registering_and_masking_from_many_threads_at_once() -> None:
    barrier = threading.Barrier(8)

    def run(worker: int) -> list[str]:
        barrier.wait()
        leaks = []
        for round_ in range(40):
            secret = _fresh(f"thread-{worker}-{round_}")
            register_secrets(secret)
            if mask_text(f"[{secret}]") != "[***]":
                leaks.append(secret)
        return leaks

    with ThreadPoolExecutor(8) as pool:
        assert [leak for leaks in pool.map(run, range(8)) for leak in leaks] == []


#: Run in a child process: a thousand long secrets would slow every later test of this process.
_MANY_SECRETS = """
import base64, os, time
from lakeops import redaction
tokens = [base64.b64encode(os.urandom(700)).decode() for _ in range(1000)]  # as long as STS session tokens
line = "compacted s3://bucket/t/data/part-00001.parquet: 12 files, 1234 rows" * 3
started = time.perf_counter()
redaction.register_secrets(*tokens)
assert all(redaction.mask_text(line) is line for _ in range(1000))  # the common path copies nothing
assert redaction.mask_text(f"x {tokens[500]} y") == "x *** y"
print(time.perf_counter() - started)
redaction.register_secrets(tokens[1])  # in use again: kept when newer secrets push old ones out
redaction.register_secrets(*(f"newer-{i:08d}" for i in range(redaction.MAX_SECRETS - 1)))
assert redaction.mask_text(tokens[0]) == tokens[0] and redaction.mask_text(tokens[1]) == "***"
"""


def test_a_thousand_long_secrets_register_and_mask_in_seconds() -> None:
    """One search pattern built at the next masking after a burst of registrations, from the secrets'
    first characters only: rebuilding an alternation of whole spellings per registration would compile
    megabytes of pattern a thousand times."""
    done = subprocess.run([sys.executable, "-c", _MANY_SECRETS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 10


def test_every_log_record_is_masked_whatever_its_logger(caplog: pytest.LogCaptureFixture) -> None:
    secret = _fresh("logged")
    register_secrets(secret)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    library = logging.getLogger("lakeops_tests.some.library")  # a child: its parent's filters never see it
    library.addHandler(handler)
    caplog.set_level(logging.DEBUG)
    try:
        logging.getLogger("botocore.endpoint").debug("Sending http request: %r", {"X-Amz-Security-Token": secret})
        library.info("headers %s", {"Authorization": f"Bearer {secret}"})
        try:
            raise ConnectionError(f"refused {secret}")
        except ConnectionError:
            library.exception("the store said no")
    finally:
        library.removeHandler(handler)
    assert secret not in stream.getvalue() and "refused ***" in stream.getvalue()
    assert secret not in caplog.text and caplog.text.count("***") >= 3
