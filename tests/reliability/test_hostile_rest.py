"""Faulty answers of an Iceberg REST catalog (issue 34, "Unclear crashes"): generated answers of the
token endpoint, ``GET /v1/config`` and loadTable, given by a gateway in front of the test catalog
(``tests/rest_catalog_gateway.py``) to a compaction through :mod:`lakeops.api`.

The invariant: the compaction either succeeds (an answer lakeops can use, however odd) and the table
holds its rows, or it raises a :class:`~lakeops.errors.LakeopsError` that names the catalog (or, when
the answer named a metadata file that cannot be read, that file) — never another exception — and the
table is as it was: the same current metadata, the same files. Budget: a quarter of
``LAKEOPS_FUZZ_EXAMPLES`` (:mod:`reliability.hostile`), at least 25: each example is a compaction.

Every generated string a catalog could hand over as a secret starts with :data:`MARK`: lakeops
registers such values with the redaction layer for the rest of the process, and a generated
``00000000`` would mask parts of every later test's output.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pyiceberg.catalog.rest import RestCatalog as PyIcebergRestCatalog
from pyiceberg_tables import rows_of
from reliability.hostile import (
    EXAMPLES,
    FUZZ,
    NASTY_JSON,
    json_bytes,
    json_scalars,
    json_values,
    must_hold,
    mutated_tree,
)
from rest_catalog_gateway import FaultyGateway, gateway, load_result
from rest_catalog_server import PREFIX, RestCatalogServer, appended_table, serve

from lakeops import api
from lakeops.errors import LakeopsError
from lakeops.ops.options import CompactionOptions
from lakeops.storage import s3 as s3_module
from lakeops.storage.s3 import clear_client_cache

TOKEN = "sentinel-token-0c4f2a"
CLIENT_SECRET = "sentinel-client-secret-7d19"
IDENTIFIER = "db.events"
CREDENTIAL_ENV = "LAKEOPS_TEST_HOSTILE_REST_CREDENTIAL"
MARK = "Zq7hostile-"
_fresh = itertools.count()


@dataclass
class Catalog:
    upstream: RestCatalogServer
    gateway: FaultyGateway
    pyiceberg: PyIcebergRestCatalog
    location: Path
    #: The catalog's answer to a load before any example, and the table's rows.
    loaded: dict[str, Any]
    rows: list[dict[str, Any]]

    def state(self) -> tuple[str, set[Path]]:
        """The current metadata file and every file of the table (audit records aside)."""
        files = {p for p in self.location.rglob("*") if p.is_file() and "_lakeops_audit" not in p.parts}
        return load_result(self.upstream, "db", "events")["metadata-location"], files

    def scan(self) -> list[dict[str, Any]]:
        return rows_of(self.pyiceberg.load_table(IDENTIFIER).scan().to_arrow())

    def restore(self) -> None:
        """Point the catalog back at the metadata it started with, after a compaction moved it: each
        example starts from the same table (hypothesis requires generated answers not to depend on what
        an earlier example did)."""
        with self.upstream.catalog.engine.begin() as connection:
            connection.execute(
                sa.text("UPDATE iceberg_tables SET metadata_location = :location WHERE table_name = 'events'"),
                {"location": self.loaded["metadata-location"]},
            )


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Catalog]:
    """Six appends behind a gateway; S3 unreachable at once, should an answer name an ``s3://`` file."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CREDENTIAL_ENV, f"lakeops:{CLIENT_SECRET}")
        patch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
        patch.setattr(s3_module, "MAX_ATTEMPTS", 1)
        clear_client_cache()
        for upstream in serve(
            tmp_path_factory.mktemp("rest"), client_id="lakeops", client_secret=CLIENT_SECRET, token=TOKEN
        ):
            pyiceberg, table = appended_table(upstream, IDENTIFIER, 6)
            location = Path(table.location().removeprefix("file://"))
            loaded = load_result(upstream, "db", "events")
            for front in gateway(upstream):
                yield Catalog(upstream, front, pyiceberg, location, loaded, rows_of(table.scan().to_arrow()))
        clear_client_cache()


_not_strings = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.lists(json_scalars, max_size=2)
)


def _marked() -> st.SearchStrategy[str]:
    return st.text(max_size=12).map(lambda text: MARK + text)


#: A configuration map's values, secret-named ones marked.
_layers = st.one_of(
    json_values,
    st.dictionaries(st.sampled_from(["prefix", "warehouse", "uri"]), json_scalars | st.just(PREFIX), max_size=3),
    st.fixed_dictionaries({"token": _marked()}),
)


