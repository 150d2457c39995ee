"""A table's data version moves with commits that change its data, not with maintenance that only
rewrites it: delta-rs OPTIMIZE (``dataChange: false``), lakeops' Iceberg manifest rewrite (a
``replace`` snapshot), lakeops' Icechunk chunk packing."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from icechunk_repos import build_history
from pyiceberg_tables import batch, small_file_table

from lakeops.iceberg.maintenance.rewrite_manifests import (
    RewriteManifestsOptions,
    commit_rewrite,
    plan_rewrite_manifests,
    write_output,
)
from lakeops.iceberg.table import load_table
from lakeops.icechunk.maintenance.packing import commit_packing, pack_unit, plan_packing
from lakeops.icechunk.repository import Repository
from lakeops.icechunk.writer import ChangeSet, commit
from lakeops.ops.data_version import data_version
from lakeops.ops.target import CatalogOptions, IcebergTarget, resolve_target
from lakeops.storage import StorageOptions, open_storage

NO_OPTIONS = StorageOptions()


def test_delta_versions_of_appends_and_deletes_not_of_optimize(tmp_path: Path) -> None:
    location = str(tmp_path / "events")
    for i in range(4):
        write_deltalake(location, pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    target = resolve_target(location, CatalogOptions(), NO_OPTIONS)
    assert data_version(target) == "3"

    DeltaTable(location).optimize.compact()
    assert DeltaTable(location).version() == 4
    assert data_version(target) == "3"

    DeltaTable(location).delete("id = 0")
    assert data_version(target) == "5"
    DeltaTable(location).optimize.compact()
    assert data_version(target) == "5"


def test_iceberg_snapshot_of_the_last_append_not_of_a_manifest_rewrite(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=4, rows=5)
    target = resolve_target(table.identifier, CatalogOptions(catalog_uri=table.catalog_uri), NO_OPTIONS)
    appended = table.reload().current_snapshot()
    assert appended is not None and data_version(target) == str(appended.snapshot_id)

    assert isinstance(target, IcebergTarget)
    plan = plan_rewrite_manifests(load_table(target.ref, NO_OPTIONS), RewriteManifestsOptions(), NO_OPTIONS)
    commit_rewrite(plan, [write_output(u) for u in plan.outputs], NO_OPTIONS)
    rewritten = table.reload().current_snapshot()
    assert rewritten is not None and rewritten.summary.operation.value == "replace"
    assert data_version(target) == str(appended.snapshot_id)

    table.table.append(batch(100, 5))
    latest = table.reload().current_snapshot()
    assert latest is not None and data_version(target) == str(latest.snapshot_id)


def test_icechunk_snapshot_of_the_last_commit_not_of_packing(tmp_path: Path) -> None:
    root = str(tmp_path / "arrays")
    storage = open_storage(root)
    build_history(storage, root, commits=6)
    target = resolve_target(root, CatalogOptions(), NO_OPTIONS)
    repo = Repository(storage, root)
    committed = repo.read_snapshot(repo.resolve("main")).id
    assert data_version(target) == committed

    plan = plan_packing(storage, root, NO_OPTIONS, branch="main", min_input_files=2)
    packed = commit_packing(plan, [pack_unit(u) for u in plan.groups], storage)
    assert Repository(storage, root).resolve("main") == packed.snapshot_id
    assert data_version(target) == committed

    written = commit(storage, root, ChangeSet().set_chunk("/data/line", (0,), b"new"), message="more")
    assert data_version(target) == Repository(storage, root).read_snapshot(written.snapshot_id).id != committed
