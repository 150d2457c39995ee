"""Credentials never leak (issue 10, "Secrets").

Operations run against the moto S3 endpoint with sentinel values in ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY`` and ``AWS_SESSION_TOKEN`` (moto accepts any): ``lakeops`` commands with
``--json`` on a Delta table, an Iceberg table (an expiry that commits new metadata) and an Icechunk
repository, failing commands (a missing table, a corrupt ``_last_checkpoint``, a missing
bucket), and one Dagster materialization with the keys given to the storage resource through
``dagster.EnvVar``. Everything they produce is searched for the sentinels: stdout and stderr, log
records (INFO and above, what a deployment keeps; botocore's own DEBUG logging of request headers
is not lakeops output and is off unless a user turns it on), reports, exception messages with their
whole cause chain, Dagster's event log and metadata, and every object written under the table roots
and the catalog database. No Spark session starts: each operation here runs on the driver.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from icechunk_repos import build_history
from pyiceberg_tables import small_file_table

from lakeops.errors import LakeopsError
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.s3 import S3Storage, clear_client_cache
from orchestration.assets import operation_key
from orchestration.definitions import build_definitions
from orchestration.registry import parse_registry
from orchestration.resources import SparkResource, StorageResource
from spark_jobs.cli import main as lakeops
from spark_jobs.operations import run_operation

SENTINELS = {
    "AWS_ACCESS_KEY_ID": "AKIASENTINELKEY4242",
    "AWS_SECRET_ACCESS_KEY": "sentinel-secret-7f3a9c1e-do-not-print",
    "AWS_SESSION_TOKEN": "sentinel-session-token-b6d2e8f0-do-not-print",
}


def _leaks(text: str) -> list[str]:
    return [name for name, value in SENTINELS.items() if value in text]


@pytest.fixture
def sentinel_env(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The sentinel credentials in the environment (fresh S3 clients pick them up); the endpoint URL."""
    for name, value in SENTINELS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint_url)
    clear_client_cache()
    yield str(s3_server.endpoint_url)
    clear_client_cache()


class Output:
    """Everything the run produced, to search for the sentinels at the end."""

    def __init__(self) -> None:
        self.texts: list[tuple[str, str]] = []

    def add(self, where: str, text: str) -> None:
        self.texts.append((where, text))

    def leaks(self) -> list[tuple[str, list[str]]]:
        return [(where, found) for where, text in self.texts if (found := _leaks(text))]


def _cli(output: Output, capsys: pytest.CaptureFixture[str], *argv: str) -> int:
    code = lakeops([*argv, "--json"])
    captured = capsys.readouterr()
    output.add(f"lakeops {' '.join(argv)}: stdout", captured.out)
    output.add(f"lakeops {' '.join(argv)}: stderr", captured.err)
    return code


def _failure(output: Output, name: str, table: str, options: dict[str, Any], storage: StorageOptions) -> None:
    """Run an operation that must fail; record its message, repr and whole cause chain."""
    with pytest.raises(LakeopsError) as caught:
        run_operation(name, table, options, storage_options=storage)
    error: BaseException | None = caught.value
    while error is not None:
        output.add(f"{name} {table}: {type(error).__name__}", f"{error}\n{error!r}\n{error.args!r}")
        error = error.__cause__ or error.__context__


def _objects(root: str, storage: StorageOptions) -> Iterator[tuple[str, bytes]]:
    store = open_storage(root, storage)
    for info in store.list(root):
        yield info.path, store.read(info.path)


def _delta_rs(endpoint: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}


