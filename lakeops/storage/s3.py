"""Amazon S3 (and S3-compatible stores) implementation of :class:`~lakeops.storage.base.Storage`.

Atomic commits rely on S3 conditional writes (``PutObject`` with ``If-None-Match: *``, docs/architecture.md,
"Storage"): S3 answers 412 ``PreconditionFailed`` when the key exists and 409
``ConditionalRequestConflict`` while a concurrent conditional write to the key is in flight (AWS
asks callers to retry that one). Clients are expensive to build and thread-safe, so one client per
(endpoint, region, addressing style, keys) is shared within a process; Spark tasks call
``open_storage`` often. Credentials come from the standard AWS chain (environment, profile,
instance/IRSA role), unless a caller of this process lends keys for an endpoint with
:func:`using_keys` (the Dagster resource does), or a REST catalog lends the keys it vends for a table's
prefix (:mod:`lakeops.storage.s3_leases`: requests under the prefix are signed with them, longest
prefix first, and renewed once when they expire): those reach only this process's clients, never the
process environment, :class:`~lakeops.storage.StorageOptions` or a Spark executor. ``$LAKEOPS_S3_READ_TIMEOUT``
(seconds, default 120) bounds the wait for an answer before botocore re-sends a request.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import hashlib
import itertools
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn, TypeVar
from urllib.parse import unquote, urlsplit

import boto3
from botocore.client import BaseClient
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from lakeops.errors import AlreadyExists, InvalidArgument, NotFound, StorageError, Superseded
from lakeops.redaction import register_secrets
from lakeops.storage import uri
from lakeops.storage.base import FileInfo
from lakeops.storage.s3_leases import Lease, S3Keys, VendedS3, lease_for, leased_keys

__all__ = [
    "COPY_LIMIT",
    "STREAM_PART_SIZE",
    "DELETE_BATCH",
    "S3Keys",
    "S3Storage",
    "clear_client_cache",
    "shared_client",
    "using_keys",
]

DELETE_BATCH = 1000  # the DeleteObjects limit
MAX_ATTEMPTS = 10  # botocore retries (throttling, 5xx, dropped connections) per request
MAX_POOL_CONNECTIONS = 64  # one client serves every thread of an executor
_CONFLICT_ATTEMPTS = 6  # 409 ConditionalRequestConflict re-sends of a put-if-absent
COPY_LIMIT = 5 * 1024**3  # the largest object one CopyObject copies; larger ones go in parts
STREAM_PART_SIZE = 16 * 1024**2  # part size of an object written from chunks (put_if_absent_stream)
COPY_PART_SIZE = 512 * 1024**2  # UploadPartCopy part size (S3 allows 5 MiB to 5 GiB, 10000 parts)
READ_TIMEOUT_ENV = "LAKEOPS_S3_READ_TIMEOUT"  # seconds a request may wait for its answer
DEFAULT_READ_TIMEOUT = 120.0
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_T = TypeVar("_T")
_MS = timedelta(milliseconds=1)


# -- clients ----------------------------------------------------------------------------------------


_ClientKey = tuple[str | None, str | None, bool, float, S3Keys | None]
_clients: dict[_ClientKey, BaseClient] = {}
_clients_lock = threading.Lock()
#: The cached clients built for leased keys (:mod:`lakeops.storage.s3_leases`).
_leased_clients: set[_ClientKey] = set()
_session: boto3.session.Session | None = None
_session_lock = threading.Lock()
#: Keys lent per endpoint (None: AWS), with how many :func:`using_keys` blocks hold them.
_lent: dict[str | None, tuple[S3Keys, int]] = {}
_lent_lock = threading.Lock()


def _reset_after_fork() -> None:
    """A forked child must not share its parent's sockets (or a lock held at fork time)."""
    global _clients_lock, _lent_lock, _session, _session_lock
    _clients.clear()
    _leased_clients.clear()
    _clients_lock = threading.Lock()
    _lent_lock = threading.Lock()
    _session = None
    _session_lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def _read_timeout() -> float:
    """``$LAKEOPS_S3_READ_TIMEOUT`` (seconds), else 120 s.

    A lost answer costs a full read timeout before botocore re-sends the request; stores known to
    answer fast (and fault-injection tests) lower it so a stalled request is retried in seconds.
    """
    text = os.environ.get(READ_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_READ_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise InvalidArgument(f"${READ_TIMEOUT_ENV}={text!r}: expected a positive number of seconds")
    return value


def _endpoint(endpoint_url: str | None) -> str | None:
    """``endpoint_url``, else ``$AWS_ENDPOINT_URL_S3`` / ``$AWS_ENDPOINT_URL`` (checked here, naming the
    variable), else None (AWS). A password in its user info is registered as a secret."""
    variable = next((name for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL") if os.environ.get(name)), None)
    endpoint = endpoint_url or (os.environ[variable] if variable is not None else None)
    if not endpoint:
        return None
    _register_password(endpoint)
    if not endpoint_url and (problem := uri.endpoint_problem(endpoint)):
        raise InvalidArgument(f"${variable} {endpoint!r} {problem}")
    return endpoint


def _register_password(endpoint: str) -> None:
    """Mask the password of an endpoint's user info by value, as written and percent-decoded (RFC 3986,
    as botocore reads it)."""
    with contextlib.suppress(ValueError):  # not a URL at all: uri.endpoint_problem says why
        password = urlsplit(endpoint).password
        register_secrets(password, unquote(password) if password else None)


def _resolve(
    endpoint_url: str | None, region: str | None, force_path_style: bool | None, keys: S3Keys | None = None
) -> _ClientKey:
    """Fill unset settings from the standard AWS environment variables (and the read timeout), with
    ``keys``, else the keys lent for the endpoint (:func:`using_keys`), if any."""
    endpoint = _endpoint(endpoint_url)
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    # S3-compatible stores (MinIO, Ceph, moto) rarely resolve virtual-host bucket names.
    path_style = force_path_style if force_path_style is not None else endpoint is not None
    lent = _lent.get(endpoint)
    return endpoint, region or None, path_style, _read_timeout(), keys or (lent[0] if lent else None)


@contextlib.contextmanager
def using_keys(keys: S3Keys, *, endpoint_url: str | None = None) -> Iterator[None]:
    """Sign every S3 request of this process to ``endpoint_url`` (None: ``$AWS_ENDPOINT_URL``, else
    AWS) with ``keys`` while the block runs, on every thread, instead of the AWS credential chain.

    Nothing is written to ``os.environ`` (concurrent steps of one process would race on it, and child
    processes would inherit the keys); clients built with the keys are cached apart from the chain's
    and dropped when the last block lending them ends. Blocks may nest and overlap across threads
    with the same keys; other keys for an endpoint whose keys are in use raise
    :class:`~lakeops.errors.InvalidArgument` (a process signs with one identity per endpoint).
    Spark executors never see these keys: they use their own identity (their environment, an
    instance or pod role).
    """
    endpoint = _endpoint(endpoint_url)
    with _lent_lock:
        held, count = _lent.get(endpoint, (keys, 0))
        if held != keys:
            where = endpoint or "AWS S3"
            raise InvalidArgument(
                f"other S3 keys for {where} are already in use in this process; one identity per endpoint"
            )
        _lent[endpoint] = (keys, count + 1)
    try:
        yield
    finally:
        with _lent_lock:
            held, count = _lent[endpoint]
            if count > 1:
                _lent[endpoint] = (held, count - 1)
            else:
                del _lent[endpoint]
                with _clients_lock:
                    for key in [key for key in _clients if key[4] == held]:
                        del _clients[key]


def _build(key: _ClientKey) -> BaseClient:
    endpoint, region, path_style, read_timeout, keys = key
    config = Config(
        retries={"mode": "standard", "max_attempts": MAX_ATTEMPTS},
        max_pool_connections=MAX_POOL_CONNECTIONS,
        connect_timeout=10,
        read_timeout=read_timeout,
        tcp_keepalive=True,
        s3={"addressing_style": "path" if path_style else "auto"},
        user_agent_appid="lakeops",
    )
    global _session
    try:
        # One private session (loading service models once) whose client creation is serialised:
        # boto3's default session is not safe to share across threads.
        with _session_lock:
            if _session is None:
                _session = boto3.session.Session()
            return _session.client(
                "s3",
                region_name=region,
                endpoint_url=endpoint,
                config=config,
                aws_access_key_id=keys.access_key_id if keys else None,
                aws_secret_access_key=keys.secret_access_key if keys else None,
                aws_session_token=keys.session_token if keys else None,
            )
    except (BotoCoreError, ValueError) as exc:
        raise StorageError(f"cannot create an S3 client for endpoint {endpoint!r}: {exc}") from exc


def shared_client(
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    force_path_style: bool | None = None,
    keys: S3Keys | None = None,
) -> BaseClient:
    """The process-wide client for these settings (signing with ``keys``, else the identity of
    :func:`_resolve`), built on first use. Building one for leased keys drops the clients of keys no
    lease holds any more (refreshed or withdrawn: :mod:`lakeops.storage.s3_leases`)."""
    key = _resolve(endpoint_url, region, force_path_style, keys)
    client = _clients.get(key)
    if client is not None:
        return client
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            if keys is not None:
                live = leased_keys()
                for stale in [k for k in _leased_clients if k[4] not in live]:
                    _leased_clients.discard(stale)
                    _clients.pop(stale, None)
                _leased_clients.add(key)
            client = _clients[key] = _build(key)
        return client


def clear_client_cache() -> None:
    """Forget shared clients and cached credentials, e.g. after the environment changed."""
    global _session
    with _clients_lock, _session_lock:
        _clients.clear()
        _leased_clients.clear()
        _session = None


# -- errors -----------------------------------------------------------------------------------------


def _code(exc: ClientError) -> tuple[str, int | None]:
    error = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return str(error.get("Code", "")), status


def _raise(exc: Exception, action: str, location: str) -> NoReturn:
    """Re-raise a boto exception as a lakeops error that names the location and the problem."""
    if isinstance(exc, ClientError):
        code, status = _code(exc)
        message = exc.response.get("Error", {}).get("Message") or ""
        if code == "NoSuchBucket":
            bucket = location[5:].split("/", 1)[0]
            raise NotFound(f"cannot {action} {location!r}: bucket {bucket!r} does not exist") from exc
        if code in ("NoSuchKey", "NotFound", "404") or status == 404:
            raise NotFound(f"cannot {action} {location!r}: no such object") from exc
        detail = f"{code}: {message}" if message else code
        raise StorageError(f"cannot {action} {location!r}: {detail} (HTTP {status})") from exc
    raise StorageError(f"cannot {action} {location!r}: {exc}") from exc


def _expired_token(exc: ClientError) -> bool:
    """Whether the store refused temporary keys past their expiry (AWS answers 400 or 403)."""
    return _code(exc)[0] in ("ExpiredToken", "TokenRefreshRequired")


def _retried(exc: ClientError) -> bool:
    """Whether botocore re-sent the request: an earlier attempt may have been applied."""
    return bool(exc.response.get("ResponseMetadata", {}).get("RetryAttempts"))


def _split(path: str, *, need_key: bool = True) -> tuple[str, str]:
    """(bucket, key) of an S3 location; refuses other schemes and, if ``need_key``, a bare bucket."""
    if uri.scheme(path) != uri.S3:
        raise InvalidArgument(f"S3 storage cannot handle {path!r}: not an s3:// location")
    bucket, _, key = uri.normalize(path)[5:].partition("/")
    if need_key and not key:
        raise InvalidArgument(f"S3 location {path!r} names a bucket, not an object")
    return bucket, key


def _files(bucket: str, page: dict[str, Any]) -> Iterator[FileInfo]:
    """The objects of a ListObjectsV2 page; zero-byte ``.../`` directory markers are directories."""
    for obj in page.get("Contents", ()):
        key: str = obj["Key"]
        if not key.endswith("/"):
            yield FileInfo(f"s3://{bucket}/{key}", int(obj["Size"]), _ms(obj["LastModified"]))


def _parts(chunks: Iterable[bytes], size: int) -> Iterator[bytes]:
    """``chunks`` regrouped into parts of at least ``size`` bytes (S3's minimum is 5 MiB), the last
    whatever remains."""
    part = bytearray()
    for chunk in chunks:
        part += chunk
        if len(part) >= size:
            yield bytes(part)
            part = bytearray()
    if part:
        yield bytes(part)


def _multipart_etag(part_etags: Iterable[str]) -> str:
    """The ETag S3 gives a completed multipart upload: MD5 of the parts' binary MD5s, ``-`` part count."""
    digests = [bytes.fromhex(e.strip('"')) for e in part_etags]
    return f"{hashlib.md5(b''.join(digests)).hexdigest()}-{len(digests)}"  # noqa: S324 -- S3's definition


def _ms(value: datetime) -> int:
    return (value - _EPOCH) // _MS


# -- storage ----------------------------------------------------------------------------------------


class S3Storage:
    """Objects in any bucket reachable with one client; paths are ``s3://bucket/key``.

    Pickles to its settings (not its client), so Spark can ship it to executors, which then use
    their own process's shared client.
    """

    def __init__(
        self,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        force_path_style: bool | None = None,
        client: BaseClient | None = None,
    ) -> None:
        self._settings = (endpoint_url, region, force_path_style)
        self._custom_client = client is not None
        self._client: BaseClient = (
            client
            if client is not None
            else shared_client(endpoint_url=endpoint_url, region=region, force_path_style=force_path_style)
        )

    @property
    def client(self) -> BaseClient:
        """The boto3 client in use (for diagnostics; prefer the protocol methods)."""
        return self._client

    def __reduce__(self) -> tuple[Callable[..., S3Storage], tuple[str | None, str | None, bool | None]]:
        if self._custom_client:
            raise InvalidArgument(
                "an S3Storage built around a caller's client cannot be pickled; "
                "ship StorageOptions and call open_storage in the task instead"
            )
        return _rebuild, self._settings

    def __repr__(self) -> str:
        endpoint, region, _ = self._settings
        return f"S3Storage(endpoint_url={endpoint!r}, region={region!r})"

    def _signed(self, path: str, request: Callable[[BaseClient], _T]) -> _T:
        """``request`` sent with the client that signs for ``path``: the keys leased for its prefix
        (:mod:`lakeops.storage.s3_leases`), else this storage's own. Leased keys that have expired, or
        that the store answers ``ExpiredToken``, are renewed once (the lender reloads them) and the
        request is sent again."""
        lease = None if self._custom_client else lease_for(path)
        if lease is None:
            return request(self._client)
        credentials = lease.credentials
        renewed = credentials.expired()
        if renewed:
            credentials = lease.renew(credentials)
        try:
            return request(self._leased_client(credentials))
        except ClientError as exc:
            if renewed or not _expired_token(exc):
                raise
        return request(self._leased_client(lease.renew(credentials)))

    def _leased_client(self, credentials: VendedS3) -> BaseClient:
        endpoint, region, path_style = self._settings
        return shared_client(
            endpoint_url=credentials.endpoint_url or endpoint,
            region=credentials.region or region,
            force_path_style=path_style,
            keys=credentials.keys,
        )

    def list(self, prefix: str) -> Iterator[FileInfo]:
        """Objects under ``prefix + "/"`` via ListObjectsV2 (already in lexicographic key order).

        Zero-byte ``.../`` directory markers (written by consoles and Hadoop) are skipped: they
        are directories, not objects. A missing bucket raises :class:`~lakeops.errors.NotFound`
        rather than listing nothing, so a typo cannot pass for an empty table.
        """
        bucket, key = _split(prefix, need_key=False)
        return self._list(bucket, f"{key}/" if key else "")

    def _list(self, bucket: str, key_prefix: str) -> Iterator[FileInfo]:
        """Every object under ``key_prefix``, page by page (:meth:`_pages`)."""
        for page in self._pages(bucket, key_prefix):
            yield from _files(bucket, page)

    def list_level(self, bucket: str, key_prefix: str) -> tuple[builtins.list[FileInfo], builtins.list[str]]:
        """The objects directly under ``key_prefix`` and its sub-prefixes as locations (ListObjectsV2
        with ``Delimiter="/"``, taken as given: no normalisation), each page signed for the prefix."""
        files: builtins.list[FileInfo] = []
        directories: builtins.list[str] = []
        for page in self._pages(bucket, key_prefix, Delimiter="/"):
            files.extend(_files(bucket, page))
            directories.extend(f"s3://{bucket}/{p['Prefix'].rstrip('/')}" for p in page.get("CommonPrefixes", ()))
        return files, directories

    def _pages(self, bucket: str, key_prefix: str, **listing: str) -> Iterator[dict[str, Any]]:
        """ListObjectsV2 pages under ``key_prefix``, one request each, signed for the listed prefix
        (:meth:`_signed`), continuing after the last key seen."""
        location = f"s3://{bucket}/{key_prefix}"
        page_args: dict[str, str] = {"Bucket": bucket, "Prefix": key_prefix, **listing}
        while True:
            try:
                page = self._signed(location, lambda client: client.list_objects_v2(**page_args))
            except (ClientError, BotoCoreError) as exc:
                _raise(exc, "list", location)
            yield page
            if not page.get("IsTruncated"):
                return
            page_args["ContinuationToken"] = page["NextContinuationToken"]

    def read(self, path: str) -> bytes:
        return self.read_versioned(path)[0]

    def read_range(self, path: str, start: int, length: int) -> bytes:
        """GetObject with ``Range``; a start at or past the end (HTTP 416) reads as empty."""
        if start < 0 or length < 0:
            raise InvalidArgument(f"cannot read {path!r}: negative range start={start} length={length}")
        if length == 0:
            self.stat(path)  # same NotFound behaviour as a non-empty read
            return b""
        bucket, key = _split(path)
        location = f"s3://{bucket}/{key}"
        try:
            response = self._signed(
                location,
                lambda client: client.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{start + length - 1}"),
            )
            with response["Body"] as body:
                data: bytes = body.read()
        except ClientError as exc:
            code, status = _code(exc)
            if status == 416 or code == "InvalidRange":
                return b""
            _raise(exc, "read", location)
        except BotoCoreError as exc:
            _raise(exc, "read", location)
        # A server that ignores Range answers 200 with the whole object; honour the contract anyway.
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status == 200 and "ContentRange" not in response:
            return data[start : start + length]
        return data

    def write(self, path: str, data: bytes) -> None:
        """PutObject: S3 makes a single PUT visible all at once (up to 5 GiB)."""
        bucket, key = _split(path)
        try:
            self._signed(path, lambda client: client.put_object(Bucket=bucket, Key=key, Body=data))
        except (ClientError, BotoCoreError) as exc:
            _raise(exc, "write", f"s3://{bucket}/{key}")

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        """GetObject, read to the end inside the error handling (streams can fail mid-body); the token
        is the object's ETag."""
        bucket, key = _split(path)
        location = f"s3://{bucket}/{key}"
        try:
            response = self._signed(location, lambda client: client.get_object(Bucket=bucket, Key=key))
            with response["Body"] as body:
                data: bytes = body.read()
        except (ClientError, BotoCoreError) as exc:
            _raise(exc, "read", location)
        return data, str(response["ETag"])

    def replace_if_match(self, path: str, data: bytes, token: str) -> None:
        """PutObject with ``If-Match: token``. A 412 after botocore re-sent the request may be our own
        first attempt having landed unheard: the object then holds exactly ``data``."""
        bucket, key = _split(path)
        location = f"s3://{bucket}/{key}"
        try:
            self._signed(location, lambda client: client.put_object(Bucket=bucket, Key=key, Body=data, IfMatch=token))
        except ClientError as exc:
            code, status = _code(exc)
            # 409: a concurrent conditional write to the key was in flight; it may win, so re-read.
            if status in (404, 409, 412) or code in ("PreconditionFailed", "NoSuchKey", "ConditionalRequestConflict"):
                if _retried(exc) and self._holds(bucket, key, data):
                    return
                raise Superseded(f"cannot replace {location!r}: it changed since it was read") from exc
            _raise(exc, "replace", location)
        except BotoCoreError as exc:
            _raise(exc, "replace", location)

    def put_if_absent(self, path: str, data: bytes) -> None:
        """PutObject with ``If-None-Match: *``; the answers are read by :meth:`_create`, which tells
        our own lost-response first attempt from another writer's object by comparing the bytes."""
        bucket, key = _split(path)
        location = f"s3://{bucket}/{key}"
        self._create(
            location,
            lambda: self._signed(
                location, lambda client: client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            ),
            lambda: self._holds(bucket, key, data),
        )

    def put_if_absent_stream(self, path: str, chunks: Iterable[bytes]) -> None:
        """One conditional PutObject when the chunks fit in one :data:`STREAM_PART_SIZE` part; else a
        multipart upload, one part in memory at a time, completed with ``If-None-Match: *`` (S3 makes
        nothing visible before the completion, and refuses it when the key exists). Any failure aborts
        the upload; :meth:`_create` reads the completion's answers as :meth:`put_if_absent`'s."""
        bucket, key = _split(path)
        parts = _parts(chunks, STREAM_PART_SIZE)
        first = next(parts, b"")
        second = next(parts, None)
        if second is None:
            self.put_if_absent(path, first)
            return

        send = functools.partial(self._signed, f"s3://{bucket}/{key}")

        def upload_parts(upload: str) -> list[dict[str, Any]]:
            return [
                {
                    "PartNumber": number,
                    "ETag": send(
                        functools.partial(
                            _upload_part, Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=body
                        )
                    )["ETag"],
                    "Size": len(body),
                }
                for number, body in enumerate(itertools.chain((first, second), parts), 1)
            ]

        self._create_in_parts(bucket, key, upload_parts, "write")

    def _create_in_parts(
        self, bucket: str, key: str, upload_parts: Callable[[str], Sequence[dict[str, Any]]], verb: str
    ) -> None:
        """A multipart upload whose parts ``upload_parts`` sends (each ``{PartNumber, ETag, Size}``),
        completed with ``If-None-Match: *`` through :meth:`_create` (our own landed completion is told
        by its size and multipart ETag); any failure aborts the upload (its parts would only cost
        storage) and is reported as ``verb`` the location."""
        location = f"s3://{bucket}/{key}"
        send = functools.partial(self._signed, location)
        upload: str | None = None
        try:
            upload = str(send(lambda client: client.create_multipart_upload(Bucket=bucket, Key=key))["UploadId"])
            sent = upload_parts(upload)
            parts = [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in sent]
            size = sum(p["Size"] for p in sent)
            self._create(
                location,
                lambda: send(
                    lambda client: client.complete_multipart_upload(
                        Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}, IfNoneMatch="*"
                    )
                ),
                lambda: self._has(bucket, key, size, _multipart_etag(p["ETag"] for p in parts)),
            )
        except BaseException as exc:
            if upload is not None:
                with contextlib.suppress(ClientError, BotoCoreError):
                    send(lambda client: client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload))
            if isinstance(exc, ClientError | BotoCoreError):
                _raise(exc, verb, location)
            raise

    def _create(self, location: str, send: Callable[[], object], ours: Callable[[], bool]) -> None:
        """Send a conditional create (``If-None-Match: *``) until S3 gives a verdict.

        412 means another writer won (:class:`~lakeops.errors.AlreadyExists`) -- unless botocore had
        re-sent the request, in which case our own lost-response first attempt may be the object
        that exists; ``ours()`` tells the two apart. 409 (a concurrent conditional write in flight)
        is re-sent with backoff, as AWS asks, and becomes AlreadyExists if it persists. Any other
        :class:`~lakeops.errors.StorageError` means the outcome is unknown: callers must not assume
        the object is absent.
        """
        maybe_landed = False  # an earlier send of this call may have been applied unheard
        attempt = 0
        while True:
            attempt += 1
            try:
                send()
                return
            except ClientError as exc:
                code, status = _code(exc)
                maybe_landed = maybe_landed or _retried(exc)
                if status == 412 or code == "PreconditionFailed":
                    if maybe_landed and ours():
                        return
                    raise AlreadyExists(f"cannot create {location!r}: it already exists") from exc
                if status == 409 or code == "ConditionalRequestConflict":
                    if attempt < _CONFLICT_ATTEMPTS:
                        time.sleep(random.uniform(0.0, 0.05 * 2**attempt))
                        continue
                    raise AlreadyExists(
                        f"cannot create {location!r}: concurrent conditional writes kept conflicting "
                        f"(409 ConditionalRequestConflict x{_CONFLICT_ATTEMPTS}); another writer races for it"
                    ) from exc
                _raise(exc, "create", location)
            except BotoCoreError as exc:
                _raise(exc, "create", location)

    def copy_if_absent(self, source: str, target: str) -> None:
        """A server-side copy: no byte passes through this process (a 1 GB file costs no driver memory).

        The target must be absent. A HEAD refuses an existing target on every S3-compatible store;
        the copy itself carries ``If-None-Match: *``, with which AWS S3 also refuses a target created
        between the HEAD and the copy (412), like :meth:`put_if_absent`. Stores that ignore the header
        on copies (moto, some S3-compatible stores) leave that window of one request open. Objects
        over :data:`COPY_LIMIT` (CopyObject's 5 GiB) are copied in parts (UploadPartCopy, each part
        pinned to the source's ETag) and completed with the same condition. After a re-sent request
        meets 412, the target is ours if it has the size and ETag the copy produces (a source whose
        ETag is no MD5 -- uploaded in parts, KMS-encrypted -- then reads as another writer's target:
        AlreadyExists, the safe answer for a move, which then keeps its source).
        """
        source_bucket, source_key = _split(source)
        bucket, key = _split(target)
        location = f"s3://{bucket}/{key}"
        try:
            head = self._signed(source, lambda client: client.head_object(Bucket=source_bucket, Key=source_key))
        except (ClientError, BotoCoreError) as exc:
            _raise(exc, f"copy to {location!r} from", f"s3://{source_bucket}/{source_key}")
        if self.exists(location):
            raise AlreadyExists(f"cannot copy to {location!r}: it already exists")
        size, etag = int(head["ContentLength"]), str(head["ETag"])
        copy_source = {"Bucket": source_bucket, "Key": source_key}
        if size <= COPY_LIMIT:
            self._create(
                location,
                lambda: self._signed(
                    location,
                    lambda client: client.copy_object(Bucket=bucket, Key=key, CopySource=copy_source, IfNoneMatch="*"),
                ),
                lambda: self._has(bucket, key, size, etag),
            )
            return
        self._copy_in_parts(copy_source, bucket, key, size, etag)

    def _copy_in_parts(self, copy_source: dict[str, str], bucket: str, key: str, size: int, etag: str) -> None:
        """UploadPartCopy parts pinned to the source's ``etag``, completed as :meth:`_create_in_parts` does."""

        def copy_parts(upload: str) -> list[dict[str, Any]]:
            parts = []
            for number, start in enumerate(range(0, size, COPY_PART_SIZE), 1):
                end = min(start + COPY_PART_SIZE, size)
                answer = self._signed(
                    f"s3://{bucket}/{key}",
                    functools.partial(
                        _upload_part_copy,
                        Bucket=bucket,
                        Key=key,
                        UploadId=upload,
                        PartNumber=number,
                        CopySource=copy_source,
                        CopySourceIfMatch=etag,
                        CopySourceRange=f"bytes={start}-{end - 1}",
                    ),
                )
                parts.append({"PartNumber": number, "ETag": answer["CopyPartResult"]["ETag"], "Size": end - start})
            return parts

        self._create_in_parts(bucket, key, copy_parts, f"copy s3://{copy_source['Bucket']}/{copy_source['Key']} to")

    def _has(self, bucket: str, key: str, size: int, etag: str) -> bool:
        """Whether the object at ``key`` has this size and ETag (False if it is absent)."""
        try:
            head = self._signed(f"s3://{bucket}/{key}", lambda client: client.head_object(Bucket=bucket, Key=key))
        except (ClientError, BotoCoreError) as exc:
            if isinstance(exc, ClientError) and (_code(exc)[1] == 404 or _code(exc)[0] in ("NoSuchKey", "NotFound")):
                return False
            raise StorageError(
                f"cannot create 's3://{bucket}/{key}': outcome unknown after a retried conditional copy ({exc})"
            ) from exc
        return int(head["ContentLength"]) == size and head["ETag"].strip('"') == etag.strip('"')

    def _holds(self, bucket: str, key: str, data: bytes) -> bool:
        """Whether the object at ``key`` has exactly ``data`` (False if it is absent)."""
        try:
            return self.read(f"s3://{bucket}/{key}") == data
        except NotFound:
            return False
        except StorageError as exc:
            raise StorageError(
                f"cannot create 's3://{bucket}/{key}': outcome unknown after a retried conditional put ({exc})"
            ) from exc

    def move_if_absent(self, source: str, target: str) -> None:
        """A server-side :meth:`copy_if_absent`, then a delete of ``source``: S3 has no rename."""
        self.copy_if_absent(source, target)
        self.delete_many([source])

    def prune(self, prefix: str) -> None:
        """Nothing to do: S3 has no directories."""

    def delete_many(self, paths: Iterable[str]) -> int:
        """DeleteObjects in batches of 1000 keys per bucket and signing identity (a batch is signed
        once: the keys of one lease, or the storage's own; quiet mode: only failures come back).

        S3 reports missing keys as deleted, which makes this idempotent. Stops at the first batch
        with failures and names its first failed key.
        """
        count = 0
        pending: dict[tuple[str, Lease | None], dict[str, None]] = {}  # (bucket, lease) -> ordered set of keys
        for path in paths:
            count += 1
            bucket, key = _split(path)
            keys = pending.setdefault((bucket, None if self._custom_client else lease_for(path)), {})
            keys[key] = None
            if len(keys) >= DELETE_BATCH:
                self._delete_batch(bucket, list(keys))
                keys.clear()
        for (bucket, _), keys in pending.items():
            if keys:
                self._delete_batch(bucket, list(keys))
        return count

    def _delete_batch(self, bucket: str, keys: Sequence[str]) -> None:
        """One DeleteObjects. botocore re-sends it when an answer is lost (harmless: deleting an absent
        key succeeds); when no answer ever came, the error says the keys may be gone all the same."""
        location = f"s3://{bucket}/{keys[0]}"
        try:
            response = self._signed(
                location,
                lambda client: client.delete_objects(
                    Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
                ),
            )
        except ClientError as exc:
            _raise(exc, f"delete {len(keys)} objects starting at", location)
        except BotoCoreError as exc:
            raise StorageError(
                f"cannot delete {len(keys)} objects starting at {location!r}: {exc} (the store may have deleted "
                "some or all of them without answering; a rerun is safe, deleting is idempotent)"
            ) from exc
        errors: list[dict[str, Any]] = response.get("Errors") or []
        if errors:
            first = errors[0]
            raise StorageError(
                f"cannot delete 's3://{bucket}/{first.get('Key')}': {first.get('Code')}: "
                f"{first.get('Message')} ({len(errors)} of {len(keys)} keys in the batch failed)"
            )

    def stat(self, path: str) -> FileInfo:
        """HeadObject; 404 is :class:`~lakeops.errors.NotFound`."""
        bucket, key = _split(path)
        location = f"s3://{bucket}/{key}"
        try:
            response = self._signed(location, lambda client: client.head_object(Bucket=bucket, Key=key))
        except (ClientError, BotoCoreError) as exc:
            _raise(exc, "stat", location)
        return FileInfo(location, int(response["ContentLength"]), _ms(response["LastModified"]))

    def exists(self, path: str) -> bool:
        """HeadObject succeeds (other failures, e.g. access denied, still raise)."""
        try:
            self.stat(path)
        except NotFound:
            return False
        return True


def _upload_part_copy(client: BaseClient, **request: Any) -> Any:
    return client.upload_part_copy(**request)


def _upload_part(client: BaseClient, **request: Any) -> Any:
    return client.upload_part(**request)


def _rebuild(endpoint_url: str | None, region: str | None, force_path_style: bool | None) -> S3Storage:
    """Unpickle: rebuild from settings with this process's shared client."""
    return S3Storage(endpoint_url=endpoint_url, region=region, force_path_style=force_path_style)
