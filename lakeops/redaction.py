"""Masking secrets in everything lakeops prints or records (issue 19, "Secrets in URIs").

Catalog URIs (``postgresql+psycopg2://user:password@host/db``), S3 endpoints
(``http://key:secret@minio:9000``) and presigned-style query strings (``?X-Amz-Signature=...``) carry
credentials that must never reach a terminal, a JSON report, an audit record or a Dagster event log.
This module is the one implementation: :class:`~lakeops.errors.LakeopsError` masks its message when
it is raised, and the CLI, the audit log and the orchestration layer pass what they print or store
through :func:`mask_text` (text) or :func:`mask_data` (JSON-like values).

What is masked, in any text:

- every secret lakeops holds, by value (issue 34: a catalog quoted the bearer token it was sent):
  each credential is registered here when it is obtained (:func:`register_secrets`: REST tokens and
  client credentials, vended and lent S3 keys, SQL catalog and endpoint passwords, secret Spark
  settings), so it is masked whoever echoes it, in any of its spellings (:func:`_spellings`);
- the token of a ``Bearer <token>`` header (the spelling lakeops sends), up to the next whitespace,
  quote or backslash, even one too short to be registered;
- a URL's password: from the ``:`` after the user name to the ``@`` before the host. Not parsed with
  :func:`urllib.parse.urlsplit`, which ends the authority at the first ``/``: SQLAlchemy reads
  ``u:pa/ss@host`` as the password ``pa/ss`` (and ``?``, ``#``, ``:`` likewise), so the password runs
  to the first ``@``; RFC 3986 parsers (botocore, urllib3) take the *last* ``@`` of the authority, so
  further ``@`` not separated by ``/``, ``?`` or ``#`` belong to it too. Masking the union of both
  readings may hide a little more than the password (``http://host:8080/a@b`` becomes
  ``http://host:***@b``), never less. A password holding whitespace must be percent-encoded (as
  RFC 3986 requires), since free text cannot tell where such a URL ends;
- the value of every ``name=value`` whose name says secret (:func:`is_secret_name`: password,
  secret, token, credential, signature, access/secret/API key, ``sig``, ... in any case and
  spelling, ``X-Amz-Signature`` included), in a query string or anywhere else (libpq DSNs, Spark
  conf), up to the next whitespace, ``&`` or ``#``.

Mapping keys that say secret have their whole value masked (:func:`mask_data`). Every log record of
the process passes through :func:`mask_text` when it is made (a log record factory installed on import):
botocore's DEBUG records of a request carry its headers and canonical request, urllib3's its URL, and
a library's record may quote any of them.

The registry is per process: a Spark executor receives no secret (it uses its own identity), so it has
nothing to register. Values shorter than :data:`MIN_SECRET_LENGTH` are not registered, since masking
every "test" or "abc1" would mangle all output; such a value is masked only where a pattern above sees
it. The registry keeps the :data:`MAX_SECRETS` most recently registered values: whoever keeps using a
secret registers it again on use (the REST client its token on every request), so what is forgotten
first is what nothing uses any more, such as vended keys of tables long done with.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = [
    "MASK",
    "MIN_SECRET_LENGTH",
    "is_secret_name",
    "mask_data",
    "mask_exception",
    "mask_text",
    "masked_errors",
    "register_secret_settings",
    "register_secrets",
]

MASK = "***"
#: The shortest value masked by value: NIST SP 800-63B's minimum length of a memorised secret.
MIN_SECRET_LENGTH = 8
#: How many values the registry keeps (each with its spellings); the least recently registered go first.
MAX_SECRETS = 1024

#: Name fragments (compared lower-cased, without ``-``, ``_`` and ``.``) that make a key secret.
_SECRET_FRAGMENTS = (
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "credential",
    "signature",
    "apikey",
    "accesskey",
    "privatekey",
    "sessionkey",
    "authorization",
)
#: Short names that are secret only as a whole (``sig`` of Azure SAS, ``pass``, ``auth``).
_SECRET_NAMES = frozenset({"sig", "pass", "auth"})

#: ``scheme://user:``, starting only where a scheme can start (no rescans inside a run of letters).
_URL_HEAD = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@\s]*:")
_AT_OR_SPACE = re.compile(r"[@\s]")
#: From a password's first "@": every further "@" still inside the authority (no "/", "?", "#" between).
_MORE_AT = re.compile(r"(?:@[^@/?#\s]*(?=@))*")
#: ``name=``; its value runs to the next whitespace, "&" or "#" (:func:`_value_spans`).
_NAME_EQ = re.compile(r"(?<![A-Za-z0-9_.\-])([A-Za-z][A-Za-z0-9_.\-]*)=")
_VALUE_END = re.compile(r"[\s&#]")
#: The token of a ``Bearer`` credential, up to the whitespace or quote (escaped or not) that ends an echo.
_BEARER = re.compile(r"\bBearer ([^\s'\"\\]+)")


# -- secrets by value ---------------------------------------------------------------------------------

_secrets: OrderedDict[str, tuple[str, ...]] = OrderedDict()  # value -> its spellings, oldest first
_secrets_lock = threading.Lock()
#: What :func:`_secret_spans` searches with: a pattern matching the first MIN_SECRET_LENGTH characters
#: of any spelling (None: no secret), and those prefixes' spellings, longest first. Rebuilt lazily.
_Index = tuple[re.Pattern[str] | None, dict[str, tuple[str, ...]]]
_index: _Index = (None, {})
_index_stale = False


def _reset_after_fork() -> None:
    """A child forked while another thread held the lock must not inherit it held."""
    global _secrets_lock
    _secrets_lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def register_secrets(*values: str | None) -> None:
    """Mask each value (None and values shorter than :data:`MIN_SECRET_LENGTH` are skipped) in every
    text :func:`mask_text` masks from now on, in this process. Registering a known value again only
    marks it recently used. Cheap: the search pattern is rebuilt at the next masking, once for a burst."""
    global _index_stale
    fresh = [v for v in values if v is not None and len(v) >= MIN_SECRET_LENGTH]
    if not fresh:
        return
    with _secrets_lock:
        for value in fresh:
            if value in _secrets:
                _secrets.move_to_end(value)
                continue
            _secrets[value] = _spellings(value)
            _index_stale = True
        while len(_secrets) > MAX_SECRETS:
            _secrets.popitem(last=False)


def register_secret_settings(settings: Mapping[str, object]) -> None:
    """Register the string value of every setting whose name says secret (:func:`is_secret_name`), in a
    catalog's configuration or Spark's, but an access key's id (``s3.access-key-id``, Hadoop's
    ``fs.s3a.access.key``): it is no secret, and on S3-compatible stores often a word of bucket names."""
    register_secrets(*(v for k, v in settings.items() if isinstance(v, str) and _names_secret_value(str(k))))


def _names_secret_value(name: str) -> bool:
    folded = _fold(name)
    return is_secret_name(name) and not ("accesskey" in folded and "secret" not in folded)


def _spellings(value: str) -> tuple[str, ...]:
    """How ``value`` can appear in text, longest first: as is; percent-encoded as a path segment, a path
    or a form field, with upper- or lower-case hex digits; JSON-escaped (ASCII or not, ``/`` as ``\\/``
    or not); inside a Python repr."""
    encoded = {quote(value, s, errors="surrogatepass") for s in ("", "/")} | {quote_plus(value, errors="surrogatepass")}
    encoded |= {re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), e) for e in encoded}
    escaped = {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    escaped |= {e.replace("/", "\\/") for e in escaped}
    return tuple(sorted({value, repr(value)[1:-1], *encoded, *escaped}, key=len, reverse=True))


def _alternation(words: Iterable[str]) -> str:
    """A pattern matching any of ``words`` (distinct, all of one length), factored into a trie: a search
    then compares a position with a few characters instead of with every word (10x faster with a
    thousand secrets)."""
    tails: dict[str, list[str]] = {}
    for word in words:
        tails.setdefault(word[0], []).append(word[1:])
    branches = [re.escape(head) + (_alternation(rest) if rest[0] else "") for head, rest in sorted(tails.items())]
    return branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"


def _current_index() -> _Index:
    """The index of the registered secrets, rebuilt if one was registered since."""
    global _index, _index_stale
    if _index_stale:
        with _secrets_lock:
            if _index_stale:
                prefixes: dict[str, set[str]] = {}
                for spellings in _secrets.values():
                    for spelling in spellings:
                        prefixes.setdefault(spelling[:MIN_SECRET_LENGTH], set()).add(spelling)
                pattern = re.compile(_alternation(prefixes)) if prefixes else None
                _index = pattern, {p: tuple(sorted(s, key=len, reverse=True)) for p, s in prefixes.items()}
                _index_stale = False
    return _index


def _secret_spans(text: str) -> list[tuple[int, int]]:
    """Where registered secrets are (occurrences may overlap: every one is found). The pattern finds
    where a spelling may start; only there are the spellings compared, longest first."""
    pattern, spellings = _current_index()
    if pattern is None:
        return []
    spans: list[tuple[int, int]] = []
    found = pattern.search(text)
    while found is not None:
        start = found.start()
        for spelling in spellings[found[0]]:
            if text.startswith(spelling, start):
                spans.append((start, start + len(spelling)))
                break
        found = pattern.search(text, start + 1)
    return spans


# -- secrets by pattern -------------------------------------------------------------------------------


def _fold(name: str) -> str:
    """``name`` lower-cased without ``-``, ``_`` and ``.``: every spelling of a setting's name alike."""
    return re.sub(r"[-_.]", "", name.lower())


