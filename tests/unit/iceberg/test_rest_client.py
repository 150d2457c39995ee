"""Answers of a REST catalog that lakeops cannot use (issue 34, "Unclear crashes"): each is a
:class:`~lakeops.errors.LakeopsError` naming the catalog, the request and what was wrong, never a
traceback and never a secret. The answers come from a faulty gateway in front of the test catalog
(``tests/rest_catalog_gateway.py``)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.rest import RestCatalog as PyIcebergRestCatalog
from pyiceberg_tables import rows_of
from rest_catalog_gateway import FaultyGateway, gateway, load_result
from rest_catalog_server import PREFIX, RestCatalogServer, appended_table, serve

from lakeops import api
from lakeops.errors import LakeopsError
from lakeops.iceberg.catalog import TableIdentifier
from lakeops.iceberg.rest_client import CatalogUnavailable, RestAnswerInvalid, RestClient, RestRefused, RestSettings
from lakeops.ops.options import CompactionOptions
from lakeops.ops.target import CatalogOptions

TOKEN = "sentinel-token-5e1b7d"
CLIENT_SECRET = "sentinel-client-secret-93a0"
IDENTIFIER = "db.events"
CREDENTIAL_ENV = "LAKEOPS_TEST_REST_CLIENT_CREDENTIAL"
_fresh = itertools.count()


@dataclass
class Faulty:
    upstream: RestCatalogServer
    gateway: FaultyGateway
    pyiceberg: PyIcebergRestCatalog

    def options(self) -> dict[str, Any]:
        """Catalog options through the gateway; a warehouse of its own, so the process's cached client of
        another test (its token, its configuration) is not reused."""
        return {
            "catalog_type": "rest",
            "catalog_uri": self.gateway.url,
            "catalog_credential_env": CREDENTIAL_ENV,
            "catalog_warehouse": f"w{next(_fresh)}",
        }


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faulty]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CREDENTIAL_ENV, f"lakeops:{CLIENT_SECRET}")
        for upstream in serve(
            tmp_path_factory.mktemp("rest"), client_id="lakeops", client_secret=CLIENT_SECRET, token=TOKEN
        ):
            catalog, _ = appended_table(upstream, IDENTIFIER, 3)
            for front in gateway(upstream):
                yield Faulty(upstream, front, catalog)


@pytest.fixture
def clean(faulty: Faulty) -> Iterator[Faulty]:
    faulty.gateway.answers.clear()
    yield faulty
    faulty.gateway.answers.clear()


def _refused(faulty: Faulty, kind: type[LakeopsError], *fragments: str) -> str:
    """The message of the error ``api.inspect`` raises, which names the catalog and ``fragments`` and no secret."""
    with pytest.raises(kind) as caught:
        api.inspect(IDENTIFIER, CatalogOptions(**faulty.options()))
    message = str(caught.value)
    assert f"REST catalog {faulty.gateway.url}" in message, message
    assert [f for f in fragments if f not in message] == [], message
    assert TOKEN not in message and CLIENT_SECRET not in message
    return message


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"<html>signed in</html>", "a body that is empty or not JSON, not a JSON object"),
        (b"", "a body that is empty or not JSON, not a JSON object"),
        (b"[1]", "a body that is an array, not a JSON object"),
        (b'{"token_type": "bearer", "expires_in": 3600}', "a body whose access_token is missing"),
        (b'{"access_token": 42, "token_type": "bearer"}', "a body whose access_token is a number, not a string"),
        (b'{"access_token": {"value": "x"}}', "a body whose access_token is an object, not a string"),
        (b'{"access_token": ""}', "a body whose access_token is empty or holds spaces or non-ASCII characters"),
        (
            b'{"access_token": "sentinel token\\r\\nX-Injected: 1"}',
            "a body whose access_token is empty or holds spaces",
        ),
    ],
)
def test_a_token_answer_lakeops_cannot_use_names_the_catalog_and_the_endpoint(
    clean: Faulty, body: bytes, problem: str
) -> None:
    clean.gateway.answers["token"] = (200, body)
    message = _refused(clean, RestAnswerInvalid, "POST /v1/oauth/tokens", problem)
    assert "sentinel token" not in message


def test_a_token_endpoint_that_fails_is_unavailable_and_one_that_refuses_is_a_refusal(clean: Faulty) -> None:
    clean.gateway.answers["token"] = (503, b"")
    _refused(clean, CatalogUnavailable, "HTTP 503 to POST /v1/oauth/tokens")
    clean.gateway.answers["token"] = (400, b'{"error": "invalid_client"}')
    _refused(clean, RestRefused, f"the client credential in ${CREDENTIAL_ENV} was refused (HTTP 400")


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"defaults": [], "overrides": {}}, "defaults that are an array, not an object"),
        ({"defaults": {}, "overrides": ["prefix", PREFIX]}, "overrides that are an array, not an object"),
        ({"defaults": "prefix=x", "overrides": {}}, "defaults that are a string, not an object"),
        ({"defaults": {}, "overrides": {"prefix": 7}}, "overrides whose prefix is a number, not a string"),
        ({"defaults": {"prefix": None}, "overrides": {}}, "defaults whose prefix is null, not a string"),
        ({"defaults": {}, "overrides": {"prefix": "\ud800"}}, "a prefix that is not valid Unicode"),
        ("defaults", "a body that is a string, not a JSON object"),
    ],
)
def test_a_configuration_lakeops_cannot_use_names_the_catalog_and_the_endpoint(
    clean: Faulty, config: Any, problem: str
) -> None:
    clean.gateway.answers["config"] = (200, json.dumps(config).encode())
    _refused(clean, RestAnswerInvalid, "GET /v1/config?warehouse=", "(reading its configuration)", problem)


def test_a_configuration_moving_the_prefix_elsewhere_finds_no_table(clean: Faulty) -> None:
    clean.gateway.answers["config"] = (200, b'{"defaults": {"prefix": "elsewhere"}, "overrides": {}}')
    with pytest.raises(LakeopsError, match=rf"db\.events: no such table in the REST catalog at {clean.gateway.url}"):
        api.inspect(IDENTIFIER, CatalogOptions(**clean.options()))


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"metadata-location": None}, "a LoadTableResult whose metadata-location is missing"),
        ({"metadata-location": 5}, "a LoadTableResult whose metadata-location is a number, not a location"),
        ({"metadata-location": ""}, "whose metadata-location is an empty string, not a location"),
        ({"metadata-location": "file:///t/metadata/v1.metadata.json\x00"}, "whose metadata-location holds control"),
        ({"metadata": None}, "a LoadTableResult whose metadata is missing"),
        ({"metadata": [1, 2]}, "a LoadTableResult whose metadata is an array, not an object"),
        ({"metadata": "{}"}, "a LoadTableResult whose metadata is a string, not an object"),
    ],
)
def test_a_load_result_lakeops_cannot_use_names_the_catalog_and_the_endpoint(
    clean: Faulty, change: dict[str, Any], problem: str
) -> None:
    result = {k: v for k, v in (load_result(clean.upstream, "db", "events") | change).items() if v is not None}
    clean.gateway.answers["load"] = (200, json.dumps(result).encode())
    _refused(
        clean, RestAnswerInvalid, f"GET /v1/{PREFIX}/namespaces/db/tables/events (loading table db.events)", problem
    )


def test_a_load_answer_that_is_no_object_is_named(clean: Faulty) -> None:
    clean.gateway.answers["load"] = (200, b"[" * 100_000)  # too deep for Python's JSON parser
    _refused(clean, RestAnswerInvalid, "a body that is empty or not JSON, not a JSON object")


def test_a_commit_answered_without_its_metadata_is_of_unknown_outcome(clean: Faulty) -> None:
    clean.gateway.answers["commit"] = (200, b'{"metadata": {}}')
    client = RestClient(RestSettings(clean.gateway.url, credential_env=CREDENTIAL_ENV))

    with pytest.raises(CatalogUnavailable) as caught:
        client.commit_table(TableIdentifier.parse(IDENTIFIER), [], [])

    assert str(caught.value) == (
        f"REST catalog {clean.gateway.url}: POST /v1/{PREFIX}/namespaces/db/tables/events (committing to table "
        "db.events) was answered with a CommitTableResponse whose metadata-location is missing; whether the commit "
        "was applied is unknown"
    )


def test_a_compaction_whose_commit_is_answered_without_its_metadata_resolves_it_by_reloading(
    clean: Faulty, tmp_path: Path
) -> None:
    rows = rows_of(clean.pyiceberg.load_table(IDENTIFIER).scan().to_arrow())
    clean.gateway.answers["commit"] = (200, b"{}")

    report = api.compact(IDENTIFIER, CompactionOptions(**clean.options(), min_input_files=2))

    assert (report.files_removed, report.files_added, report.commit_attempts) == (3, 1, 1)
    assert rows_of(clean.pyiceberg.load_table(IDENTIFIER).scan().to_arrow()) == rows
