"""One table found and read once per call: every :mod:`lakeops.api` function, on a location or on a
handle from ``lakeops.open``, resolves the table once, detects its format once (a catalog table needs
no detection) and reads its latest state once (Delta: the snapshot replayed; Iceberg: the metadata
loaded), for the operation, its audit record and compaction's plan and run together. Real runs read
the table again when they commit, as the commit rule asks: there the handle's own count says the plan
side read it once, and the outcome is read back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from icechunk_repos import build_history
from pyiceberg_tables import small_file_table
from table_reads import count_reads

import lakeops
from lakeops import api, audit
from lakeops.errors import UsageError
from lakeops.icechunk.repository import Repository
from lakeops.ops.cdc import CdcOptions
from lakeops.ops.checkpoint import CheckpointOptions
from lakeops.ops.compaction import CompactionOptions
from lakeops.ops.expiry import ExpiryOptions
from lakeops.ops.orphans import OrphansOptions
from lakeops.ops.target import CatalogOptions
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize


def _delta(tmp_path: Path) -> str:
    location = str(tmp_path / "delta")
    for i in range(5):
        write_deltalake(location, pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64())}), mode="append")
    return normalize(location)


#: Each operation's dry run (inspect reads only), as a function of the table (an address or a handle)
#: and the catalog options (an Iceberg catalog table's) and the scratch directory.
Call = Callable[[Any, dict[str, Any], Path], Any]
DRY_RUNS: dict[str, Call] = {
    "inspect": lambda t, c, _: api.inspect(t, CatalogOptions(**c)),
    "compact": lambda t, c, _: api.compact(t, CompactionOptions(**c, min_input_files=2), dry_run=True),
    "checkpoint": lambda t, c, _: api.checkpoint(t, CheckpointOptions(**c), dry_run=True),
    "expire": lambda t, c, _: api.expire(t, ExpiryOptions(**c, older_than="1s", force=True), dry_run=True),
    "orphans": lambda t, c, _: api.orphans(
        t, OrphansOptions(**c, older_than="0s", force_short_retention=True), dry_run=True
    ),
    "cdc": lambda t, c, tmp: api.cdc(t, CdcOptions(**c, from_version=0, output=str(tmp / "changes")), dry_run=True),
}


@pytest.mark.parametrize("operation", sorted(DRY_RUNS))
@pytest.mark.parametrize("opened", [False, True], ids=["address", "handle"])
def test_a_delta_dry_run_finds_detects_and_reads_the_table_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operation: str, opened: bool
) -> None:
    location = _delta(tmp_path)
    table = lakeops.open(location) if opened else location
    reads = count_reads(monkeypatch)
    report = DRY_RUNS[operation](table, {}, tmp_path)
    assert report.format == "delta"
    assert reads.of(location) == (1, 1, 1)


@pytest.mark.parametrize("operation", sorted(DRY_RUNS))
@pytest.mark.parametrize("opened", [False, True], ids=["address", "handle"])
def test_an_iceberg_dry_run_finds_and_loads_the_catalog_table_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operation: str, opened: bool
) -> None:
    iceberg = small_file_table(tmp_path, appends=4, rows=5)
    catalog = {"catalog_uri": iceberg.catalog_uri}
    table = lakeops.open(iceberg.identifier, CatalogOptions(**catalog)) if opened else iceberg.identifier
    reads = count_reads(monkeypatch)
    report = DRY_RUNS[operation](table, catalog, tmp_path)
    assert report.format == "iceberg"
    assert reads.of(iceberg.identifier) == (1, 0, 1)  # a catalog names the format: nothing to detect


ICECHUNK_OPERATIONS = ["inspect", "compact", "checkpoint", "expire", "orphans", "cdc"]


@pytest.mark.parametrize("operation", ICECHUNK_OPERATIONS)
def test_an_icechunk_run_finds_and_detects_the_repository_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    root = normalize(str(tmp_path / "repo"))
    build_history(open_storage(root), root, commits=3)
    middle = Repository(open_storage(root), root).resolve("middle")
    calls: dict[str, Callable[[], Any]] = {
        "inspect": lambda: api.inspect(root),
        "compact": lambda: api.compact(root, dry_run=True),
        "checkpoint": lambda: api.checkpoint(root),  # not applicable, and audited: the audit finds no table again
        "expire": lambda: api.expire(root, dry_run=True),
        "orphans": lambda: api.orphans(root, dry_run=True),
        "cdc": lambda: api.cdc(root, CdcOptions(from_version=middle, output=str(tmp_path / "changes")), dry_run=True),
    }
    reads = count_reads(monkeypatch)
    assert calls[operation]().format == "icechunk"
    # checkpoints do not apply to Icechunk: nothing of the repository is read
    assert reads.of(root) == (1, 1, 0 if operation == "checkpoint" else 1)


def test_a_real_icechunk_compaction_plans_from_one_read_and_the_next_call_reads_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The packing is planned from the handle's state and committed after reading the branch again; the
    recorded run makes the handle forget the state, so the next call reads the packed repository."""
    root = normalize(str(tmp_path / "repo"))
    build_history(open_storage(root), root, commits=3)
    table = lakeops.open(root)
    reads = count_reads(monkeypatch)
    report = api.compact(table, CompactionOptions(min_input_files=2))
    assert report.committed_version is not None and report.files_added > 0
    assert (reads.of(root), table.loads) == ((1, 1, 1), 1)
    assert [r.command for r in audit.read_records(root)] == ["compact"]
    inspected = api.inspect(table)
    assert inspected.snapshot == report.state_version and table.loads == 2