def _answers(documents: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[int, bytes]]:
    """A status (mostly 200) and a body: mostly one of ``documents`` as JSON, else bytes that are hardly JSON."""
    bodies = st.one_of(
        documents.map(json_bytes), documents.map(json_bytes), st.binary(max_size=40), st.sampled_from(NASTY_JSON)
    )
    return st.tuples(st.sampled_from([200] * 6 + [201, 204, 400, 401, 403, 404, 500, 503]), bodies)


TOKEN_ANSWERS = _answers(
    st.one_of(
        json_values,
        st.fixed_dictionaries(
            {"access_token": st.one_of(_not_strings, _marked())},
            optional={"token_type": json_scalars, "expires_in": json_scalars},
        ),
    )
)
CONFIG_ANSWERS = _answers(
    st.one_of(
        json_values,
        mutated_tree({"defaults": {}, "overrides": {"prefix": PREFIX}}),
        st.fixed_dictionaries({}, optional={"defaults": _layers, "overrides": _layers}),
    )
)


@st.composite
def _load_results(draw: st.DrawFn, valid: dict[str, Any]) -> Any:
    """A LoadTableResult with hostile values anywhere in it, or with each field lakeops reads kept,
    dropped or replaced by a hostile value."""
    if draw(st.booleans()):
        return draw(mutated_tree(valid))
    hostile = {
        "metadata-location": st.one_of(
            json_scalars,
            st.sampled_from(["/etc/passwd", "file:///no/such.metadata.json", "s3://other/m.json", "a\x00b", "\n"]),
        ),
        "metadata": json_values,
        "config": st.one_of(json_values, st.fixed_dictionaries({"s3.secret-access-key": _marked()})),
        "storage-credentials": json_values,
    }
    result = dict(valid)
    for name, values in hostile.items():
        match draw(st.sampled_from(["keep", "drop", "replace"])):
            case "drop":
                result.pop(name, None)
            case "replace":
                result[name] = draw(values)
    return result


def _compact_through_the_gateway(catalog: Catalog, endpoint: str, answer: tuple[int, bytes]) -> None:
    before = catalog.state()
    catalog.gateway.answers = {endpoint: answer}
    options = {  # a warehouse of its own: a fresh client, which asks for its token and configuration
        "catalog_type": "rest",
        "catalog_uri": catalog.gateway.url,
        "catalog_credential_env": CREDENTIAL_ENV,
        "catalog_warehouse": f"w{next(_fresh)}",
    }
    try:
        outcome = must_hold(lambda: api.compact(IDENTIFIER, CompactionOptions(**options, min_input_files=2)), endpoint)
    finally:
        catalog.gateway.answers = {}
    event(type(outcome).__name__)  # --hypothesis-show-statistics: how often each outcome came
    if isinstance(outcome, LakeopsError):
        message = str(outcome)
        named = _named_location(answer[1]) if endpoint == "load" else None
        assert catalog.gateway.url in message or (named and named in message), message
        assert TOKEN not in message and CLIENT_SECRET not in message and MARK not in message, message
        assert catalog.state() == before  # so its rows are too
    else:
        assert catalog.scan() == catalog.rows
        catalog.restore()


def _named_location(body: bytes) -> str | None:
    """The metadata file a load answer names, if it names one."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    location = document.get("metadata-location") if isinstance(document, dict) else None
    return location if isinstance(location, str) else None


@settings(FUZZ, max_examples=max(25, EXAMPLES // 4))  # a catalog round trip per example
@given(answer=TOKEN_ANSWERS)
def test_hostile_token_answers(catalog: Catalog, answer: tuple[int, bytes]) -> None:
    _compact_through_the_gateway(catalog, "token", answer)


@settings(FUZZ, max_examples=max(25, EXAMPLES // 4))  # a catalog round trip per example
@given(answer=CONFIG_ANSWERS)
def test_hostile_configurations(catalog: Catalog, answer: tuple[int, bytes]) -> None:
    _compact_through_the_gateway(catalog, "config", answer)


@settings(FUZZ, max_examples=max(25, EXAMPLES // 4))  # a catalog round trip per example
@given(data=st.data())
def test_hostile_load_results(catalog: Catalog, data: st.DataObject) -> None:
    _compact_through_the_gateway(catalog, "load", data.draw(_answers(_load_results(catalog.loaded))))
