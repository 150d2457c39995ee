"""JSON and display text that keep file names which are not UTF-8 (issue 19, "Unclear crashes").

POSIX file names are bytes. Python holds one that is not UTF-8 as ``os.fsdecode`` gives it: each
undecodable byte ``0xXX`` as the lone surrogate ``U+DCXX``. pydantic's JSON refuses to write lone
surrogates (``PydanticSerializationError: surrogates not allowed``) and its parser refuses their
escapes. :func:`dumps` writes them as the JSON escape ``\\udcXX``: valid JSON, which :func:`json.loads`
decodes back to the same string, whose ``os.fsencode`` gives the original bytes. So a report, a plan
unit, an audit record or a quarantine manifest naming such a file is written, and read back exactly
(with ``json.loads``; ``model_validate_json`` cannot read it). For people, :func:`printable` shows
them as Python's ``backslashreplace`` does on stderr (``\udcff``): a terminal whose encoding is strict
UTF-8 refuses the surrogate itself.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["dumps", "printable"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(data: Any) -> str:
    """``data`` (JSON types, e.g. from ``model_dump(mode="json")``) as one line of compact JSON, UTF-8
    text except for lone surrogates, escaped. They occur only inside strings, so each escape lands
    inside a JSON string."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return _SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def printable(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\udcff``), so it can be printed."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8") if _SURROGATE.search(text) else text
