"""The Storage contract (lakeops.storage.base), run against local disk and moto's S3 over HTTP.

Each test receives ``any_storage_root`` = (empty root, storage) once per backend, so both
implementations must agree on every edge: sorting, sibling prefixes, short range reads,
directories not being objects, idempotent deletes and put-if-absent under contention.
"""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ConnectionClosedError
from s3_clients import make_client

from lakeops.errors import AlreadyExists, InvalidArgument, NotFound, Superseded
from lakeops.storage import FileInfo, Storage, StorageOptions, join, open_storage, s3
from lakeops.storage.s3 import S3Storage

Root = tuple[str, Storage]


def paths(storage: Storage, prefix: str) -> list[str]:
    return [info.path for info in storage.list(prefix)]


def put_all(storage: Storage, root: str, names: list[str], data: bytes = b"x") -> None:
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda name: storage.write(join(root, name), data), names))


# -- list ---------------------------------------------------------------------------------------------


def test_missing_prefix_lists_nothing(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    assert list(storage.list(root)) == []
    assert list(storage.list(join(root, "no/such/dir"))) == []


def test_list_is_recursive_sorted_with_sizes_and_mtimes(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    # "/" sorts after "-" and before "0": a per-directory sort would put a/b/* before a/b-c.
    names = ["a/b/x", "a/b-c", "a/b0", "z", "a/b/y/deep/file", "m.json", "a/a"]
    before_ms = int(time.time() * 1000)
    for i, name in enumerate(names):
        storage.write(join(root, name), b"0123456789"[: i + 1])
    after_ms = int(time.time() * 1000)

    infos = list(storage.list(root))
    assert [i.path for i in infos] == sorted(join(root, n) for n in names)
    sizes = {info.path: info.size for info in infos}
    assert sizes == {join(root, n): i + 1 for i, n in enumerate(names)}
    for info in infos:
        assert isinstance(info, FileInfo)
        # S3 reports whole seconds; allow for that and for clock granularity.
        assert before_ms - 2000 <= info.mtime_ms <= after_ms + 2000


def test_list_nested_prefix_and_sibling_names_do_not_mix(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    for name in ["a/b/1", "a/b/c/2", "a/bc/3", "a/b.txt", "a/b-c"]:
        storage.write(join(root, name), b"v")
    assert paths(storage, join(root, "a/b")) == [join(root, "a/b/1"), join(root, "a/b/c/2")]
    assert paths(storage, join(root, "a/bc")) == [join(root, "a/bc/3")]
    assert paths(storage, join(root, "a/b/c")) == [join(root, "a/b/c/2")]


def test_list_accepts_other_spellings_of_the_prefix(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    storage.write(join(root, "t/f"), b"v")
    spelled = ("file://" + root if root.startswith("/") else "s3a" + root[2:]) + "/t/"
    assert paths(storage, spelled) == [join(root, "t/f")]


def test_list_does_not_show_directories(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    storage.write(join(root, "d/e/f"), b"v")
    assert paths(storage, root) == [join(root, "d/e/f")]
    assert not storage.exists(join(root, "d"))
    with pytest.raises(NotFound):
        storage.stat(join(root, "d"))
    with pytest.raises(NotFound):
        storage.read(join(root, "d/e"))


# -- read ---------------------------------------------------------------------------------------------


def test_read_write_roundtrip_and_empty_object(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    data = bytes(range(256)) * 100
    storage.write(join(root, "bin"), data)
    storage.write(join(root, "empty"), b"")
    assert storage.read(join(root, "bin")) == data
    assert storage.read(join(root, "empty")) == b""
    assert storage.stat(join(root, "empty")).size == 0


def test_read_missing_names_the_path(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    missing = join(root, "nope.json")
    with pytest.raises(NotFound, match="nope.json"):
        storage.read(missing)
    with pytest.raises(NotFound, match="nope.json"):
        storage.read_range(missing, 0, 4)
    with pytest.raises(NotFound, match="nope.json"):
        storage.read_range(missing, 0, 0)


@pytest.mark.parametrize(
    ("start", "length", "expected"),
    [(0, 4, b"0123"), (3, 4, b"3456"), (8, 10, b"89"), (9, 1, b"9"), (10, 5, b""), (50, 5, b""), (4, 0, b"")],
)
def test_read_range(any_storage_root: Root, start: int, length: int, expected: bytes) -> None:
    root, storage = any_storage_root
    storage.write(join(root, "digits"), b"0123456789")
    assert storage.read_range(join(root, "digits"), start, length) == expected


def test_read_range_rejects_negative(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    with pytest.raises(InvalidArgument, match="negative"):
        storage.read_range(join(root, "x"), -1, 3)


# -- write ----------------------------------------------------------------------------------------------


def test_write_replaces_and_leaves_no_temporaries(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    target = join(root, "deep/dir/_last_checkpoint")
    storage.write(target, b"old contents")
    storage.write(target, b"new")
    assert storage.read(target) == b"new"
    assert storage.stat(target).size == 3
    assert paths(storage, root) == [target]


def test_concurrent_writes_never_expose_a_partial_object(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    target = join(root, "hot")
    versions = [bytes([65 + i]) * 200_000 for i in range(4)]
    storage.write(target, versions[0])
    stop = threading.Event()
    seen: list[bytes] = []

    def reader() -> None:
        while not stop.is_set():
            seen.append(storage.read(target))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for data in versions[1:] * 3:
            storage.write(target, data)
    finally:
        stop.set()
        thread.join()
    assert seen and all(data in versions for data in seen)


# -- stat / exists ------------------------------------------------------------------------------------


def test_stat_and_exists(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    target = join(root, "part-0.parquet")
    assert not storage.exists(target)
    with pytest.raises(NotFound, match="part-0.parquet"):
        storage.stat(target)
    storage.write(target, b"PAR1")
    info = storage.stat(target)
    assert (info.path, info.size) == (target, 4)
    assert info == next(iter(storage.list(root)))
    assert storage.exists(target)


# -- delete_many ----------------------------------------------------------------------------------------


def test_delete_many_is_idempotent(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    keep, gone = join(root, "keep"), [join(root, "a"), join(root, "b/c")]
    for path in [keep, *gone]:
        storage.write(path, b"v")
    targets = [*gone, join(root, "never-existed"), gone[0]]
    assert storage.delete_many(targets) == 4
    assert paths(storage, root) == [keep]
    assert storage.delete_many(iter(targets)) == 4  # again, and from a one-shot iterator
    assert storage.delete_many([]) == 0
    assert paths(storage, root) == [keep]


def test_delete_many_more_than_one_batch(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    names = [f"data/part-{i:05d}" for i in range(2100)]
    put_all(storage, root, [*names[::150], names[-1], "survivor"])  # the rest are missing: fine
    assert storage.delete_many(join(root, n) for n in names) == len(names)
    assert paths(storage, root) == [join(root, "survivor")]


@pytest.mark.s3
def test_s3_delete_many_batches_by_1000(s3_bucket: Any) -> None:
    client = make_client(endpoint_url=s3_bucket.options.endpoint_url)
    storage = S3Storage(client=client)
    sizes: list[int] = []
    client.meta.events.register(
        "before-parameter-build.s3.DeleteObjects",
        lambda params, **_: sizes.append(len(params["Delete"]["Objects"])),
    )
    root = join(s3_bucket.uri, "t")
    names = [f"f{i}" for i in range(2500)]
    put_all(storage, root, names[:10])
    assert storage.delete_many(join(root, n) for n in names) == 2500
    assert sizes == [1000, 1000, 500]
    assert paths(storage, root) == []


@pytest.mark.s3
def test_s3_delete_errors_name_the_first_failed_key(s3_bucket: Any) -> None:
    client = make_client(endpoint_url=s3_bucket.options.endpoint_url)
    storage = S3Storage(client=client)

    def fail(parsed: dict[str, Any], **_: Any) -> None:
        parsed["Errors"] = [{"Key": "t/b", "Code": "AccessDenied", "Message": "Access Denied"}]

    client.meta.events.register("after-call.s3.DeleteObjects", fail)
    with pytest.raises(Exception, match=r"s3://.*/t/b.*AccessDenied") as info:
        storage.delete_many([f"{s3_bucket.uri}/t/a", f"{s3_bucket.uri}/t/b"])
    assert type(info.value).__name__ == "StorageError"


# -- put_if_absent ------------------------------------------------------------------------------------


def test_put_if_absent_creates_once(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    target = join(root, "_delta_log/00000000000000000000.json")
    storage.put_if_absent(target, b"first")
    with pytest.raises(AlreadyExists, match="00000000000000000000.json"):
        storage.put_if_absent(target, b"second")
    assert storage.read(target) == b"first"
    assert paths(storage, root) == [target]  # no temporaries left behind


def _chunks(tag: bytes, total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    """``total`` bytes in ``size`` pieces, each piece naming its offset (a misordered part would show)."""
    for offset in range(0, total, size):
        yield (tag + f"{offset:012d}".encode()).ljust(min(size, total - offset), b".")


def _pending_uploads(storage: Storage, root: str) -> list[str]:
    if not isinstance(storage, S3Storage):
        return []
    bucket = root.removeprefix("s3://").split("/", 1)[0]
    return [u["Key"] for u in storage._client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


@pytest.mark.parametrize("total", [3, 11 * 1024 * 1024], ids=["one-part", "multipart"])
def test_put_if_absent_stream_creates_once(any_storage_root: Root, monkeypatch: pytest.MonkeyPatch, total: int) -> None:
    """A stream of chunks is put-if-absent as a whole: on S3 above one part (5 MiB here, S3's minimum)
    a multipart upload completed only if the key is still absent; a refused one leaves no upload."""
    monkeypatch.setattr(s3, "STREAM_PART_SIZE", 5 * 1024 * 1024)
    root, storage = any_storage_root
    target = join(root, "_delta_log/00000000000000000007.json")
    storage.put_if_absent_stream(target, _chunks(b"first", total))
    assert storage.read(target) == b"".join(_chunks(b"first", total))
    with pytest.raises(AlreadyExists, match="00000000000000000007.json"):
        storage.put_if_absent_stream(target, _chunks(b"second", total))
    assert storage.read(target) == b"".join(_chunks(b"first", total))
    assert paths(storage, root) == [target]  # no temporaries left behind
    assert _pending_uploads(storage, root) == []


def _winners(racers: int, attempt: Callable[[int], object], lost: type[Exception]) -> list[int]:
    """The racers whose ``attempt`` did not raise ``lost``, all released at once by one barrier."""
    barrier = threading.Barrier(racers)

    def race(racer: int) -> bool:
        barrier.wait()
        try:
            attempt(racer)
        except lost:
            return False
        return True

    with ThreadPoolExecutor(racers) as pool:
        return [r for r, ok in enumerate(pool.map(race, range(racers))) if ok]


def test_racing_put_if_absent_streams_have_exactly_one_winner(
    any_storage_root: Root, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(s3, "STREAM_PART_SIZE", 5 * 1024 * 1024)
    root, storage = any_storage_root
    target = join(root, "_delta_log/00000000000000000001.json")
    chunks = [list(_chunks(f"racer-{racer}".encode(), 6 * 1024 * 1024)) for racer in range(4)]
    won = _winners(len(chunks), lambda racer: storage.put_if_absent_stream(target, iter(chunks[racer])), AlreadyExists)
    assert len(won) == 1
    assert storage.read(target) == b"".join(_chunks(f"racer-{won[0]}".encode(), 6 * 1024 * 1024))
    assert paths(storage, root) == [target]
    assert _pending_uploads(storage, root) == []


def test_put_if_absent_over_a_replaced_object(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    target = join(root, "x")
    storage.write(target, b"w")
    with pytest.raises(AlreadyExists):
        storage.put_if_absent(target, b"p")
    storage.delete_many([target])
    storage.put_if_absent(target, b"p")
    assert storage.read(target) == b"p"


def test_replace_if_match_swaps_only_the_version_read(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    target = join(root, "repo")
    storage.write(target, b"v1")
    data, token = storage.read_versioned(target)
    assert data == b"v1"
    storage.replace_if_match(target, b"v2", token)
    assert storage.read(target) == b"v2"
    with pytest.raises(Superseded, match="repo.*changed since it was read"):
        storage.replace_if_match(target, b"v3", token)  # the token names v1, which is gone
    assert storage.read(target) == b"v2"
    _, token = storage.read_versioned(target)
    storage.delete_many([target])
    with pytest.raises(Superseded, match="repo"):
        storage.replace_if_match(target, b"v4", token)
    assert paths(storage, root) == []  # nothing recreated, no temporaries left


def test_racing_replace_if_match_has_exactly_one_winner(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    target = join(root, "repo")
    storage.write(target, b"base")
    _, token = storage.read_versioned(target)
    won = _winners(
        8, lambda racer: storage.replace_if_match(target, f"racer-{racer}".encode() * 1000, token), Superseded
    )
    assert len(won) == 1
    assert storage.read(target) == f"racer-{won[0]}".encode() * 1000
    assert paths(storage, root) == [target]


def test_racing_put_if_absent_has_exactly_one_winner(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    racers, keys = 8, 6
    barrier = threading.Barrier(racers)
    winners: dict[int, list[int]] = {k: [] for k in range(keys)}
    unexpected: list[BaseException] = []
    lock = threading.Lock()

    def race(racer: int) -> None:
        for k in range(keys):
            barrier.wait()  # all racers hit the same key at the same moment
            try:
                storage.put_if_absent(join(root, f"_delta_log/{k:020d}.json"), f"racer-{racer}".encode() * 5000)
            except AlreadyExists:
                continue
            except BaseException as exc:  # noqa: BLE001 - reported below
                unexpected.append(exc)
                continue
            with lock:
                winners[k].append(racer)

    threads = [threading.Thread(target=race, args=(r,)) for r in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert unexpected == []
    for k, won in winners.items():
        assert len(won) == 1, f"key {k}: winners {won}"
        assert storage.read(join(root, f"_delta_log/{k:020d}.json")) == f"racer-{won[0]}".encode() * 5000
    assert len(paths(storage, root)) == keys


# -- S3 specifics: retries, conflicts, pickling ---------------------------------------------------------


class _Raw:
    """Minimal urllib3-like body for a canned AWSResponse."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def _conflict(url: str) -> AWSResponse:
    body = (
        b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>ConditionalRequestConflict</Code>'
        b"<Message>A conflicting operation is in progress.</Message></Error>"
    )
    return AWSResponse(url, 409, {"Content-Type": "application/xml"}, _Raw(body))


@pytest.fixture
def own_client_storage(s3_bucket: Any) -> tuple[str, S3Storage, Any]:
    """A storage with a private client, so event hooks cannot affect other tests."""
    client = make_client(endpoint_url=s3_bucket.options.endpoint_url)
    return s3_bucket.uri, S3Storage(client=client), client


@pytest.mark.s3
@pytest.mark.parametrize(("landed", "outcome"), [(b"mine", None), (b"theirs", AlreadyExists)])
def test_s3_put_if_absent_after_a_lost_response(
    own_client_storage: tuple[str, S3Storage, Any], landed: bytes, outcome: type[Exception] | None
) -> None:
    """The first PUT lands but its response is lost; botocore re-sends and gets 412.

    If the object holds our bytes, our own first attempt won and the call succeeds; otherwise
    another writer won. Reporting AlreadyExists for our own commit would make a committer clean
    up files its committed version references.
    """
    bucket, storage, client = own_client_storage
    target = f"{bucket}/_delta_log/0.json"
    other = open_storage(bucket, StorageOptions(endpoint_url=client.meta.endpoint_url))
    sends: list[int] = []

    def lose_first_response(request: Any, **_: Any) -> None:
        sends.append(1)
        if len(sends) == 1:
            other.write(target, landed)
            raise ConnectionClosedError(endpoint_url=request.url)

    client.meta.events.register("before-send.s3.PutObject", lose_first_response)
    if outcome is None:
        storage.put_if_absent(target, b"mine")
    else:
        with pytest.raises(outcome):
            storage.put_if_absent(target, b"mine")
    assert len(sends) == 2
    assert storage.read(target) == landed


@pytest.mark.s3
def test_s3_conditional_conflict_is_retried(own_client_storage: tuple[str, S3Storage, Any]) -> None:
    bucket, storage, client = own_client_storage
    sends: list[int] = []

    def conflict_twice(request: Any, **_: Any) -> AWSResponse | None:
        sends.append(1)
        return _conflict(request.url) if len(sends) <= 2 else None

    client.meta.events.register("before-send.s3.PutObject", conflict_twice)
    storage.put_if_absent(f"{bucket}/k", b"v")
    assert len(sends) == 3
    assert storage.read(f"{bucket}/k") == b"v"


@pytest.mark.s3
def test_s3_persistent_conflict_is_already_exists(own_client_storage: tuple[str, S3Storage, Any]) -> None:
    bucket, storage, client = own_client_storage
    client.meta.events.register("before-send.s3.PutObject", lambda request, **_: _conflict(request.url))
    with pytest.raises(AlreadyExists, match="ConditionalRequestConflict"):
        storage.put_if_absent(f"{bucket}/k", b"v")


@pytest.mark.s3
def test_s3_missing_bucket_is_not_an_empty_listing(s3_bucket: Any) -> None:
    storage = open_storage(s3_bucket.uri, s3_bucket.options)
    with pytest.raises(NotFound, match="does not exist"):
        list(storage.list(s3_bucket.uri + "-missing/t"))


@pytest.mark.s3
def test_s3_storage_pickles_to_its_settings(s3_bucket: Any) -> None:
    storage = open_storage(s3_bucket.uri, s3_bucket.options)
    storage.write(f"{s3_bucket.uri}/p", b"v")
    clone = pickle.loads(pickle.dumps(storage))
    assert isinstance(clone.inner, S3Storage) and clone.inner.client is storage.inner.client  # type: ignore[attr-defined]
    assert clone.roots == storage.roots  # a Spark task gets the same confinement
    assert clone.read(f"{s3_bucket.uri}/p") == b"v"
    with pytest.raises(InvalidArgument, match="cannot be pickled"):
        pickle.dumps(S3Storage(client=make_client(endpoint_url=s3_bucket.options.endpoint_url)))


def test_storages_refuse_foreign_schemes(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    foreign = "s3://bucket/x" if root.startswith("/") else "/tmp/x"
    with pytest.raises(InvalidArgument, match="cannot handle"):
        storage.read(foreign)


# -- copy_if_absent -----------------------------------------------------------------------------------


def test_copy_if_absent_copies_once_and_never_over_an_object(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    source, target = join(root, "data/part-0.parquet"), join(root, "_lakeops_trash/run/data/part-0.parquet")
    storage.write(source, b"rows")
    storage.copy_if_absent(source, target)
    assert storage.read(target) == storage.read(source) == b"rows"
    storage.write(source, b"other rows")
    with pytest.raises(AlreadyExists, match="part-0.parquet"):
        storage.copy_if_absent(source, target)
    assert storage.read(target) == b"rows"
    with pytest.raises(NotFound, match="missing.parquet"):
        storage.copy_if_absent(join(root, "data/missing.parquet"), join(root, "elsewhere"))
    assert paths(storage, root) == [target, source]  # no temporaries, nothing at the refused target


# -- move_if_absent and prune -------------------------------------------------------------------------


def test_move_if_absent_moves_once_and_never_over_an_object(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    source, target = join(root, "data/part-0.parquet"), join(root, "_lakeops_trash/run/data/part-0.parquet")
    storage.write(source, b"rows")
    storage.move_if_absent(source, target)
    assert storage.read(target) == b"rows" and not storage.exists(source)
    storage.write(source, b"other rows")
    with pytest.raises(AlreadyExists, match="part-0.parquet"):
        storage.move_if_absent(source, target)
    assert storage.read(target) == b"rows" and storage.read(source) == b"other rows"
    with pytest.raises(NotFound, match="missing.parquet"):
        storage.move_if_absent(join(root, "data/missing.parquet"), join(root, "elsewhere"))
    assert paths(storage, root) == [target, source]


def test_prune_removes_only_empty_directories(any_storage_root: Root) -> None:
    root, storage = any_storage_root
    storage.write(join(root, "run/a/kept"), b"v")
    storage.write(join(root, "run/b/c/gone"), b"v")
    storage.delete_many([join(root, "run/b/c/gone")])
    storage.prune(join(root, "run"))
    storage.prune(join(root, "no/such/dir"))
    assert paths(storage, root) == [join(root, "run/a/kept")]
    if root.startswith("/"):
        assert sorted(p.name for p in Path(root, "run").iterdir()) == ["a"]


@pytest.mark.s3
def test_s3_copy_is_server_side_and_conditional(own_client_storage: tuple[str, S3Storage, Any]) -> None:
    """No GetObject/PutObject (the bytes never reach this process); the CopyObject carries If-None-Match."""
    bucket, storage, client = own_client_storage
    storage.write(f"{bucket}/big", b"x" * 100_000)
    sent: list[tuple[str, bytes | None]] = []

    def record(request: Any, event_name: str, **_: Any) -> None:
        sent.append((event_name.rsplit(".", 1)[1], request.headers.get("If-None-Match")))

    client.meta.events.register("before-send.s3", record)
    storage.copy_if_absent(f"{bucket}/big", f"{bucket}/copy")
    assert sent == [("HeadObject", None), ("HeadObject", None), ("CopyObject", b"*")]
    assert storage.read(f"{bucket}/copy") == b"x" * 100_000


def _precondition_failed(url: str) -> AWSResponse:
    body = (
        b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code>'
        b"<Message>At least one of the pre-conditions you specified did not hold</Message></Error>"
    )
    return AWSResponse(url, 412, {"Content-Type": "application/xml"}, _Raw(body))


@pytest.mark.s3
@pytest.mark.parametrize(("lost", "landed", "outcome"), [(True, None, None), (False, b"theirs", AlreadyExists)])
def test_s3_copy_that_meets_412(
    own_client_storage: tuple[str, S3Storage, Any], lost: bool, landed: bytes | None, outcome: type[Exception] | None
) -> None:
    """What AWS S3 answers (moto ignores If-None-Match on copies, so the answers are canned). ``lost``: the
    first copy lands, its answer is lost, the re-send meets our own copy (412): success. Otherwise
    another writer created the target between the HEAD and the copy: AlreadyExists, theirs kept."""
    bucket, storage, client = own_client_storage
    source, target = f"{bucket}/data", f"{bucket}/trash/data"
    storage.write(source, b"ours")
    other = open_storage(bucket, StorageOptions(endpoint_url=client.meta.endpoint_url))
    sends: list[int] = []

    def copy_answer(request: Any, **_: Any) -> AWSResponse | None:
        sends.append(1)
        if lost and len(sends) == 1:
            other.copy_if_absent(source, target)
            raise ConnectionClosedError(endpoint_url=request.url)
        if landed is not None:
            other.write(target, landed)
        return _precondition_failed(request.url)

    client.meta.events.register("before-send.s3.CopyObject", copy_answer)
    if outcome is None:
        storage.copy_if_absent(source, target)
    else:
        with pytest.raises(outcome, match="trash/data"):
            storage.copy_if_absent(source, target)
    assert len(sends) == (2 if lost else 1)
    assert storage.read(target) == (landed or b"ours") and storage.read(source) == b"ours"


@pytest.mark.s3
@pytest.mark.parametrize("raced", [False, True])
def test_s3_copy_over_the_copy_limit_goes_in_parts(
    own_client_storage: tuple[str, S3Storage, Any], monkeypatch: pytest.MonkeyPatch, raced: bool
) -> None:
    """Objects over CopyObject's limit (lowered here to 5 MiB) are copied by UploadPartCopy; the completion
    carries If-None-Match, so a target created meanwhile wins and the upload is aborted."""
    monkeypatch.setattr(s3, "COPY_LIMIT", 5 * 1024 * 1024)
    monkeypatch.setattr(s3, "COPY_PART_SIZE", 5 * 1024 * 1024)
    bucket, storage, client = own_client_storage
    data = bytes(range(256)) * (11 * 4096)  # 11 MiB: three parts
    source, target = f"{bucket}/large", f"{bucket}/trash/large"
    storage.write(source, data)
    other = open_storage(bucket, StorageOptions(endpoint_url=client.meta.endpoint_url))
    parts: list[int] = []
    client.meta.events.register("before-send.s3.UploadPartCopy", lambda **_: parts.append(1))
    if raced:
        client.meta.events.register(
            "before-send.s3.CompleteMultipartUpload", lambda **_: other.write(target, b"theirs")
        )
        with pytest.raises(AlreadyExists, match="trash/large"):
            storage.copy_if_absent(source, target)
        assert storage.read(target) == b"theirs"
    else:
        storage.copy_if_absent(source, target)
        assert storage.read(target) == data
    assert len(parts) == 3
    bucket_name = bucket.removeprefix("s3://")
    assert client.list_multipart_uploads(Bucket=bucket_name).get("Uploads", []) == []
