"""Which delete files apply to which data files: the "Scan Planning" rules case by case."""

from __future__ import annotations

from typing import Any

import pytest
from iceberg_fixtures import minimal_metadata

from lakeops.errors import InvalidArgument
from lakeops.iceberg.deletes import FILE_PATH_ID
from lakeops.iceberg.manifest import DataFile, EntryStatus, FileContent, ManifestEntry
from lakeops.iceberg.manifest_list import ManifestFile, PartitionFieldSummary
from lakeops.iceberg.metadata import TableMetadata
from lakeops.iceberg.scan import DeleteIndex, LiveFile, PartitionFilter, may_reference
from lakeops.iceberg.single_values import to_bytes
from lakeops.iceberg.types import PrimitiveType
from lakeops.predicate import parse_predicate

PARTITIONED, UNPARTITIONED = 0, 1


def _file(
    path: str,
    seq: int,
    *,
    content: FileContent = FileContent.DATA,
    spec_id: int = PARTITIONED,
    partition: dict[str, Any] | None = None,
    bounds: tuple[str, str] | None = None,
) -> LiveFile:
    string = PrimitiveType(name="string")
    lower = {FILE_PATH_ID: to_bytes(string, bounds[0])} if bounds else None
    upper = {FILE_PATH_ID: to_bytes(string, bounds[1])} if bounds else None
    data = DataFile(
        content=content,
        file_path=path,
        file_format="PARQUET",
        partition={"day": 19000} if partition is None and spec_id == PARTITIONED else (partition or {}),
        record_count=1,
        file_size_in_bytes=10,
        lower_bounds=lower,
        upper_bounds=upper,
        equality_ids=[1] if content == FileContent.EQUALITY_DELETES else None,
    )
    entry = ManifestEntry(
        status=EntryStatus.ADDED, snapshot_id=1, sequence_number=seq, file_sequence_number=seq, data_file=data
    )
    return LiveFile(entry, spec_id, "m.avro")


def _applies(data: LiveFile, *deletes: LiveFile) -> list[str]:
    return [d.path for d in DeleteIndex(deletes, {UNPARTITIONED}).for_data_file(data)]


def test_position_deletes_apply_to_older_and_same_commit_data() -> None:
    delete = _file("pos", 5, content=FileContent.POSITION_DELETES)
    assert _applies(_file("older", 4), delete) == ["pos"]
    assert _applies(_file("same-commit", 5), delete) == ["pos"]  # data seq <= delete seq
    assert _applies(_file("newer", 6), delete) == []


def test_equality_deletes_apply_only_to_strictly_older_data() -> None:
    delete = _file("eq", 5, content=FileContent.EQUALITY_DELETES)
    assert _applies(_file("older", 4), delete) == ["eq"]
    assert _applies(_file("same-commit", 5), delete) == []  # data seq < delete seq, strictly
    assert _applies(_file("newer", 6), delete) == []


def test_partition_scope() -> None:
    other_day = {"day": 19001}
    assert _applies(_file("d", 1, partition=other_day), _file("pos", 5, content=FileContent.POSITION_DELETES)) == []
    assert _applies(_file("d", 1, partition=other_day), _file("eq", 5, content=FileContent.EQUALITY_DELETES)) == []
    # Another spec with equal values is another partition.
    assert (
        _applies(
            _file("d", 1, spec_id=2, partition={"day": 19000}), _file("eq", 5, content=FileContent.EQUALITY_DELETES)
        )
        == []
    )


def test_unpartitioned_equality_deletes_are_global_position_deletes_are_not() -> None:
    global_eq = _file("eq-global", 5, content=FileContent.EQUALITY_DELETES, spec_id=UNPARTITIONED)
    unpartitioned_pos = _file("pos-unpartitioned", 5, content=FileContent.POSITION_DELETES, spec_id=UNPARTITIONED)
    data = _file("d", 1, partition={"day": 19003})
    assert _applies(data, global_eq, unpartitioned_pos) == ["eq-global"]
    assert _applies(_file("d", 5, partition={"day": 19003}), global_eq) == []