def is_secret_name(name: str) -> bool:
    """Whether a parameter, option or key called ``name`` holds a secret."""
    folded = _fold(name)
    return folded in _SECRET_NAMES or any(fragment in folded for fragment in _SECRET_FRAGMENTS)


def _password_spans(text: str) -> list[tuple[int, int]]:
    """Where URL passwords are: from each ``scheme://user:`` to the first ``@`` before whitespace, then
    on through any further ``@`` of the authority. Linear in ``text``: heads with no ``@`` of their own
    share the search for the next ``@`` or whitespace (hostile text can hold thousands of them)."""
    spans: list[tuple[int, int]] = []
    stop = last_stop = end = -1
    for head in _URL_HEAD.finditer(text):
        start = head.end()
        if stop < start:
            found = _AT_OR_SPACE.search(text, start)
            stop = found.start() if found else len(text)
        if stop == len(text) or text[stop] != "@":
            continue
        if stop != last_stop:
            more = _MORE_AT.match(text, stop)
            assert more is not None  # the pattern matches the empty string
            last_stop, end = stop, more.end()
        if end > start:
            spans.append((start, end))
    return spans


def _value_spans(text: str) -> list[tuple[int, int]]:
    """Where the values of secret ``name=value`` pairs are. Values are not consumed while searching:
    one can hold another pair (``uri=postgresql://h/db?password=...``). Linear like
    :func:`_password_spans`: names in one value share the search for its end."""
    spans: list[tuple[int, int]] = []
    stop = -1
    for pair in _NAME_EQ.finditer(text):
        if not is_secret_name(pair[1]):
            continue
        start = pair.end()
        if stop < start:
            found = _VALUE_END.search(text, start)
            stop = found.start() if found else len(text)
        if stop > start:
            spans.append((start, stop))
    return spans


