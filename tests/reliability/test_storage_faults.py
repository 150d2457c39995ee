"""Storage faults (issue 10): every operation, on every format, through a fault-injecting S3 proxy.

Tables are written directly to moto by the peers (delta-rs, PyIceberg, our Icechunk writer); the
``lakeops`` command line then reaches S3 only through :mod:`reliability.faulty_s3`, which answers a
fixed-seed share of the requests with 500/503, stalls, resets or a lost answer. Each run must either
succeed or fail with a :class:`~lakeops.errors.LakeopsError` naming the table or file, and afterwards
the table, read directly, must hold the same rows with every file its current version references.
Destructive runs may delete only what a fault-free dry run planned. A commit whose answer is lost
is resolved by re-reading it, and the files it references are never deleted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from icechunk_repos import build_history, contents, missing_objects
from pyiceberg.table import StaticTable
from pyiceberg_tables import PyIcebergTable, rows_of, small_file_table
from reliability.faulty_s3 import Fault, FaultyS3, Rule, faulty_s3  # noqa: F401 -- faulty_s3 is a fixture
from s3_clients import make_client

from lakeops.errors import InvalidArgument
from lakeops.iceberg.catalog import VERSION_HINT
from lakeops.icechunk import refs
from lakeops.icechunk.repository import Repository
from lakeops.ops.target import CatalogOptions, resolve_target
from lakeops.ops.verify import retained_files_exist
from lakeops.storage import Storage, StorageOptions, open_storage, s3
from lakeops.storage.s3 import READ_TIMEOUT_ENV, clear_client_cache
from spark_jobs.cli import main as lakeops

pytestmark = [pytest.mark.s3, pytest.mark.long]  # long: CI runs it as its own stage (make test-long)

#: Seconds a client waits for an answer here; the proxy stalls longer (0.8 s), so a stall times out.
READ_TIMEOUT_S = "0.5"


@pytest.fixture
def proxy(faulty_s3: FaultyS3, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultyS3]:  # noqa: F811 -- the fixture
    """The proxy, with this process's S3 clients rebuilt to give up on a stalled answer quickly."""
    monkeypatch.setenv(READ_TIMEOUT_ENV, READ_TIMEOUT_S)
    clear_client_cache()
    yield faulty_s3
    assert faulty_s3.failures == [], "the proxy itself failed"
    clear_client_cache()


def transient(proxy: FaultyS3, *, rate: float, seed: int) -> None:
    """About ``rate`` of all requests fail transiently: throttling, 500s, resets, lost answers and a
    few stalls (each costs a read timeout)."""
    share = rate / 4
    proxy.add(
        Rule(Fault.SLOW_DOWN, probability=share, seed=seed),
        Rule(Fault.INTERNAL_ERROR, probability=share, seed=seed + 1),
        Rule(Fault.RESET, probability=share, seed=seed + 2),
        Rule(Fault.DROP_ANSWER, probability=share * 0.8, seed=seed + 3),
        Rule(Fault.STALL, probability=share * 0.2, seed=seed + 4),
    )


def run(capsys: pytest.CaptureFixture[str], names: str, *argv: str) -> dict[str, Any] | None:
    """``lakeops ARGV --json``: the report on success; on failure, asserts a clean LakeopsError that
    names the table or file (one of the ``|``-separated ``names``: a bucket, a table name), and
    returns None."""
    code = lakeops([*argv, "--json"])
    captured = capsys.readouterr()
    if code == 0:
        report: dict[str, Any] = json.loads(captured.out)
        return report
    assert code == 1, captured.err  # 1: a LakeopsError; anything else is a crash or a usage error
    assert "error:" in captured.err and any(name in captured.err for name in names.split("|")), captured.err
    return None


def assert_retained_files_exist(table: str, options: StorageOptions, catalog_uri: str | None = None) -> None:
    """lakeops' own post-operation check, read directly: every file a retained version references exists."""
    target = resolve_target(table, CatalogOptions(catalog_uri=catalog_uri), options)
    verification = retained_files_exist(target, options)
    assert verification.passed, verification.summary


def listing(storage: Storage, root: str) -> set[str]:
    return {info.path for info in storage.list(root) if "/_lakeops_audit/" not in info.path}