def test_position_delete_file_path_bounds_prune() -> None:
    delete = _file(
        "pos", 5, content=FileContent.POSITION_DELETES, bounds=("s3://b/t/data/b.parquet", "s3://b/t/data/d.parquet")
    )
    assert may_reference(delete, "s3://b/t/data/c.parquet")
    assert not may_reference(delete, "s3://b/t/data/a.parquet")
    assert not may_reference(delete, "s3://b/t/data/e.parquet")
    assert _applies(_file("s3://b/t/data/e.parquet", 1), delete) == []
    assert _applies(_file("s3://b/t/data/c.parquet", 1), delete) == ["pos"]


def test_several_deletes_sorted_and_mixed() -> None:
    data = _file("d", 3)
    deletes = [
        _file("eq-2", 2, content=FileContent.EQUALITY_DELETES),
        _file("pos-3", 3, content=FileContent.POSITION_DELETES),
        _file("eq-4", 4, content=FileContent.EQUALITY_DELETES),
        _file("pos-2", 2, content=FileContent.POSITION_DELETES),
        _file("eq-g7", 7, content=FileContent.EQUALITY_DELETES, spec_id=UNPARTITIONED),
    ]
    assert sorted(_applies(data, *deletes)) == ["eq-4", "eq-g7", "pos-3"]


def _metadata() -> TableMetadata:
    schema = {
        "type": "struct",
        "schema-id": 0,
        "fields": [
            {"id": 1, "name": "ts", "required": False, "type": "timestamp"},
            {"id": 2, "name": "region", "required": False, "type": "string"},
        ],
    }
    specs = [
        {
            "spec-id": 0,
            "fields": [
                {"source-id": 1, "field-id": 1000, "name": "ts_day", "transform": "day"},
                {"source-id": 2, "field-id": 1001, "name": "region", "transform": "identity"},
            ],
        },
        {"spec-id": 1, "fields": []},
    ]
    return TableMetadata.model_validate(minimal_metadata(location="/t", schema=schema, specs=specs))


def test_partition_filter_on_field_names_and_identity_sources() -> None:
    partition_filter = PartitionFilter(parse_predicate("ts_day >= '2022-01-02' AND region = 'eu'"), _metadata())
    day = 18994  # 2022-01-02
    assert partition_filter.matches(0, {"ts_day": day, "region": "eu"})
    assert not partition_filter.matches(0, {"ts_day": day - 1, "region": "eu"})
    assert not partition_filter.matches(0, {"ts_day": day, "region": "us"})
    assert not partition_filter.matches(1, {})  # the unpartitioned spec cannot prove a match
    with pytest.raises(InvalidArgument, match="may only use partition columns"):
        PartitionFilter(parse_predicate("ts = 1"), _metadata())


def _manifest(spec_id: int, summaries: list[PartitionFieldSummary] | None) -> ManifestFile:
    return ManifestFile(
        manifest_path="m.avro", manifest_length=1, partition_spec_id=spec_id, added_snapshot_id=1, partitions=summaries
    )


def test_manifests_are_pruned_by_partition_summaries() -> None:
    date, string = PrimitiveType(name="date"), PrimitiveType(name="string")
    jan = [  # ts_day 2022-01-01..2022-01-31, region eu..us
        PartitionFieldSummary(
            contains_null=False, lower_bound=to_bytes(date, 18993), upper_bound=to_bytes(date, 19023)
        ),
        PartitionFieldSummary(
            contains_null=True, lower_bound=to_bytes(string, "eu"), upper_bound=to_bytes(string, "us")
        ),
    ]

    def may_match(where: str, manifest: ManifestFile) -> bool:
        return PartitionFilter(parse_predicate(where), _metadata()).may_match(manifest)

    manifest = _manifest(0, jan)
    assert may_match("ts_day = '2022-01-15'", manifest)
    assert not may_match("ts_day = '2022-02-01'", manifest)
    assert not may_match("ts_day < '2022-01-01'", manifest) and may_match("ts_day <= '2022-01-01'", manifest)
    assert not may_match("ts_day > '2022-01-31'", manifest) and may_match("ts_day >= '2022-01-31'", manifest)
    assert may_match("region IN ('fr', 'zz', 'us')", manifest) and not may_match("region IN ('aa', 'zz')", manifest)
    assert may_match("region IS NULL", manifest)
    assert not may_match("region IS NULL", _manifest(0, [jan[0], jan[1].model_copy(update={"contains_null": False})]))
    assert may_match("ts_day = '2030-01-01'", _manifest(0, None))  # no summaries: cannot rule it out
    assert not may_match("region = 'eu'", _manifest(1, []))  # the unpartitioned spec has no such field
