"""The Dagster assets of an Icechunk format 2 repository (written by icechunk 2.x): observed, compacted,
expired and garbage-collected through the same asset graph as every table, with its checks passing
(the registry's defaults: a week's retention, so garbage collection finds nothing old enough here)."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
from lakeops_testdata import TESTDATA
from run_events import own_materializations

from lakeops import api
from lakeops.icechunk.versioned import VersionedRepository
from lakeops.ops.data_version import data_version
from lakeops.ops.options import CompactionOptions
from lakeops.ops.target import IcechunkTarget
from lakeops.registry import parse_registry
from lakeops.storage import open_storage
from orchestration.assets import operation_key, table_key
from orchestration.registry_definitions import build_definitions
from orchestration.resources import SparkResource, StorageResource

FIXTURE = TESTDATA / "modern" / "icechunk" / "split-repo-v2"


def test_a_format_2_repository_is_maintained_through_its_assets(tmp_path: Path) -> None:
    root = tmp_path / "arrays"
    shutil.copytree(FIXTURE, root)
    registry = parse_registry(
        f"""
tables:
  - name: arrays
    location: {root}
    format: icechunk
    compaction: {{small_file_trigger: 2, min_input_files: 2}}
"""
    )
    entry = registry.table("arrays")
    tip_before = VersionedRepository(open_storage(str(root)), str(root)).info.branches["main"]
    keys = [table_key(entry), *(operation_key(entry, op) for op in ("compaction", "expiry", "orphans"))]
    result = dg.materialize(
        list(build_definitions(registry).assets or []),
        selection=keys,
        resources={"spark": SparkResource(), "storage": StorageResource()},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    # The operations' own checks (rows kept, retained files exist) pass; the table's health checks
    # describe it as it was observed, before the maintenance, and are not asserted here.
    evaluations = [
        e.event_specific_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION" and e.event_specific_data.asset_key != table_key(entry)  # type: ignore[union-attr]
    ]
    assert {e.asset_key for e in evaluations} == set(keys[1:])  # type: ignore[union-attr]
    assert all(e.passed for e in evaluations)  # type: ignore[union-attr]
    compacted = own_materializations(result, "arrays__compaction")[0].metadata
    assert compacted["chunks_packed"].value > 0
    # The fixture's snapshots were flushed months ago: the default week expires every one no ref keeps,
    # the compacted tip's parent included, and the tip is re-parented onto the initial snapshot.
    expired = own_materializations(result, "arrays__expiry")[0].metadata
    repo = VersionedRepository(open_storage(str(root)), str(root))
    tip = repo.info.branches["main"]
    assert expired["snapshots_expired"].value > 0 and tip_before not in repo.info.snapshots
    assert [s.id for s in repo.info.ancestry(tip)] == [tip, "1CECHNKREP0F1RSTCMT0"]
    assert repo.snapshot(tip).message.startswith("lakeops")


def test_compaction_leaves_the_data_version_of_a_format_2_repository(tmp_path: Path) -> None:
    """What Dagster's observation reports as the table's data version passes over lakeops' compaction
    snapshot (its chunks moved, its data unchanged) to the commit that last changed the data."""
    root = tmp_path / "arrays"
    shutil.copytree(FIXTURE, root)
    target = IcechunkTarget(location=str(root))
    before = data_version(target)
    report = api.compact(str(root), CompactionOptions(min_input_files=2))
    tip = VersionedRepository(open_storage(str(root)), str(root)).info.branches["main"]
    assert report.committed_snapshot == tip and tip != before
    assert data_version(target) == before
