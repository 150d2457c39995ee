"""Location normalisation and root confinement for :mod:`lakeops.storage`.

Table formats record the same location in many spellings: ``s3a://`` from Hadoop writers,
``file:/tmp/t`` or percent-encoded ``file:///tmp/a%20b`` from Spark and Delta, trailing slashes
from users. Comparing such strings naively either misses a match (a file looks orphaned) or,
worse, accepts a path outside the table (``/a/bc`` "starts with" ``/a/b``). Every comparison in
lakeops therefore goes through :func:`normalize` first; every delete, move and write is confined to
its table root by :mod:`lakeops.storage.confined`, which builds on :func:`is_within` (docs/architecture.md,
"Storage" and "Safety rules").

Canonical forms:

* local: an absolute POSIX path without trailing slash (``/`` for the root), ``.``/``..``
  resolved lexically (symlinks are *not* resolved);
* S3: ``s3://bucket/key`` without trailing slash. Keys are kept literally: S3 has no ``..`` and
  no percent-decoding, so ``%20`` in an ``s3://`` location is part of the key. Callers that hold
  a URI-encoded path (Delta ``add.path``) decode it before building an ``s3://`` location.

Whether ``%2520`` in a ``file:`` location is an escape depends on who wrote it, and guessing wrong
makes live files look unreferenced (issue 19: ``orphans`` deleted them):

* Delta action paths are URIs ("The path is a URI as specified by RFC 2396 URI Generic Syntax,
  which needs to be decoded to get the data file path",
  https://github.com/delta-io/delta/blob/master/PROTOCOL.md#add-file-and-remove-file): the Delta
  reader decodes them exactly once, and :func:`normalize` decodes a ``file:`` URI by default;
* Iceberg paths (``location``, ``metadata-log``, ``manifest-list``, ``manifest_path``,
  ``file_path``, ``statistics-path``; https://iceberg.apache.org/spec/) are strings the table's
  FileIO opens as spelled: PyIceberg writes the partition directory of ``ü`` literally as
  ``s=%C3%BC`` and records ``file:///…/s=%C3%BC/…``, as Java's Hadoop ``Path`` does. Iceberg code
  normalises with ``normalize(path, literal=True)``;
* Icechunk object keys are ids lakeops builds itself: never escaped;
* user input (a table location on the command line, a registry entry) is a path or a URI and is
  normalised by default, once, where it enters.

Storage calls take the canonical form. :func:`storage_location` (what the adapters and
:func:`lakeops.storage.open_storage` apply) refuses a ``file:`` URI holding a ``%``: only the table
format that recorded it knows what it means, so code that forgot to convert fails loudly instead of
reading, writing or deleting the wrong file.
"""

from __future__ import annotations

import functools
import os
import re
from urllib.parse import unquote, urlsplit

from lakeops.errors import InvalidArgument, OutsideRoot

__all__ = [
    "endpoint_problem",
    "is_within",
    "is_within_normalized",
    "join",
    "normalize",
    "relative_to",
    "require_within",
    "scheme",
    "storage_location",
    "unquote_utf8",
]

LOCAL = "file"
S3 = "s3"
_S3_ALIASES = frozenset({"s3", "s3a", "s3n"})
_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def scheme(location: str) -> str:
    """The canonical scheme of ``location``: ``"file"`` for local paths, ``"s3"`` for s3/s3a/s3n.

    Other schemes are returned lower-cased and unchanged (``"gs"``), so callers can name them in
    an error instead of guessing.
    """
    match = _SCHEME_RE.match(location)
    if match is None:
        return LOCAL  # plain paths and Hadoop-style ``file:/x`` URIs
    raw = match.group(1).lower()
    return S3 if raw in _S3_ALIASES else raw


