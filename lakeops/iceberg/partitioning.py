"""Partition specs and sort orders ("Partitioning", "Partition Evolution", "Sorting"; Appendix C
"Partition Specs" and "Sort Orders").

A partition spec turns a row into the tuple of partition values its data file is filed under; the
tuple's struct type (:meth:`PartitionSpec.partition_type`) is the ``partition`` field of every
manifest written for that spec, with the partition field ids as struct field ids. Transforms stay
strings here, exactly as the JSON spells them, and are parsed by :mod:`lakeops.iceberg.transforms`
where they are applied, so an unknown future transform in an old spec does not stop a table from
loading.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from lakeops.errors import ProtocolError
from lakeops.iceberg.types import IcebergType, NestedField, Schema, StructType

__all__ = [
    "PARTITION_DATA_ID_START",
    "PartitionField",
    "PartitionSpec",
    "SortField",
    "SortOrder",
    "UNSORTED",
]

_FROZEN = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

#: v1 specs carry no partition field ids; the reference implementation numbered them from 1000.
PARTITION_DATA_ID_START = 1000


def _single_source(data: Any) -> Any:
    """v3 partition and sort fields may name their source as ``source-ids`` (Appendix C: "only
    ``source-ids`` is written" for a multi-argument transform). A one-element list is the single
    argument, read (and written back, as the spec asks) as ``source-id``; every transform lakeops
    knows takes one argument, so more are refused by name."""
    if not isinstance(data, dict) or "source-ids" not in data:
        return data
    data = dict(data)
    ids = data.pop("source-ids")
    if not isinstance(ids, list) or len(ids) != 1 or data.get("source-id", ids[0]) != ids[0]:
        raise ValueError(f"source-ids {ids!r}: multi-argument transforms are not supported")
    return {**data, "source-id": ids[0]}


class PartitionField(BaseModel):
    model_config = _FROZEN

    source_id: int = Field(alias="source-id")
    field_id: int = Field(alias="field-id")
    name: str
    transform: str

    _one_source = model_validator(mode="before")(_single_source)


class PartitionSpec(BaseModel):
    model_config = _FROZEN

    spec_id: int = Field(default=0, alias="spec-id")
    fields: tuple[PartitionField, ...] = ()

    @classmethod
    def from_v1_fields(cls, fields: Sequence[dict[str, Any]], spec_id: int = 0) -> PartitionSpec:
        """A v1 spec from its field list (the deprecated ``partition-spec``), numbering fields
        without a ``field-id`` from 1000 as the reference implementation did."""
        numbered = [{**f, "field-id": f.get("field-id", PARTITION_DATA_ID_START + i)} for i, f in enumerate(fields)]
        return cls.model_validate({"spec-id": spec_id, "fields": numbered})

    @property
    def is_unpartitioned(self) -> bool:
        """No fields, or only ``void`` ones: every file lands in the one (empty) partition."""
        return all(f.transform == "void" for f in self.fields)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def fields_json(self) -> list[dict[str, Any]]:
        """The field list alone: the form manifests store as their ``partition-spec`` metadata."""
        return [f.model_dump(mode="json", by_alias=True) for f in self.fields]

    def partition_type(self, schemas: Schema | Sequence[Schema]) -> StructType:
        """The partition tuple's struct: one optional field per partition field, named and numbered
        as the spec names them, typed by its transform's result on the source column.

        ``schemas``: the current schema first, then older ones, so a spec whose source column was
        dropped since (an old spec's files are still in the table) still resolves.
        """
        from lakeops.iceberg.transforms import parse_transform

        ordered = [schemas] if isinstance(schemas, Schema) else list(schemas)
        fields = []
        for f in self.fields:
            source = _source_type(ordered, f.source_id)
            if source is None:
                raise ProtocolError(
                    f"partition spec {self.spec_id}: field {f.name!r} reads source column {f.source_id}, "
                    "which no table schema has"
                )
            fields.append(
                NestedField(
                    id=f.field_id, name=f.name, required=False, type=parse_transform(f.transform).result_type(source)
                )
            )
        return StructType(fields=tuple(fields))


def _source_type(schemas: Sequence[Schema], field_id: int) -> IcebergType | None:
    for schema in schemas:
        found = schema.fields_by_id().get(field_id)
        if found is not None:
            return found[1]
    return None


class SortField(BaseModel):
    model_config = _FROZEN

    transform: str
    source_id: int = Field(alias="source-id")
    direction: Literal["asc", "desc"]
    null_order: Literal["nulls-first", "nulls-last"] = Field(alias="null-order")

    _one_source = model_validator(mode="before")(_single_source)


class SortOrder(BaseModel):
    """Order id 0 is reserved for the unsorted order."""

    model_config = _FROZEN

    order_id: int = Field(default=0, alias="order-id")
    fields: tuple[SortField, ...] = ()

    @property
    def is_unsorted(self) -> bool:
        return not self.fields

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


UNSORTED = SortOrder.model_validate({"order-id": 0, "fields": []})
