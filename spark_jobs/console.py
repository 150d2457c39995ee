"""The console every operation's progress goes to: secrets masked, undecodable names escaped."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from lakeops.jsontext import printable
from lakeops.redaction import mask_text

__all__ = ["MaskedConsole"]


class MaskedConsole(Console):
    """A console that masks secrets (:func:`lakeops.redaction.mask_text`) in the text it prints: the
    CLI's stderr and Dagster's run log. Masked before rich renders: rich wraps long lines, and a URL
    split across two lines would slip past a mask applied to the output. File names that are not
    UTF-8 are shown escaped (:func:`lakeops.jsontext.printable`), which every log can store."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(printable(mask_text(o)) if isinstance(o, str) else o for o in objects), **kwargs)
