"""The ``_delta_log/_last_checkpoint`` pointer and its checksum ("Last Checkpoint File", "JSON checksum").

The checksum is the MD5 of a canonical form of the JSON: every scalar leaf as ``path=value``, the
path made of URL-encoded, quoted object keys and bare array indexes joined by ``+``, pairs sorted by
the UTF-8 bytes of the path (so array index ``10`` sorts before ``2``, which the real files confirm),
joined by ``,``; the top-level ``checksum`` key is left out. Empty objects and arrays have no
leaves and so vanish. Numbers are "their own canonical form": a parsed number is rendered back
from the exact text it was written as, because re-formatting a float (``1E+2`` vs ``100.0``) would
change the digest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lakeops.errors import CorruptFile, InvalidArgument

__all__ = ["LastCheckpoint", "canonicalize", "checksum", "parse_last_checkpoint", "render_last_checkpoint"]

_CHECKSUM_KEY = "checksum"


class LastCheckpoint(BaseModel):
    """The pointer's fields; unknown ones (``tags``, ``v2Checkpoint``, ...) are kept for a rewrite."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="allow")

    version: int
    size: int
    parts: int | None = None
    size_in_bytes: int | None = Field(alias="sizeInBytes", default=None)
    num_of_add_files: int | None = Field(alias="numOfAddFiles", default=None)
    checkpoint_schema: dict[str, Any] | None = Field(alias="checkpointSchema", default=None)
    checksum: str | None = None


class _FloatText(float):
    """A parsed JSON number with a fraction or exponent that remembers how it was written."""

    text: str

    def __new__(cls, text: str) -> _FloatText:
        value = super().__new__(cls, text)
        value.text = text
        return value


def _url_encode(text: str) -> str:
    """Percent-encode everything but ``A-Za-z0-9-._~`` with uppercase hex, over UTF-8 octets."""
    return quote(text, safe="", encoding="utf-8", errors="strict")


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return f'"{_url_encode(value)}"'
    if isinstance(value, _FloatText):
        return value.text
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidArgument(f"{value!r} is not a JSON number and cannot be canonicalised")
        return repr(value)  # what json.dumps writes, so a rendered file re-validates
    raise InvalidArgument(f"{type(value).__name__} value {value!r} is not JSON")


def _leaves(value: Any, path: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, f'"{_url_encode(key)}"'))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, str(index)))
    else:
        yield "+".join(path), _scalar(value)


def canonicalize(json_obj: Any) -> str:
    """The canonical string of a parsed JSON value ("JSON checksum"), top-level ``checksum`` ignored."""
    if isinstance(json_obj, dict):
        json_obj = {key: value for key, value in json_obj.items() if key != _CHECKSUM_KEY}
    pairs = sorted(_leaves(json_obj, ()), key=lambda pair: pair[0].encode("utf-8"))
    return ",".join(f"{path}={value}" if path else value for path, value in pairs)


def checksum(json_obj: Any) -> str:
    """The 32-hex-digit MD5 of :func:`canonicalize`."""
    return hashlib.md5(canonicalize(json_obj).encode("utf-8"), usedforsecurity=False).hexdigest()


def _pairs_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


class _DuplicateKey(Exception):
    pass


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_last_checkpoint(raw: bytes, location: str) -> LastCheckpoint:
    """Parse and validate the pointer file at ``location``.

    Raises :class:`~lakeops.errors.CorruptFile` naming ``location`` for bytes that are not UTF-8
    JSON (an empty file included), duplicate keys at any depth, missing required fields, or a
    ``checksum`` that does not match the content.
    """
    try:
        parsed = json.loads(
            raw.decode("utf-8"),
            object_pairs_hook=_pairs_without_duplicates,
            parse_float=_FloatText,
            parse_constant=_reject_constant,
        )
    except _DuplicateKey as exc:
        raise CorruptFile(f"{location}: duplicate key {exc.args[0]!r}; the protocol makes such JSON invalid") from exc
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        what = "is empty" if not raw.strip() else f"is not valid JSON ({exc})"
        raise CorruptFile(f"{location}: last checkpoint file {what}") from None
    if not isinstance(parsed, dict):
        raise CorruptFile(f"{location}: last checkpoint file holds a JSON {type(parsed).__name__}, not an object")
    stored = parsed.get(_CHECKSUM_KEY)
    if stored is not None:
        if not isinstance(stored, str):
            raise CorruptFile(f"{location}: checksum is {stored!r}, not a string")
        try:
            expected = checksum(parsed)
        except (InvalidArgument, UnicodeEncodeError) as exc:
            raise CorruptFile(f"{location}: cannot canonicalise the content for its checksum ({exc})") from exc
        if stored.lower() != expected:
            raise CorruptFile(f"{location}: checksum mismatch (stored {stored}, content hashes to {expected})")
    try:
        return LastCheckpoint.model_validate(parsed)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"])
        raise CorruptFile(f"{location}: last checkpoint field {field!r}: {error['msg']}") from exc


def render_last_checkpoint(model: LastCheckpoint) -> bytes:
    """The file's bytes: protocol field names, absent rather than null, and a fresh checksum."""
    body = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    body.pop(_CHECKSUM_KEY, None)
    body[_CHECKSUM_KEY] = checksum(body)
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode("utf-8")
