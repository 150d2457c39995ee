"""Data files imported with PyIceberg's ``add_files`` carry no field ids: the table's name mapping
(``schema.name-mapping.default``, which ``add_files`` sets) names their columns. Compaction, its
verification and the changelog must read them through it, as every Iceberg reader does (found by the
concurrent-writers run, whose slow writer commits its files with ``add_files``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from maintenance_commits import commit_compaction
from pyiceberg_tables import ARROW_SCHEMA, PyIcebergTable, batch, replay_changes, rows_of, small_file_table

from lakeops.iceberg.maintenance.changelog import ChangelogOptions, change_rows, plan_changelog
from lakeops.iceberg.table import TableRef, load_table
from lakeops.ops import compaction as ops_compaction
from lakeops.ops.compaction import CompactionOptions
from lakeops.ops.target import CatalogOptions, resolve_target
from lakeops.ops.verify import compaction_kept_rows
from lakeops.storage import StorageOptions

OPTIONS = StorageOptions()


def _with_imported_file(tmp_path: Path) -> tuple[PyIcebergTable, int]:
    """Small PyIceberg appends, then one file written by pyarrow (no field ids) added with ``add_files``;
    returns the table and the snapshot id before the import."""
    table = small_file_table(tmp_path, appends=3, rows=5)
    before = table.table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    imported = Path(table.location) / "data" / "imported.parquet"
    pq.write_table(batch(100, 4).cast(ARROW_SCHEMA), imported)
    assert pq.read_schema(imported).field("id").metadata is None  # no field ids
    table.reload().add_files([str(imported)])
    return table, before


def test_compaction_rewrites_an_imported_file_by_the_name_mapping_and_verifies(tmp_path: Path) -> None:
    table, _ = _with_imported_file(tmp_path)
    expected = table.rows()
    catalog = CatalogOptions(catalog_uri=table.catalog_uri)
    options = CompactionOptions(catalog_uri=table.catalog_uri, min_input_files=2)
    plan = ops_compaction.plan(table.identifier, options, OPTIONS)
    assert any(f.path.endswith("imported.parquet") for g in plan.groups for f in g.files)

    results = [plan.task()(g) for g in plan.groups]
    report = commit_compaction(plan, plan.groups, results, OPTIONS, 0.0)
    assert report.committed_version is not None and table.rows() == expected
    verified = compaction_kept_rows(resolve_target(table.identifier, catalog, OPTIONS), report)
    assert verified.passed, verified.summary


def test_the_changelog_reads_an_imported_file_by_the_name_mapping(tmp_path: Path) -> None:
    table, before = _with_imported_file(tmp_path)
    ours = load_table(TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier), OPTIONS)
    plan = plan_changelog(ours, ChangelogOptions(from_snapshot=str(before), output=str(tmp_path / "out")), OPTIONS)

    changes = [row for unit in plan.units for rows in change_rows(unit) for row in rows.to_pylist()]
    assert sorted((r["_change_type"], r["id"]) for r in changes) == [("insert", i) for i in range(100, 104)]
    start = rows_of(table.table.scan(snapshot_id=before).to_arrow())
    assert replay_changes(start, changes) == replay_changes(table.rows())
