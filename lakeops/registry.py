"""Table names from the registry file: where each named table is.

The registry (``$LAKEOPS_REGISTRY``, else ``lakeops.yaml`` in the working directory) lists the tables
the platform maintains; the command line accepts a registry name wherever it takes a table. Only the
address of each entry is read here (``name``, ``location`` or ``catalog`` + ``identifier``,
``format``); policies are the orchestration layer's business and are validated there. A catalog is
``{type: sql, uri, name}`` (the default type, a SQLAlchemy URL), ``{type: glue, region, endpoint_url,
catalog_id}`` (AWS Glue) or ``{type: rest, uri, warehouse, credential_env, token_env, prefix,
vended_credentials}`` (an Iceberg REST catalog; its secrets only by the names of the environment
variables that hold them).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from lakeops.errors import InvalidArgument

__all__ = [
    "REST_ONLY",
    "REGISTRY_ENV",
    "CatalogAddress",
    "CatalogType",
    "RegisteredTable",
    "lookup",
    "registry_audit_location",
    "registry_document",
    "registry_path",
    "why_unknown",
]

#: The Iceberg catalogs an entry (and the command line) can name, beside a file-system table's location.
CatalogType = Literal["sql", "glue", "rest"]

REGISTRY_ENV = "LAKEOPS_REGISTRY"
DEFAULT_FILE = "lakeops.yaml"


class CatalogAddress(BaseModel):
    """An entry's Iceberg catalog: ``type: sql`` (the default) with ``uri`` (a SQLAlchemy URL) and
    ``name``; ``type: glue`` with optional ``region``, ``endpoint_url`` and ``catalog_id`` (the AWS
    account); ``type: rest`` with ``uri`` and the REST settings ``warehouse``, ``credential_env``,
    ``token_env``, ``prefix`` and ``vended_credentials`` (see
    :class:`lakeops.iceberg.rest_client.RestSettings`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: CatalogType = "sql"
    uri: str | None = None
    name: str = "default"
    region: str | None = None
    endpoint_url: str | None = None
    catalog_id: str | None = None
    warehouse: str | None = None
    credential_env: str | None = None
    token_env: str | None = None
    prefix: str | None = None
    vended_credentials: bool | None = None

    @model_validator(mode="after")
    def _keys_of_its_type(self) -> CatalogAddress:
        glue_keys = [key for key in GLUE_ONLY if getattr(self, key) is not None]
        rest_keys = [key for key in REST_ONLY if getattr(self, key) is not None]
        if self.type != "glue" and self.uri is None:
            raise ValueError(f"a {self.type.upper()} catalog needs a uri")
        if self.type != "glue" and glue_keys:
            raise ValueError(f"{', '.join(glue_keys)}: only for a Glue catalog (type: glue)")
        if self.type == "glue" and self.uri is not None:
            raise ValueError("uri: a Glue catalog takes endpoint_url (and region, catalog_id), not uri")
        if self.type != "rest" and rest_keys:
            raise ValueError(f"{', '.join(rest_keys)}: only a catalog of type rest takes them")
        return self

    def options(self) -> dict[str, str | bool | None]:
        """The operations' ``catalog_*`` options (:class:`lakeops.ops.target.CatalogOptions` fields)."""
        if self.type == "glue":
            return {
                "catalog_type": "glue",
                "catalog_uri": self.endpoint_url,
                "catalog_region": self.region,
                "catalog_id": self.catalog_id,
            }
        fields = {"type": self.type, "uri": self.uri, "name": self.name}
        fields |= {key: getattr(self, key) for key in REST_ONLY if getattr(self, key) is not None}
        return {f"catalog_{key}": value for key, value in fields.items()}


#: The catalog settings only a Glue catalog has.
GLUE_ONLY = ("region", "endpoint_url", "catalog_id")
#: The catalog settings only a REST catalog has.
REST_ONLY = ("warehouse", "credential_env", "token_env", "prefix", "vended_credentials")


class RegisteredTable(BaseModel):
    """An entry's address; its other keys (policies) are left to the orchestration layer."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    location: str | None = None
    catalog: CatalogAddress | None = None
    identifier: str | None = None
    format: Literal["auto", "delta", "iceberg", "icechunk"] = "auto"

    @model_validator(mode="after")
    def _one_address(self) -> RegisteredTable:
        if self.location is None and (self.catalog is None or self.identifier is None):
            raise ValueError("location: missing (give location, or catalog and identifier)")
        if self.location is not None and (self.catalog is not None or self.identifier is not None):
            raise ValueError("location: give location, or catalog and identifier, not both")
        return self


def registry_path() -> Path:
    return Path(os.environ.get(REGISTRY_ENV) or DEFAULT_FILE)


def _document(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise InvalidArgument(f"registry {path}: cannot read it ({exc})") from exc
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"registry {path}: not valid YAML ({exc})") from exc


def registry_document(path: Path) -> dict[str, Any]:
    """The registry file at ``path`` as a mapping (an empty file: no keys)."""
    document = _document(path)
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise InvalidArgument(f"registry {path}: not a mapping of keys (tables, ...)")
    return document


def _entries(path: Path) -> list[Any]:
    document = _document(path)
    tables = (document or {}).get("tables", []) if isinstance(document, dict) else None
    if not isinstance(tables, list):
        raise InvalidArgument(f"registry {path}: 'tables' must be a list of table entries")
    return tables


def lookup(name: str) -> RegisteredTable | None:
    """The registry entry called ``name``, or None when there is no registry or no such entry."""
    path = registry_path()
    if not path.is_file():
        if REGISTRY_ENV in os.environ:
            raise InvalidArgument(f"registry {path} (from ${REGISTRY_ENV}) does not exist")
        return None
    for i, raw in enumerate(_entries(path)):
        if isinstance(raw, dict) and raw.get("name") == name:
            try:
                return RegisteredTable.model_validate(raw)
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in exc.errors())
                raise InvalidArgument(f"registry {path}: table {name!r} (entry {i}): {problems}") from None
    return None


def why_unknown(name: str) -> str:
    """Why ``name`` is no registry table, for an error message: the registry searched (and where its
    path came from) with its closest names, or that there is no registry file."""
    path = registry_path()
    if not path.is_file():  # with $LAKEOPS_REGISTRY set, lookup() has refused the missing file already
        return f"no registry to look the name up in (${REGISTRY_ENV} is not set and {path.resolve()} does not exist)"
    source = f"from ${REGISTRY_ENV}" if REGISTRY_ENV in os.environ else f"in the working directory; no ${REGISTRY_ENV}"
    names = [raw["name"] for raw in _entries(path) if isinstance(raw, dict) and isinstance(raw.get("name"), str)]
    close = difflib.get_close_matches(name, names, n=3)
    hint = f"did you mean {' or '.join(map(repr, close))}?" if close else f"none of its {len(names)} names is close"
    return f"no table named {name!r} in registry {path.resolve()} ({source}); {hint}"


def registry_audit_location() -> str | None:
    """The registry's top-level ``audit_location`` (where run audit records go), if it has one."""
    path = registry_path()
    if not path.is_file():
        return None
    document = _document(path)
    location = document.get("audit_location") if isinstance(document, dict) else None
    if location is not None and not isinstance(location, str):
        raise InvalidArgument(f"registry {path}: audit_location must be a path or URI, not {location!r}")
    return location or None
