"""OPTIMIZE against versions that landed between its plan and its commit: which ones it rebases over,
which bins they drop and which abort it (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#add-file-and-remove-file).

Each test plans two bins (one per partition), rewrites them (the pure task, no Spark), lets another
writer commit first and then commits through :func:`maintenance_commits.commit_compaction`, which also deletes
the new files of dropped bins (or of the whole run on an abort) and reports what happened.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from maintenance_commits import commit_compaction

from lakeops.delta.maintenance.compaction import RewriteResult, plan_compaction, rewrite_group
from lakeops.delta.maintenance.options import DeltaCompactionOptions
from lakeops.delta.snapshot import load_snapshot
from lakeops.delta.version_checksum import check_version_checksum
from lakeops.errors import CommitConflict
from lakeops.ops.compaction import CompactionReport
from lakeops.storage import StorageOptions, open_storage

DAYS = ("2026-11-01", "2026-11-02")


def _table(tmp_path: Path) -> str:
    location = str(tmp_path / "t")
    for i in range(6):
        batch = pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "day": pa.array([DAYS[i % 2]] * 10)})
        write_deltalake(location, batch, mode="append", partition_by=["day"])
    return location


def _rewrite(location: str) -> tuple[Any, list[RewriteResult]]:
    snapshot = load_snapshot(open_storage(location), location)
    plan = plan_compaction(snapshot, DeltaCompactionOptions(min_input_files=2), StorageOptions())
    assert [g.partition_values["day"] for g in plan.groups] == list(DAYS)
    return plan, [rewrite_group(g) for g in plan.groups]


def _commit(plan: Any, results: list[RewriteResult]) -> CompactionReport:
    return commit_compaction(plan, plan.groups, results, StorageOptions(), 0.0)


def _land(location: str, *actions: dict[str, Any]) -> int:
    """Another engine's commit at the next version."""
    version = DeltaTable(location).version() + 1
    lines = [{"commitInfo": {"operation": "OTHER", "txnId": "someone-else"}}, *actions]
    path = Path(location) / "_delta_log" / f"{version:020d}.json"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return version


def _add_json(location: str, day: str) -> dict[str, Any]:
    """The JSON of a live file of ``day`` (as the log has it)."""
    snapshot = load_snapshot(open_storage(location), location)
    add = next(a for a in snapshot.files.values() if a.partition_values["day"] == day)
    return add.to_json_dict()


def _exists(results: list[RewriteResult], group_id: int) -> list[bool]:
    return [Path(w.location).exists() for r in results if r.group_id == group_id for w in r.written]


def _ids(location: str) -> list[int]:
    return sorted(DeltaTable(location).to_pyarrow_table().column("id").to_pylist())


def test_an_append_meanwhile_is_rebased_over(tmp_path: Path) -> None:
    location = _table(tmp_path)
    plan, results = _rewrite(location)
    write_deltalake(location, pa.table({"id": [100], "day": [DAYS[0]]}), mode="append", partition_by=["day"])

    report = _commit(plan, results)

    assert (report.committed_version, report.commit_attempts, report.commit_retries) == (7, 2, 1)
    assert report.groups_dropped_by_conflict == 0 and report.files_removed == 6
    assert _ids(location) == [*range(60), 100]
    files = DeltaTable(location).file_uris()
    assert len(files) == 3  # two compacted files and the append
    # The checksum of version 7 is the state after the rebase: the append that landed first included.
    crc = json.loads((Path(location) / "_delta_log" / f"{7:020d}.crc").read_text())
    assert (crc["numFiles"], crc["tableSizeBytes"]) == (3, sum(Path(f).stat().st_size for f in files))
    storage = open_storage(location)
    assert check_version_checksum(storage, load_snapshot(storage, location)).status == "matches"


