"""Clustered tables (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#clustered-table, "Writer
Requirements for Clustered Table").

The clustering columns live in the ``delta.clustering`` domain (physical names under column mapping).
lakeops clusters along the Hilbert curve of :mod:`lakeops.ordering`, the curve Delta's own liquid
clustering uses; either way only the row order changes, and the files are ordinary data files. Files
are marked with ``clusteringProvider`` = :data:`PROVIDER`, and lakeops reclusters only files whose
provider is unset, its own, or one it supersedes (:data:`SUPERSEDED`), as the spec requires by default.
"""

from __future__ import annotations

import json

from lakeops.delta.actions import DomainMetadata
from lakeops.delta.schema import ColumnMappingMode, StructType, physical_name
from lakeops.errors import CorruptFile, UnsupportedFeature

DOMAIN = "delta.clustering"
#: The ``clusteringProvider`` lakeops's clustered files carry.
PROVIDER = "lakeops-hilbert"
#: Providers of lakeops's earlier clustering implementations, whose files it reclusters: a Z-order
#: (lakeops 0.x clustered along that curve before the Hilbert curve).
SUPERSEDED = frozenset({"lakeops-zorder"})
#: Files lakeops may recluster: unclustered (no provider), clustered by lakeops now or before.
RECLUSTERED = frozenset({None, PROVIDER, *SUPERSEDED})


def clustering_columns(
    domains: dict[str, DomainMetadata], schema: StructType, mode: ColumnMappingMode, table: str
) -> list[str]:
    """The clustering columns by logical name, in clustering order (empty: the table clusters by none).

    The spec's example lists names; Delta writes each as a path (``[["department"]]``): both are read.
    A nested column is refused (lakeops orders by top-level columns only).
    """
    domain = domains.get(DOMAIN)
    if domain is None:
        return []
    try:
        listed = json.loads(domain.configuration)["clusteringColumns"]
        paths = [[entry] if isinstance(entry, str) else list(entry) for entry in listed]
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptFile(
            f"{table}: domain {DOMAIN} has no readable clusteringColumns ({domain.configuration[:80]!r})"
        ) from exc
    by_physical = {physical_name(f, mode): f.name for f in schema.fields}
    columns = []
    for path in paths:
        if len(path) != 1 or not isinstance(path[0], str):
            raise UnsupportedFeature(
                f"{table}: table feature clustering on nested column {'.'.join(map(str, path))} is not supported "
                "by lakeops compact yet (it orders by top-level columns)"
            )
        if path[0] not in by_physical:
            raise CorruptFile(f"{table}: domain {DOMAIN} names clustering column {path[0]!r}, not in the schema")
        columns.append(by_physical[path[0]])
    return columns
