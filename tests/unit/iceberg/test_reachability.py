"""Reachability: every file a snapshot needs is found; DELETED entries keep nothing alive."""

from __future__ import annotations

from pathlib import Path

from pyiceberg_tables import small_file_table

from lakeops.iceberg.reachability import reachable_files
from lakeops.iceberg.table import TableRef, load_table
from lakeops.storage import StorageOptions


def test_reachable_files_of_snapshots(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "identity", appends=3, rows=12)
    table.table.delete("category == 'a'")  # copy-on-write: removes the files of partition a
    pyiceberg = table.reload()
    ours = load_table(TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier), StorageOptions())
    metadata = ours.metadata

    everything = reachable_files(ours.storage, metadata, metadata.snapshots)
    for snapshot in pyiceberg.snapshots():
        assert snapshot.manifest_list in everything.manifest_lists
        for manifest in snapshot.manifests(pyiceberg.io):
            assert manifest.manifest_path in everything.manifests
        for task in pyiceberg.scan(snapshot_id=snapshot.snapshot_id).plan_files():
            assert task.file.file_path in everything.content_files
    assert all(Path(p.removeprefix("file://")).is_file() for p in everything.all())

    current = metadata.current_snapshot()
    assert current is not None
    latest = reachable_files(ours.storage, metadata, [current])
    live = {t.file.file_path for t in pyiceberg.scan().plan_files()}
    assert latest.content_files == live  # the deleted partition's files are only DELETED entries now
    assert "category=a" in " ".join(everything.content_files - latest.content_files)
    with_deleted = reachable_files(ours.storage, metadata, [current], live_only=False)
    assert with_deleted.content_files > latest.content_files
