"""AWS Glue as an Iceberg catalog, against moto's Glue and S3 over HTTP on 127.0.0.1: tables PyIceberg's
``GlueCatalog`` creates, maintained by lakeops through Glue, read back by PyIceberg.

moto 5.2.5 implements ``GetTable`` (with the table's ``VersionId``) and ``UpdateTable`` (archiving a
new version), but its ``UpdateTable`` ignores ``VersionId`` (a stale one is accepted, where AWS
answers ``ConcurrentModificationException``) and ``SkipArchive`` (it archives every version). The
first is what optimistic concurrency needs, so conftest.py's ``glue_endpoint`` adds AWS's check (the table's
current version must be the one given, under one lock), as tests/conftest.py makes moto's
conditional PutObject atomic. ``SkipArchive`` changes nothing the tests can observe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
from deltalake import DeltaTable
from glue_tables import REGION, glue_table
from lakeops_cli import run_json
from maintenance_commits import commit_compaction
from pyiceberg_tables import PyIcebergTable, batch

from lakeops import api
from lakeops.errors import CommitConflict, CommitStateUnknown, InvalidArgument, NotATable
from lakeops.iceberg.catalog import TableIdentifier
from lakeops.iceberg.glue_catalog import GlueCatalog, glue_client
from lakeops.ops import compaction
from lakeops.ops.options import CdcOptions, CheckpointOptions, CompactionOptions, ExpiryOptions, OrphansOptions
from lakeops.registry import REGISTRY_ENV
from lakeops.storage import StorageOptions, open_storage

pytestmark = pytest.mark.s3


@pytest.fixture
def table(glue_endpoint: str, s3_bucket: Any) -> PyIcebergTable:
    return glue_table(glue_endpoint, s3_bucket)


def _options(table: PyIcebergTable) -> dict[str, Any]:
    return {"catalog_type": "glue", "catalog_uri": table.catalog_uri}


def _ours(table: PyIcebergTable, storage_options: StorageOptions) -> GlueCatalog:
    return GlueCatalog(
        TableIdentifier.parse(table.identifier), endpoint_url=table.catalog_uri, storage_options=storage_options
    )


def _parameters(table: PyIcebergTable) -> dict[str, str]:
    database, name = table.identifier.split(".")
    answer = glue_client(None, table.catalog_uri).get_table(DatabaseName=database, Name=name)
    return dict(answer["Table"]["Parameters"])


def _objects(table: PyIcebergTable, storage_options: StorageOptions) -> set[str]:
    location = table.table.location()
    return {info.path for info in open_storage(location, storage_options).list(location)}


@contextmanager
def _on_update_table(table: PyIcebergTable, event: str, handler: Callable[..., None]) -> Iterator[None]:
    """``handler`` on ``event`` (``before-call``/``after-call``) of lakeops' Glue UpdateTable requests."""
    events = glue_client(None, table.catalog_uri).meta.events
    name = f"{event}.glue.UpdateTable"
    events.register(name, handler)
    try:
        yield
    finally:
        events.unregister(name, handler)


def test_swap_is_seen_by_pyiceberg_with_glue_parameters(table: PyIcebergTable, s3_server: Any) -> None:
    ours = _ours(table, s3_server.options)
    current = ours.current()
    assert current == table.table.metadata_location
    new = ours.new_metadata_location(table.table.location(), current)
    payload = open_storage(current, s3_server.options).read(current)

    ours.swap(current, new, payload)

    assert table.reload().metadata_location == new and len(table.rows()) == 40
    parameters = _parameters(table)
    assert (parameters["table_type"], parameters["previous_metadata_location"]) == ("ICEBERG", current)


def test_stale_swap_conflicts_and_writes_nothing(table: PyIcebergTable, s3_server: Any) -> None:
    ours = _ours(table, s3_server.options)
    stale = ours.current()
    table.table.append(batch(100, 5))  # PyIceberg moves the pointer
    new = ours.new_metadata_location(table.table.location(), stale)

    with pytest.raises(CommitConflict, match=f"{table.identifier} .*another writer committed"):
        ours.swap(stale, new, open_storage(stale, s3_server.options).read(stale))

    assert not open_storage(new, s3_server.options).exists(new)
    assert len(table.rows()) == 45


