"""Credentials and Spark (issue 23, part 3), on real local sessions, one per test.

- Whatever lakeops passes through Spark settings is redacted in the UI and the event log: sentinel keys
  given as ``spark.executorEnv.AWS_*`` and ``spark.hadoop.fs.s3a.access.key`` appear neither in the
  event log nor on the UI's environment page (REST API), nor in lakeops' output or audit records.
- Executors that cannot reach the table fail the run before any unit runs, with one error naming the
  location: the driver has keys (lent by :func:`lakeops.storage.s3.using_keys`), the workers none. Every
  plan's unit type names the table the preflight reads.
"""

from __future__ import annotations

import contextlib
import io
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from integration.conftest import free_port
from pyspark.sql import SparkSession
from rich.console import Console

from lakeops import api
from lakeops.changefeed.cdf_export import ExportUnit
from lakeops.deletion import DeleteBatch
from lakeops.delta.maintenance.checkpoint import CheckpointPart
from lakeops.delta.maintenance.compaction import RewriteGroup as DeltaRewriteGroup
from lakeops.errors import StorageError
from lakeops.iceberg.maintenance.changelog import ChangeUnit
from lakeops.iceberg.maintenance.compaction import RewriteGroup as IcebergRewriteGroup
from lakeops.iceberg.maintenance.orphans import ListingUnit
from lakeops.iceberg.maintenance.rewrite_manifests import OutputManifest
from lakeops.icechunk.maintenance.diff import DiffUnit
from lakeops.icechunk.maintenance.packing import PackUnit
from lakeops.ops.options import CompactionOptions
from lakeops.storage import StorageOptions
from lakeops.storage.s3 import S3Keys, clear_client_cache, using_keys
from spark_jobs.cli import main as lakeops
from spark_jobs.preflight import table_of
from spark_jobs.session import build_session, stop_session
from spark_jobs.spark_settings import SparkSettings

pytestmark = pytest.mark.spark

KEY_ID = "LKOPSENTINELKEYID0042"  # not AKIA-shaped: only the setting's name can get it redacted
SECRET = "sentinel-secret-91c4e7-do-not-print"
S3A_KEY = "sentinel-s3a-key-5d0b2a"
AWS_SHAPED = "AKIAZZSENTINEL424242"  # under an innocuous name: redacted for its value
SENTINELS = (KEY_ID, SECRET, S3A_KEY, AWS_SHAPED)


@pytest.fixture
def fresh_session() -> Iterator[None]:
    """No session before the test (its settings are static), none left after it."""
    stop_session()
    try:
        yield
    finally:
        stop_session()


def _texts_under(directory: Path) -> str:
    return "\n".join(path.read_bytes().decode("utf-8", "replace") for path in directory.rglob("*") if path.is_file())


def _environment_page(spark: SparkSession) -> dict[str, Any]:
    base = spark.sparkContext.uiWebUrl
    assert base is not None and "127.0.0.1" in base, base
    app = spark.sparkContext.applicationId
    with urllib.request.urlopen(f"{base}/api/v1/applications/{app}/environment", timeout=30) as answer:
        page: dict[str, Any] = json.loads(answer.read())
    return page


