"""Iceberg data types and schemas ("Schemas and Data Types", Appendix C "JSON serialization").

Types parse from and serialise to the spec's JSON exactly: primitives are strings (``"long"``,
``"decimal(9,2)"``, ``"fixed[16]"``, v3's ``"variant"`` and ``"geometry(srid:4326)"``), nested types
objects with field ids (``struct`` fields with ``id``/``name``/``required``/``type``/``doc`` and the
v3 ``initial-default``/``write-default``; ``list`` with ``element-id``; ``map`` with
``key-id``/``value-id``). A table schema is a struct with ``schema-id`` and ``identifier-field-ids``.
Field ids are how every other part of the format (manifest metrics, partition sources, Parquet
columns) names a column, so :meth:`Schema.fields_by_id` is the
index everything else uses.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_serializer

from lakeops.errors import ProtocolError

__all__ = [
    "DecimalType",
    "FixedType",
    "GeoType",
    "IcebergType",
    "ListType",
    "MapType",
    "NestedField",
    "PrimitiveType",
    "Schema",
    "StructType",
    "parse_type",
]

PrimitiveName = Literal[
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "date",
    "time",
    "timestamp",
    "timestamptz",
    "timestamp_ns",
    "timestamptz_ns",
    "string",
    "uuid",
    "binary",
    "unknown",
    "variant",  # semi-structured, neither primitive nor nested, but spelled like a primitive
]
_PRIMITIVES: frozenset[str] = frozenset(PrimitiveName.__args__)  # type: ignore[attr-defined]
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")
_FIXED = re.compile(r"fixed\[\s*(\d+)\s*\]")
_GEO = re.compile(r"(geometry|geography)(?:\(\s*([^,()]+?)\s*(?:,\s*([^,()]+?)\s*)?\))?")

_FROZEN = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class PrimitiveType(BaseModel):
    """A primitive without parameters; JSON is its name."""

    model_config = _FROZEN

    name: PrimitiveName

    @model_serializer
    def _to_json(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name


class DecimalType(BaseModel):
    """``decimal(P,S)``: precision at most 38 (the spec's requirement)."""

    model_config = _FROZEN

    precision: int = Field(ge=1, le=38)
    scale: int = Field(ge=0)

    @model_serializer
    def _to_json(self) -> str:
        return f"decimal({self.precision},{self.scale})"

    def __str__(self) -> str:
        return self._to_json()


class FixedType(BaseModel):
    """``fixed[L]``: byte arrays of exactly L bytes."""

    model_config = _FROZEN

    length: int = Field(ge=1)

    @model_serializer
    def _to_json(self) -> str:
        return f"fixed[{self.length}]"

    def __str__(self) -> str:
        return self._to_json()


class GeoType(BaseModel):
    """``geometry(C)`` / ``geography(C, A)`` (v3, "Primitive Types"): a CRS and, for geography, an
    edge-interpolation algorithm, each optional (the spec's defaults apply when absent)."""

    model_config = _FROZEN

    kind: Literal["geometry", "geography"]
    crs: str | None = None
    algorithm: str | None = None

    @model_serializer
    def _to_json(self) -> str:
        params = [p for p in (self.crs, self.algorithm) if p is not None]
        return f"{self.kind}({', '.join(params)})" if params else self.kind

    def __str__(self) -> str:
        return self._to_json()


def parse_type(value: Any) -> Any:
    """The model for a type's JSON: primitive strings become models, objects keep their ``type``
    tag for the union below. Unknown type names are a :class:`ProtocolError` naming them."""
    if isinstance(value, str):
        text = value.strip()
        if text in _PRIMITIVES:
            return PrimitiveType(name=text)  # type: ignore[arg-type]
        if match := _DECIMAL.fullmatch(text):
            return DecimalType(precision=int(match[1]), scale=int(match[2]))
        if match := _FIXED.fullmatch(text):
            return FixedType(length=int(match[1]))
        if (match := _GEO.fullmatch(text)) and (match[1] == "geography" or match[3] is None):
            return GeoType(kind=match[1], crs=match[2], algorithm=match[3])  # type: ignore[arg-type]
        raise ProtocolError(f"unknown Iceberg type {value!r}")
    if isinstance(value, dict):
        kind = value.get("type")
        nested: dict[Any, type[BaseModel]] = {"struct": StructType, "list": ListType, "map": MapType}
        model = nested.get(kind)
        if model is None:
            raise ProtocolError(f"unknown Iceberg nested type {kind!r} in {value!r}")
        return model.model_validate(value)
    return value


class NestedField(BaseModel):
    """A struct field; ``initial_default``/``write_default`` are kept as their JSON single-value
    encoding (Appendix D), decoded by whoever needs the value."""

    model_config = _FROZEN

    id: int
    name: str
    required: bool
    type: IcebergType
    doc: str | None = None
    initial_default: Any = Field(default=None, alias="initial-default")
    write_default: Any = Field(default=None, alias="write-default")


class StructType(BaseModel):
    model_config = _FROZEN

    type: Literal["struct"] = "struct"
    fields: tuple[NestedField, ...] = ()


class ListType(BaseModel):
    model_config = _FROZEN

    type: Literal["list"] = "list"
    element_id: int = Field(alias="element-id")
    element_required: bool = Field(alias="element-required")
    element: IcebergType


class MapType(BaseModel):
    model_config = _FROZEN

    type: Literal["map"] = "map"
    key_id: int = Field(alias="key-id")
    key: IcebergType
    value_id: int = Field(alias="value-id")
    value_required: bool = Field(alias="value-required")
    value: IcebergType


IcebergType = Annotated[
    Union[PrimitiveType, DecimalType, FixedType, GeoType, StructType, ListType, MapType],  # noqa: UP007 (forward refs)
    BeforeValidator(parse_type),
]


class Schema(StructType):
    """A table schema: the top-level struct plus ``schema-id`` (optional in v1, required in v2;
    Appendix E defaults it to 0) and ``identifier-field-ids``."""

    schema_id: int = Field(default=0, alias="schema-id")
    identifier_field_ids: tuple[int, ...] = Field(default=(), alias="identifier-field-ids")

    def to_json(self) -> dict[str, Any]:
        """The schema's JSON as the spec spells it (aliases, no unset optional fields)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def walk(self) -> Iterator[tuple[tuple[str, ...], int, IcebergType, bool]]:
        """Every field, element, key and value below the schema, depth first, as
        ``(name path, id, type, required)``; list elements are named ``element``, map parts
        ``key``/``value`` (the names Parquet's 3-level lists and maps use)."""
        yield from _walk(self, ())

    def fields_by_id(self) -> dict[int, tuple[tuple[str, ...], IcebergType, bool]]:
        """Field id → (name path, type, required); duplicate ids are a :class:`ProtocolError`."""
        index: dict[int, tuple[tuple[str, ...], IcebergType, bool]] = {}
        for path, field_id, type_, required in self.walk():
            if field_id in index:
                raise ProtocolError(
                    f"schema {self.schema_id}: field id {field_id} is used by both "
                    f"{'.'.join(index[field_id][0])} and {'.'.join(path)}"
                )
            index[field_id] = (path, type_, required)
        return index

    def highest_field_id(self) -> int:
        return max((field_id for _, field_id, _, _ in self.walk()), default=0)


def _walk(type_: IcebergType, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], int, IcebergType, bool]]:
    children: list[tuple[str, int, IcebergType, bool]]
    if isinstance(type_, StructType):
        children = [(f.name, f.id, f.type, f.required) for f in type_.fields]
    elif isinstance(type_, ListType):
        children = [("element", type_.element_id, type_.element, type_.element_required)]
    elif isinstance(type_, MapType):
        children = [
            ("key", type_.key_id, type_.key, True),
            ("value", type_.value_id, type_.value, type_.value_required),
        ]
    else:
        return
    for name, field_id, child, required in children:
        yield (*path, name), field_id, child, required
        yield from _walk(child, (*path, name))


for _model in (NestedField, StructType, ListType, MapType, Schema):
    _model.model_rebuild()
