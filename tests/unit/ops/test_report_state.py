"""What orchestration reads from reports, as typed fields: every report's state version (the table's
version after the run, an id that is never the text "None" and moves when the table does), its row
count, and every inspect report's table state in the same terms for Delta, Iceberg and Icechunk."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from icechunk_repos import build_history
from pyiceberg_tables import batch, small_file_table

from lakeops.icechunk.repository import Repository
from lakeops.icechunk.writer import ChangeSet, commit
from lakeops.ops.cdc import CdcReport
from lakeops.ops.checkpoint import CheckpointReport
from lakeops.ops.compaction import CompactionReport
from lakeops.ops.expiry import ExpiryReport
from lakeops.ops.icechunk.cdc import IcechunkCdcReport
from lakeops.ops.icechunk.compaction import IcechunkCompactionReport
from lakeops.ops.icechunk.expiry import IcechunkExpiryReport
from lakeops.ops.inspect import InspectReport, inspect_table
from lakeops.ops.report import InspectionReport, Report, TableState
from lakeops.ops.target import CatalogOptions
from lakeops.storage import open_storage


def test_a_delta_inspect_report_states_its_version_and_table(tmp_path: Path) -> None:
    location = str(tmp_path / "events")
    for i in range(3):
        write_deltalake(location, pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    report = inspect_table(location)
    assert isinstance(report, InspectionReport)
    assert report.state_version == "2"
    assert report.table_state() == TableState(
        format="delta",
        small_files=3,
        live_files=3,
        checkpoint_lag=3,
        snapshots=3,
        oldest_snapshot_age_s=report.oldest_commit_age_s,
        reclaimable_bytes=0,
    )
    write_deltalake(location, pa.table({"id": pa.array([9], pa.int64())}), mode="append")
    assert inspect_table(location).state_version == "3"


def test_an_iceberg_inspect_report_states_its_snapshot(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=3, rows=5)
    catalog = CatalogOptions(catalog_uri=table.catalog_uri)
    report = inspect_table(table.identifier, catalog=catalog)
    current = table.reload().current_snapshot()
    assert current is not None and report.state_version == str(current.snapshot_id)
    state = report.table_state()
    assert (state.format, state.live_files, state.small_files, state.checkpoint_lag) == ("iceberg", 3, 3, 3)
    assert state.reclaimable_bytes is None  # Iceberg's inspect does not measure it

    table.table.append(batch(100, 5))
    appended = table.reload().current_snapshot()
    after = inspect_table(table.identifier, catalog=catalog)
    assert appended is not None and after.state_version == str(appended.snapshot_id) != report.state_version


def test_an_icechunk_inspect_report_states_its_tip_snapshot_not_none(tmp_path: Path) -> None:
    """The report's generic version fields are None for Icechunk (its versions are snapshot ids):
    a state read from them as text was "None" whatever the repository did."""
    root = str(tmp_path / "arrays")
    storage = open_storage(root)
    build_history(storage, root, commits=4)
    report = inspect_table(root)
    tip = Repository(storage, root).resolve("main")
    assert report.state_version == tip != "None"
    state = report.table_state()
    assert (state.format, state.checkpoint_lag, state.manifests) == ("icechunk", None, None)
    # Chunk objects stand for files: those packing would merge are the small ones.
    assert (state.small_files, state.live_files) == (report.packable_chunk_objects, report.chunk_objects)
    assert state.small_files > 0

    written = commit(storage, root, ChangeSet().set_chunk("/data/line", (0,), b"new"), message="more")
    assert inspect_table(root).state_version == written.snapshot_id != tip


@pytest.mark.parametrize(
    ("report", "version"),
    [
        (CompactionReport(format="delta", table="t", read_version=4, committed_version=5), "5"),
        (CompactionReport(format="delta", table="t", read_version=4, dry_run=True), "4"),
        (CompactionReport(format="iceberg", table="t", read_version=0, committed_version=0, snapshot_id=77), "77"),
        (CheckpointReport(format="iceberg", table="t", read_version=3, committed_version=4, snapshot_id=12), "12"),
        (CheckpointReport(format="delta", table="t", read_version=9, version=9), "9"),
        # CDC: the source's version (committed_version is the output's).
        (CdcReport(format="delta", table="t", read_version=6, committed_version=1), "6"),
        (CdcReport(format="iceberg", table="t", read_version=2, committed_version=1, to_snapshot_id=5), "5"),
        (IcechunkCompactionReport(format="icechunk", table="t", base_snapshot="A", committed_snapshot="B"), "B"),
        (IcechunkCompactionReport(format="icechunk", table="t", base_snapshot="A"), "A"),
        (IcechunkCdcReport(format="icechunk", table="t", read_version=3, to_snapshot="C"), "C"),
        (ExpiryReport(format="delta", table="t", read_version=8), "8"),
        (IcechunkExpiryReport(format="icechunk", table="t"), None),
    ],
)
def test_every_report_states_the_version_it_leaves(report: Report, version: str | None) -> None:
    assert report.state_version == version


def test_row_counts_of_the_operations_that_count_rows() -> None:
    assert CompactionReport(format="delta", table="t", rows_written=40).row_count == 40
    assert CdcReport(format="delta", table="t", rows_written=3).row_count == 3
    assert IcechunkCdcReport(format="icechunk", table="t", rows_written=2).row_count == 2
    assert InspectReport(format="delta", table="t", rows=7).row_count == 7
    assert CheckpointReport(format="delta", table="t").row_count is None
