"""The SQL catalog's answers are not the outcome either (issue 34, ``lakeops/commit_outcome.py``): a
catalog update whose answer is lost or refused after it was applied (a proxy in front of the database
that re-sent it), one that never ran, one that lost to a rival. lakeops reads the table back each time
and PyIceberg, sharing the catalog, reads every snapshot with every row."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyiceberg_tables import PyIcebergTable, batch, small_file_table

from lakeops import api
from lakeops.errors import CommitConflict, CommitPending, CommitStateUnknown
from lakeops.iceberg.sql_catalog import SqlCatalog
from lakeops.ops.options import CompactionOptions


def _scans(table: PyIcebergTable) -> dict[int, list[dict[str, Any]]]:
    return {s.snapshot_id: table.rows(s.snapshot_id) for s in table.reload().snapshots()}


def _swap_then(
    monkeypatch: pytest.MonkeyPatch, answer: Callable[[], Exception], *, apply: bool, before: Callable[[], None] = list
) -> None:
    """Every swap runs ``before``, is applied (or not), and then answers with ``answer()``, once."""
    real_swap = SqlCatalog.swap
    faults = [answer]

    def faulty(self: SqlCatalog, expected: str, new: str, payload: bytes) -> str:
        if not faults:
            return real_swap(self, expected, new, payload)
        fault = faults.pop()
        before()
        if apply:
            real_swap(self, expected, new, payload)
        raise fault()

    monkeypatch.setattr(SqlCatalog, "swap", faulty)


@pytest.mark.parametrize(
    "answer",
    [lambda: CommitStateUnknown("the answer was lost"), lambda: CommitConflict("no row updated")],
    ids=["lost", "refused"],
)
def test_an_update_that_was_applied_is_committed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: Callable[[], Exception]
) -> None:
    table = small_file_table(tmp_path, appends=4, rows=5)
    before, rows = _scans(table), table.rows()
    _swap_then(monkeypatch, answer, apply=True)

    report = api.compact(table.identifier, CompactionOptions(catalog_uri=table.catalog_uri, min_input_files=2))

    assert report.commits == 1 and report.commit_retries == 0
    snapshot = table.reload().current_snapshot()
    assert snapshot is not None and snapshot.summary is not None and snapshot.summary.operation.value == "replace"
    after = _scans(table)  # every snapshot the catalog lists scans
    assert table.rows() == rows and {i: after[i] for i in before} == before


def test_an_update_that_never_ran_leaves_every_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = small_file_table(tmp_path, appends=4, rows=5)
    before = _scans(table)
    files = {p for p in Path(table.location).rglob("*") if p.is_file()}
    _swap_then(monkeypatch, lambda: CommitStateUnknown("the answer was lost"), apply=False)

    with pytest.raises(CommitPending, match="the commit may still land; nothing is deleted"):
        api.compact(table.identifier, CompactionOptions(catalog_uri=table.catalog_uri, min_input_files=2))

    assert files < {p for p in Path(table.location).rglob("*") if p.is_file()}  # ours stay: it may land
    assert _scans(table) == before


def test_a_lost_answer_after_a_rival_moved_the_pointer_is_retried_on_top(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = small_file_table(tmp_path, appends=4, rows=5)
    appended = batch(900, 3)
    _swap_then(
        monkeypatch,
        lambda: CommitStateUnknown("the answer was lost"),
        apply=False,
        before=lambda: table.reload().append(appended),  # the pointer moves: ours can never land now
    )
    ids = [r["id"] for r in table.rows()]

    report = api.compact(table.identifier, CompactionOptions(catalog_uri=table.catalog_uri, min_input_files=2))

    assert report.commits == 1 and report.commit_retries == 1
    assert sorted(r["id"] for r in table.rows()) == sorted([*ids, *appended["id"].to_pylist()])
    _scans(table)  # every snapshot the catalog lists scans
