"""One Airflow pool per registered table, ``lakeops_<table>`` with one slot: every task of a table runs in
it, so two operations on one table never overlap (a second queues) while other tables run in parallel.

Airflow keeps pools in its metadata database, and a task in a pool that does not exist is never
scheduled, so the pools are created where that database is reachable, before the DAGs' first runs (an
Airflow 3 task has no database access): ``python -m orchestration.airflow.pools`` (with the scheduler's
configuration, ``$LAKEOPS_REGISTRY`` the registry), or ``--export FILE`` for ``airflow pools import FILE``.
A pool that exists is left as it is: an operator who gave a table more slots keeps them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from lakeops.registry import Registry, load_registry

__all__ = ["POOL_SLOTS", "pool_file", "register_pools"]

#: A table's pool's slots: one operation on a table at a time.
POOL_SLOTS = 1


def _description(name: str) -> str:
    return f"lakeops: one maintenance operation of table {name} at a time"


def pool_file(registry: Registry) -> dict[str, dict[str, object]]:
    """Every table's pool as ``airflow pools import`` reads a file."""
    return {
        entry.pool: {"slots": POOL_SLOTS, "description": _description(entry.name), "include_deferred": False}
        for entry in registry.tables
    }


def register_pools(registry: Registry) -> list[str]:
    """Create each table's pool that the metadata database lacks; returns the pools created."""
    from airflow.models.pool import Pool  # the metadata database's model: scheduler side only

    existing = {pool.pool for pool in Pool.get_pools()}
    created = []
    for name, pool in pool_file(registry).items():
        if name not in existing:
            Pool.create_or_update_pool(
                name, slots=POOL_SLOTS, description=str(pool["description"]), include_deferred=False
            )
            created.append(name)
    return created


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestration.airflow.pools", description=__doc__)
    parser.add_argument("--export", type=Path, help="write the pools for `airflow pools import` instead")
    args = parser.parse_args(argv)
    registry = load_registry()
    if args.export is not None:
        args.export.write_text(json.dumps(pool_file(registry), indent=2) + "\n")
        return 0
    created = register_pools(registry)
    print(f"created {len(created)} pool(s): {', '.join(created)}" if created else "every table's pool exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
