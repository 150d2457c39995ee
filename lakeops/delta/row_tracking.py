"""Row tracking on the writer side (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#row-tracking,
"Writer Requirements for Row Tracking").

Reading is unaffected (a writer feature). A commit that adds files to a table that supports row
tracking gives every new ``add`` a ``baseRowId`` above the ``delta.rowTracking`` domain's
``rowIdHighWaterMark`` and the commit's version as ``defaultRowCommitVersion``, and commits the raised
high-water mark; both depend on the version the commit lands at, so they are assigned per attempt
(:class:`RowIdAssignment`). When tracking is *enabled*, a rewrite keeps each copied row's stable row id
and row commit version by materialising them into the hidden columns the table's configuration names
(:func:`stable_row_columns`).
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
from lakeops.errors import CorruptFile, ProtocolError

DOMAIN = "delta.rowTracking"
ENABLE_PROPERTY = "delta.enableRowTracking"
SUSPENDED_PROPERTY = "delta.rowTrackingSuspended"
ROW_ID_COLUMN_PROPERTY = "delta.rowTracking.materializedRowIdColumnName"
COMMIT_VERSION_COLUMN_PROPERTY = "delta.rowTracking.materializedRowCommitVersionColumnName"
#: The table properties a rewrite's files depend on: one changing under it invalidates them.
PROPERTIES = (ENABLE_PROPERTY, SUSPENDED_PROPERTY, ROW_ID_COLUMN_PROPERTY, COMMIT_VERSION_COLUMN_PROPERTY)
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
        assigns = supported and config.get(SUSPENDED_PROPERTY, "false").lower() != "true"
        if not (assigns and config.get(ENABLE_PROPERTY, "false").lower() == "true"):
            return cls(assigns, None)
        row_id, version = config.get(ROW_ID_COLUMN_PROPERTY), config.get(COMMIT_VERSION_COLUMN_PROPERTY)
        if not row_id or not version:
            raise ProtocolError(
                f"{table}: {ENABLE_PROPERTY}=true but {ROW_ID_COLUMN_PROPERTY} or {COMMIT_VERSION_COLUMN_PROPERTY} "
                "is not set in the table configuration"
            )
        return cls(assigns, MaterializedColumns(row_id, version))


NONE = RowTracking(assigns=False, materialized=None)


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
    if not isinstance(value, int):
        raise CorruptFile(f"{table}: domain {DOMAIN} rowIdHighWaterMark {value!r} is not an integer")
    return value


@dataclass
class RowIdAssignment:
    """Fresh row ids and commit versions for the ``add``s of one pending commit, re-derived for the
    version each attempt lands at: a concurrent commit that raised the high-water mark (an append)
    moves ours above it instead of conflicting."""

    table: str
    mark: int
    version: int

    def rebase(self, winner: CommitActions) -> None:
        """Follow a version that landed first: ours goes after it, above any mark it raised."""
        self.version = winner.version + 1
        self.mark = max(self.mark, high_water_mark({d.domain: d for d in winner.domains}, self.table))

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
