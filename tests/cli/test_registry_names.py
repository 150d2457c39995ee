"""Every command takes a registry name for TABLE (issue 20: ``lakeops expire events`` and ``lakeops orphans
events`` looked for ``./events``): a Delta table and an Icechunk repository by location, an Iceberg table
by catalog entry, each run from a working directory that holds nothing of that name; cdc's ``--output``
takes one too. A name that is not in the registry says which registry was searched and its closest names."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg_tables import small_file_table

from lakeops.icechunk.snapshot import FillValue, ZarrArrayMetadata
from lakeops.icechunk.writer import ChangeSet, commit, init_repository
from lakeops.storage import LocalStorage
from spark_jobs.cli import main as lakeops

OLD = 1_500_000_000.0  # July 2017: older than any retention


def _icechunk(root: Path) -> str:
    """A repository of two commits; returns the first one's snapshot id (cdc's ``--from``)."""
    storage, location = LocalStorage(), str(root)
    init_repository(storage, location)
    line = ZarrArrayMetadata(shape=(4,), data_type="uint8", chunk_shape=(1,), fill_value=FillValue("UInt8", 0))
    first = commit(storage, location, ChangeSet().add_group("/").add_array("/line", line), message="structure")
    commit(storage, location, ChangeSet().set_chunk("/line", (1,), b"\x01\x02"), message="a chunk")
    return first.snapshot_id


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """events (Delta), orders (Iceberg in a SQLite catalog), arrays (Icechunk) and the registry naming
    them, plus ``events_changes``: a location with no table yet (cdc's output)."""
    root = tmp_path_factory.mktemp("registered")
    events = root / "warehouse" / "events"
    for i in range(3):
        write_deltalake(str(events), pa.table({"id": [i]}), mode="append")
    orders = small_file_table(root / "iceberg", appends=3, rows=5)
    first_snapshot = _icechunk(root / "warehouse" / "arrays")
    registry = root / "lakeops.yaml"
    registry.write_text(
        "tables:\n"
        f"  - name: events\n    location: {events}\n"
        f"  - name: orders\n    catalog: {{uri: '{orders.catalog_uri}'}}\n    identifier: {orders.identifier}\n"
        f"  - name: arrays\n    location: {root / 'warehouse' / 'arrays'}\n"
        f"  - name: events_changes\n    location: {root / 'warehouse' / 'events_changes'}\n"
    )
    return {"root": root, "registry": registry, "events": events, "orders": orders, "from": first_snapshot}


@pytest.fixture
def elsewhere(tables: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with nothing named like a table; the registry comes from $LAKEOPS_REGISTRY."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LAKEOPS_REGISTRY", str(tables["registry"]))
    return tmp_path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any] | None, str]:
    code = lakeops([*argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code == 0 else None, " ".join(captured.err.split())


COMMANDS: list[tuple[str, ...]] = [
    ("inspect",),
    ("compact", "--dry-run"),
    ("checkpoint", "--dry-run"),
    ("expire", "--dry-run"),
    ("orphans", "--dry-run"),
    ("purge-trash", "--dry-run"),
]


@pytest.mark.parametrize("name", ["events", "orders", "arrays"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_resolves_a_registry_name(
    name: str, command: tuple[str, ...], tables: dict[str, Any], elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, err = _run(capsys, command[0], name, *command[1:])
    assert code == 0, err
    assert report is not None
    expected = {
        "events": str(tables["events"]),
        "orders": f"default.{tables['orders'].identifier}",
        "arrays": str(tables["root"] / "warehouse" / "arrays"),
    }[name]
    if command[0] != "purge-trash":  # its report names the table root
        assert report["table"] == expected
    assert not (elsewhere / name).exists() and "NotATable" not in err


@pytest.mark.parametrize("name", ["events", "orders", "arrays"])
def test_cdc_resolves_the_table_and_the_output(
    name: str, tables: dict[str, Any], elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    start = tables["from"] if name == "arrays" else "0"
    output = tables["root"] / "warehouse" / f"{name}_out"
    code, report, err = _run(capsys, "cdc", name, "--from", start, "--output", str(output), "--dry-run")
    assert code == 0, err
    assert report is not None and report["rows_written"] == 0 and not output.exists()


def test_cdc_writes_to_a_registry_named_output(
    tables: dict[str, Any], elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, err = _run(capsys, "cdc", "events", "--from", "0", "--output", "events_changes")
    assert code == 0, err
    assert report is not None and report["rows_written"] == 3
    changes = tables["root"] / "warehouse" / "events_changes"
    assert DeltaTable(str(changes)).to_pyarrow_table().num_rows == 3
    assert not (elsewhere / "events_changes").exists()


def test_a_catalog_table_is_no_cdc_output(
    tables: dict[str, Any], elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "cdc", "events", "--from", "0", "--output", "orders", "--dry-run")
    assert code == 2
    assert "UsageError: --output 'orders': registry table 'orders' is an Iceberg catalog table" in err


def test_restore_resolves_a_registry_name(
    tables: dict[str, Any], elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    leftover = tables["events"] / "part-crashed-writer.parquet"
    leftover.write_bytes(b"never committed")
    os.utime(leftover, (OLD, OLD))
    code, report, err = _run(capsys, "orphans", "events", "--quarantine")
    assert code == 0, err
    assert report is not None and report["deleted_files"] == 1 and not leftover.exists()
    code, restored, err = _run(capsys, "restore", "events", report["quarantine_run"])
    assert code == 0, err
    assert restored is not None and restored["restored_files"] == 1 and leftover.read_bytes() == b"never committed"
    leftover.unlink()


@pytest.mark.parametrize("name", ["orders", "arrays"])
def test_restore_looks_in_the_named_tables_trash(
    name: str, tables: dict[str, Any], elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "restore", name, "20260101T000000Z-abcdef")
    assert code == 1
    assert "NotFound" in err and "no quarantine run 20260101T000000Z-abcdef" in err
    assert str(tables["root"]) in err and str(elsewhere) not in err


def test_the_working_directorys_registry_is_the_default(
    tables: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("LAKEOPS_REGISTRY", raising=False)
    monkeypatch.chdir(tables["registry"].parent)
    code, report, err = _run(capsys, "expire", "events", "--dry-run")
    assert code == 0, err
    assert report is not None and report["table"] == str(tables["events"])
    code, _, err = _run(capsys, "expire", "event")
    assert code == 1
    assert err.endswith(
        f"no table named 'event' in registry {tables['registry']} (in the working directory; no $LAKEOPS_REGISTRY); "
        "did you mean 'events'?"
    )


def test_a_typo_names_the_registry_and_the_closest_names(
    tables: dict[str, Any], elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "expire", "evnts")
    assert code == 1
    assert err == (
        f"error: NotATable: evnts: no file or directory {elsewhere / 'evnts'}, and no table named 'evnts' in "
        f"registry {tables['registry']} (from $LAKEOPS_REGISTRY); did you mean 'events'?"
    )
    code, _, err = _run(capsys, "inspect", "zzz")
    assert code == 1
    assert err.endswith(
        f"'zzz' in registry {tables['registry']} (from $LAKEOPS_REGISTRY); none of its 4 names is close"
    )


def test_a_name_without_a_registry_says_there_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("LAKEOPS_REGISTRY", raising=False)
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(capsys, "orphans", "events")
    assert code == 1
    assert err == (
        f"error: NotATable: events: no file or directory {tmp_path / 'events'}, and no registry to look the name "
        f"up in ($LAKEOPS_REGISTRY is not set and {tmp_path / 'lakeops.yaml'} does not exist)"
    )
    monkeypatch.setenv("LAKEOPS_REGISTRY", str(tmp_path / "missing.yaml"))
    code, _, err = _run(capsys, "orphans", "events")
    assert code == 2  # a registry problem is a usage error, as for plan-maintenance
    assert err == f"error: RegistryError: registry {tmp_path / 'missing.yaml'} (from $LAKEOPS_REGISTRY) does not exist"


def test_a_path_in_the_working_directory_is_still_a_table(
    tables: dict[str, Any], elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bare name that is not in the registry but is a directory here is a location, as before."""
    local = elsewhere / "local_table"
    write_deltalake(str(local), pa.table({"id": [1]}))
    code, report, err = _run(capsys, "inspect", "local_table")
    assert code == 0, err
    assert report is not None and report["table"] == str(local)
