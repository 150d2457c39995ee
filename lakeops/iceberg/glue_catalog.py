"""AWS Glue Data Catalog as an Iceberg catalog ("Metastore Tables",
https://iceberg.apache.org/spec/#metastore-tables): a Glue table whose parameters say
``table_type=ICEBERG`` points at its current metadata file with ``metadata_location`` (and the one
before with ``previous_metadata_location``), the parameters PyIceberg's and Java's Glue catalogs use.

The swap is Glue's ``UpdateTable`` with the ``VersionId`` read by ``GetTable``
(https://docs.aws.amazon.com/glue/latest/webapi/API_UpdateTable.html): Glue refuses the update with
``ConcurrentModificationException`` when another writer updated the table since, the lost compare-and-
swap every catalog reports as :class:`~lakeops.errors.CommitConflict`. ``SkipArchive`` is set, as
PyIceberg does by default: Glue keeps a bounded number of archived versions, and maintenance commits
often. boto3 is imported with this module, which only a command on a Glue table imports; credentials
come from the standard AWS chain of the process.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import boto3
from botocore.client import BaseClient
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from lakeops.errors import CommitConflict, CommitStateUnknown, InvalidArgument, NotATable, StorageError
from lakeops.iceberg.catalog import TableIdentifier, numbered_metadata_location, pointer_unmoved
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import endpoint_problem

__all__ = ["GlueCatalog", "glue_client"]

TABLE_TYPE = "table_type"
ICEBERG = "ICEBERG"
METADATA_LOCATION = "metadata_location"
PREVIOUS_METADATA_LOCATION = "previous_metadata_location"
_CONFLICT = "ConcurrentModificationException"
_NOT_FOUND = "EntityNotFoundException"
_MAX_ATTEMPTS = 5  # botocore's standard retries (throttling, 5xx, dropped connections) per request
#: The fields of a ``GetTable`` answer that ``UpdateTable``'s ``TableInput`` takes back unchanged.
_TABLE_INPUT_FIELDS = (
    "Name",
    "Description",
    "Owner",
    "LastAccessTime",
    "LastAnalyzedTime",
    "Retention",
    "StorageDescriptor",
    "PartitionKeys",
    "ViewOriginalText",
    "ViewExpandedText",
    "TableType",
    "Parameters",
    "TargetTable",
)

_clients: dict[tuple[str | None, str | None], BaseClient] = {}
_clients_lock = threading.Lock()


def _reset_after_fork() -> None:
    """A forked child must not share its parent's sockets (or a lock held at fork time)."""
    global _clients_lock
    _clients.clear()
    _clients_lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def glue_client(region: str | None, endpoint_url: str | None) -> BaseClient:
    """The process's Glue client for ``region`` (None: the AWS chain's) and ``endpoint_url`` (None: AWS),
    built once: clients are thread-safe and slow to build."""
    key = (region, endpoint_url)
    with _clients_lock:
        if key not in _clients:
            try:
                _clients[key] = boto3.session.Session().client(
                    "glue",
                    region_name=region,
                    endpoint_url=endpoint_url,
                    config=Config(
                        retries={"mode": "standard", "max_attempts": _MAX_ATTEMPTS}, user_agent_appid="lakeops"
                    ),
                )
            except (BotoCoreError, ValueError) as exc:  # NoRegionError among them
                raise InvalidArgument(
                    f"cannot create an AWS Glue client (region {region!r}, endpoint {endpoint_url!r}): {exc}; "
                    "give the catalog's region (registry catalog.region, --catalog-region) or set AWS_REGION"
                ) from exc
        return _clients[key]


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _retried(exc: ClientError) -> bool:
    """Whether botocore re-sent the request before this answer: an earlier attempt may have landed."""
    return int(exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0)) > 0


