"""Planning from manifest columns, in driver threads or as executor units, chooses what the full
scan would: the same files with the same delete files and sequence numbers, the same totals, and
the same compaction plan."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from iceberg_merge_on_read import add_equality_deletes, add_position_deletes, load
from pyiceberg_tables import small_file_table

from lakeops.executors import ThreadExecutor
from lakeops.iceberg.scan import plan_scan, plan_selected_scan
from lakeops.iceberg.table import TableRef
from lakeops.ops import compaction
from lakeops.ops.compaction import CompactionOptions
from lakeops.storage import StorageOptions


def _table_with_deletes(tmp_path: Path) -> tuple[str, str, TableRef]:
    made = small_file_table(tmp_path, "identity", appends=4, rows=12)
    ref = TableRef(catalog_uri=made.catalog_uri, identifier=made.identifier)
    table = load(ref)
    files = sorted(
        t.file.path for t in plan_scan(table.storage, table.metadata, table.metadata.current_snapshot()).tasks
    )
    target = files[0]
    table = add_position_deletes(
        table, [(target, 0)], partition={"category": target.split("category=")[1].split("/")[0]}
    )
    add_equality_deletes(table, pa.table({"category": pa.array(["b"], pa.string())}), [3], partition={"category": "b"})
    return made.catalog_uri, made.identifier, ref


def _facts(plan: object) -> list[tuple[object, ...]]:
    return sorted(
        (
            t.file.path,
            t.file.manifest_path,
            t.file.data_sequence_number,
            t.file.file_size,
            t.file.partition_key,
            tuple(sorted(d.path for d in t.deletes)),
        )
        for t in plan.tasks  # type: ignore[attr-defined]
    )


def test_selected_scan_keeps_what_the_full_scan_says_of_the_files_it_selects(tmp_path: Path) -> None:
    _, _, ref = _table_with_deletes(tmp_path)
    table = load(ref)
    snapshot = table.metadata.current_snapshot()
    full = plan_scan(table.storage, table.metadata, snapshot)
    sizes = sorted(t.file.file_size for t in full.tasks)
    low = high = sizes[len(sizes) // 2]  # about half the files are outside the bounds

    selected = plan_selected_scan(table.storage, table.metadata, snapshot, low=low, high=high)

    outside = {t.file.path for t in full.tasks if not low <= t.file.file_size <= high}
    with_deletes = {t.file.path for t in full.tasks if t.deletes}
    chosen = {t.file.path for t in selected.tasks}
    assert outside | with_deletes <= chosen and chosen < {t.file.path for t in full.tasks}
    assert _facts(selected) == [f for f in _facts(full) if f[0] in chosen]
    assert (selected.live_files, selected.live_bytes) == (full.live_files, full.live_bytes)
    assert selected.delete_files == full.delete_files


def test_manifests_read_as_executor_units_plan_as_driver_threads(tmp_path: Path) -> None:
    catalog_uri, identifier, _ = _table_with_deletes(tmp_path)
    options = CompactionOptions(catalog_uri=catalog_uri, manifest_threshold=0, min_input_files=2)

    in_threads = compaction.plan(identifier, options, StorageOptions())
    as_units = compaction.plan(identifier, options, StorageOptions(), executor=ThreadExecutor())

    assert in_threads.groups and any(f.deletes for g in in_threads.groups for f in g.files)
    assert as_units.model_dump() == in_threads.model_dump()
    assert len(in_threads.dangling_deletes) == 2 and in_threads.live_files == 4 * 4
