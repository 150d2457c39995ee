"""Which table a command acts on: a location, a catalog identifier, or a registry name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakeops.errors import InvalidArgument, NotATable
from lakeops.ops.table import open_table
from lakeops.ops.target import CatalogOptions, DeltaTarget, IcebergTarget, resolve_target
from lakeops.storage import StorageOptions


def resolve_name(table: str, catalog: CatalogOptions, storage_options: StorageOptions) -> tuple[str, CatalogOptions]:
    """The address and catalog ``lakeops.open`` resolves ``table`` to."""
    handle = open_table(table, catalog, storage_options=storage_options)
    return handle.address, handle.catalog


OPTIONS = StorageOptions()


def _delta_table(path: Path) -> Path:
    (path / "_delta_log").mkdir(parents=True)
    (path / "_delta_log" / "00000000000000000000.json").write_text("{}\n")
    return path


def _iceberg_table(path: Path) -> Path:
    (path / "metadata").mkdir(parents=True)
    (path / "metadata" / "v1.metadata.json").write_text(json.dumps({"format-version": 2}))
    return path


def test_locations_are_detected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    delta = _delta_table(tmp_path / "d")
    iceberg = _iceberg_table(tmp_path / "i")
    assert resolve_target(f"file://{delta}", CatalogOptions(), OPTIONS).format == "delta"
    target = resolve_target(str(iceberg) + "/", CatalogOptions(), OPTIONS)
    assert isinstance(target, IcebergTarget) and target.ref.location == str(iceberg)
    with pytest.raises(NotATable):
        resolve_target(str(tmp_path), CatalogOptions(), OPTIONS)


def test_catalog_identifier() -> None:
    target = resolve_target("db.events", CatalogOptions(catalog_uri="sqlite:///c.db", catalog_name="prod"), OPTIONS)
    assert isinstance(target, IcebergTarget) and target.ref.location is None
    assert str(target) == "prod.db.events"
    assert target.ref.catalog_uri == "sqlite:///c.db"


def test_registry_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    delta = _delta_table(tmp_path / "tables" / "events")
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(
        "tables:\n"
        f"  - name: events\n    location: {delta}\n    compaction: {{target_file_size: 128MB}}\n"
        "  - name: orders\n    catalog: {uri: 'sqlite:///cat.db'}\n    identifier: shop.orders\n"
        f"  - name: wrong\n    location: {delta}\n    format: iceberg\n"
        "  - name: broken\n    identifier: a.b\n"
    )
    monkeypatch.chdir(tmp_path)  # ./lakeops.yaml is the default registry
    assert resolve_name("events", CatalogOptions(), OPTIONS) == (str(delta), CatalogOptions())
    orders = resolve_name("orders", CatalogOptions(), OPTIONS)
    assert orders == ("shop.orders", CatalogOptions(catalog_uri="sqlite:///cat.db", catalog_name="default"))
    with pytest.raises(InvalidArgument, match="declared iceberg but .* holds a delta table"):
        resolve_name("wrong", CatalogOptions(), OPTIONS)
    missing = r"table 'broken' \(entry 3\): .*location: missing \(give location, or catalog and identifier\)"
    with pytest.raises(InvalidArgument, match=missing):
        resolve_name("broken", CatalogOptions(), OPTIONS)
    monkeypatch.setenv("LAKEOPS_REGISTRY", str(tmp_path / "missing.yaml"))
    with pytest.raises(InvalidArgument, match="missing.yaml .*does not exist"):
        resolve_name("events", CatalogOptions(), OPTIONS)


def test_only_bare_names_are_looked_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Locations, names with a catalog URI and names of files here are addresses already; the targets
    of addresses never read the registry (an entry named like a relative location cannot hijack it)."""
    delta = _delta_table(tmp_path / "events")
    (tmp_path / "lakeops.yaml").write_text("tables:\n  - name: events\n    location: /nowhere/else\n")
    monkeypatch.chdir(tmp_path)
    given = CatalogOptions(catalog_uri="sqlite:///c.db")
    assert resolve_name("events", given, OPTIONS) == ("events", given)
    assert resolve_name("./events", CatalogOptions(), OPTIONS) == ("./events", CatalogOptions())
    assert resolve_name(str(delta), CatalogOptions(), OPTIONS) == (str(delta), CatalogOptions())
    assert resolve_target("events", CatalogOptions(), OPTIONS) == DeltaTarget(str(delta))
    with pytest.raises(NotATable, match="no table named 'evnts' in registry"):
        resolve_name("evnts", CatalogOptions(), OPTIONS)