def mask_text(text: str) -> str:
    """``text`` with every registered secret, bearer token, URL password and secret ``name=value``
    value replaced by ``***``.

    Every kind is found in the original text and the spans merged before replacing: one reading
    may swallow another's name (``http://host:1/?sig=a@b`` is a password ``1/?sig=a`` to SQLAlchemy
    and a ``sig`` of ``a@b`` to RFC 3986), so masking one first could leave the rest of the other bare.
    """
    spans = _secret_spans(text)
    if "Bearer " in text:
        spans += [found.span(1) for found in _BEARER.finditer(text)]
    if "=" in text or "://" in text:
        spans += _password_spans(text) + _value_spans(text)
    if not spans:
        return text
    parts: list[str] = []
    end = 0
    for start, stop in sorted(spans):
        if start > end or not parts:
            parts += [text[end:start], MASK]
        end = max(end, stop)
    return "".join(parts) + text[end:]


def mask_data(value: Any) -> Any:
    """A copy of a JSON-like ``value`` with every string masked (:func:`mask_text`) and the value of
    every mapping key that says secret (:func:`is_secret_name`) replaced by ``***`` (None stays None)."""
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, Mapping):
        return {str(k): MASK if v is not None and is_secret_name(str(k)) else mask_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_data(v) for v in value]
    return value


def mask_exception(error: BaseException) -> BaseException:
    """``error`` with the string arguments of it and of every exception in its cause/context chain
    masked in place, so a traceback or an error report (Dagster's event log shows the whole chain) of
    a driver's or an S3 client's exception does not carry the URL it was given. Returns ``error``."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(mask_text(a) if isinstance(a, str) else a for a in current.args)
        current = current.__cause__ or current.__context__
    return error


@contextmanager
def masked_errors() -> Iterator[None]:
    """Let any exception leave the block with its chain masked (:func:`mask_exception`): around code
    whose errors an orchestrator records with their causes."""
    try:
        yield
    except Exception as exc:
        mask_exception(exc)
        raise


def _mask_record(record: logging.LogRecord) -> None:
    """Mask a log record's message, its exception's chain and its stack in place."""
    try:
        message = record.getMessage()
    except Exception:  # arguments that do not fit the format: logging reports that when it emits
        return
    masked = mask_text(message)
    if masked != message:
        record.msg, record.args = masked, None
    if record.exc_info and record.exc_info[1] is not None:
        mask_exception(record.exc_info[1])
    if record.stack_info:
        record.stack_info = mask_text(record.stack_info)


def _install_record_factory() -> None:
    """Make every log record of the process pass through :func:`_mask_record` (once, on top of the
    factory already installed). Not a filter: a logger's filters miss records its children propagate,
    and the handlers are the application's."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "lakeops_masks", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _mask_record(record)
        return record

    factory.lakeops_masks = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


_install_record_factory()
