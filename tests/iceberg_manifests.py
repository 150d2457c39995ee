"""Iceberg manifest headers read back, for tests that check what a manifest file declares."""

from __future__ import annotations

from lakeops.iceberg.avro_schema import read_avro
from lakeops.iceberg.manifest import ManifestMetadata
from lakeops.storage import Storage


def read_manifest_metadata(storage: Storage, path: str) -> ManifestMetadata:
    """The key-value metadata of the manifest at ``path``: schema, partition spec, version, content."""
    what = f"manifest {path}"
    return ManifestMetadata.from_avro_metadata(read_avro(storage, path, what).metadata, what)
