"""Row tracking on tables built by the specification
(https://github.com/delta-io/delta/blob/master/PROTOCOL.md#row-tracking): delta-rs writes the data, the
test enables the feature by hand as "Writer Requirements for Row Tracking" describes (protocol, metadata
with the materialised column names, every live ``add`` recommitted with ``baseRowId`` and
``defaultRowCommitVersion``, the high-water mark domain). After lakeops compacts, delta-rs reads the
same rows and each row's stable row id and row commit version — computed here from the log and the
data files per "Reader Requirements for Row Tracking", not by lakeops — are unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_deletion_vectors import inline_dv_descriptor
from delta_json_log import commit_next, live_adds, log_commits
from delta_rs_sql import delta_rs_rows
from deltalake import DeltaTable, write_deltalake
from maintenance_commits import commit_compaction
from pyroaring import BitMap64

from lakeops import api
from lakeops.delta.actions import Metadata, Protocol
from lakeops.delta.maintenance.compaction import plan_compaction, rewrite_group
from lakeops.delta.maintenance.options import DeltaCompactionOptions
from lakeops.delta.row_tracking import RowTracking
from lakeops.delta.schema import parse_schema
from lakeops.delta.snapshot import load_snapshot
from lakeops.delta.writer import DataFileWriter, append_files, read_target
from lakeops.errors import CommitConflict, ProtocolError
from lakeops.ops.cdc import CdcOptions
from lakeops.ops.compaction import CompactionOptions
from lakeops.storage import StorageOptions, open_storage
from spark_jobs.cli import main as lakeops

ROW_ID = "_row-id-col-test"
ROW_VERSION = "_row-commit-version-col-test"
TRACKING = {
    "delta.enableRowTracking": "true",
    "delta.rowTracking.materializedRowIdColumnName": ROW_ID,
    "delta.rowTracking.materializedRowCommitVersionColumnName": ROW_VERSION,
}
#: Writer 7 lists the legacy writer-2 features delta-rs's table had, plus row tracking and what it needs.
PROTOCOL = {
    "minReaderVersion": 1,
    "minWriterVersion": 7,
    "writerFeatures": ["appendOnly", "invariants", "domainMetadata", "rowTracking"],
}


def _metadata(location: str) -> dict[str, Any]:
    return [a["metaData"] for _, actions in log_commits(location) for a in actions if "metaData" in a][-1]


def _mark(high: int) -> dict[str, Any]:
    return {
        "domainMetadata": {"domain": "delta.rowTracking", "configuration": json.dumps({"rowIdHighWaterMark": high})}
    }


def _tracked_table(tmp_path: Path, configuration: dict[str, str]) -> str:
    """Three delta-rs appends of four rows (ids 0..11), then one commit enabling row tracking with
    ``configuration``: every live file recommitted with consecutive ``baseRowId``s from 0."""
    location = str(tmp_path / "t")
    for i in range(3):
        write_deltalake(location, pa.table({"id": pa.array(range(i * 4, i * 4 + 4), pa.int64())}), mode="append")
    version = log_commits(location)[-1][0] + 1
    metadata = _metadata(location)
    metadata["configuration"] = {**metadata["configuration"], **configuration}
    adds, base = [], 0
    for add in live_adds(location).values():  # in commit order: ids 0..11 get row ids 0..11
        adds.append({"add": {**add, "dataChange": False, "baseRowId": base, "defaultRowCommitVersion": version}})
        base += json.loads(add["stats"])["numRecords"]
    assert commit_next(location, {"protocol": PROTOCOL}, {"metaData": metadata}, *adds, _mark(base - 1)) == version
    return location


def _append(location: str, ids: range, base_row_id: int) -> int:
    """Another writer's append (a file written with pyarrow) numbered from ``base_row_id``."""
    name = f"part-append-{ids.start}.parquet"
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), Path(location) / name)
    version = log_commits(location)[-1][0] + 1
    add = {
        "path": name,
        "partitionValues": {},
        "size": (Path(location) / name).stat().st_size,
        "modificationTime": 0,
        "dataChange": True,
        "stats": json.dumps({"numRecords": len(ids)}),
        "baseRowId": base_row_id,
        "defaultRowCommitVersion": version,
    }
    return commit_next(location, {"add": add}, _mark(base_row_id + len(ids) - 1))


