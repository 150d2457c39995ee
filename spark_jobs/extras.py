"""The optional parts of lakeops, and the error that names the extra to install for one.

``pip install lakeops`` is the library and the ``lakeops`` command, which plan and run on the driver;
Spark, the Spark Connect client and Dagster come with the extras ``spark``, ``connect`` and ``dagster``
(pyproject.toml). Code that needs one asks :func:`require` first, so that a missing one ends in a
message saying what to install, not in an ImportError traceback.
"""

from __future__ import annotations

import importlib

from lakeops.errors import UsageError

__all__ = ["MissingExtra", "require"]


class MissingExtra(UsageError):
    """What was asked for needs an extra of lakeops that is not installed; the message names it."""


def require(module: str, *, extra: str, needed_for: str) -> None:
    """Import ``module``, or raise :class:`MissingExtra` saying that ``needed_for`` (what the user
    asked for: "Spark (master local[2])") needs ``pip install 'lakeops[extra]'``."""
    try:
        importlib.import_module(module)
    except ImportError as exc:  # the module or one it imports (pyspark's py4j, Spark Connect's grpc)
        raise MissingExtra(
            f"{needed_for} needs the extra {extra!r} of lakeops, which is not installed ({exc}): "
            f"pip install 'lakeops[{extra}]'"
        ) from None  # the message holds the ImportError