def test_a_delete_of_a_rewritten_file_drops_that_bin_and_commits_the_other(tmp_path: Path) -> None:
    location = _table(tmp_path)
    plan, results = _rewrite(location)
    DeltaTable(location).delete("id = 3")  # rewrites a file of the first bin (day 1)

    report = _commit(plan, results)

    assert report.commits == 1 and report.groups_dropped_by_conflict == 1
    assert report.files_removed == 3 and report.files_added == 1
    assert "version 6 removed day=2026-11-01/" in report.conflicts[0]
    assert _exists(results, 0) == [False] and _exists(results, 1) == [True]  # only the dropped bin's output went
    assert _ids(location) == [i for i in range(60) if i != 3]
    assert report.metrics()["groups_dropped_by_conflict"] == 1


def test_when_every_bin_conflicts_it_aborts_deleting_only_its_own_files(tmp_path: Path) -> None:
    location = _table(tmp_path)
    plan, results = _rewrite(location)
    DeltaTable(location).delete("id IN (3, 14)")  # a file in each bin
    before = sorted(DeltaTable(location).file_uris())

    with pytest.raises(CommitConflict, match=r"t: OPTIMIZE based on version 5 aborted: version 6 removed .*every one"):
        _commit(plan, results)

    assert _exists(results, 0) == _exists(results, 1) == [False]
    assert sorted(DeltaTable(location).file_uris()) == before and DeltaTable(location).version() == 6


def test_a_deletion_vector_added_to_a_rewritten_file_drops_its_bin(tmp_path: Path) -> None:
    location = _table(tmp_path)
    plan, results = _rewrite(location)
    add = _add_json(location, DAYS[1])
    dv = {"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5EtOA", "sizeInBytes": 36}
    remove = {k: add[k] for k in ("path", "partitionValues", "size")} | {"deletionTimestamp": 1, "dataChange": True}
    _land(location, {"remove": remove}, {"add": add | {"deletionVector": dv | {"cardinality": 1}}})

    report = _commit(plan, results)

    assert report.groups_dropped_by_conflict == 1
    assert f"changed the deletion vector of {add['path']}" in report.conflicts[0]
    assert _exists(results, 1) == [False] and _exists(results, 0) == [True]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schemaString": json.dumps({"type": "struct", "fields": []})}, "changed the table schema"),
        ({"partitionColumns": []}, "changed the partition columns"),
        ({"configuration": {"delta.columnMapping.mode": "name"}}, "changed the column mapping mode"),
    ],
)
def test_a_metadata_change_the_new_files_depend_on_aborts(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    location = _table(tmp_path)
    plan, results = _rewrite(location)
    metadata = load_snapshot(open_storage(location), location).metadata.to_json_dict()
    _land(location, {"metaData": metadata | change})

    with pytest.raises(CommitConflict, match=f"version 6 {message}"):
        _commit(plan, results)
    assert _exists(results, 0) == _exists(results, 1) == [False]


def test_a_property_change_is_rebased_over(tmp_path: Path) -> None:
    location = _table(tmp_path)
    plan, results = _rewrite(location)
    metadata = load_snapshot(open_storage(location), location).metadata.to_json_dict()
    _land(location, {"metaData": metadata | {"configuration": {"delta.logRetentionDuration": "interval 1 day"}}})

    report = _commit(plan, results)

    assert report.committed_version == 7 and report.groups_dropped_by_conflict == 0
    assert _ids(location) == list(range(60))


def test_a_protocol_lakeops_does_not_write_aborts(tmp_path: Path) -> None:
    location = _table(tmp_path)
    plan, results = _rewrite(location)
    protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["madeUpWriterFeature"]}
    _land(location, {"protocol": protocol})

    with pytest.raises(CommitConflict, match="version 6 changed the protocol: .*madeUpWriterFeature"):
        _commit(plan, results)
    assert _exists(results, 0) == _exists(results, 1) == [False]


def test_retries_are_bounded_by_commit_retries(tmp_path: Path) -> None:
    location = _table(tmp_path)
    plan, results = _rewrite(location)
    write_deltalake(location, pa.table({"id": [100], "day": [DAYS[0]]}), mode="append", partition_by=["day"])

    with pytest.raises(CommitConflict, match="gave up at version 6 after 1 attempts"):
        _commit(plan.model_copy(update={"commit_retries": 0}), results)
    assert _exists(results, 0) == _exists(results, 1) == [False]
    assert _ids(location) == [*range(60), 100]
