"""A lakeops commit as an Iceberg REST catalog commit: the ``updates`` and ``requirements`` of a
``CommitTableRequest`` derived from the metadata a commit starts from and the metadata lakeops built
(https://github.com/apache/iceberg/blob/main/open-api/rest-catalog-open-api.yaml, ``TableUpdate``,
``TableRequirement``; ``POST /v1/{prefix}/namespaces/{namespace}/tables/{table}``).

lakeops builds a table's new metadata itself (the other catalogs swap a whole file); a REST server
writes the file from a list of changes instead. The difference between the two metadata versions is
that list: snapshots added and removed, refs set and removed, properties, statistics, a new current
schema. The fields the server derives from those changes (``last-updated-ms``, ``metadata-log``,
``snapshot-log``, ``last-sequence-number``, ``current-snapshot-id``, ``next-row-id``,
``last-column-id``) are not sent. Any other difference is a change no lakeops operation makes today,
so it is refused by name rather than silently dropped.

Requirements: ``assert-table-uuid`` always, and ``assert-ref-snapshot-id`` for every ref a commit
moves or removes; a commit that removes snapshots also relies on every other ref (what it may expire
depends on them all), so it asserts each. A 409 then means what a lost compare-and-swap means for the
other catalogs, the table moved on, once the table read back confirms it: a commit whose requirements
still hold there (:meth:`RestChange.applies_to`) could still land.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakeops.errors import UnsupportedFeature
from lakeops.iceberg.metadata import Snapshot, SnapshotRef, TableMetadata

__all__ = ["RestChange", "rest_change"]

#: Fields the server computes from the updates (never sent).
_DERIVED = {
    "last_updated_ms",
    "metadata_log",
    "snapshot_log",
    "last_sequence_number",
    "current_snapshot_id",
    "next_row_id",
    "last_column_id",
}
#: Fields the updates below carry.
_EXPRESSED = {"snapshots", "refs", "properties", "statistics", "partition_statistics", "schemas", "current_schema_id"}

Json = dict[str, Any]


@dataclass(frozen=True)
class RestChange:
    """One ``CommitTableRequest``'s ``requirements`` and ``updates``."""

    requirements: list[Json]
    updates: list[Json]

    def applies_to(self, metadata: TableMetadata) -> bool:
        """Whether every requirement holds on ``metadata`` (so the server could still apply the commit)."""
        for requirement in self.requirements:
            if requirement["type"] == "assert-table-uuid" and str(metadata.table_uuid) != requirement["uuid"]:
                return False
            if requirement["type"] == "assert-ref-snapshot-id":
                ref = metadata.refs.get(requirement["ref"])
                if (None if ref is None else ref.snapshot_id) != requirement["snapshot-id"]:
                    return False
        return True


def rest_change(table: str, base: TableMetadata, new: TableMetadata) -> RestChange:
    """The REST commit that turns ``base`` into ``new``; :class:`UnsupportedFeature` for a change of
    a field no update here expresses (a new partition spec, sort order, location, format version)."""
    unexpressed = [
        name
        for name in TableMetadata.model_fields
        if name not in _DERIVED | _EXPRESSED and getattr(base, name) != getattr(new, name)
    ]
    if unexpressed:
        fields = ", ".join(str(TableMetadata.model_fields[n].alias or n) for n in unexpressed)
        raise UnsupportedFeature(f"{table}: a REST catalog commit that changes {fields} is not supported")
    base_snapshots = {s.snapshot_id: s for s in base.snapshots}
    new_snapshots = {s.snapshot_id: s for s in new.snapshots}
    added = [s for s in new.snapshots if s.snapshot_id not in base_snapshots]
    removed = sorted(set(base_snapshots) - set(new_snapshots))
    updates = [
        *_schema_updates(table, base, new),
        *({"action": "add-snapshot", "snapshot": _snapshot_json(new, s)} for s in added),
        *_ref_updates(base.refs, new.refs),
        *([{"action": "remove-snapshots", "snapshot-ids": removed}] if removed else []),
        *_property_updates(base.properties, new.properties),
        *_statistics_updates(base, new),
    ]
    return RestChange(requirements=_requirements(base, new, relies_on_all_refs=bool(removed)), updates=updates)


def _requirements(base: TableMetadata, new: TableMetadata, *, relies_on_all_refs: bool) -> list[Json]:
    asserted = [
        name
        for name in sorted(set(base.refs) | set(new.refs))
        if relies_on_all_refs or base.refs.get(name) != new.refs.get(name)
    ]
    requirements: list[Json] = []
    if base.table_uuid is not None:
        requirements.append({"type": "assert-table-uuid", "uuid": str(base.table_uuid)})
    for name in asserted:
        ref = base.refs.get(name)
        requirements.append(
            {"type": "assert-ref-snapshot-id", "ref": name, "snapshot-id": None if ref is None else ref.snapshot_id}
        )
    return requirements


def _snapshot_json(metadata: TableMetadata, snapshot: Snapshot) -> Json:
    """A snapshot as its metadata file writes it (the same per-version rules as the whole file)."""
    return next(s for s in metadata.to_json().get("snapshots", []) if s["snapshot-id"] == snapshot.snapshot_id)


def _schema_updates(table: str, base: TableMetadata, new: TableMetadata) -> list[Json]:
    known = {s.schema_id for s in base.schemas}
    updates: list[Json] = [
        {"action": "add-schema", "schema": s.to_json()} for s in new.schemas if s.schema_id not in known
    ]
    if new.current_schema_id != base.current_schema_id:
        updates.append({"action": "set-current-schema", "schema-id": new.current_schema_id})
    if {s.schema_id for s in new.schemas} < known:
        raise UnsupportedFeature(f"{table}: a REST catalog commit that removes schemas is not supported")
    return updates


def _ref_updates(base: dict[str, SnapshotRef], new: dict[str, SnapshotRef]) -> list[Json]:
    moved = [
        {
            "action": "set-snapshot-ref",
            "ref-name": name,
            **ref.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
        for name, ref in new.items()
        if base.get(name) != ref
    ]
    return moved + [{"action": "remove-snapshot-ref", "ref-name": name} for name in base if name not in new]


def _property_updates(base: dict[str, str], new: dict[str, str]) -> list[Json]:
    changed = {k: v for k, v in new.items() if base.get(k) != v}
    removed = sorted(set(base) - set(new))
    return [
        *([{"action": "set-properties", "updates": changed}] if changed else []),
        *([{"action": "remove-properties", "removals": removed}] if removed else []),
    ]


def _statistics_updates(base: TableMetadata, new: TableMetadata) -> list[Json]:
    updates: list[Json] = []
    for kind, old_files, new_files in (
        ("statistics", base.statistics, new.statistics),
        ("partition-statistics", base.partition_statistics, new.partition_statistics),
    ):
        old = {f.snapshot_id: f for f in old_files}
        current = {f.snapshot_id: f for f in new_files}
        for snapshot_id, file in current.items():
            if old.get(snapshot_id) != file:
                updates.append(
                    {"action": f"set-{kind}", kind: file.model_dump(mode="json", by_alias=True, exclude_none=True)}
                )
        updates += [{"action": f"remove-{kind}", "snapshot-id": i} for i in sorted(set(old) - set(current))]
    return updates