def planned(capsys: pytest.CaptureFixture[str], *argv: str) -> set[str]:
    """The files a fault-free dry run would delete."""
    code = lakeops([*argv, "--dry-run", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return {p.replace("s3a://", "s3://") for p in json.loads(captured.out)["paths"]}


def delete_through_faults(
    capsys: pytest.CaptureFixture[str],
    proxy: FaultyS3,
    storage: Storage,
    root: str,
    bucket: str,
    *argv: str,
    seed: int,
) -> set[str]:
    """Run a destructive command through faults; it deletes only (and, on success, exactly) what a
    fault-free dry run planned. Returns what it deleted."""
    proxy.clear()
    plan = planned(capsys, *argv)
    before = listing(storage, root)
    transient(proxy, rate=0.15, seed=seed)
    report = run(capsys, bucket, *argv)
    proxy.clear()
    deleted = before - listing(storage, root)
    assert deleted <= plan
    if report is not None:
        assert deleted == plan
    return deleted


# -- Delta ------------------------------------------------------------------------------------------


def _delta_rs(endpoint: str) -> dict[str, str]:
    """delta-rs reaches moto directly (credentials and region: the session's AWS environment)."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}


def _delta_table(location: str, endpoint: str, appends: int = 8) -> pa.Table:
    """``appends`` small appends, then a delete (a tombstone for vacuum); returns the rows."""
    options = _delta_rs(endpoint)
    for i in range(appends):
        write_deltalake(
            location, pa.table({"id": [3 * i, 3 * i + 1, 3 * i + 2]}), mode="append", storage_options=options
        )
    DeltaTable(location, storage_options=options).delete("id = 4")
    return _delta_rows(location, endpoint)


def _delta_rows(location: str, endpoint: str) -> pa.Table:
    return DeltaTable(location, storage_options=_delta_rs(endpoint)).to_pyarrow_table().sort_by("id")


def _assert_delta_intact(location: str, endpoint: str, storage: Storage, rows: pa.Table) -> None:
    """delta-rs reads the same rows, and every file of the current version exists."""
    table = DeltaTable(location, storage_options=_delta_rs(endpoint))
    assert table.to_pyarrow_table().sort_by("id").equals(rows)
    missing = [uri for uri in table.file_uris() if not storage.exists(uri.replace("s3a://", "s3://"))]
    assert missing == []
    assert_retained_files_exist(location, StorageOptions(endpoint_url=endpoint))


def test_delta_operations_through_transient_faults(
    proxy: FaultyS3, s3_bucket: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = s3_bucket.options.endpoint_url
    location = f"{s3_bucket.uri}/events"
    storage = open_storage(location, s3_bucket.options)
    rows = _delta_table(location, endpoint)
    via = ("--endpoint-url", proxy.endpoint_url)
    bucket = s3_bucket.name

    transient(proxy, rate=0.15, seed=1)
    run(capsys, bucket, "compact", location, "--min-input-files", "2", *via)
    proxy.clear()
    _assert_delta_intact(location, endpoint, storage, rows)

    transient(proxy, rate=0.15, seed=2)
    run(capsys, bucket, "checkpoint", location, *via)
    proxy.clear()
    _assert_delta_intact(location, endpoint, storage, rows)

    time.sleep(0.05)  # moto dates objects "now": the shortest retention needs the clock to move on
    delete_through_faults(
        capsys, proxy, storage, location, bucket, "expire", location, "--older-than", "1ms", "--force", *via, seed=3
    )
    _assert_delta_intact(location, endpoint, storage, rows)

    delete_through_faults(
        capsys,
        proxy,
        storage,
        location,
        bucket,
        "orphans",
        location,
        "--older-than",
        "0s",
        "--force-short-retention",
        *via,
        seed=4,
    )
    _assert_delta_intact(location, endpoint, storage, rows)

    changes = f"{s3_bucket.uri}/changes"
    transient(proxy, rate=0.15, seed=5)
    extracted = run(capsys, bucket, "cdc", location, "--from", "0", "--output", changes, *via)
    proxy.clear()
    if extracted is not None:
        inserted = DeltaTable(changes, storage_options=_delta_rs(endpoint)).to_pyarrow_table()
        assert inserted.num_rows == extracted["rows_written"] > 0
    assert sum(proxy.counts().values()) > 0


# -- Iceberg ----------------------------------------------------------------------------------------


def _iceberg_table(tmp_path: Path, bucket: Any) -> tuple[PyIcebergTable, list[dict[str, Any]]]:
    """Six small appends and a copy-on-write delete by PyIceberg; an untracked file for orphans."""
    table = small_file_table(tmp_path, "day", appends=6, rows=8, s3=(bucket.uri, bucket.options.endpoint_url))
    table.table.delete("id < 3")
    rows = table.rows()
    storage = open_storage(bucket.uri, bucket.options)
    storage.write(f"{table.table.location()}/data/crashed-writer-leftover.parquet", b"not referenced")
    return table, rows


def _assert_iceberg_intact(table: PyIcebergTable, rows: list[dict[str, Any]], options: StorageOptions) -> None:
    assert table.rows() == rows
    assert_retained_files_exist(table.identifier, options, table.catalog_uri)


def test_iceberg_operations_through_transient_faults(
    proxy: FaultyS3, s3_bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, rows = _iceberg_table(tmp_path, s3_bucket)
    direct = s3_bucket.options
    storage = open_storage(s3_bucket.uri, direct)
    root = table.table.location()
    bucket = f"{s3_bucket.name}|{table.identifier}"
    name = (table.identifier, "--catalog-uri", table.catalog_uri, "--endpoint-url", proxy.endpoint_url)

    transient(proxy, rate=0.15, seed=11)
    run(capsys, bucket, "compact", *name, "--min-input-files", "2")
    proxy.clear()
    _assert_iceberg_intact(table, rows, direct)

    transient(proxy, rate=0.15, seed=12)
    run(capsys, bucket, "checkpoint", *name, "--rewrite-all")
    proxy.clear()
    _assert_iceberg_intact(table, rows, direct)

    changes = f"{s3_bucket.uri}/changes"
    transient(proxy, rate=0.15, seed=15)
    extracted = run(capsys, bucket, "cdc", *name, "--from", "0", "--output", changes)
    proxy.clear()
    if extracted is not None:
        feed = DeltaTable(changes, storage_options=_delta_rs(direct.endpoint_url)).to_pyarrow_table()
        assert feed.num_rows == extracted["rows_written"] > 0

    time.sleep(0.05)
    retention = ("--older-than", "1ms", "--retain-last", "1", "--force")
    delete_through_faults(capsys, proxy, storage, root, bucket, "expire", *name, *retention, seed=13)
    _assert_iceberg_intact(table, rows, direct)

    # After the expiry: older metadata-log files still name the snapshots whose manifest lists it deleted.
    vacuum = ("--older-than", "1ms", "--force-short-retention")
    delete_through_faults(capsys, proxy, storage, root, bucket, "orphans", *name, *vacuum, seed=14)
    _assert_iceberg_intact(table, rows, direct)

    assert sum(proxy.counts().values()) > 0


# -- Icechunk ---------------------------------------------------------------------------------------


def test_icechunk_operations_through_transient_faults(
    proxy: FaultyS3, s3_bucket: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    root = f"{s3_bucket.uri}/repo"
    direct = s3_bucket.options
    storage = open_storage(root, direct)
    build_history(storage, root, commits=5)
    before = contents(storage, root)
    first = Repository(storage, root).ancestry(Repository(storage, root).resolve("main", "branch"))[-1].id
    bucket = s3_bucket.name
    via = ("--endpoint-url", proxy.endpoint_url)

    def intact() -> None:
        assert contents(storage, root) == before
        assert missing_objects(storage, root) == []
        assert_retained_files_exist(root, direct)

    transient(proxy, rate=0.15, seed=21)
    run(capsys, bucket, "compact", root, "--min-input-files", "2", *via)
    proxy.clear()
    intact()

    changes = f"{s3_bucket.uri}/changes"
    transient(proxy, rate=0.15, seed=24)
    extracted = run(capsys, bucket, "cdc", root, "--from", first, "--output", changes, *via)
    proxy.clear()
    if extracted is not None:
        feed = DeltaTable(changes, storage_options=_delta_rs(direct.endpoint_url)).to_pyarrow_table()
        assert feed.num_rows == extracted["rows_written"] > 0

    time.sleep(0.05)
    delete_through_faults(
        capsys, proxy, storage, root, bucket, "expire", root, "--older-than", "1ms", "--force", *via, seed=22
    )
    intact()

    vacuum = ("--older-than", "1ms", "--force-short-retention")
    delete_through_faults(capsys, proxy, storage, root, bucket, "orphans", root, *vacuum, *via, seed=23)
    intact()

    assert sum(proxy.counts().values()) > 0


# -- the read timeout -------------------------------------------------------------------------------


def test_read_timeout_comes_from_the_environment(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(READ_TIMEOUT_ENV, "2.5")
    assert make_client(endpoint_url=s3_server.endpoint_url).meta.config.read_timeout == 2.5
    monkeypatch.delenv(READ_TIMEOUT_ENV)
    assert make_client(endpoint_url=s3_server.endpoint_url).meta.config.read_timeout == 120
    monkeypatch.setenv(READ_TIMEOUT_ENV, "soon")
    with pytest.raises(InvalidArgument, match=r"LAKEOPS_S3_READ_TIMEOUT='soon': expected a positive number"):
        make_client(endpoint_url=s3_server.endpoint_url)


def test_a_stall_costs_one_read_timeout_then_the_request_is_retried(proxy: FaultyS3, s3_bucket: Any) -> None:
    storage = open_storage(s3_bucket.uri, StorageOptions(endpoint_url=proxy.endpoint_url))
    proxy.add(Rule(Fault.STALL, method="PUT", nth=frozenset({1})))
    storage.write(f"{s3_bucket.uri}/object", b"bytes")
    assert proxy.counts() == {Fault.STALL: 1}
    assert open_storage(s3_bucket.uri, s3_bucket.options).read(f"{s3_bucket.uri}/object") == b"bytes"


# -- the ambiguous commit: the store applied it, the client never heard --------------------------------

#: How a commit's answer is lost: ``once`` (botocore re-sends, S3 answers 412 to our own object),
#: ``always`` (every re-send's answer is lost too: the retries run out), ``unreadable`` (as
#: ``always``, and reading the object back fails too: the outcome cannot be established).
LOSSES = ("once", "always", "unreadable")
#: Sends of one request with :func:`few_retries`: botocore's ``max_attempts`` counts the re-sends.
SENDS = 3 + 1


@pytest.fixture
def few_retries(proxy: FaultyS3, monkeypatch: pytest.MonkeyPatch) -> FaultyS3:
    """Three attempts per request, so running out of retries takes a second, not a minute of backoff."""
    monkeypatch.setattr(s3, "MAX_ATTEMPTS", 3)
    clear_client_cache()
    return proxy


def lose_commit_answer(proxy: FaultyS3, key: str, loss: str) -> None:
    """Drop the answer to the PUT of ``key`` (a regex) as ``loss`` says (:data:`LOSSES`)."""
    if loss == "once":
        proxy.add(Rule(Fault.DROP_ANSWER, method="PUT", key=key, nth=frozenset({1})))
        return
    proxy.add(Rule(Fault.DROP_ANSWER, method="PUT", key=key, probability=1.0))
    if loss == "unreadable":
        proxy.add(
            Rule(Fault.SLOW_DOWN, method="GET", key=key, probability=1.0),
            Rule(Fault.SLOW_DOWN, method="HEAD", key=key, probability=1.0),
        )


def failing(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """``lakeops ARGV``, which must fail with a LakeopsError (exit 1); its message."""
    code = lakeops([*argv, "--json"])
    err = capsys.readouterr().err
    assert code == 1, err
    return err


def compact_through_lost_answers(
    capsys: pytest.CaptureFixture[str], proxy: FaultyS3, bucket: str, location: str, loss: str, commit_file: str
) -> dict[str, Any] | None:
    """``lakeops compact LOCATION`` through ``proxy``: with an ``unreadable`` loss it must fail with
    CommitStateUnknown naming ``commit_file``, else succeed. The report, or None; the rules cleared."""
    argv = ("compact", location, "--min-input-files", "2", "--endpoint-url", proxy.endpoint_url)
    report = None
    if loss == "unreadable":
        err = failing(capsys, *argv)
        assert "CommitStateUnknown" in err and commit_file in err, err
    else:
        report = run(capsys, bucket, *argv)
        assert report is not None
    proxy.clear()
    return report


@pytest.mark.parametrize("loss", LOSSES)
def test_delta_commit_with_a_lost_answer_is_resolved_by_rereading(
    loss: str, few_retries: FaultyS3, s3_bucket: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = s3_bucket.options.endpoint_url
    location = f"{s3_bucket.uri}/events"
    storage = open_storage(location, s3_bucket.options)
    rows = _delta_table(location, endpoint)  # versions 0..8: the compaction commits version 9
    before = listing(storage, location)
    lose_commit_answer(few_retries, r"/_delta_log/0{19}9\.json$", loss)

    report = compact_through_lost_answers(capsys, few_retries, s3_bucket.name, location, loss, f"{9:020d}.json")
    assert report is None or report["committed_version"] == 9

    assert few_retries.counts()[Fault.DROP_ANSWER] == (1 if loss == "once" else SENDS)
    # The commit landed (in every case): the table is at version 9, once, and nothing it names is gone.
    assert DeltaTable(location, storage_options=_delta_rs(endpoint)).version() == 9
    assert not storage.exists(f"{location}/_delta_log/{10:020d}.json")
    assert before <= listing(storage, location)
    _assert_delta_intact(location, endpoint, storage, rows)


def test_delta_commit_whose_checksum_file_the_store_refuses_stands(
    few_retries: FaultyS3, s3_bucket: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every PUT of a version checksum file fails with a 500, through the client's retries: the
    compaction still commits version 9, which delta-rs reads, and its report names the ``.crc`` not
    written (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#version-checksum-file: optional)."""
    endpoint = s3_bucket.options.endpoint_url
    location = f"{s3_bucket.uri}/events"
    storage = open_storage(location, s3_bucket.options)
    rows = _delta_table(location, endpoint)  # versions 0..8: the compaction commits version 9
    few_retries.add(Rule(Fault.INTERNAL_ERROR, method="PUT", key=r"/_delta_log/\d{20}\.crc$", probability=1.0))

    argv = ("compact", location, "--min-input-files", "2", "--endpoint-url", few_retries.endpoint_url)
    report = run(capsys, s3_bucket.name, *argv)

    assert few_retries.counts()[Fault.INTERNAL_ERROR] >= 1
    few_retries.clear()
    assert report is not None and report["committed_version"] == 9
    (warning,) = report["warnings"]
    assert f"{9:020d}.crc" in warning and "was not written" in warning
    assert not storage.exists(f"{location}/_delta_log/{9:020d}.crc")
    assert DeltaTable(location, storage_options=_delta_rs(endpoint)).version() == 9
    _assert_delta_intact(location, endpoint, storage, rows)


@pytest.mark.parametrize("loss", LOSSES)
def test_iceberg_commit_with_a_lost_answer_fails_cleanly_or_commits_once(
    loss: str, few_retries: FaultyS3, s3_bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, rows = _iceberg_table(tmp_path, s3_bucket)
    storage = open_storage(s3_bucket.uri, s3_bucket.options)
    root = table.table.location()
    snapshot = table.reload().current_snapshot()
    before = listing(storage, root)
    version = int(table.table.metadata_location.rsplit("/", 1)[1][:5])  # the commit writes version + 1
    lose_commit_answer(few_retries, rf"/metadata/{version + 1:05d}-[0-9a-f-]{{36}}\.metadata\.json$", loss)
    argv = ("compact", table.identifier, "--catalog-uri", table.catalog_uri, "--min-input-files", "2")

    report = run(capsys, f"{s3_bucket.name}|{table.identifier}", *argv, "--endpoint-url", few_retries.endpoint_url)
    few_retries.clear()

    assert few_retries.counts()[Fault.DROP_ANSWER] == (1 if loss == "once" else SENDS)
    current = table.reload().current_snapshot()
    assert current is not None and snapshot is not None
    if loss == "once":  # the re-sent PUT met our own object (412): compared, committed
        assert report is not None and report["snapshot_id"] == current.snapshot_id != snapshot.snapshot_id
    else:  # the metadata file may exist, but the catalog never pointed at it: not committed
        assert report is None and current.snapshot_id == snapshot.snapshot_id
    assert before <= listing(storage, root)
    _assert_iceberg_intact(table, rows, s3_bucket.options)


def _file_system_table(tmp_path: Path, bucket: Any) -> tuple[str, list[dict[str, Any]], int]:
    """The table of :func:`_iceberg_table` as a file-system (Hadoop-style) table: its current metadata
    copied to ``metadata/v1.metadata.json``, ``version-hint.text`` saying 1. Returns the location, the
    rows and the current snapshot id."""
    table, rows = _iceberg_table(tmp_path, bucket)
    storage = open_storage(bucket.uri, bucket.options)
    location = table.table.location()
    storage.write(f"{location}/metadata/v1.metadata.json", storage.read(table.table.metadata_location))
    storage.write(f"{location}/metadata/{VERSION_HINT}", b"1")
    snapshot = table.table.current_snapshot()
    assert snapshot is not None
    return location, rows, snapshot.snapshot_id


@pytest.mark.parametrize("loss", LOSSES)
def test_iceberg_file_system_commit_with_a_lost_answer_is_resolved_by_rereading(
    loss: str, few_retries: FaultyS3, s3_bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location, rows, snapshot_id = _file_system_table(tmp_path, s3_bucket)
    storage = open_storage(location, s3_bucket.options)
    metadata = f"{location}/metadata"
    before = listing(storage, location)
    lose_commit_answer(few_retries, r"/metadata/v2\.metadata\.json$", loss)  # creating v2 is the commit

    report = compact_through_lost_answers(capsys, few_retries, s3_bucket.name, location, loss, "v2.metadata.json")
    assert report is None or (report["commits"] == 1 and report["snapshot_id"] != snapshot_id)

    assert few_retries.counts()[Fault.DROP_ANSWER] == (1 if loss == "once" else SENDS)
    # v2 landed in every case, once and whole: PyIceberg reads the same rows from it, at a new snapshot.
    assert not storage.exists(f"{metadata}/v3.metadata.json")
    static = StaticTable.from_metadata(f"{metadata}/v2.metadata.json", {"s3.endpoint": s3_bucket.options.endpoint_url})
    assert rows_of(static.scan().to_arrow()) == rows
    assert static.metadata.current_snapshot_id != snapshot_id
    # The hint follows a commit whose answer came back only; one settled by reading the table back
    # leaves it at v1 (it is only a hint: the listing names v2, and the next commit moves it).
    assert storage.read(f"{metadata}/{VERSION_HINT}") == (b"2" if loss == "once" else b"1")
    assert before <= listing(storage, location)
    assert_retained_files_exist(location, s3_bucket.options)


@pytest.mark.parametrize("loss", LOSSES)
def test_icechunk_ref_update_with_a_lost_answer_is_resolved_by_rereading(
    loss: str, few_retries: FaultyS3, s3_bucket: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    root = f"{s3_bucket.uri}/repo"
    storage = open_storage(root, s3_bucket.options)
    build_history(storage, root, commits=3)
    before, files_before = contents(storage, root), listing(storage, root)
    tip = max(Repository(storage, root).branch_history("main"), key=lambda v: v.sequence)
    next_ref = refs.branch_file_name(tip.sequence + 1)
    lose_commit_answer(few_retries, rf"/refs/branch\.main/{next_ref}$", loss)

    report = compact_through_lost_answers(capsys, few_retries, s3_bucket.name, root, loss, next_ref)
    assert report is None or report["committed_snapshot"]

    assert few_retries.counts()[Fault.DROP_ANSWER] == (1 if loss == "once" else SENDS)
    # The ref landed in every case: main moved once, to a snapshot whose every object exists.
    moved = max(Repository(storage, root).branch_history("main"), key=lambda v: v.sequence)
    assert moved.sequence == tip.sequence + 1 and moved.snapshot_id != tip.snapshot_id
    assert files_before <= listing(storage, root)
    assert contents(storage, root) == before
    assert missing_objects(storage, root) == []


# -- the lost delete: DeleteObjects applied, its answer lost --------------------------------------------


@pytest.mark.parametrize("lost", [1, 2, SENDS])
def test_vacuum_whose_delete_answers_are_lost_deletes_exactly_the_garbage(
    lost: int, few_retries: FaultyS3, s3_bucket: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store deletes, the answer never comes (``lost`` sends in a row). DeleteObjects is idempotent,
    so the re-send deletes nothing more and succeeds; when every send's answer is lost the run fails
    with a StorageError naming the files, and a rerun finds nothing left to delete."""
    endpoint = s3_bucket.options.endpoint_url
    location = f"{s3_bucket.uri}/events"
    storage = open_storage(location, s3_bucket.options)
    rows = _delta_table(location, endpoint, appends=4)  # the delete leaves a tombstoned file
    storage.write(f"{location}/part-00000-crashed-writer-leftover.parquet", b"not referenced")
    time.sleep(0.05)
    argv = ("orphans", location, "--older-than", "0s", "--force-short-retention")
    via = ("--endpoint-url", few_retries.endpoint_url)
    garbage = planned(capsys, *argv, *via)
    assert len(garbage) == 2
    before = listing(storage, location)
    few_retries.add(Rule(Fault.DROP_ANSWER, method="POST", query="delete", nth=frozenset(range(1, lost + 1))))

    if lost < SENDS:
        report = run(capsys, s3_bucket.name, *argv, *via)
        assert report is not None and report["deleted_files"] == len(garbage)
    else:
        err = failing(capsys, *argv, *via)
        assert "StorageError: cannot delete 2 objects" in err and location in err and "a rerun is safe" in err, err
    few_retries.clear()

    assert few_retries.counts()[Fault.DROP_ANSWER] == lost
    assert before - listing(storage, location) == garbage  # gone, whether or not the run heard it
    # The current version is whole (older versions lost the tombstoned file: a 0s retention's price).
    table = DeltaTable(location, storage_options=_delta_rs(endpoint))
    assert table.to_pyarrow_table().sort_by("id").equals(rows)
    assert all(storage.exists(uri.replace("s3a://", "s3://")) for uri in table.file_uris())
    again = run(capsys, s3_bucket.name, *argv, *via)
    assert again is not None and again["deleted_files"] == 0 and listing(storage, location) == before - garbage


def test_quarantine_and_restore_whose_copy_and_delete_answers_are_lost(
    few_retries: FaultyS3, s3_bucket: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A quarantine move is a server-side copy then a delete; restore moves back. The first answer of
    a copy and of a delete is lost in each direction: the re-sends finish the moves, nothing is
    overwritten or lost, and the table ends byte-identical."""
    endpoint = s3_bucket.options.endpoint_url
    location = f"{s3_bucket.uri}/events"
    storage = open_storage(location, s3_bucket.options)
    rows = _delta_table(location, endpoint, appends=4)
    storage.write(f"{location}/part-00000-crashed-writer-leftover.parquet", b"not referenced")
    time.sleep(0.05)
    via = ("--endpoint-url", few_retries.endpoint_url)
    vacuum = ("orphans", location, "--older-than", "0s", "--force-short-retention", *via)
    garbage = planned(capsys, *vacuum)
    before = {path: storage.read(path) for path in listing(storage, location)}

    def lose_first_answers(copied_to: str) -> None:
        few_retries.add(
            Rule(Fault.DROP_ANSWER, method="PUT", key=copied_to, nth=frozenset({1})),
            Rule(Fault.DROP_ANSWER, method="POST", query="delete", nth=frozenset({1})),
        )

    lose_first_answers(r"/_lakeops_trash/[^/]+/part-[^/]+\.parquet$")
    report = run(capsys, s3_bucket.name, *vacuum, "--quarantine")
    few_retries.clear()
    assert report is not None and report["deleted_files"] == len(garbage) == 2
    run_id = report["quarantine_run"]
    trash = f"{location}/_lakeops_trash/{run_id}"
    assert {p: storage.read(p) for p in listing(storage, trash) if p.endswith(".parquet")} == {
        p.replace(location, trash): before[p] for p in garbage
    }
    assert {p for p in listing(storage, location) if not p.startswith(trash)} == set(before) - garbage

    lose_first_answers(r"/events/part-[^/]+\.parquet$")
    restored = run(capsys, s3_bucket.name, "restore", location, run_id, *via)
    few_retries.clear()
    assert restored is not None and restored["restored_files"] == 2
    assert few_retries.counts()[Fault.DROP_ANSWER] == 4
    assert {path: storage.read(path) for path in listing(storage, location)} == before
    assert DeltaTable(location, storage_options=_delta_rs(endpoint)).to_pyarrow_table().sort_by("id").equals(rows)
