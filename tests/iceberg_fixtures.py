"""Hand-written Iceberg metadata for unit tests that need a table but no data."""

from __future__ import annotations

from typing import Any

INT_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "x", "required": True, "type": "int"}],
}


def minimal_metadata(
    version: int = 2,
    *,
    location: str = "s3://b/wh/t",
    schema: dict[str, Any] | None = None,
    specs: list[dict[str, Any]] | None = None,
    properties: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The smallest valid metadata JSON of ``version``: one schema, no snapshots."""
    specs = specs or [{"spec-id": 0, "fields": []}]
    schema = schema or INT_SCHEMA
    return {
        "format-version": version,
        "table-uuid": "fb072c92-a02b-11e9-ae9c-1bb7bc9eca94",
        "location": location,
        "last-sequence-number": 0,
        "last-updated-ms": 1,
        "last-column-id": max(f["id"] for f in schema["fields"]),
        "schemas": [schema],
        "current-schema-id": schema.get("schema-id", 0),
        "partition-specs": specs,
        "default-spec-id": specs[0]["spec-id"],
        "last-partition-id": max([f["field-id"] for s in specs for f in s["fields"]], default=999),
        "properties": properties or {},
        "sort-orders": [{"order-id": 0, "fields": []}],
        "default-sort-order-id": 0,
    }