def test_sentinel_credentials_appear_in_no_output_report_error_or_file(
    sentinel_env: str,
    s3_bucket: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    output = Output()
    options = StorageOptions(endpoint_url=sentinel_env)
    delta = f"{s3_bucket.uri}/events"
    for version in range(3):
        write_deltalake(delta, pa.table({"id": [version]}), mode="append", storage_options=_delta_rs(sentinel_env))
    iceberg = small_file_table(tmp_path, appends=3, rows=5, s3=(s3_bucket.uri, sentinel_env))
    icechunk = f"{s3_bucket.uri}/arrays"
    build_history(open_storage(icechunk, options), icechunk, commits=3)
    broken = f"{s3_bucket.uri}/broken"
    for version in range(2):
        write_deltalake(broken, pa.table({"id": [version]}), mode="append", storage_options=_delta_rs(sentinel_env))
    open_storage(broken, options).write(f"{broken}/_delta_log/_last_checkpoint", b'{"version": 1, "size": ')

    ok = [
        ("inspect", delta),
        ("expire", delta, "--older-than", "1s", "--force"),
        ("orphans", delta, "--dry-run"),
        ("inspect", icechunk),
        ("orphans", icechunk, "--dry-run"),
        ("inspect", iceberg.identifier, "--catalog-uri", iceberg.catalog_uri),
        ("expire", iceberg.identifier, "--retain-last", "1", "--older-than", "0d", "--force"),
    ]
    for argv in ok:
        extra = (
            ("--catalog-uri", iceberg.catalog_uri)
            if argv[1] == iceberg.identifier and "--catalog-uri" not in argv
            else ()
        )
        assert _cli(output, capsys, *argv, *extra) == 0, output.texts[-1]
    assert _cli(output, capsys, "inspect", f"{s3_bucket.uri}/missing") != 0
    assert _cli(output, capsys, "expire", broken, "--older-than", "1s", "--force") != 0
    _failure(output, "inspect", broken, {}, options)
    _failure(output, "inspect", f"s3://lakeops-no-such-bucket-{s3_bucket.name[-8:]}/t", {}, options)

    for record in caplog.records:
        output.add(f"log {record.name}", record.getMessage())
    output.add("S3Storage repr", repr(S3Storage(endpoint_url=sentinel_env)) + repr(options))
    for root in (delta, icechunk, broken, f"{s3_bucket.uri}/warehouse"):
        for path, data in _objects(root, options):
            output.add(path, data.decode("latin-1"))
    output.add("catalog database", (tmp_path / "catalog.db").read_bytes().decode("latin-1"))

    assert len(output.texts) > 30
    assert output.leaks() == []
    # The operations really ran with the sentinels: the shared client signs with them.
    credentials = S3Storage(endpoint_url=sentinel_env).client._request_signer._credentials.get_frozen_credentials()
    assert (credentials.access_key, credentials.secret_key, credentials.token) == tuple(SENTINELS.values())


def test_dagster_materialization_with_keys_from_env_vars_records_no_secret(
    sentinel_env: str, s3_bucket: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SENTINELS.items():
        monkeypatch.setenv(f"LAKEOPS_TEST_{name}", value)
    location = f"{s3_bucket.uri}/events"
    for version in range(3):
        write_deltalake(location, pa.table({"id": [version]}), mode="append", storage_options=_delta_rs(sentinel_env))
    registry = parse_registry(f"tables:\n  - name: events\n    location: {location}\n")
    storage = StorageResource(
        endpoint_url=sentinel_env,
        access_key_id=dg.EnvVar("LAKEOPS_TEST_AWS_ACCESS_KEY_ID"),
        secret_access_key=dg.EnvVar("LAKEOPS_TEST_AWS_SECRET_ACCESS_KEY"),
    )
    defs = build_definitions(registry)
    instance = dg.DagsterInstance.ephemeral()
    key = operation_key(registry.table("events"), "expiry")

    result = dg.materialize(
        list(defs.assets or []),
        selection=[key],
        resources={"spark": SparkResource(master="local[1]"), "storage": storage},
        instance=instance,
    )

    assert result.success
    (materialization,) = result.asset_materializations_for_node("events__expiry")
    assert materialization.metadata, "the expiry recorded no metadata"
    texts = [repr(event) for event in result.all_events]
    texts += [repr(record) for record in instance.get_records_for_run(result.run_id).records]
    texts.append(json.dumps(result.dagster_run.run_config, default=str))
    texts.append(repr(storage))
    assert [(i, found) for i, text in enumerate(texts) if (found := _leaks(text))] == []
