"""The code location ``workspace.yaml``, ``dagster api grpc -m orchestration.definitions`` (deploy/) and
``dagster asset materialize -m orchestration.definitions`` load: the definitions of the registry the
command line reads (``$LAKEOPS_REGISTRY``, else ``./lakeops.yaml``; absent: no tables). A ``dg`` project
uses the ``LakeopsRegistry`` component instead (:mod:`orchestration.component`); both build through
:func:`orchestration.registry_definitions.build_definitions`.
"""

from __future__ import annotations

from lakeops.registry import load_registry
from orchestration.registry_definitions import build_definitions

__all__ = ["defs"]

defs = build_definitions(load_registry())
