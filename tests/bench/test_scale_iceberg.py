"""The 10 M-entry workload at a tiny size: PyIceberg reads the generated metadata-only table as the
spec says it (inherited sequence numbers, both snapshots), and each planning run reports its work."""

from __future__ import annotations

from pathlib import Path

from pyiceberg.table import StaticTable

from bench.scale_iceberg import _plan
from bench.workloads.iceberg_manifests import BIG_SIZE, SMALL_SIZE, manifest_set


def test_generated_manifests_read_by_pyiceberg_and_planned(tmp_path: Path) -> None:
    workload = manifest_set(tmp_path / "w", entries=250, entries_per_manifest=100)
    metadata = Path(workload.target) / "metadata" / "v1.metadata.json"

    table = StaticTable.from_metadata(str(metadata))
    files = [task.file for task in table.scan().plan_files()]
    assert len(files) == 250
    assert sorted({f.file_size_in_bytes for f in files}) == [SMALL_SIZE, BIG_SIZE]
    assert sum(f.file_size_in_bytes == SMALL_SIZE for f in files) == 3  # one in a hundred, per manifest
    first = table.metadata.snapshots[0]
    assert len(table.scan(snapshot_id=first.snapshot_id).plan_files()) == 100  # the first half's manifest

    compact = _plan("compact", workload.target)
    assert (compact["live_files_before"], compact["candidate_files"]) == (250, 3)
    orphans = _plan("orphans", workload.target)
    assert orphans["referenced_files"] == 250 + 3 + 2 + 1 + 1  # entries, manifests, lists, metadata, hint
    expire = _plan("expire", workload.target)
    assert (expire["snapshots_expired"], expire["deleted_manifest_lists"], expire["deleted_manifests"]) == (1, 1, 0)
