"""Masking secrets in everything lakeops prints or records (issue 19, "Secrets in URIs").

Catalog URIs (``postgresql+psycopg2://user:password@host/db``), S3 endpoints
(``http://key:secret@minio:9000``) and presigned-style query strings (``?X-Amz-Signature=...``) carry
credentials that must never reach a terminal, a JSON report, an audit record or a Dagster event log.
This module is the one implementation: :class:`~lakeops.errors.LakeopsError` masks its message when
it is raised, and the CLI, the audit log and the orchestration layer pass what they print or store
through :func:`mask_text` (text) or :func:`mask_data` (JSON-like values).

What is masked, in any text:

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

Mapping keys that say secret have their whole value masked (:func:`mask_data`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = ["MASK", "is_secret_name", "mask_data", "mask_exception", "mask_text", "masked_errors"]

MASK = "***"

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


def is_secret_name(name: str) -> bool:
    """Whether a parameter, option or key called ``name`` holds a secret."""
    folded = re.sub(r"[-_.]", "", name.lower())
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
    """``text`` with every URL password and every secret ``name=value`` value replaced by ``***``.

    Both kinds are found in the original text and their spans merged before replacing: one reading
    may swallow the other's name (``http://host:1/?sig=a@b`` is a password ``1/?sig=a`` to SQLAlchemy
    and a ``sig`` of ``a@b`` to RFC 3986), so masking one first could leave the rest of the other bare.
    """
    if "=" not in text and "://" not in text:  # the common case: nothing to look at
        return text
    spans = _password_spans(text) + _value_spans(text)
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
