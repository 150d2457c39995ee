"""``LakeopsRegistry``, the Dagster Component: a Dagster project adds lakeops with one ``defs.yaml``.

A ``dg`` project (``dg scaffold defs orchestration.component.LakeopsRegistry lakeops``) names the registry
file in the component's attributes; the component builds exactly what ``workspace.yaml`` loads from
:mod:`orchestration.definitions` — the same :func:`~orchestration.registry_definitions.build_definitions` — so the
two ways in cannot drift. Registered for ``dg list components`` through the
``dagster_dg_cli.registry_modules`` entry point (``pyproject.toml``).
"""

from __future__ import annotations

from pathlib import Path

from spark_jobs.extras import require

require("dagster", extra="dagster", needed_for="loading the Dagster definitions of lakeops (orchestration)")

import dagster as dg  # noqa: E402 (after the extra's check)
from pydantic import Field  # noqa: E402 (after the extra's check)

from lakeops.registry import RegistryError, load_registry  # noqa: E402 (after the extra's check)
from orchestration.registry_definitions import build_definitions  # noqa: E402 (after the extra's check)

__all__ = ["LakeopsRegistry"]


class LakeopsRegistry(dg.Component, dg.Model, dg.Resolvable):
    """lakeops maintenance of the tables a registry lists: each table's asset with its health checks,
    its maintenance assets, schedules, sensors, pools, the health overview and, with a budget, the
    planner."""

    registry: str | None = Field(
        default=None,
        description="The registry file (YAML). A relative path is taken from this defs.yaml's folder; "
        "absent: $LAKEOPS_REGISTRY, else ./lakeops.yaml, as the lakeops command reads it.",
    )
    tables: list[str] | None = Field(
        default=None,
        description="Only these registered tables (by name), for a registry several code locations share; "
        "absent: every table.",
    )

    def registry_file(self, folder: Path) -> Path | None:
        """The registry file this component reads, given its ``defs.yaml``'s folder."""
        if self.registry is None:
            return None
        path = Path(self.registry).expanduser()
        return path if path.is_absolute() else folder / path

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        registry = load_registry(self.registry_file(context.path))
        if self.tables is None:
            return build_definitions(registry)
        names = [entry.name for entry in registry.tables]
        unknown = [name for name in self.tables if name not in names]
        if unknown:
            raise RegistryError(
                f"LakeopsRegistry at {context.path}: tables {unknown} are not in the registry "
                f"(it has {names})"
            )
        chosen = [entry for entry in registry.tables if entry.name in self.tables]
        return build_definitions(registry.model_copy(update={"tables": chosen}))
