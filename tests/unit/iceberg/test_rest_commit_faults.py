"""A REST catalog's answers are never the verdict on a commit: the table read back is (issue 34).

The test server (``tests/rest_catalog_server.py``) injects the faults real servers and gateways produce:
a commit applied and answered 409 (a gateway re-sent a request that had landed, so its requirement no
longer held), applied and answered 200 naming the metadata from before it, and applied without its
``remove-snapshots`` updates (answered 200 with the metadata really written). After each, PyIceberg
scans the catalog's current snapshot and every snapshot it still lists, and each has every row it had
before; a later orphan removal deletes nothing any of them reads.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.rest import RestCatalog as PyIcebergRestCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg_tables import batch, rows_of
from rest_catalog_server import RestCatalogServer, appended_table, serve

from lakeops import api
from lakeops.errors import CommitStateUnknown
from lakeops.ops.options import CheckpointOptions, CompactionOptions, ExpiryOptions, OrphansOptions
from spark_jobs.cli import main

IDENTIFIER = "db.faults"
SECRET = "fault-tests-client-secret"


@dataclass
class Table:
    server: RestCatalogServer
    pyiceberg: PyIcebergRestCatalog
    options: dict[str, Any]

    def scans(self) -> dict[int, list[dict[str, Any]]]:
        """Every snapshot the catalog lists, scanned by PyIceberg: its rows."""
        table = self.pyiceberg.load_table(IDENTIFIER)
        return {s.snapshot_id: rows_of(table.scan(snapshot_id=s.snapshot_id).to_arrow()) for s in table.snapshots()}

    def current(self) -> tuple[int | None, list[dict[str, Any]]]:
        table = self.pyiceberg.load_table(IDENTIFIER)
        snapshot = table.current_snapshot()
        return (snapshot.snapshot_id if snapshot else None), rows_of(table.scan().to_arrow())

    def location(self) -> Path:
        return Path(self.pyiceberg.load_table(IDENTIFIER).location().removeprefix("file://"))

    def commit_answers(self) -> list[int]:
        return [status for method, path, status in self.server.answers if method == "POST" and "/tables/" in path]

    def fault(self, fault: str) -> int:
        """Inject ``fault`` into the next commit; the number of commits the server took so far."""
        self.server.commit_faults.append(fault)
        return len(self.server.commits)


@pytest.fixture
def table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Table]:
    """Six appends of 10 rows (one manifest each), a delete, a seventh append: small files to compact,
    manifests to merge, snapshots to expire."""
    monkeypatch.setenv("LAKEOPS_FAULT_CREDENTIAL", f"lakeops:{SECRET}")
    for server in serve(tmp_path, client_id="lakeops", client_secret=SECRET, token="fault-tests-token"):
        catalog, created = appended_table(server, IDENTIFIER, 6)
        created.delete(EqualTo("id", 3))
        created.refresh().append(batch(100, 5))
        options = {
            "catalog_type": "rest",
            "catalog_uri": server.url,
            "catalog_credential_env": "LAKEOPS_FAULT_CREDENTIAL",
        }
        yield Table(server, catalog, options)


def _compact(t: Table) -> Any:
    return api.compact(IDENTIFIER, CompactionOptions(**t.options, min_input_files=2))


def _rewrite_manifests(t: Table) -> Any:
    return api.checkpoint(IDENTIFIER, CheckpointOptions(**t.options, rewrite_all=True))


def _expire(t: Table) -> Any:
    return api.expire(IDENTIFIER, ExpiryOptions(**t.options, older_than="0s", retain_last=1, force=True))


def _no_file_a_snapshot_reads_is_orphaned(t: Table, scans: dict[int, list[dict[str, Any]]]) -> None:
    """Orphan removal with no age floor after the fault: every listed snapshot still scans the same."""
    for path in t.location().rglob("*"):
        if path.is_file():
            os.utime(path, (0, 0))  # old enough for any floor: only the metadata protects a file now
    api.orphans(IDENTIFIER, OrphansOptions(**t.options, older_than="1s", force_short_retention=True))
    assert t.scans() == scans


WRITERS: dict[str, Callable[[Table], Any]] = {"compact": _compact, "checkpoint": _rewrite_manifests}


@pytest.mark.parametrize("fault", ["409", "stale-200", "503", "drop"])
@pytest.mark.parametrize("operation", sorted(WRITERS))
def test_a_commit_that_landed_is_kept_whatever_the_answer(table: Table, operation: str, fault: str) -> None:
    before = table.scans()
    _, rows = table.current()
    sent = table.fault(fault)

    report = WRITERS[operation](table)

    assert report.commit_attempts == 1
    assert table.commit_answers()[-1:] == [{"409": 409, "stale-200": 200, "503": 503, "drop": 0}[fault]]
    assert len(table.server.commits) == sent + 1  # resolved from the table read back: never sent a second time
    current_id, current_rows = table.current()
    assert current_id not in before and current_rows == rows  # the landed snapshot is current and complete
    after = table.scans()
    assert {i: after[i] for i in before} == before  # every earlier snapshot still scans, every row
    _no_file_a_snapshot_reads_is_orphaned(table, after)


@pytest.mark.parametrize("fault", ["409", "stale-200", "503"])
def test_an_expiry_that_landed_deletes_only_what_the_table_no_longer_lists(table: Table, fault: str) -> None:
    before = table.scans()
    current_id, rows = table.current()
    sent = table.fault(fault)

    report = _expire(table)

    assert report.snapshots_expired == len(before) - 1 and report.commit_attempts == 1
    assert len(table.server.commits) == sent + 1
    assert table.scans() == {current_id: rows}
    _no_file_a_snapshot_reads_is_orphaned(table, {current_id: rows})


def test_an_expiry_whose_removals_the_catalog_dropped_deletes_nothing(table: Table) -> None:
    before = table.scans()
    files = sorted(p for p in table.location().rglob("*") if p.is_file())
    table.fault("drop-removals")

    with pytest.raises(CommitStateUnknown, match=r"db\.faults: .*does not hold the change"):
        _expire(table)

    assert table.scans() == before  # the catalog lists every snapshot still, and each scans
    assert set(files) <= {p for p in table.location().rglob("*") if p.is_file()}  # nothing was deleted
    _no_file_a_snapshot_reads_is_orphaned(table, before)


def test_the_command_line_reports_dropped_removals_and_exits_non_zero(
    table: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    before = table.scans()
    table.fault("drop-removals")
    argv = ["expire", IDENTIFIER, "--catalog-type", "rest", "--catalog-uri", table.server.url]
    argv += ["--catalog-credential-env", "LAKEOPS_FAULT_CREDENTIAL", "--older-than", "0s", "--retain-last", "1"]

    code = main([*argv, "--force"])

    err = capsys.readouterr().err
    assert code == 1 and "does not hold the change" in err and "nothing is deleted" in err
    assert table.scans() == before
