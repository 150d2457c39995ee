"""Dagster on a table of an AWS Glue catalog (issue 25): the registry's catalog of type glue reaches the
operations the assets run (moto's Glue and S3 on 127.0.0.1, conftest.py's ``glue_endpoint``)."""

from __future__ import annotations

from typing import Any

import pytest
from glue_tables import glue_table
from pyiceberg_tables import PyIcebergTable

from lakeops.registry import parse_registry
from orchestration.maintenance import inspect
from orchestration.resources import StorageResource

pytestmark = pytest.mark.s3


@pytest.fixture
def table(glue_endpoint: str, s3_bucket: Any) -> PyIcebergTable:
    return glue_table(glue_endpoint, s3_bucket)


def test_dagster_inspects_a_glue_registry_table(table: PyIcebergTable) -> None:
    registry = parse_registry(
        f"tables:\n  - name: events\n    identifier: {table.identifier}\n"
        f"    catalog: {{type: glue, endpoint_url: '{table.catalog_uri}'}}\n"
    )
    report = inspect(registry.table("events"), StorageResource(endpoint_url=table.catalog_uri))

    assert report.model_dump()["rows"] == 40 and report.table == f"glue:{table.identifier}"