def normalize(location: str, *, literal: bool = False) -> str:
    """The canonical spelling of ``location`` (see the module docstring).

    ``literal``: the path of a ``file:`` URI is taken as spelled, not percent-decoded (Iceberg
    paths). Plain paths and S3 keys are literal either way.
    Raises :class:`~lakeops.errors.InvalidArgument` for an empty location, an unsupported scheme,
    a ``file://`` URI naming a remote host, or an S3 URI without a bucket.
    """
    if _is_canonical_local(location):
        return location
    if not location or not location.strip():
        raise InvalidArgument(f"storage location {location!r} is empty")
    kind = scheme(location)
    if kind == LOCAL:
        return _normalize_local(location, literal=literal)
    if kind == S3:
        return _normalize_s3(location)
    raise InvalidArgument(f"storage location {location!r} has unsupported scheme {kind!r} (use a path or s3://)")


def storage_location(location: str) -> str:
    """The canonical ``location`` for a storage call; :class:`~lakeops.errors.InvalidArgument` for a
    ``file:`` URI holding a ``%``, whose meaning depends on the table format that recorded it (see
    the module docstring): the caller converts it with :func:`normalize` as that format says."""
    if _is_canonical_local(location):
        return location
    if _is_file_uri(location) and "%" in location:
        raise InvalidArgument(
            f"storage location {location!r} is a file: URI with percent signs, which Delta decodes and Iceberg "
            "takes literally; the caller must pass the normalised path"
        )
    return normalize(location)


def _is_file_uri(location: str) -> bool:
    return location[:5].lower() == "file:"


def _is_canonical_local(path: str) -> bool:
    """``path`` is already canonical: absolute, with no empty, ``.`` or ``..`` segment (no ``//``, no
    segment starting with a dot) and no trailing slash. A listing or a resolved action path always is,
    and lakeops normalises each several times on its way to a delete: this check costs a tenth of
    ``abspath`` (a VACUUM of 100,000 files normalised 400,000 times)."""
    return path.startswith("/") and "//" not in path and "/." not in path and (len(path) == 1 or path[-1] != "/")


def _normalize_local(location: str, *, literal: bool) -> str:
    path = location
    if _is_file_uri(location):
        rest = location[5:]
        if rest.startswith("//"):
            authority, sep, tail = rest[2:].partition("/")
            if authority not in ("", "localhost"):
                raise InvalidArgument(f"file URI {location!r} names host {authority!r}; only local files are supported")
            rest = sep + tail
        if not rest.startswith("/"):
            raise InvalidArgument(f"file URI {location!r} is not absolute")
        path = rest if literal else unquote_utf8(rest, f"file URI {location!r}")
    # abspath joins the working directory and resolves "." and ".." lexically; normpath keeps a
    # leading "//" (POSIX allows it to be special), which we fold into "/".
    result = os.path.abspath(path)
    if result.startswith("//"):
        result = "/" + result.lstrip("/")
    return result


def _normalize_s3(location: str) -> str:
    rest = location.split("://", 1)[1]
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise InvalidArgument(f"S3 location {location!r} has no bucket")
    key = key.rstrip("/")
    return f"s3://{bucket}/{key}" if key else f"s3://{bucket}"


def join(base: str, *relative: str) -> str:
    """``base`` with the relative parts appended, normalised.

    Relative parts must not be absolute or carry a scheme: ``os.path.join`` would silently
    discard ``base`` for them, which is how deletes escape a table root.
    """
    result = normalize(base)
    for part in relative:
        if part.startswith("/") or _SCHEME_RE.match(part) or _is_file_uri(part):
            raise InvalidArgument(f"cannot join absolute location {part!r} onto {base!r}")
        stripped = part.strip("/")
        if stripped:
            result = f"{result.rstrip('/')}/{stripped}"
    return normalize(result)


def unquote_utf8(text: str, what: str) -> str:
    """``text`` percent-decoded, its escapes read as UTF-8 (RFC 3986, "Percent-Encoding"). Escapes that are
    no UTF-8 (``%FF``) are refused, naming ``what``: readers disagree on them (delta-rs refuses them, Java
    decodes U+FFFD), and ``unquote``'s replacement names a file other than the one the bytes spell, so
    that file would look unreferenced to VACUUM."""
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(f"{what} has percent-escapes that are not UTF-8") from exc