def test_not_an_iceberg_table(table: PyIcebergTable) -> None:
    database = table.identifier.split(".")[0]
    glue_client(None, table.catalog_uri).create_table(
        DatabaseName=database, TableInput={"Name": "plain", "Parameters": {"classification": "csv"}}
    )
    with pytest.raises(NotATable, match=f"{database}.plain .*not an Iceberg table"):
        GlueCatalog(TableIdentifier(database, "plain"), endpoint_url=table.catalog_uri).current()
    with pytest.raises(NotATable, match=f"{database}.missing .*no such table"):
        GlueCatalog(TableIdentifier(database, "missing"), endpoint_url=table.catalog_uri).current()


def test_a_nested_namespace_or_a_bad_endpoint_is_refused_before_any_request() -> None:
    with pytest.raises(InvalidArgument, match="a.b.events: a Glue database is one level"):
        GlueCatalog(TableIdentifier("a.b", "events"))
    with pytest.raises(InvalidArgument, match="db.events: Glue endpoint 'glue.local' must start with http"):
        GlueCatalog(TableIdentifier("db", "events"), endpoint_url="glue.local")


def test_every_maintenance_operation_through_glue_reads_identically(
    table: PyIcebergTable, s3_server: Any, tmp_path: Path
) -> None:
    storage = s3_server.options
    rows = table.rows()
    first = table.table.metadata_location

    changes = api.cdc(
        table.identifier,
        CdcOptions(**_options(table), from_version=0, output=str(tmp_path / "changes")),
        storage_options=storage,
    )
    assert (changes.rows_insert, DeltaTable(str(tmp_path / "changes")).to_pyarrow_table().num_rows) == (40, 40)

    compacted = api.compact(
        table.identifier, CompactionOptions(**_options(table), min_input_files=2), storage_options=storage
    )
    assert compacted.commits == 1 and compacted.files_removed == 16 and table.rows() == rows
    assert _parameters(table)["metadata_location"] == table.table.metadata_location != first

    rewritten = api.checkpoint(table.identifier, CheckpointOptions(**_options(table)), storage_options=storage)
    assert rewritten.status == "committed" and table.rows() == rows
    assert table.table.current_snapshot().snapshot_id == rewritten.snapshot_id  # type: ignore[union-attr]

    options = ExpiryOptions(**_options(table), older_than="0d", retain_last=1, force=True)
    expired = api.expire(table.identifier, options, storage_options=storage)
    assert expired.snapshots_expired == 5 and len(table.reload().snapshots()) == 1 and table.rows() == rows

    files = open_storage(table.table.location(), storage)
    orphan = f"{table.table.location()}/data/category=a/left-by-a-crashed-writer.parquet"
    files.write(orphan, b"not data")
    options = OrphansOptions(**_options(table), older_than="0d", force_short_retention=True)
    removed = api.orphans(table.identifier, options, storage_options=storage)
    assert removed.deleted_files == 1 and not files.exists(orphan)
    assert table.rows() == rows


def test_an_append_between_plan_and_commit_is_rebased_over(table: PyIcebergTable, s3_server: Any) -> None:
    options = CompactionOptions(**_options(table), min_input_files=2)
    plan = compaction.plan(table.identifier, options, s3_server.options)
    results = [plan.task()(group) for group in plan.groups]
    table.table.append(batch(100, 5))
    expected = table.rows()
    appended = table.table.current_snapshot().snapshot_id  # type: ignore[union-attr]

    report = commit_compaction(plan, plan.groups, results, s3_server.options, 0.0)

    assert report.commits == 1 and report.groups_dropped_by_conflict == 0
    committed = table.reload().current_snapshot()
    assert committed is not None and (committed.snapshot_id, committed.parent_snapshot_id) == (
        report.snapshot_id,
        appended,
    )  # validated from the plan's snapshot, committed on top of the append
    assert table.rows() == expected and len(expected) == 45


