"""S3 clients of a test's own, built as lakeops builds its shared ones (:mod:`lakeops.storage.s3`)."""

from __future__ import annotations

from botocore.client import BaseClient

from lakeops.storage import s3


def make_client(
    *, endpoint_url: str | None = None, region: str | None = None, force_path_style: bool | None = None
) -> BaseClient:
    """A new, unshared S3 client (tests that hook client events want their own)."""
    return s3._build(s3._resolve(endpoint_url, region, force_path_style))
