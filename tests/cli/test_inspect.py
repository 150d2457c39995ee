"""``lakeops inspect``: the health numbers of a table, at the latest version or by time travel."""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from lakeops_testdata import TESTDATA

from lakeops import api
from lakeops.delta import features
from lakeops.errors import UnsupportedFeature
from spark_jobs.cli import main as lakeops


def _inspect(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert lakeops(["inspect", *argv, "--json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def test_inspect_reports_files_checkpoint_and_features(capsys: pytest.CaptureFixture[str]) -> None:
    report = _inspect(capsys, str(TESTDATA / "delta-rs" / "checkpoints_vacuumed"), "--version", "7")
    assert report["version"] == 7
    assert report["live_files"] == 7
    assert report["small_files"] == 6  # one of the two date partitions holds a lone file: nothing to merge
    assert report["last_checkpoint_version"] == 5 and report["commits_since_checkpoint"] == 2
    assert report["partition_columns"] == ["date"]

    latest = _inspect(capsys, str(TESTDATA / "delta-rs" / "table-with-dv-small"))
    assert latest["features"] == ["deletionVectors"]
    assert (latest["min_reader_version"], latest["min_writer_version"]) == (3, 7)
    assert latest["files_with_dv"] == 1 and latest["rows_deleted_by_dv"] == 2 and latest["rows"] == 8


def test_inspect_by_timestamp(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(location), pa.table({"id": [i]}), mode="append")
    # Date the commits one hour apart, as the protocol dates commits by file modification time.
    base = time.time() - 10 * 3600
    for version in range(3):
        stamp = base + version * 3600
        os.utime(location / "_delta_log" / f"{version:020d}.json", (stamp, stamp))
    between = datetime.fromtimestamp(base + 1.5 * 3600, UTC).isoformat()
    report = _inspect(capsys, str(location), "--timestamp", between)
    assert report["version"] == 1 and report["live_files"] == 2
    assert len(DeltaTable(str(location), version=1).file_uris()) == 2


def test_inspect_before_the_first_commit_fails_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = tmp_path / "t"
    write_deltalake(str(location), pa.table({"id": [1]}))
    assert lakeops(["inspect", str(location), "--timestamp", "2001-01-01T00:00:00Z"]) == 1
    assert "no version was committed at or before 2001-01-01" in capsys.readouterr().err


def test_inspect_previews_vacuum_and_log_expiry(capsys: pytest.CaptureFixture[str]) -> None:
    report = _inspect(capsys, str(TESTDATA / "delta-rs" / "simple_table"))
    # 31 files were removed years ago: all past the default one-week tombstone retention.
    assert report["tombstones"] == report["reclaimable_tombstones"] == 31
    assert report["oldest_log_version"] == 0 and report["commits_since_checkpoint"] == 5

    vacuumed = _inspect(capsys, str(TESTDATA / "delta-rs" / "checkpoints_vacuumed"))
    assert vacuumed["oldest_log_version"] == 5 and vacuumed["last_checkpoint_version"] == 10


def test_inspect_iceberg_catalog_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from iceberg_merge_on_read import add_position_deletes, load
    from pyiceberg_tables import small_file_table

    from lakeops.iceberg.table import TableRef

    table = small_file_table(tmp_path, "identity", appends=4, rows=12)
    first = table.table.current_snapshot()
    assert first is not None
    table.table.manage_snapshots().create_tag(first.snapshot_id, "v4").commit()
    data_file = next(iter(table.reload().scan().plan_files())).file
    partition = {"category": data_file.partition[0]}
    add_position_deletes(
        load(TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier)),
        [(data_file.file_path, 0)],
        partition=partition,
    )
    catalog = ["--catalog-uri", table.catalog_uri]

    report = _inspect(capsys, table.identifier, *catalog)
    assert report["format"] == "iceberg" and report["format_version"] == 2
    assert report["snapshots"] == 5 and report["tags"] == 1 and report["branches"] == 1
    assert report["live_files"] == 16 and report["partitions"] == 4
    assert report["small_files"] == 16  # four small files in each of four partitions
    assert report["position_delete_files"] == 1 and report["rows"] is None  # a delete file makes the count inexact
    assert report["manifests"] == 5 and report["snapshots_since_manifest_rewrite"] == 5
    assert report["tombstones"] is None  # Delta's numbers are not Iceberg's

    earlier = _inspect(capsys, table.identifier, *catalog, "--snapshot-id", str(first.snapshot_id))
    assert earlier["snapshot_id"] == first.snapshot_id and earlier["rows"] == 48
    assert earlier["position_delete_files"] == 0


def test_inspect_shows_each_feature_and_the_operations_it_allows(capsys: pytest.CaptureFixture[str]) -> None:
    table = str(TESTDATA / "modern" / "delta" / "data-reader-timestamp_ntz-id-mode")
    report = _inspect(capsys, table)
    everything = ["cdc", "checkpoint", "commit", "compact", "expire", "read", "vacuum", "write"]
    assert report["features"] == ["columnMapping", "timestampNtz"]
    assert report["feature_operations"] == {"columnMapping": everything, "timestampNtz": everything}
    assert report["supported_operations"] == everything and report["refused_operations"] == {}

    assert lakeops(["inspect", table]) == 0
    summary = capsys.readouterr().out
    assert "feature timestampNtz" in summary and "supported operations" in summary


def test_inspect_names_the_operations_a_feature_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = tmp_path / "t"
    write_deltalake(str(location), pa.table({"id": [1]}))
    (location / "_delta_log" / "00000000000000000001.json").write_text(
        '{"protocol":{"minReaderVersion":1,"minWriterVersion":7,'
        '"writerFeatures":["appendOnly","invariants","madeUpWriterFeature"]}}\n'
    )
    report = _inspect(capsys, str(location))
    assert report["feature_operations"]["madeUpWriterFeature"] == []
    assert report["supported_operations"] == ["cdc", "read"]  # an unknown writer feature does not bind readers
    assert sorted(report["refused_operations"]) == ["checkpoint", "commit", "compact", "expire", "vacuum", "write"]
    assert "writer feature madeUpWriterFeature not supported" in report["refused_operations"]["vacuum"]

    assert lakeops(["inspect", str(location)]) == 0
    assert "refused vacuum" in capsys.readouterr().out


def test_inspect_lists_what_a_partly_supported_feature_allows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A known feature honoured by some operations only (``FeatureSupport.operations``): inspect says
    which, and the others refuse naming the feature, the operation and why."""
    partial = features.FeatureSupport(reader=True, writer=True, operations=frozenset({"read", "checkpoint"}), why="x")
    monkeypatch.setitem(features.FEATURES, "timestampNtz", partial)
    location = tmp_path / "t"
    shutil.copytree(TESTDATA / "modern" / "delta" / "data-reader-timestamp_ntz", location)
    report = _inspect(capsys, str(location))
    assert report["feature_operations"] == {"timestampNtz": ["checkpoint", "read"]}
    assert report["supported_operations"] == ["checkpoint", "read"]
    assert report["refused_operations"]["compact"] == (
        f"{location}: table feature timestampNtz is not supported by lakeops compact yet (x)"
    )
    with pytest.raises(UnsupportedFeature, match="timestampNtz is not supported by lakeops compact yet"):
        api.compact(str(location))


def test_the_folder_of_a_catalog_managed_iceberg_table_points_to_its_catalog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PyIceberg's SQL catalog names metadata files ``NNNNN-<uuid>.metadata.json``; only the catalog knows
    which is current, so the folder alone is refused with the way to address the table, and the table by
    its catalog name works."""
    from pyiceberg_tables import small_file_table

    table = small_file_table(tmp_path, appends=3, rows=5)
    numbered = sorted(p.name for p in (Path(table.location) / "metadata").glob("*.metadata.json"))
    assert len(numbered) == 4 and not any(name.startswith("v") for name in numbered)

    assert lakeops(["inspect", table.location]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"NotATable: {table.location}: a catalog-managed Iceberg table (metadata/{numbered[-1]} and 3 more" in err
    assert "address it as NAMESPACE.TABLE with --catalog-uri (or --catalog-type glue / rest)" in err

    assert lakeops(["inspect", table.identifier, "--catalog-uri", table.catalog_uri, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["live_files"] == 3


def test_a_version_checksum_that_is_not_json_is_a_warning_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38, item 3: a malformed ``1.crc`` stopped ``inspect`` (exit 1) though the file is optional."""
    root = tmp_path / "events"
    for value in range(2):
        write_deltalake(str(root), pa.table({"id": [value]}), mode="append")
    crc = root / "_delta_log" / f"{1:020d}.crc"
    crc.write_text("{not json")
    report = _inspect(capsys, str(root))
    assert report["checksum"] == "invalid" and report["rows"] == 2
    (warning,) = report["warnings"]
    assert warning.startswith(f"{crc}: version checksum file is invalid")
    assert warning.endswith("; ignored (the file is optional)")

    assert lakeops(["inspect", str(root)]) == 0
    assert "version checksum file is invalid" in " ".join(capsys.readouterr().out.split())
    assert crc.read_text() == "{not json"  # read, never rewritten
