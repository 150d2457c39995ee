"""Row tracking on the writer side (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#row-tracking,
"Writer Requirements for Row Tracking").

Reading is unaffected (a writer feature). A commit that adds files to a table that supports row
tracking gives every new ``add`` a ``baseRowId`` above the ``delta.rowTracking`` domain's
``rowIdHighWaterMark`` and the commit's version as ``defaultRowCommitVersion``, and commits the raised
high-water mark; both depend on the version the commit lands at, so they are assigned per attempt
(:class:`RowIdAssignment`). When tracking is *enabled*, a rewrite keeps each copied row's stable row id
and row commit version by materialising them into the hidden columns the table's configuration names
(:func:`stable_row_columns`). Those column names must be unique, apart from each other and from every
column of the schema by its name and its physical name ("Writer Requirements for Row Tracking"); a
rewrite of a table where they are not is refused before any file is written
(:meth:`RowTracking.for_rewrite`). An append writes no such column, so it only numbers its rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakeops.delta.actions import Add, DomainMetadata, Metadata, Protocol
from lakeops.delta.commit_file import CommitActions
from lakeops.delta.features import enabled_features
from lakeops.delta.properties import (
    ENABLE_ROW_TRACKING,
    ROW_COMMIT_VERSION_COLUMN_NAME,
    ROW_ID_COLUMN_NAME,
    ROW_TRACKING_SUSPENDED,
)
from lakeops.delta.schema import column_mapping_mode, parse_schema, physical_name
from lakeops.errors import CorruptFile, ProtocolError
from lakeops.integer_types import BOUNDS

DOMAIN = "delta.rowTracking"
#: The table properties a rewrite's files depend on: one changing under it invalidates them.
PROPERTIES = (ENABLE_ROW_TRACKING, ROW_TRACKING_SUSPENDED, ROW_ID_COLUMN_NAME, ROW_COMMIT_VERSION_COLUMN_NAME)
#: ``commitInfo.tags`` key saying every copied row kept its stable row id and row commit version.
PRESERVED_TAG = "delta.rowTracking.preserved"
#: The ``add``/``remove`` fields a file's default generated row ids and commit versions come from.
FILE_FIELDS = ("baseRowId", "defaultRowCommitVersion")


@dataclass(frozen=True)
class MaterializedColumns:
    """The hidden data-file columns that hold preserved stable row ids and row commit versions."""

    row_id: str
    row_commit_version: str

    @property
    def names(self) -> list[str]:
        return [self.row_id, self.row_commit_version]


@dataclass(frozen=True)
class RowTracking:
    """How a table's commits must treat row ids: ``assigns`` (supported, not suspended) and
    ``materialized`` (enabled: the columns copied rows keep their stable values in)."""

    assigns: bool
    materialized: MaterializedColumns | None

    @classmethod
    def of(cls, protocol: Protocol, metadata: Metadata, table: str) -> RowTracking:
        config = metadata.configuration
        supported = "rowTracking" in enabled_features(protocol)
        assigns = supported and config.get(ROW_TRACKING_SUSPENDED, "false").lower() != "true"
        if not (assigns and config.get(ENABLE_ROW_TRACKING, "false").lower() == "true"):
            return cls(assigns, None)
        row_id, version = config.get(ROW_ID_COLUMN_NAME), config.get(ROW_COMMIT_VERSION_COLUMN_NAME)
        if not row_id or not version:
            raise ProtocolError(
                f"{table}: {ENABLE_ROW_TRACKING}=true but {ROW_ID_COLUMN_NAME} or {ROW_COMMIT_VERSION_COLUMN_NAME} "
                "is not set in the table configuration"
            )
        return cls(assigns, MaterializedColumns(row_id, version))

    @classmethod
    def for_rewrite(cls, protocol: Protocol, metadata: Metadata, table: str) -> RowTracking:
        """:meth:`of`, for a commit that copies rows into new files: their materialised columns must be
        unique (:func:`_check_unique`), or the files would hold a column twice."""
        tracking = cls.of(protocol, metadata, table)
        if tracking.materialized is not None:
            _check_unique(protocol, metadata, table, tracking.materialized)
        return tracking


#: Where the protocol requires the materialised column names to be unique.
_UNIQUE_RULE = (
    "the materialized row tracking columns must be unique "
    "(https://github.com/delta-io/delta/blob/master/PROTOCOL.md#writer-requirements-for-row-tracking, "
    '"Writer Requirements for Row Tracking")'
)


def _check_unique(protocol: Protocol, metadata: Metadata, table: str, materialized: MaterializedColumns) -> None:
    """Refuse materialised column names equal to each other or to a top-level column's name or physical
    name (data files hold columns by physical name). Compared ignoring case, as Delta compares column
    names: a data file holding ``id`` and ``ID`` is ambiguous to Spark."""
    row_id, version = materialized.row_id, materialized.row_commit_version
    if row_id.lower() == version.lower():
        raise ProtocolError(
            f"{table}: table properties {ROW_ID_COLUMN_NAME}={row_id!r} and "
            f"{ROW_COMMIT_VERSION_COLUMN_NAME}={version!r} name one column; {_UNIQUE_RULE}"
        )
    mode = column_mapping_mode(metadata, protocol)
    columns: dict[str, str] = {}
    for column in parse_schema(metadata.schema_string):
        try:
            physical = physical_name(column, mode)
        except ProtocolError as exc:
            raise ProtocolError(f"{table}: {exc}") from exc
        for name in (column.name, physical):
            columns.setdefault(name.lower(), column.name)
    for property_name, name in ((ROW_ID_COLUMN_NAME, row_id), (ROW_COMMIT_VERSION_COLUMN_NAME, version)):
        if (column_name := columns.get(name.lower())) is not None:
            raise ProtocolError(
                f"{table}: table property {property_name}={name!r} names the column {column_name!r} of the "
                f"table's schema; {_UNIQUE_RULE}"
            )


def high_water_mark(domains: dict[str, DomainMetadata], table: str) -> int:
    """The highest fresh row id assigned so far (-1: none yet)."""
    domain = domains.get(DOMAIN)
    if domain is None or domain.removed:
        return -1
    try:
        value = json.loads(domain.configuration)["rowIdHighWaterMark"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptFile(
            f"{table}: domain {DOMAIN} has no readable rowIdHighWaterMark ({domain.configuration[:80]!r})"
        ) from exc
    if not isinstance(value, int) or isinstance(value, bool):
        raise CorruptFile(f"{table}: domain {DOMAIN} rowIdHighWaterMark {value!r} is not an integer")
    low, high = BOUNDS["long"]
    if not low <= value <= high:
        raise CorruptFile(f"{table}: domain {DOMAIN} rowIdHighWaterMark {value} is not a long")
    return value


@dataclass
class RowIdAssignment:
    """Fresh row ids and commit versions for the ``add``s of one pending commit, re-derived for the
    version each attempt lands at: a concurrent commit that raised the high-water mark (an append)
    moves ours above it instead of conflicting. ``rows``: the physical rows to number at most; their
    ids must be longs, which is checked against every mark before the commit is written."""

    table: str
    mark: int
    version: int
    rows: int

    def __post_init__(self) -> None:
        self._check_room()

    def rebase(self, winner: CommitActions) -> None:
        """Follow a version that landed first: ours goes after it, above any mark it raised."""
        self.version = winner.version + 1
        self.mark = max(self.mark, high_water_mark({d.domain: d for d in winner.domains}, self.table))
        self._check_room()

    def _check_room(self) -> None:
        largest = BOUNDS["long"][1]
        if self.mark + self.rows > largest:
            raise ProtocolError(
                f"{self.table}: domain {DOMAIN}'s rowIdHighWaterMark is {self.mark}: {self.rows} more row ids "
                f'would pass the largest long ({largest}), so no commit can number these rows ("Writer '
                'Requirements for Row Tracking": fresh row ids above the mark)'
            )

    def assign(self, adds: Sequence[Add], rows: Sequence[int]) -> tuple[list[Add], DomainMetadata | None]:
        """``adds`` (holding ``rows`` physical rows each) numbered consecutively above the mark, and the
        ``delta.rowTracking`` domain with the new mark (None when no row id was assigned)."""
        numbered: list[Add] = []
        next_id = self.mark + 1
        for add, count in zip(adds, rows, strict=True):
            numbered.append(
                Add.model_validate(
                    {**add.to_json_dict(), "baseRowId": next_id, "defaultRowCommitVersion": self.version}
                )
            )
            next_id += count
        if next_id == self.mark + 1:
            return numbered, None
        domain = DomainMetadata(domain=DOMAIN, configuration=json.dumps({"rowIdHighWaterMark": next_id - 1}))
        return numbered, domain


def stable_row_columns(data: pa.Table, add: Add, columns: MaterializedColumns, location: str) -> list[pa.Array]:
    """Each physical row's stable row id and stable row commit version ("Reader Requirements for Row
    Tracking"): the materialised value where the file holds a non-null one, else ``baseRowId`` plus the
    row's position in the file (deletion vectors not applied) and ``defaultRowCommitVersion``."""
    extra = add.model_extra or {}
    base, version = extra.get("baseRowId"), extra.get("defaultRowCommitVersion")
    if base is None or version is None:
        raise ProtocolError(
            f"{location}: row tracking is enabled but its add action has no baseRowId/defaultRowCommitVersion"
        )
    defaults = [
        pa.array(np.arange(data.num_rows, dtype=np.int64) + int(base)),
        pa.array(np.full(data.num_rows, int(version), dtype=np.int64)),
    ]
    stable = []
    for name, default in zip(columns.names, defaults, strict=True):
        if name in data.column_names:
            stable.append(pc.coalesce(data.column(name).combine_chunks().cast(pa.int64()), default))
        else:
            stable.append(default)
    return stable