def resolve(base: str, path: str) -> str:
    """The location of a path a Delta action names (a URI): a relative one percent-decoded and joined
    to ``base``, an absolute one decoded exactly once (``file:`` URIs decode themselves). A path that
    cannot be decoded is refused naming ``base`` (:func:`unquote_utf8`)."""
    if path.startswith("file:"):
        try:
            return normalize(path)
        except InvalidArgument as exc:
            raise InvalidArgument(f"{base}: the action path {exc}") from exc
    if "://" in path or path.startswith("/"):
        return normalize(unquote_utf8(path, f"{base}: the action path {path!r}"))
    if _PLAIN_RELATIVE.fullmatch(path) and _absolute(base):
        # Nothing to decode or collapse (most paths, once per file of a table): the root, normalised
        # once per root, and the path as written.
        root = _normalized_root(base)
        return f"{root}/{path}" if root != "/" else f"/{path}"
    return join(base, *(unquote_utf8(part, f"{base}: the action path {path!r}") for part in path.split("/")))


#: A relative path of ordinary segments: no percent-escape, empty, ``.`` or ``..`` segment, or colon.
_PLAIN_RELATIVE = re.compile(r"(?:(?!\.\.?(?:/|$))[^/%:]+/)*(?!\.\.?$)[^/%:]+")


def _absolute(location: str) -> bool:
    """An absolute local path or an S3 URI: normalising it does not depend on the working directory."""
    return location.startswith(("/", "s3://", "s3a://", "s3n://"))


@functools.lru_cache(maxsize=256)
def _normalized_root(location: str) -> str:
    return normalize(location)


def is_within(root: str, path: str) -> bool:
    """Whether ``path`` is ``root`` itself or lies beneath it, after normalising both.

    Compared by whole segments, so ``/a/bc`` is not within ``/a/b``. Local ``..`` is resolved
    before comparing; an S3 key with a ``.`` or ``..`` segment below the root is refused, since
    some S3-compatible stores and proxies collapse dot segments and the object could land outside.
    """
    return is_within_normalized(normalize(root), normalize(path))


def is_within_normalized(root: str, path: str) -> bool:
    """:func:`is_within` for two locations already in :func:`normalize`'s spelling (a listing's paths,
    a confined storage's roots, ``realpath``'s results), which it does not normalise again: checks made
    once per file of a 100,000-file deletion, so by string prefix: in that spelling, lying beneath the
    root's segments is starting with the root and a slash (same scheme and bucket included)."""
    if path == root:
        return True
    prefix = root if root.endswith("/") else f"{root}/"
    if not path.startswith(prefix):
        return False
    rest = path[len(prefix) :]
    return "/." not in f"/{rest}" or not any(part in (".", "..") for part in rest.split("/"))


def require_within(root: str, path: str) -> str:
    """The normalised ``path``, or :class:`~lakeops.errors.OutsideRoot` naming both locations."""
    if not is_within(root, path):
        raise OutsideRoot(f"path {path!r} is outside the root {root!r}; refusing to touch it")
    return normalize(path)


def relative_to(root: str, path: str) -> str:
    """``path`` relative to ``root`` without a leading slash (``""`` for the root itself).

    Raises :class:`~lakeops.errors.OutsideRoot` when ``path`` is not within ``root``.
    """
    full = require_within(root, path)
    base = normalize(root)
    if full == base:
        return ""
    return full[len(base) + 1 :] if base != "/" else full[1:]


def endpoint_problem(url: str) -> str | None:
    """What is wrong with an S3 endpoint URL, or None: botocore's own errors name neither the URL's
    source nor the fix (``Invalid endpoint``, ``Custom endpoint ... was not a valid URI``)."""
    if not url.startswith(("http://", "https://")):
        return "must start with http:// or https://"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError:  # not echoed: it quotes what it took for the port, maybe part of a password
        return "is not a URL (a port that is not a number, or a bracket left open)"
    if not parts.hostname or parts.query or parts.fragment:
        return "must be scheme://host[:port][/path], without a query or fragment"
    return None