class GlueCatalog:
    """One Iceberg table of a Glue Data Catalog (``database.table``), shared with PyIceberg's and
    Java's Glue catalogs (same parameters, same ``VersionId`` check)."""

    def __init__(
        self,
        identifier: TableIdentifier,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        catalog_id: str | None = None,
        storage_options: StorageOptions | None = None,
    ) -> None:
        if "." in identifier.namespace:
            raise InvalidArgument(f"{identifier}: a Glue database is one level; expected database.table")
        if endpoint_url is not None and (problem := endpoint_problem(endpoint_url)):
            raise InvalidArgument(f"{identifier}: Glue endpoint {endpoint_url!r} {problem}")
        self.identifier = identifier
        self.storage_options = storage_options or StorageOptions()
        self.client = glue_client(region or self.storage_options.region, endpoint_url)
        self.catalog_id = catalog_id
        where = f"Glue catalog {catalog_id}" if catalog_id else "the account's Glue catalog"
        self.table = f"{identifier} in {where}"

    def _catalog(self) -> dict[str, str]:
        return {"CatalogId": self.catalog_id} if self.catalog_id else {}

    def _get_table(self) -> dict[str, Any]:
        """The Glue table (its ``VersionId`` included); :class:`NotATable` unless it is an Iceberg table."""
        try:
            answer = self.client.get_table(
                DatabaseName=self.identifier.namespace, Name=self.identifier.name, **self._catalog()
            )
        except ClientError as exc:
            if _code(exc) == _NOT_FOUND:
                raise NotATable(f"{self.table}: no such table or database") from exc
            raise StorageError(f"{self.table}: cannot read the Glue table: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"{self.table}: cannot read the Glue table: {exc}") from exc
        table: dict[str, Any] = answer["Table"]
        parameters = table.get("Parameters") or {}
        if str(parameters.get(TABLE_TYPE, "")).upper() != ICEBERG or not parameters.get(METADATA_LOCATION):
            raise NotATable(
                f"{self.table}: not an Iceberg table (its Glue parameters lack table_type=ICEBERG or metadata_location)"
            )
        return table

    def current(self) -> str:
        return str(self._get_table()["Parameters"][METADATA_LOCATION])

    def new_metadata_location(self, table_location: str, current: str) -> str:
        return numbered_metadata_location(table_location, current)

    def swap(self, expected: str, new: str, payload: bytes) -> str:
        table = self._get_table()
        if table["Parameters"][METADATA_LOCATION] != expected:
            raise CommitConflict(f"{self.table}: another writer committed since {expected.rsplit('/', 1)[-1]}")
        # ``new`` is ``<location>/metadata/<name>``: open its store at the table location (see SqlCatalog.swap).
        storage = open_storage(new.rsplit("/", 2)[0], self.storage_options)
        storage.put_if_absent(new, payload)
        table_input = {key: table[key] for key in _TABLE_INPUT_FIELDS if key in table}
        table_input["Parameters"] = {
            **table["Parameters"],
            TABLE_TYPE: ICEBERG,
            METADATA_LOCATION: new,
            PREVIOUS_METADATA_LOCATION: expected,
        }
        try:
            self.client.update_table(
                DatabaseName=self.identifier.namespace,
                TableInput=table_input,
                VersionId=table["VersionId"],
                SkipArchive=True,
                **self._catalog(),
            )
        except ClientError as exc:
            if _code(exc) == _CONFLICT and not _retried(exc):
                # The only request sent was refused: nothing of ours is in the catalog.
                storage.delete_many([new])
                raise CommitConflict(
                    f"{self.table}: another writer committed since {expected.rsplit('/', 1)[-1]} "
                    f"(Glue version {table['VersionId']} is no longer current)"
                ) from exc
            # Refused on a re-send after an attempt that may have landed, or failed: the table read back decides.
            raise CommitStateUnknown(f"{self.table}: the Glue update to {new} failed ({exc})") from exc
        except BotoCoreError as exc:
            raise CommitStateUnknown(f"{self.table}: the Glue update to {new} failed ({exc})") from exc
        return new

    could_land = staticmethod(pointer_unmoved)