def _stable(location: str) -> dict[int, tuple[int, int]]:
    """Each row's (stable row id, stable row commit version) by its ``id``, from the log and the data
    files: the materialised value where non-null, else baseRowId + physical position and
    defaultRowCommitVersion."""
    stable: dict[int, tuple[int, int]] = {}
    for add in live_adds(location).values():
        data = pq.read_table(Path(location) / add["path"])
        for position, row in enumerate(data.to_pylist()):
            row_id = row.get(ROW_ID)
            version = row.get(ROW_VERSION)
            stable[row["id"]] = (
                add["baseRowId"] + position if row_id is None else row_id,
                add["defaultRowCommitVersion"] if version is None else version,
            )
    return stable


def _ids(location: str) -> list[int]:
    return sorted(DeltaTable(location).to_pyarrow_table()["id"].to_pylist())


def _last_commit(location: str) -> tuple[int, list[dict[str, Any]]]:
    return log_commits(location)[-1]


def test_compaction_assigns_fresh_row_ids_and_preserves_stable_ones(tmp_path: Path) -> None:
    location = _tracked_table(tmp_path, TRACKING)
    assert _ids(location) == list(range(12))  # delta-rs reads the table built by the spec
    before = _stable(location)
    assert before == {i: (i, 3) for i in range(12)}
    removed = {p: (a["baseRowId"], a["defaultRowCommitVersion"]) for p, a in live_adds(location).items()}

    report = api.compact(location, CompactionOptions(min_input_files=2))

    assert report.committed_version == 4
    assert _ids(location) == list(range(12))
    assert _stable(location) == before
    version, actions = _last_commit(location)
    (add,) = [a["add"] for a in actions if "add" in a]
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (12, 4)  # above the mark 11, at its version
    assert [a["domainMetadata"] for a in actions if "domainMetadata" in a] == [
        {"domain": "delta.rowTracking", "configuration": json.dumps({"rowIdHighWaterMark": 23}), "removed": False}
    ]
    assert {
        a["remove"]["path"]: (a["remove"]["baseRowId"], a["remove"]["defaultRowCommitVersion"])
        for a in actions
        if "remove" in a
    } == removed
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["tags"] == {"delta.rowTracking.preserved": "true"}
    columns = pq.read_schema(Path(location) / add["path"]).names
    assert columns == ["id", ROW_ID, ROW_VERSION]
    assert list(json.loads(add["stats"])["minValues"]) == ["id"]  # hidden columns are not the schema's


def test_a_second_compaction_over_a_concurrent_append_keeps_every_stable_id(tmp_path: Path) -> None:
    """Materialised and default ids mixed in one rewrite; an append landing first raises the mark, and
    the rewrite is renumbered above it at the version it lands at instead of conflicting."""
    location = _tracked_table(tmp_path, TRACKING)
    api.compact(location, CompactionOptions(min_input_files=2))  # version 4, mark 23
    _append(location, range(100, 104), 24)  # version 5, mark 27
    before = _stable(location)
    snapshot = load_snapshot(open_storage(location), location)
    plan = plan_compaction(snapshot, DeltaCompactionOptions(min_input_files=2), StorageOptions())
    results = [rewrite_group(g) for g in plan.groups]
    _append(location, range(200, 202), 28)  # version 6 lands first, mark 29

    report = commit_compaction(plan, plan.groups, results, StorageOptions(), 0.0)

    assert report.committed_version == 7
    assert _ids(location) == [*range(12), *range(100, 104), 200, 201]
    assert _stable(location) == {**before, 200: (28, 6), 201: (29, 6)}
    _, actions = _last_commit(location)
    (add,) = [a["add"] for a in actions if "add" in a]
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (30, 7)
    marks = [json.loads(a["domainMetadata"]["configuration"]) for a in actions if "domainMetadata" in a]
    assert marks == [{"rowIdHighWaterMark": 45}]  # 16 rows from 30
    fresh = [add["baseRowId"] + i for i in range(16)] + [28, 29]
    assert len(set(fresh)) == len(fresh)  # fresh ids stay unique in the version


