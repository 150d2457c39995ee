"""The code location ``workspace.yaml``, ``dagster api grpc -m orchestration.definitions`` (deploy/) and
``dagster asset materialize -m orchestration.definitions`` load: the definitions of the registry the
command line reads (``$LAKEOPS_REGISTRY``, else ``./lakeops.yaml``; absent: no tables). A ``dg`` project
uses the ``LakeopsRegistry`` component instead (:mod:`orchestration.component`); both build through
:func:`orchestration.registry_definitions.build_definitions`.
"""

from __future__ import annotations

from spark_jobs.extras import require

require("dagster", extra="dagster", needed_for="loading the Dagster definitions of lakeops (orchestration)")

from lakeops.registry import load_registry  # noqa: E402 (after the extra's check)
from orchestration.registry_definitions import build_definitions  # noqa: E402 (after the extra's check)

__all__ = ["defs"]

defs = build_definitions(load_registry())
