"""PyIceberg tables in an AWS Glue catalog on moto (Glue and S3 on one endpoint, 127.0.0.1), for the
Glue catalog's tests; the endpoint is conftest.py's ``glue_endpoint``."""

from __future__ import annotations

import uuid
from typing import Any

from pyiceberg.catalog.glue import GlueCatalog as PyIcebergGlueCatalog
from pyiceberg_tables import SCHEMA, SPECS, PyIcebergTable, batch

REGION = "us-east-1"
#: moto's dummy keys, given to PyIceberg explicitly (lakeops reads the test session's AWS environment).
KEYS = {"access-key-id": "lakeops-test", "secret-access-key": "lakeops-test-secret", "region": REGION}


def glue_table(endpoint: str, bucket: Any, *, appends: int = 4, rows: int = 10) -> PyIcebergTable:
    """A PyIceberg Glue table, identity-partitioned by category, grown by ``appends`` small appends."""
    properties = {
        "warehouse": f"{bucket.uri}/warehouse",
        "glue.endpoint": endpoint,
        "s3.endpoint": endpoint,
        **{f"glue.{key}": value for key, value in KEYS.items()},
        **{f"s3.{key}": value for key, value in KEYS.items()},
    }
    catalog = PyIcebergGlueCatalog("glue", **properties)
    database = f"db_{uuid.uuid4().hex[:12]}"
    catalog.create_namespace(database)
    identifier = f"{database}.events"
    table = PyIcebergTable(
        catalog, endpoint, identifier, catalog.create_table(identifier, SCHEMA, partition_spec=SPECS["identity"])
    )
    for i in range(appends):
        table.table.append(batch(i * rows, rows))
        table.reload()
    return table
