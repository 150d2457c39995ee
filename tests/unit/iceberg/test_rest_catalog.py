"""lakeops through an Iceberg REST catalog: the test server (``tests/rest_catalog_server.py``) over a
SQLite ``SqlCatalog`` validates every request and response against the specification's OpenAPI
document; PyIceberg's own ``RestCatalog`` creates and appends, and reads back what lakeops committed
(https://github.com/apache/iceberg/blob/main/open-api/rest-catalog-open-api.yaml)."""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from maintenance_commits import commit_compaction
from pyiceberg.catalog.rest import RestCatalog as PyIcebergRestCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg.table import Table
from pyiceberg_tables import batch, rows_of
from rest_catalog_server import RestCatalogServer, appended_table, serve

from lakeops import api, audit
from lakeops.errors import (
    CommitConflict,
    CommitStateUnknown,
    InvalidArgument,
    LakeopsError,
    NotATable,
    UnsupportedFeature,
)
from lakeops.iceberg.metadata import TableMetadata
from lakeops.iceberg.rest_updates import rest_change
from lakeops.iceberg.table import load_table
from lakeops.ops import compaction
from lakeops.ops.options import CdcOptions, CheckpointOptions, CompactionOptions, ExpiryOptions, OrphansOptions
from lakeops.ops.target import CatalogOptions
from lakeops.redaction import mask_text
from lakeops.storage import StorageOptions
from spark_jobs.cli import main

SENTINEL = "sentinel-token-7f3a9c"
CLIENT_SECRET = "sentinel-client-secret-51d2"
IDENTIFIER = "db.events"


@dataclass
class Rest:
    server: RestCatalogServer
    pyiceberg: PyIcebergRestCatalog
    table: Table
    options: dict[str, Any]

    def rows(self) -> list[dict[str, Any]]:
        return rows_of(self.pyiceberg.load_table(IDENTIFIER).scan().to_arrow())

    def snapshots(self) -> int:
        return len(self.pyiceberg.load_table(IDENTIFIER).snapshots())


@pytest.fixture
def rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rest]:
    """A table PyIceberg created through the REST server (6 appends of 10 rows, then a delete); lakeops
    reaches it with the OAuth2 client credential in ``$LAKEOPS_TEST_CREDENTIAL``."""
    monkeypatch.setenv("LAKEOPS_TEST_CREDENTIAL", f"lakeops:{CLIENT_SECRET}")
    for server in serve(tmp_path, client_id="lakeops", client_secret=CLIENT_SECRET, token=SENTINEL):
        catalog, table = appended_table(server, IDENTIFIER, 6)
        table.delete(EqualTo("id", 3))
        options = {
            "catalog_type": "rest",
            "catalog_uri": server.url,
            "catalog_credential_env": "LAKEOPS_TEST_CREDENTIAL",
        }
        yield Rest(server, catalog, catalog.load_table(IDENTIFIER), options)


def test_every_iceberg_operation_runs_through_the_rest_catalog(rest: Rest, tmp_path: Path) -> None:
    rows = rest.rows()
    assert len(rows) == 59

    compacted = api.compact(IDENTIFIER, CompactionOptions(**rest.options, min_input_files=2))
    assert (compacted.files_removed, compacted.files_added, compacted.commit_attempts) == (6, 1, 1)
    assert rest.rows() == rows and rest.server.commits[-1] == ["add-snapshot", "set-snapshot-ref"]

    rest.table.refresh().append(batch(100, 5))  # a second manifest for the rewrite to merge
    rows = rest.rows()
    rewritten = api.checkpoint(IDENTIFIER, CheckpointOptions(**rest.options, rewrite_all=True))
    assert rewritten.manifests_before > rewritten.manifests_after == 1
    assert rest.rows() == rows and rest.server.commits[-1] == ["add-snapshot", "set-snapshot-ref"]

    output = tmp_path / "changes"  # the changelog from the table's creation, before expiry cuts it
    api.cdc(IDENTIFIER, CdcOptions(**rest.options, from_version=0, output=str(output)))
    changes = DeltaTable(str(output)).to_pyarrow_table()
    kinds = list(zip(changes["id"].to_pylist(), changes["_change_type"].to_pylist(), strict=True))
    net = Counter(i for i, kind in kinds if kind == "insert") - Counter(i for i, kind in kinds if kind == "delete")
    assert sorted(net.elements()) == sorted(r["id"] for r in rows)

    before = rest.snapshots()
    expired = api.expire(IDENTIFIER, ExpiryOptions(**rest.options, older_than="0d", retain_last=1, force=True))
    assert expired.snapshots_expired == before - 1 and rest.snapshots() == 1
    assert rest.rows() == rows and rest.server.commits[-1] == ["remove-snapshots"]

    location = Path(rest.table.refresh().location().removeprefix("file://"))
    stray = location / "data" / "left-by-a-failed-writer.parquet"
    stray.write_bytes(b"not referenced")
    os.utime(stray, (0, 0))
    removed = api.orphans(IDENTIFIER, OrphansOptions(**rest.options))
    assert removed.deleted_files >= 1 and not stray.exists() and rest.rows() == rows

    records = audit.read_records(str(location))
    assert [r.command for r in records] == ["compact", "checkpoint", "expire", "orphans"]
    assert {r.options["catalog_type"] for r in records} == {"rest"}