def test_supported_but_not_enabled_assigns_fresh_ids_without_preserving(tmp_path: Path) -> None:
    """Supported only: fresh ids and versions are assigned, nothing is materialised, and the commit
    says the stable ids were not preserved."""
    location = _tracked_table(tmp_path, {})

    api.compact(location, CompactionOptions(min_input_files=2))

    assert _ids(location) == list(range(12))
    _, actions = _last_commit(location)
    (add,) = [a["add"] for a in actions if "add" in a]
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (12, 4)
    assert next(a["commitInfo"] for a in actions if "commitInfo" in a)["tags"] == {
        "delta.rowTracking.preserved": "false"
    }
    assert pq.read_schema(Path(location) / add["path"]).names == ["id"]


def test_a_version_adding_row_tracking_under_a_compaction_aborts_it(tmp_path: Path) -> None:
    location = str(tmp_path / "t")
    for i in range(3):
        write_deltalake(location, pa.table({"id": [i]}), mode="append")
    snapshot = load_snapshot(open_storage(location), location)
    plan = plan_compaction(snapshot, DeltaCompactionOptions(min_input_files=2), StorageOptions())
    results = [rewrite_group(g) for g in plan.groups]
    commit_next(location, {"protocol": PROTOCOL})

    with pytest.raises(CommitConflict, match="version 3 enables row tracking"):
        commit_compaction(plan, plan.groups, results, StorageOptions(), 0.0)
    assert _ids(location) == [0, 1, 2]


def test_an_append_numbers_its_rows_above_a_concurrent_appends(tmp_path: Path) -> None:
    """A change table's append (:func:`append_files`) on a table that tracks rows: planned on version
    3, it lands after another writer's append at version 5, numbered above that one's mark."""
    location = _tracked_table(tmp_path, TRACKING)
    storage = open_storage(location)
    target = read_target(storage, location)
    assert target.version == 3 and target.metadata is not None
    writer = DataFileWriter(parse_schema(target.metadata.schema_string))
    writer.write(pa.table({"id": pa.array([50, 51, 52], pa.int64())}))
    written = writer.finish(storage, location)
    assert written is not None
    _append(location, range(200, 202), 12)  # version 4, mark 13

    result = append_files(storage, target, metadata=target.metadata, files=[written], txn=None, operation_parameters={})

    assert result.version == 5
    assert _ids(location) == [*range(12), 50, 51, 52, 200, 201]
    assert _stable(location) == {
        **{i: (i, 3) for i in range(12)},
        200: (12, 4),
        201: (13, 4),
        50: (14, 5),
        51: (15, 5),
        52: (16, 5),
    }
    _, actions = _last_commit(location)
    marks = [json.loads(a["domainMetadata"]["configuration"]) for a in actions if "domainMetadata" in a]
    assert marks == [{"rowIdHighWaterMark": 16}]
    assert next(a["commitInfo"] for a in actions if "commitInfo" in a)["tags"] == {
        "delta.rowTracking.preserved": "true"
    }