def test_a_commit_between_read_and_update_loses_the_version_check_and_retries(
    table: PyIcebergTable, s3_server: Any
) -> None:
    """PyIceberg commits after lakeops read the Glue table's version and before its UpdateTable: Glue
    refuses the stale version, and compaction rebases over the append."""
    codes: list[str] = []

    def rival_first(**_: Any) -> None:
        if not codes:
            table.table.append(batch(100, 5))
        codes.append("sent")

    def answer(parsed: dict[str, Any], **_: Any) -> None:
        codes[-1] = parsed.get("Error", {}).get("Code", "ok")

    expected_ids = {row["id"] for row in table.rows()} | set(range(100, 105))
    with _on_update_table(table, "before-call", rival_first), _on_update_table(table, "after-call", answer):
        report = api.compact(
            table.identifier, CompactionOptions(**_options(table), min_input_files=2), storage_options=s3_server.options
        )

    assert codes == ["ConcurrentModificationException", "ok"]
    assert report.commits == 1 and report.commit_retries == 1
    assert {row["id"] for row in table.rows()} == expected_ids


def test_a_lost_answer_of_an_update_that_landed_is_resolved_by_rereading(table: PyIcebergTable, s3_server: Any) -> None:
    lost: list[str] = []

    def lose_answer(**_: Any) -> None:
        if not lost:
            lost.append("lost")
            raise ReadTimeoutError(endpoint_url=table.catalog_uri)

    rows = table.rows()
    with _on_update_table(table, "after-call", lose_answer):
        report = api.compact(
            table.identifier, CompactionOptions(**_options(table), min_input_files=2), storage_options=s3_server.options
        )

    assert lost and report.commits == 1 and report.commit_retries == 0
    assert _parameters(table)["metadata_location"] == table.reload().metadata_location
    assert table.table.current_snapshot().summary.operation.value == "replace"  # type: ignore[union-attr]
    assert table.rows() == rows


def test_an_update_that_did_not_land_is_unknown_and_deletes_nothing(table: PyIcebergTable, s3_server: Any) -> None:
    def unreachable(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url=table.catalog_uri)

    rows, before = table.rows(), table.table.metadata_location
    objects = _objects(table, s3_server.options)
    with (
        _on_update_table(table, "before-call", unreachable),
        pytest.raises(CommitStateUnknown, match=f"{table.identifier} .*the commit may still land; nothing is deleted"),
    ):
        api.compact(
            table.identifier, CompactionOptions(**_options(table), min_input_files=2), storage_options=s3_server.options
        )

    after = _objects(table, s3_server.options)
    assert objects < after  # the new data and metadata files stay: the update may still land
    assert any(path.endswith(".metadata.json") for path in after - objects)
    assert table.reload().metadata_location == before and table.rows() == rows


def test_a_registry_glue_table_and_the_catalog_flags(
    table: PyIcebergTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(
        "tables:\n"
        "  - name: events\n"
        f"    identifier: {table.identifier}\n"
        f"    catalog: {{type: glue, region: {REGION}, endpoint_url: '{table.catalog_uri}'}}\n"
    )
    monkeypatch.setenv(REGISTRY_ENV, str(registry))
    snapshot = table.table.current_snapshot().snapshot_id  # type: ignore[union-attr]

    by_name = run_json(capsys, "inspect", "events", "--endpoint-url", table.catalog_uri)
    by_flags = run_json(
        capsys,
        "inspect",
        table.identifier,
        "--catalog-type",
        "glue",
        "--catalog-uri",
        table.catalog_uri,
        "--catalog-region",
        REGION,
        "--endpoint-url",
        table.catalog_uri,
    )

    for report in (by_name, by_flags):
        assert (report["table"], report["snapshot_id"], report["snapshots"], report["rows"]) == (
            f"glue:{table.identifier}",
            snapshot,
            4,
            40,
        )