def test_a_pyiceberg_append_between_plan_and_commit_is_rebased_over(rest: Rest) -> None:
    rows = rest.rows()
    appended = batch(700, 3)
    # PyIceberg commits just before the server takes lakeops' commit: lakeops' requirement fails (409).
    rest.server.before_commit = lambda: rest.table.refresh().append(appended)

    report = api.compact(IDENTIFIER, CompactionOptions(**rest.options, min_input_files=2))

    assert report.commit_attempts == 2
    assert [status for method, _, status in rest.server.answers if method == "POST"][-3:] == [200, 409, 200]
    assert rest.rows() == sorted(
        [*rows, *rows_of(appended)], key=lambda r: tuple((v is None, str(v)) for v in r.values())
    )


def test_a_pyiceberg_delete_between_plan_and_commit_aborts_cleanly(rest: Rest) -> None:
    plan = compaction.plan(IDENTIFIER, CompactionOptions(**rest.options, min_input_files=2), StorageOptions())
    results = [plan.task()(group) for group in plan.groups]
    written = [Path(w.location.removeprefix("file://")) for r in results for w in r.written]
    # PyIceberg rewrites a file lakeops is compacting just before lakeops' commit reaches the server.
    rest.server.before_commit = lambda: rest.table.refresh().delete(EqualTo("id", 15))

    with pytest.raises(CommitConflict, match=r"db\.events: .* is no longer in the table"):
        commit_compaction(plan, plan.groups, results, StorageOptions(), 0.0)

    assert [status for method, _, status in rest.server.answers if method == "POST"][-2:] == [200, 409]
    assert written and not any(path.exists() for path in written)  # only lakeops' own files went
    assert 15 not in [r["id"] for r in rest.rows()] and len(rest.rows()) == 58


@pytest.mark.parametrize("lost", ["503", "drop"])
def test_a_lost_commit_answer_is_resolved_by_reloading(rest: Rest, lost: str) -> None:
    rows = rest.rows()
    rest.server.commit_faults.append(lost)

    report = api.compact(IDENTIFIER, CompactionOptions(**rest.options, min_input_files=2))

    assert report.commit_attempts == 1 and report.files_added == 1
    assert rest.rows() == rows  # the commit landed; PyIceberg reads its file, so it was not deleted
    current = rest.pyiceberg.load_table(IDENTIFIER).current_snapshot()
    assert current is not None and current.summary is not None and current.summary.operation.value == "replace"


def test_an_unknown_commit_outcome_deletes_nothing(rest: Rest) -> None:
    rows = rest.rows()
    options = CompactionOptions(**rest.options, min_input_files=2)
    plan = compaction.plan(IDENTIFIER, options, StorageOptions())
    results = [plan.task()(group) for group in plan.groups]
    rest.server.commit_faults.append("503-unapplied")

    with pytest.raises(CommitStateUnknown, match="does not hold the change, and the commit may still land"):
        commit_compaction(plan, plan.groups, results, StorageOptions(), 0.0)

    written = [Path(w.location.removeprefix("file://")) for r in results for w in r.written]
    assert written and all(path.exists() for path in written)
    assert rest.rows() == rows