def test_cdc_appending_to_a_change_table_that_tracks_rows_numbers_them(tmp_path: Path) -> None:
    """End to end: lakeops cdc creates a change table (no row tracking), someone enables row tracking
    on it by the spec, and the next cdc run's append numbers its rows above the mark."""
    source, output = str(tmp_path / "source"), str(tmp_path / "changes")
    cdf = {"delta.enableChangeDataFeed": "true"}
    write_deltalake(source, pa.table({"id": pa.array([1, 2, 3], pa.int64())}), configuration=cdf)
    api.cdc(source, CdcOptions(from_version=0, output=output))
    (first,) = live_adds(output).values()
    assert "baseRowId" not in first  # lakeops's change table does not track rows
    metadata = _metadata(output)
    metadata["configuration"] = {**metadata["configuration"], **TRACKING}
    recommitted = {**first, "dataChange": False, "baseRowId": 0, "defaultRowCommitVersion": 1}
    commit_next(output, {"protocol": PROTOCOL}, {"metaData": metadata}, {"add": recommitted}, _mark(2))
    write_deltalake(source, pa.table({"id": pa.array([4, 5], pa.int64())}), mode="append")

    report = api.cdc(source, CdcOptions(from_version=1, output=output))

    assert report.committed_version == 2
    changes = DeltaTable(output).to_pyarrow_table()
    assert sorted(changes["id"].to_pylist()) == [1, 2, 3, 4, 5]
    _, actions = _last_commit(output)
    (add,) = [a["add"] for a in actions if "add" in a]
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (3, 2)
    assert [json.loads(a["domainMetadata"]["configuration"]) for a in actions if "domainMetadata" in a] == [
        {"rowIdHighWaterMark": 4}
    ]


def test_positions_count_rows_a_deletion_vector_hides(tmp_path: Path) -> None:
    """A row's default row id is baseRowId plus its physical position, deleted rows included: after
    a DV hides ids 5 and 6 (positions 1 and 2 of the second file), id 7 keeps row id 7, not 5."""
    location = _tracked_table(tmp_path, TRACKING)
    second = list(live_adds(location).values())[1]
    dv = inline_dv_descriptor(BitMap64([1, 2])).to_json_dict()
    protocol = {
        **PROTOCOL,
        "minReaderVersion": 3,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": [*PROTOCOL["writerFeatures"], "deletionVectors"],
    }
    remove = {k: second[k] for k in ("path", "partitionValues", "size", "baseRowId", "defaultRowCommitVersion")}
    commit_next(
        location,
        {"protocol": protocol},
        {"remove": {**remove, "dataChange": True, "deletionTimestamp": 0}},
        {"add": {**second, "dataChange": True, "deletionVector": dv}},
    )
    alive = [i for i in range(12) if i not in (5, 6)]
    assert sorted(delta_rs_rows(location)["id"].to_pylist()) == alive

    api.compact(location, CompactionOptions(min_input_files=2))

    assert sorted(delta_rs_rows(location)["id"].to_pylist()) == alive
    assert _stable(location) == {i: (i, 3) for i in alive}
    assert not any("deletionVector" in a for a in live_adds(location).values())


def test_clustering_a_tracked_table_moves_rows_with_their_stable_ids(tmp_path: Path) -> None:
    """Both features, as the Databricks tables have them: clustering reorders rows across files, and
    each row's materialised stable id and commit version travel with it."""
    location = _tracked_table(tmp_path, TRACKING)
    _append(location, range(-4, 0), 12)  # version 4: ids below the others, so clustering moves rows
    before = _stable(location)
    protocol = {**PROTOCOL, "writerFeatures": [*PROTOCOL["writerFeatures"], "clustering"]}
    clustering = json.dumps({"clusteringColumns": [["id"]]})
    commit_next(
        location,
        {"protocol": protocol},
        {"domainMetadata": {"domain": "delta.clustering", "configuration": clustering}},
    )

    api.compact(location, CompactionOptions(min_input_files=2))

    assert _ids(location) == list(range(-4, 12))
    assert _stable(location) == before
    (add,) = live_adds(location).values()
    assert add["clusteringProvider"] == "lakeops-hilbert"
    assert pq.read_table(Path(location) / add["path"])["id"].to_pylist() == list(range(-4, 12))


def test_suspended_row_tracking_assigns_nothing(tmp_path: Path) -> None:
    """``delta.rowTrackingSuspended=true``: writers should not assign row ids or commit versions."""
    location = _tracked_table(tmp_path, {"delta.rowTrackingSuspended": "true"})

    api.compact(location, CompactionOptions(min_input_files=2))

    assert _ids(location) == list(range(12))
    _, actions = _last_commit(location)
    (add,) = [a["add"] for a in actions if "add" in a]
    assert "baseRowId" not in add and "defaultRowCommitVersion" not in add
    assert not any("domainMetadata" in a for a in actions)
    assert "tags" not in next(a["commitInfo"] for a in actions if "commitInfo" in a)


