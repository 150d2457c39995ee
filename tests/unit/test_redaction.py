"""Masking secrets in text and records (issue 19): every URL password shape and secret parameter."""

from __future__ import annotations

import pytest

from lakeops.errors import InvalidArgument, StorageError
from lakeops.redaction import is_secret_name, mask_data, mask_exception, mask_text


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