def test_a_real_delta_compaction_plans_from_one_read_and_commits_after_reading_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plan and run share the handle (no second detection), the audit record goes under its root (no
    third), and the commit's outcome is read back from the table: delta-rs reads the compacted table."""
    location = _delta(tmp_path)
    table = lakeops.open(location)
    reads = count_reads(monkeypatch)
    report = api.compact(table, CompactionOptions(min_input_files=2))
    assert (report.files_removed, report.files_added, report.committed_version) == (5, 1, 5)
    assert (reads.found[location], reads.detected[location], table.loads) == (1, 1, 1)
    assert DeltaTable(location).to_pyarrow_table().num_rows == 50
    assert [r.command for r in audit.read_records(location)] == ["compact"]
    # The run changed the table: the handle forgot what it read, and the next call reads version 5.
    inspected = api.inspect(table)
    assert inspected.read_version == 5 and table.loads == 2


@pytest.mark.parametrize(
    "operation",
    [
        ("checkpoint", lambda t, tmp: api.checkpoint(t)),
        ("expire", lambda t, tmp: api.expire(t, ExpiryOptions(older_than="1s", force=True))),
        ("orphans", lambda t, tmp: api.orphans(t, OrphansOptions(older_than="0s", force_short_retention=True))),
        ("cdc", lambda t, tmp: api.cdc(t, CdcOptions(from_version=0, output=str(tmp / "changes")))),
    ],
    ids=lambda op: op[0],
)
def test_a_real_delta_run_detects_once_and_plans_from_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operation: tuple[str, Callable[[Any, Path], Any]]
) -> None:
    location = _delta(tmp_path)
    table = lakeops.open(location)
    reads = count_reads(monkeypatch)
    report = operation[1](table, tmp_path)
    assert report.format == "delta" and not report.dry_run
    assert (reads.found[location], reads.detected[location], table.loads) == (1, 1, 1)


@pytest.mark.parametrize(
    "operation",
    [
        ("compact", lambda t, c: api.compact(t, CompactionOptions(**c, min_input_files=2))),
        ("checkpoint", lambda t, c: api.checkpoint(t, CheckpointOptions(**c))),
        ("expire", lambda t, c: api.expire(t, ExpiryOptions(**c, older_than="1s", retain_last=1, force=True))),
        ("orphans", lambda t, c: api.orphans(t, OrphansOptions(**c, older_than="0s", force_short_retention=True))),
    ],
    ids=lambda op: op[0],
)
def test_a_real_iceberg_run_finds_once_and_plans_from_one_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operation: tuple[str, Callable[[Any, dict[str, Any]], Any]]
) -> None:
    """The commit re-reads the table through its catalog (not counted as the handle's); the audit
    record lands under the table's location without another load."""
    iceberg = small_file_table(tmp_path, appends=4, rows=5)
    catalog = {"catalog_uri": iceberg.catalog_uri}
    rows = iceberg.rows()
    table = lakeops.open(iceberg.identifier, CatalogOptions(**catalog))
    reads = count_reads(monkeypatch)
    report = operation[1](table, catalog)
    assert report.format == "iceberg" and not report.dry_run
    assert (reads.found[iceberg.identifier], table.loads) == (1, 1)
    assert iceberg.rows() == rows
    assert [r.command for r in audit.read_records(iceberg.location)] == [report.operation]


def test_a_handle_refuses_other_storage_options(tmp_path: Path) -> None:
    location = _delta(tmp_path)
    table = lakeops.open(location)
    with pytest.raises(UsageError, match=r"storage_options differ from the table handle's"):
        api.inspect(table, storage_options=StorageOptions(endpoint_url="http://localhost:9"))


def _daily(path: Path) -> str:
    """A partitioned Delta table with small files in two partitions."""
    for i in range(8):
        rows = pa.table({"id": pa.array([i], pa.int64()), "day": ["2026-11-01" if i % 4 else "2026-11-02"]})
        write_deltalake(str(path), rows, mode="append", partition_by=["day"])
    return normalize(str(path))


def test_a_planner_pass_finds_detects_and_reads_each_table_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over a registry of two Delta tables (one compacted per partition, with a CDC consumer whose
    floor holds expiry and orphans back), an Iceberg catalog table and an Icechunk repository, every
    dry run of the pass and the history share one handle per table."""
    from lakeops.planning import estate
    from lakeops.registry import MaintenanceBudget, parse_registry

    daily, plain = _daily(tmp_path / "daily"), _delta(tmp_path)
    iceberg = small_file_table(tmp_path, appends=4, rows=5)
    repo = normalize(str(tmp_path / "repo"))
    build_history(open_storage(repo), repo, commits=3)
    registry = parse_registry(
        f"""
tables:
  - name: daily
    location: {daily}
    compaction: {{min_input_files: 2, partitioned: true}}
    cdc: {{enabled: true, output: {tmp_path / "changes"}, start_date: 2026-01-01}}
  - name: plain
    location: {plain}
    compaction: {{min_input_files: 2}}
  - name: catalogued
    catalog: {{uri: "{iceberg.catalog_uri}"}}
    identifier: {iceberg.identifier}
  - name: repo
    location: {repo}
"""
    )
    reads = count_reads(monkeypatch)
    planned = estate.plan_tables(registry.tables, MaintenanceBudget(core_minutes=10))
    assert planned.unreadable == {}
    partitions = {d.action.partition for d in planned.decisions if d.action.table == "daily"}
    assert {"day=2026-11-01", "day=2026-11-02"} <= partitions  # a compaction dry run per partition
    assert reads.of(daily) == (1, 1, 1)
    assert reads.of(plain) == (1, 1, 1)
    assert reads.of(iceberg.identifier) == (1, 0, 1)
    assert reads.of(repo) == (1, 1, 1)