def test_enabled_without_materialised_column_names_is_refused(tmp_path: Path) -> None:
    location = _tracked_table(tmp_path, {"delta.enableRowTracking": "true"})
    with pytest.raises(ProtocolError, match="materializedRowIdColumnName or .* is not set"):
        api.compact(location, CompactionOptions(min_input_files=2))
    assert len(log_commits(location)) == 4


_ROW_ID_PROPERTY = "delta.rowTracking.materializedRowIdColumnName"
_VERSION_PROPERTY = "delta.rowTracking.materializedRowCommitVersionColumnName"


@pytest.mark.parametrize(
    ("configuration", "named"),
    [
        ({_ROW_ID_PROPERTY: "id"}, [f"{_ROW_ID_PROPERTY}='id'", "column 'id'"]),
        ({_VERSION_PROPERTY: "id"}, [f"{_VERSION_PROPERTY}='id'", "column 'id'"]),
        ({_ROW_ID_PROPERTY: "ID"}, [f"{_ROW_ID_PROPERTY}='ID'", "column 'id'"]),  # Delta names ignore case
        ({_VERSION_PROPERTY: ROW_ID}, [f"{_ROW_ID_PROPERTY}={ROW_ID!r}", f"{_VERSION_PROPERTY}={ROW_ID!r}"]),
    ],
    ids=["row id is a column", "commit version is a column", "row id is a column but for case", "both one name"],
)
def test_materialised_columns_that_are_not_unique_are_refused_naming_the_property(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], configuration: dict[str, str], named: list[str]
) -> None:
    """ "Writer Requirements for Row Tracking": "The assigned column names must be unique. They must not be
    equal to the name of any other column in the table's schema." Compaction wrote a data file holding the
    column twice: ``KeyError: Field "id" exists 2 times in schema`` (issue 34)."""
    location = _tracked_table(tmp_path, {**TRACKING, **configuration})

    def table_files() -> list[Path]:
        return sorted(p for p in Path(location).rglob("*") if "_lakeops_audit" not in p.parts)

    files = table_files()

    for dry_run in (["--dry-run"], []):
        assert lakeops(["compact", location, "--min-input-files", "2", *dry_run]) == 1
        error = capsys.readouterr().err
        assert "ProtocolError" in error and location in error, error
        assert all(fragment in error for fragment in named), error
        assert "Writer Requirements for Row Tracking" in error
    with pytest.raises(ProtocolError, match="must be unique"):
        api.compact(location, CompactionOptions(min_input_files=2))
    assert table_files() == files  # nothing written, nothing committed
    assert _ids(location) == list(range(12))

    # An append writes no materialised column: it numbers its rows and lands.
    storage = open_storage(location)
    target = read_target(storage, location)
    assert target.metadata is not None
    writer = DataFileWriter(parse_schema(target.metadata.schema_string))
    writer.write(pa.table({"id": pa.array([50], pa.int64())}))
    written = writer.finish(storage, location)
    assert written is not None
    result = append_files(storage, target, metadata=target.metadata, files=[written], txn=None, operation_parameters={})
    assert result.version == 4 and _ids(location) == [*range(12), 50]