def test_no_secret_appears_in_output_logs_audit_or_reports(
    rest: Rest, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("LAKEOPS_TEST_TOKEN", SENTINEL)
    common = ["--catalog-type", "rest", "--catalog-uri", rest.server.url, "--json"]
    assert (
        main(["compact", IDENTIFIER, *common, "--catalog-token-env", "LAKEOPS_TEST_TOKEN", "--min-input-files", "2"])
        == 0
    )
    assert main(["inspect", IDENTIFIER, *common, "--catalog-credential-env", "LAKEOPS_TEST_CREDENTIAL"]) == 0
    monkeypatch.setenv("LAKEOPS_TEST_REVOKED", SENTINEL + "-revoked")  # refused: the error must not quote it
    assert main(["inspect", IDENTIFIER, *common, "--catalog-token-env", "LAKEOPS_TEST_REVOKED"]) == 1
    output = capsys.readouterr()
    assert "HTTP 401" in output.err

    location = Path(rest.table.refresh().location().removeprefix("file://"))
    audit_text = "".join(p.read_text() for p in location.rglob("*") if p.is_file() and "audit" in str(p))
    assert '"catalog_type":"rest"' in audit_text  # the compaction's record
    for text in (output.out, output.err, caplog.text, audit_text):
        assert SENTINEL not in text and CLIENT_SECRET not in text


#: The four table-changing commands, each able to reach a commit.
COMMANDS = [
    ["compact", "--min-input-files", "2"],
    ["checkpoint", "--rewrite-all"],
    ["expire", "--older-than", "0d", "--retain-last", "1", "--force"],
    ["orphans", "--older-than", "0d", "--force"],
]


@pytest.mark.parametrize("where", ["load", "commit"])
def test_a_token_the_catalog_echoes_is_masked_in_output_logs_audit_and_errors(
    rest: Rest,
    where: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 34, break 4: a catalog answers 403 quoting the ``Authorization`` header it was sent, on
    every load or on every commit. The token is lakeops' own, so it is masked by value wherever it
    lands, through the CLI (a bearer token from the environment, then one the token endpoint issued for
    the client credential) and through the API."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("LAKEOPS_TEST_TOKEN", SENTINEL)
    rest.server.echo_token = where
    common = ["--catalog-type", "rest", "--catalog-uri", rest.server.url, "--json"]
    texts: list[tuple[str, str]] = []
    for secret in (
        ["--catalog-token-env", "LAKEOPS_TEST_TOKEN"],
        ["--catalog-credential-env", "LAKEOPS_TEST_CREDENTIAL"],
    ):
        for command in COMMANDS:
            code = main([command[0], IDENTIFIER, *command[1:], *common, *secret])
            output = capsys.readouterr()
            texts += [(f"{command[0]} stdout", output.out), (f"{command[0]} stderr", output.err)]
            refused = where == "load" or command[0] != "orphans"  # orphan removal commits nothing
            assert code == (1 if refused else 0), output.err
            assert ("HTTP 403" in output.err) == refused, output.err
    calls = [
        lambda: api.compact(IDENTIFIER, CompactionOptions(**rest.options, min_input_files=2)),
        lambda: api.checkpoint(IDENTIFIER, CheckpointOptions(**rest.options, rewrite_all=True)),
        lambda: api.expire(IDENTIFIER, ExpiryOptions(**rest.options, older_than="0d", retain_last=1, force=True)),
    ]
    for call in calls:
        with pytest.raises(LakeopsError, match="HTTP 403") as caught:
            call()
        error: BaseException | None = caught.value
        while error is not None:
            texts.append((type(error).__name__, f"{error}\n{error!r}"))
            error = error.__cause__ or error.__context__

    rest.server.echo_token = None
    location = Path(rest.table.refresh().location().removeprefix("file://"))
    records = [p for p in location.rglob("*.json") if "_lakeops_audit" in p.parts]
    assert len(records) == (0 if where == "load" else 2 * 4 + 3)  # a load refused: no root to write one to
    texts += [(str(p), p.read_text()) for p in records]
    texts += [(f"log {r.name}", r.getMessage()) for r in caplog.records]
    assert [where for where, text in texts if SENTINEL in text or CLIENT_SECRET in text] == []
    assert "'Bearer ***' may not" in "".join(text for _, text in texts)
    assert mask_text(f"{CLIENT_SECRET} lakeops:{CLIENT_SECRET}") == "*** ***"  # the credential, should one echo it
    assert rest.rows() and rest.server.violations == []


def test_a_change_no_rest_update_expresses_is_refused_by_name(rest: Rest) -> None:
    table = load_table(CatalogOptions(**rest.options).table_ref(IDENTIFIER), StorageOptions())
    moved = TableMetadata.model_validate({**table.metadata.to_json(), "location": "file:///elsewhere"})

    with pytest.raises(UnsupportedFeature, match="changes location is not supported"):
        rest_change(table.name, table.metadata, moved)


def test_a_commit_asserts_the_table_uuid_and_the_refs_it_moves(rest: Rest) -> None:
    table = load_table(CatalogOptions(**rest.options).table_ref(IDENTIFIER), StorageOptions())
    metadata = table.metadata
    parent = next(s for s in metadata.snapshots if s.snapshot_id != metadata.current_snapshot_id)
    main = metadata.refs["main"].model_copy(update={"snapshot_id": parent.snapshot_id})
    moved = metadata.model_copy(update={"refs": {"main": main}, "current_snapshot_id": parent.snapshot_id})

    change = rest_change(table.name, metadata, moved)

    assert change.requirements == [
        {"type": "assert-table-uuid", "uuid": str(metadata.table_uuid)},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": metadata.current_snapshot_id},
    ]
    assert change.updates == [
        {"action": "set-snapshot-ref", "ref-name": "main", "snapshot-id": parent.snapshot_id, "type": "branch"}
    ]


def test_an_unknown_table_is_named(rest: Rest) -> None:
    with pytest.raises(NotATable, match=r"db\.missing: no such table in the REST catalog"):
        api.inspect("db.missing", CatalogOptions(**rest.options))


def test_an_unusable_rest_address_is_refused_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAKEOPS_TEST_UNSET", raising=False)
    unset = CatalogOptions(
        catalog_type="rest", catalog_uri="http://127.0.0.1:9", catalog_token_env="LAKEOPS_TEST_UNSET"
    )
    with pytest.raises(InvalidArgument, match="the environment variable LAKEOPS_TEST_UNSET .* is not set"):
        api.inspect(IDENTIFIER, unset)
    with pytest.raises(InvalidArgument, match="'sqlite:///c.db': a REST catalog URI is an http:// or https:// URL"):
        api.inspect(IDENTIFIER, CatalogOptions(catalog_type="rest", catalog_uri="sqlite:///c.db"))
