"""``lakeops compact`` on broken Iceberg tables: each case exits 1 with a message naming the table,
the file and the problem, and changes nothing (planning fails before any Spark task runs)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from pyiceberg_tables import PyIcebergTable, small_file_table

from spark_jobs.cli import main as lakeops


def _fingerprint(root: Path) -> dict[str, str]:
    """Every file's hash, except lakeops's own audit records (a run, failed or not, leaves one: issue 10)."""
    return {
        str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and "_lakeops_audit" not in p.parts
    }


def _fails(capsys: pytest.CaptureFixture[str], table: PyIcebergTable, root: Path) -> str:
    before = _fingerprint(root)
    assert lakeops(["compact", table.identifier, "--catalog-uri", table.catalog_uri]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert _fingerprint(root) == before, "a failed run changed the table"
    return err


def _edit_metadata(table: PyIcebergTable, edit: dict[str, object]) -> Path:
    path = Path(table.table.metadata_location.removeprefix("file://"))
    document = json.loads(path.read_text())
    document.update(edit)
    path.write_text(json.dumps(document))
    return path


def test_unknown_format_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = small_file_table(tmp_path, appends=2)
    path = _edit_metadata(table, {"format-version": 7})
    err = _fails(capsys, table, tmp_path)
    assert f"{path.name}: Iceberg format-version 7 is not supported" in err


def test_missing_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = small_file_table(tmp_path, appends=2)
    manifest = next(iter(table.table.current_snapshot().manifests(table.table.io)))  # type: ignore[union-attr]
    Path(manifest.manifest_path.removeprefix("file://")).unlink()
    err = _fails(capsys, table, tmp_path)
    assert "NotFound" in err and Path(manifest.manifest_path).name in err


def test_catalog_row_pointing_to_a_missing_metadata_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = small_file_table(tmp_path, appends=1)
    path = Path(table.table.metadata_location.removeprefix("file://"))
    path.rename(path.with_suffix(".moved"))
    err = _fails(capsys, table, tmp_path)
    assert (
        f"default.{table.identifier}: the current metadata file" in err and path.name in err and "does not exist" in err
    )


def test_malformed_transform(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = small_file_table(tmp_path, "bucket", appends=2)
    path = Path(table.table.metadata_location.removeprefix("file://"))
    document = json.loads(path.read_text())
    document["partition-specs"][0]["fields"][0]["transform"] = "bucket[sixteen]"
    path.write_text(json.dumps(document))
    err = _fails(capsys, table, tmp_path)
    assert "bucket[sixteen]" in err


@pytest.mark.parametrize("command", ["compact", "checkpoint"])
@pytest.mark.parametrize("last", [2**63 - 1, 2**63])
def test_a_last_sequence_number_no_snapshot_can_follow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, last: int
) -> None:
    """ "Sequence Numbers": a new snapshot's is one past ``last-sequence-number``, a long. At the largest
    one, compaction and the manifest rewrite ended in ``OverflowError`` from the Avro writer, after writing
    data files (issue 34, nearby); they are refused when they plan, naming the table and the field. One past
the largest is not a long at all: the metadata file is refused when read."""
    table = small_file_table(tmp_path, appends=3, rows=5)
    _edit_metadata(table, {"last-sequence-number": last})
    before = _fingerprint(tmp_path)

    options = ["--min-input-files", "2"] if command == "compact" else []
    assert lakeops([command, table.identifier, "--catalog-uri", table.catalog_uri, *options]) == 1
    err = " ".join(capsys.readouterr().err.split())
    if last < 2**63:  # the largest long: no snapshot can follow it
        assert f"ProtocolError: {table.table.location()}: last-sequence-number is {last}:" in err, err
    else:  # past a long: the metadata file is corrupt, named with the field when it is read (issue 38, item 7)
        assert "CorruptFile: " in err and "metadata.json: invalid table metadata: last-sequence-number:" in err, err
    assert _fingerprint(tmp_path) == before