def test_keys_passed_through_spark_appear_in_no_event_log_ui_output_or_audit_record(
    fresh_session: None, tmp_path: Path
) -> None:
    events = tmp_path / "events"
    events.mkdir()
    table = tmp_path / "table"
    for version in range(6):
        write_deltalake(str(table), pa.table({"id": [version]}), mode="append")
    conf = {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events.as_uri(),
        "spark.eventLog.compress": "false",  # a compressed log would hide any sentinel from the grep
        "spark.ui.port": str(free_port()),
        "spark.executorEnv.AWS_ACCESS_KEY_ID": KEY_ID,
        "spark.executorEnv.AWS_SECRET_ACCESS_KEY": SECRET,
        "spark.executorEnv.LAKEOPS_NOTE": AWS_SHAPED,
        "spark.hadoop.fs.s3a.access.key": S3A_KEY,
    }
    spark = build_session(master="local[1]", conf=conf, ui=True)
    argv = ["compact", str(table), "--master", "local[1]", "--json"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = lakeops([*argv, *(arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}"))])

    assert code == 0, err.getvalue()
    assert "on Spark (local[1])" in err.getvalue()  # the units ran as Spark tasks, not on the driver
    assert json.loads(out.getvalue())["files_removed"] == 6
    environment = _environment_page(spark)
    properties = dict(environment["sparkProperties"])
    for name in ("spark.executorEnv.AWS_ACCESS_KEY_ID", "spark.executorEnv.AWS_SECRET_ACCESS_KEY"):
        assert properties[name] == "*********(redacted)"
    assert properties["spark.hadoop.fs.s3a.access.key"] == "*********(redacted)"
    assert properties["spark.executorEnv.LAKEOPS_NOTE"] == "*********(redacted)"
    page = json.dumps(environment)
    stop_session(spark)  # the event log is complete once the application ends
    log = _texts_under(events)
    assert "spark.executorEnv.AWS_ACCESS_KEY_ID" in log and "SparkListenerTaskEnd" in log
    (audit,) = (table / "_lakeops_audit").glob("*.json")
    assert json.loads(audit.read_text())["command"] == "compact"
    records = _texts_under(table)  # the table's files, its log and lakeops' audit record
    texts = {"event log": log, "UI environment": page, "stdout": out.getvalue(), "stderr": err.getvalue()}
    texts["table and audit"] = records
    assert [(where, s) for where, text in texts.items() for s in SENTINELS if s in text] == []
    rows = DeltaTable(str(table)).to_pyarrow_table().column("id").to_pylist()
    assert sorted(rows) == list(range(6))


@pytest.mark.s3
def test_executors_without_credentials_fail_the_run_before_any_unit_runs(
    s3_bucket: Any, monkeypatch: pytest.MonkeyPatch, fresh_session: None
) -> None:
    location = f"{s3_bucket.uri}/events"
    endpoint = s3_bucket.options.endpoint_url
    delta_rs = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "driver-key",
        "AWS_SECRET_ACCESS_KEY": "driver-secret",
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }
    for version in range(6):
        write_deltalake(location, pa.table({"id": [version]}), mode="append", storage_options=delta_rs)
    # The session's workers inherit this environment: no keys, as on workers without an identity. Empty
    # executor variables too: pyspark keeps an earlier session's spark.executorEnv.* for the next one.
    no_keys = {"spark.executorEnv.AWS_ACCESS_KEY_ID": "", "spark.executorEnv.AWS_SECRET_ACCESS_KEY": ""}
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    clear_client_cache()
    progress = io.StringIO()
    with (
        using_keys(S3Keys("driver-key", "driver-secret"), endpoint_url=endpoint),
        pytest.raises(StorageError) as caught,
    ):
        api.compact(
            location,
            CompactionOptions(),
            storage_options=StorageOptions(endpoint_url=endpoint),
            executor=SparkSettings(master="local[1]", conf=no_keys),
            progress=Console(file=progress),
        )

    message = str(caught.value)
    assert message.startswith(f"executors cannot read {location} (on ")
    assert f"cannot list '{location}/': Unable to locate credentials" in message
    assert message.endswith("(set AWS_* in the workers' environment or give them an instance/pod role)")
    assert "Spark tasks done" not in progress.getvalue()  # no unit ran
    peer = DeltaTable(location, storage_options=delta_rs)
    assert peer.version() == 5 and len(peer.file_uris()) == 6
    clear_client_cache()


UNIT_TYPES = [
    ExportUnit,
    DeleteBatch,
    CheckpointPart,
    DeltaRewriteGroup,
    ChangeUnit,
    IcebergRewriteGroup,
    ListingUnit,
    OutputManifest,
    DiffUnit,
    PackUnit,
]


@pytest.mark.parametrize("unit_type", UNIT_TYPES, ids=lambda t: f"{t.__module__}.{t.__name__}")
def test_every_plan_unit_names_the_table_the_preflight_reads(unit_type: type[Any]) -> None:
    fields = unit_type.model_fields
    roots = [name for name in ("table_root", "table_location") if name in fields]
    assert len(roots) == 1 and fields[roots[0]].annotation is str
    assert fields["storage"].annotation is StorageOptions


def test_the_preflight_reads_a_units_table_and_skips_units_without_one() -> None:
    options = StorageOptions(endpoint_url="http://127.0.0.1:9000")
    batch = DeleteBatch(batch_id=0, table_root="s3://lake/events", storage=options, files=[])

    assert table_of(batch) == ("s3://lake/events", options)
    assert table_of(CompactionOptions()) is None
