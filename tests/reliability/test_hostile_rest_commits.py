"""Faulty REST catalog answers to commits, generated (issue 34): whatever a catalog or its gateway
answers, lakeops never deletes what the table still lists.

Each example takes a fresh table through the test server (``tests/rest_catalog_server.py``), queues a
sequence of the faults real servers produce on the next commits (applied and answered 409, 503, a
dropped connection or 200 naming the metadata from before; answered 503 unapplied; applied without its
``remove-snapshots``), and runs compaction, a manifest rewrite or an expiry. The run ends with a report
or a LakeopsError. Afterwards PyIceberg scans the catalog's current snapshot and every snapshot it still
lists, each with the rows it had before; an unknown outcome deleted no file; and an orphan removal with
no age floor, run after the faults, deletes nothing any of them reads.

Budget: every example builds a table and runs commits (about two seconds), so the property runs a
tenth of ``LAKEOPS_FUZZ_EXAMPLES`` (at least 3; see :mod:`reliability.hostile`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg_tables import rows_of
from reliability.hostile import EXAMPLES, FUZZ
from rest_catalog_server import RestCatalogServer, appended_table, serve

from lakeops import api
from lakeops.errors import CommitStateUnknown, LakeopsError
from lakeops.ops.options import CheckpointOptions, CompactionOptions, ExpiryOptions, OrphansOptions

FAULTS = ("409", "stale-200", "503", "drop", "503-unapplied", "drop-removals")
REST_FUZZ = settings(FUZZ, max_examples=max(3, EXAMPLES // 10))
SECRET = "hostile-rest-secret"
_names = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestCatalogServer]:
    os.environ["LAKEOPS_HOSTILE_REST_CREDENTIAL"] = f"lakeops:{SECRET}"
    root = tmp_path_factory.mktemp("rest")
    yield from serve(root, client_id="lakeops", client_secret=SECRET, token="hostile-rest-token")
    del os.environ["LAKEOPS_HOSTILE_REST_CREDENTIAL"]


def _scans(catalog: RestCatalog, identifier: str) -> dict[int, list[dict[str, Any]]]:
    table = catalog.load_table(identifier)
    return {s.snapshot_id: rows_of(table.scan(snapshot_id=s.snapshot_id).to_arrow()) for s in table.snapshots()}


def _files(location: Path) -> set[Path]:
    return {p for p in location.rglob("*") if p.is_file()}


def _run(operation: str, identifier: str, options: dict[str, Any]) -> Any:
    if operation == "compact":
        return api.compact(identifier, CompactionOptions(**options, min_input_files=2))
    if operation == "checkpoint":
        return api.checkpoint(identifier, CheckpointOptions(**options, rewrite_all=True))
    return api.expire(identifier, ExpiryOptions(**options, older_than="0s", retain_last=1, force=True))


@REST_FUZZ
@given(
    operation=st.sampled_from(["compact", "checkpoint", "expire"]),
    faults=st.lists(st.sampled_from(FAULTS), min_size=1, max_size=3),
)
def test_no_commit_answer_makes_lakeops_delete_what_the_table_lists(
    server: RestCatalogServer, operation: str, faults: list[str]
) -> None:
    identifier = f"hostile.t{next(_names)}"
    catalog, table = appended_table(server, identifier, 4)
    table.delete(EqualTo("id", 3))
    options = {
        "catalog_type": "rest",
        "catalog_uri": server.url,
        "catalog_credential_env": "LAKEOPS_HOSTILE_REST_CREDENTIAL",
    }
    location = Path(catalog.load_table(identifier).location().removeprefix("file://"))
    before, files = _scans(catalog, identifier), _files(location)
    current_rows = rows_of(catalog.load_table(identifier).scan().to_arrow())
    server.commit_faults[:] = faults

    try:
        _run(operation, identifier, options)
        event(f"{operation}: report")
    except LakeopsError as exc:
        event(f"{operation}: {type(exc).__name__}")
        if isinstance(exc, CommitStateUnknown):
            assert files <= _files(location), "an unknown outcome deleted files"
    finally:
        server.commit_faults.clear()

    after = _scans(catalog, identifier)
    assert {i: after[i] for i in before.keys() & after.keys()} == {i: before[i] for i in before.keys() & after.keys()}
    assert rows_of(catalog.load_table(identifier).scan().to_arrow()) == current_rows
    for path in _files(location):
        os.utime(path, (0, 0))  # old enough for any floor: only the metadata protects a file now
    api.orphans(identifier, OrphansOptions(**options, older_than="1s", force_short_retention=True))
    assert _scans(catalog, identifier) == after