def test_a_materialised_column_equal_to_a_physical_column_name_is_refused() -> None:
    """With column mapping the data files name columns by their physical names, which the hidden columns
    must differ from too ("Writer Requirements for Row Tracking")."""
    field = {"name": "id", "type": "long", "nullable": True, "metadata": {"delta.columnMapping.physicalName": "col-7"}}
    metadata = Metadata(
        id="t",
        schemaString=json.dumps({"type": "struct", "fields": [field]}),
        configuration={**TRACKING, "delta.columnMapping.mode": "name", _VERSION_PROPERTY: "col-7"},
    )
    protocol = Protocol(
        minReaderVersion=3,
        minWriterVersion=7,
        readerFeatures=["columnMapping"],
        writerFeatures=["columnMapping", "domainMetadata", "rowTracking"],
    )
    with pytest.raises(ProtocolError, match=rf"/t: table property {_VERSION_PROPERTY}='col-7' .* column 'id'"):
        RowTracking.for_rewrite(protocol, metadata, "/t")
    mapped_off = metadata.model_copy(update={"configuration": {**metadata.configuration, _VERSION_PROPERTY: "id"}})
    with pytest.raises(ProtocolError, match="column 'id'"):
        RowTracking.for_rewrite(protocol, mapped_off, "/t")  # the logical name is refused as well
    unmapped = metadata.model_copy(
        update={"schema_string": json.dumps({"type": "struct", "fields": [{**field, "metadata": {}}]})}
    )
    with pytest.raises(ProtocolError, match=r"^/t: column 'id' has no delta.columnMapping.physicalName"):
        RowTracking.for_rewrite(protocol, unmapped, "/t")  # a column mapping without its physical name


LONG_MAX = 2**63 - 1


@pytest.mark.parametrize(
    ("mark", "error"),
    [
        (LONG_MAX, "ProtocolError: {table}: domain delta.rowTracking's rowIdHighWaterMark is 9223372036854775807:"),
        (LONG_MAX - 5, "ProtocolError: {table}: domain delta.rowTracking's rowIdHighWaterMark is 9223372036854775802:"),
        (2**63, "CorruptFile: {table}: domain delta.rowTracking rowIdHighWaterMark 9223372036854775808 is not a long"),
        (True, "CorruptFile: {table}: domain delta.rowTracking rowIdHighWaterMark True is not an integer"),
    ],
    ids=["long max", "too few left", "past long", "boolean"],
)
def test_a_high_water_mark_no_new_row_id_fits_above_is_refused_naming_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mark: object, error: str
) -> None:
    """Fresh row ids are longs above the mark ("Writer Requirements for Row Tracking"); compaction wrote
    ``baseRowId`` 2^63 into the log, then ``checkpoint`` failed naming nothing (issue 34, nearby)."""
    location = _tracked_table(tmp_path, TRACKING)
    commit_next(location, _mark(mark))  # type: ignore[arg-type]
    commits = len(log_commits(location))

    assert lakeops(["compact", location, "--min-input-files", "2"]) == 1  # 12 rows to number
    assert error.format(table=location) in " ".join(capsys.readouterr().err.split())
    assert len(log_commits(location)) == commits and _ids(location) == list(range(12))


def test_an_append_whose_rows_pass_the_largest_row_id_is_refused_before_it_commits(tmp_path: Path) -> None:
    location = _tracked_table(tmp_path, TRACKING)
    commit_next(location, _mark(LONG_MAX - 2))
    storage = open_storage(location)
    target = read_target(storage, location)
    assert target.metadata is not None
    writer = DataFileWriter(parse_schema(target.metadata.schema_string))
    writer.write(pa.table({"id": pa.array([50, 51, 52], pa.int64())}))
    written = writer.finish(storage, location)
    assert written is not None

    with pytest.raises(ProtocolError, match=f"rowIdHighWaterMark is {LONG_MAX - 2}: 3 more row ids"):
        append_files(storage, target, metadata=target.metadata, files=[written], txn=None, operation_parameters={})
    assert len(log_commits(location)) == 5 and _ids(location) == list(range(12))


def test_a_checkpoint_of_a_value_its_schema_cannot_hold_names_the_checkpoint_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another writer's ``baseRowId`` of 2^63 (no long): the checkpoint was refused naming no table."""
    location = _tracked_table(tmp_path, TRACKING)
    (path, add), *_ = live_adds(location).items()
    commit_next(location, {"add": {**add, "dataChange": False, "baseRowId": 2**63}})

    assert lakeops(["checkpoint", location]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"ProtocolError: {location}/_delta_log/{4:020}.checkpoint.parquet: cannot encode checkpoint actions" in err
    assert not list((Path(location) / "_delta_log").glob("*.checkpoint.parquet"))
