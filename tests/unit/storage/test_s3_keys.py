"""Keys lent to this process's S3 clients (:func:`lakeops.storage.s3.using_keys`): they sign requests on
every thread while lent, never enter the environment, and are gone from the client cache afterwards."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from lakeops.errors import InvalidArgument, StorageError
from lakeops.storage import open_storage
from lakeops.storage.s3 import S3Keys, clear_client_cache, shared_client, using_keys

pytestmark = pytest.mark.s3

KEYS = S3Keys("AKIALENTKEY0001", "lent-secret-do-not-print")


@pytest.fixture
def no_env_keys(s3_bucket: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A bucket (created with the session's keys), then no keys in the environment nor in cached clients."""
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    clear_client_cache()
    yield s3_bucket
    clear_client_cache()


def _signing_key(endpoint: str) -> str:
    return shared_client(endpoint_url=endpoint)._request_signer._credentials.access_key


def test_lent_keys_sign_on_every_thread_and_never_enter_the_environment(no_env_keys: Any) -> None:
    root = f"{no_env_keys.uri}/t"
    before = dict(os.environ)
    with using_keys(KEYS, endpoint_url=no_env_keys.options.endpoint_url):
        seen: list[str] = []
        worker = threading.Thread(target=lambda: seen.append(_signing_key(no_env_keys.options.endpoint_url or "")))
        worker.start()
        worker.join()
        open_storage(root, no_env_keys.options).write(f"{root}/a", b"x")
        assert seen == [KEYS.access_key_id]
        assert dict(os.environ) == before
    assert dict(os.environ) == before
    with pytest.raises(StorageError, match="Unable to locate credentials"):
        open_storage(root, no_env_keys.options).read(f"{root}/a")


def test_nested_blocks_keep_the_keys_until_the_last_ends(no_env_keys: Any) -> None:
    endpoint = no_env_keys.options.endpoint_url
    assert endpoint is not None
    with using_keys(KEYS, endpoint_url=endpoint):
        with using_keys(S3Keys(KEYS.access_key_id, KEYS.secret_access_key), endpoint_url=endpoint):
            assert _signing_key(endpoint) == KEYS.access_key_id
        assert _signing_key(endpoint) == KEYS.access_key_id
    assert shared_client(endpoint_url=endpoint)._request_signer._credentials is None


def test_other_keys_for_an_endpoint_in_use_are_refused(s3_server: Any) -> None:
    with (
        using_keys(KEYS, endpoint_url=s3_server.endpoint_url),
        pytest.raises(InvalidArgument, match=f"other S3 keys for {s3_server.endpoint_url} are already in use"),
        using_keys(S3Keys("AKIAOTHER", "other"), endpoint_url=s3_server.endpoint_url),
    ):
        pass


def test_the_secret_shows_in_no_repr() -> None:
    assert "lent-secret" not in repr(KEYS) and KEYS.access_key_id not in repr(KEYS)
