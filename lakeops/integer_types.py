"""The formats' ``long`` and ``int`` (Delta's protocol, Iceberg's spec: signed 64- and 32-bit integers) as
pydantic field types, checked by pydantic-core with no Python call per value (a replay validates
millions): a number outside them is a corrupt file named at parse time, not an ``OverflowError`` deep in
a unit that hands it to Arrow or numpy."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

__all__ = ["BOUNDS", "Int", "Long"]

Long = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
Int = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
#: The bounds by kind, for messages (:func:`lakeops.delta.commit_file.parse_commit`).
BOUNDS = {"long": (-(2**63), 2**63 - 1), "int": (-(2**31), 2**31 - 1)}
