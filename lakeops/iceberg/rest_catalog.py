"""An Iceberg table in a REST catalog (https://github.com/apache/iceberg/blob/main/open-api/rest-catalog-open-api.yaml):
the :class:`~lakeops.iceberg.catalog.Catalog` contract over the client in
:mod:`lakeops.iceberg.rest_client`.

The server, not lakeops, writes the new metadata file: :meth:`RestCatalog.swap` sends the difference
between the metadata the commit started from and the one lakeops built, as updates with requirements
(:mod:`lakeops.iceberg.rest_updates`), and returns the location the server names. A 409 is a
:class:`CommitConflict`, a 5xx or no answer :class:`CommitStateUnknown`; neither is the verdict, nor is
a 200: :mod:`lakeops.iceberg.commit` reads the table back (a gateway that re-sent a commit which had
landed answers 409; a server may name older metadata). The swap could still land while the table
read back meets the request's requirements (:meth:`RestCatalog.could_land`).

Every load lends the S3 keys the catalog vends with the table (:mod:`lakeops.iceberg.rest_credentials`)
to this process's S3 clients for the table's prefix, for the rest of the :mod:`lakeops.api` call
(:mod:`lakeops.storage.s3_leases`); keys that expire (``s3.session-token-expires-at-ms``, or the store
answers ``ExpiredToken``) are renewed by loading the table again, once per request. Spark executors
never see them.
"""

from __future__ import annotations

import functools
from typing import Any

from lakeops.errors import CommitStateUnknown
from lakeops.iceberg.catalog import TableIdentifier, numbered_metadata_location
from lakeops.iceberg.metadata import TableMetadata, parse_metadata
from lakeops.iceberg.rest_client import CatalogUnavailable, RestClient
from lakeops.iceberg.rest_credentials import vended_s3
from lakeops.iceberg.rest_updates import rest_change
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.s3_leases import VendedS3, lend
from lakeops.storage.uri import normalize

__all__ = ["RestCatalog"]


class RestCatalog:
    """One table of a REST catalog."""

    def __init__(
        self,
        client: RestClient,
        identifier: TableIdentifier,
        catalog_name: str = "default",
        *,
        storage_options: StorageOptions | None = None,
    ) -> None:
        self.client = client
        self.identifier = identifier
        self.storage_options = storage_options or StorageOptions()
        self.table = f"{catalog_name}.{identifier}"

    def current(self) -> str:
        return str(self._load()["metadata-location"])

    def _load(self) -> dict[str, Any]:
        """``LoadTableResult``, its vended S3 keys lent for the table's prefixes."""
        loaded = self.client.load_table(self.identifier)
        for prefix, credentials in vended_s3(self.table, loaded).items():
            lend(prefix, credentials, functools.partial(self._reload_credentials, prefix))
        return loaded

    def _reload_credentials(self, prefix: str) -> VendedS3 | None:
        """Fresh keys for ``prefix``: the table loaded again (a lease's refresh)."""
        return vended_s3(self.table, self.client.load_table(self.identifier)).get(prefix)

    def new_metadata_location(self, table_location: str, current: str) -> str:
        """Only a proposal: the server names the file it writes (:meth:`swap` returns it)."""
        return numbered_metadata_location(table_location, current)

    def swap(self, expected: str, new: str, payload: bytes) -> str:
        change = rest_change(self.table, self._read(expected), parse_metadata(payload, new))
        try:
            response = self.client.commit_table(self.identifier, change.requirements, change.updates)
        except CatalogUnavailable as exc:
            raise CommitStateUnknown(f"{self.table}: {exc}") from exc
        return str(response["metadata-location"])

    def could_land(
        self, expected: str, base: TableMetadata, new: TableMetadata, now_location: str, now: TableMetadata
    ) -> bool:
        """The commit's requirements (table UUID, the refs it relies on) still hold on ``now``."""
        return rest_change(self.table, base, new).applies_to(now)

    def _read(self, location: str) -> TableMetadata:
        path = normalize(location, literal=True)
        return parse_metadata(open_storage(path.rsplit("/", 1)[0], self.storage_options).read(path), location)
