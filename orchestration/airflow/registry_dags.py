"""The Airflow DAGs of one table registry, as :mod:`orchestration.registry_definitions` builds Dagster's.

Per registered table (:mod:`lakeops.registry`), each DAG named for the table and what it does:

- ``lakeops__<table>__nightly``: expiry, then orphan removal, on the table's ``schedules.nightly`` cron (UTC);
- ``lakeops__<table>__compaction`` and ``lakeops__<table>__checkpoint``: unscheduled for now (trigger them,
  or a later step's deferrable health sensor will when the table's signal crosses its threshold);
- ``lakeops__<table>__cdc`` when CDC is enabled: one run per UTC day from ``cdc.start_date``, caught up, each
  extracting every commit before the end of its data interval that the output does not hold yet, so a
  re-run (or a backfill over days already extracted) writes nothing;

and over all tables ``lakeops__health`` (:mod:`orchestration.airflow.health`) on their health crons.

Every task is a :class:`~orchestration.airflow.operator.LakeopsOperator` in the table's pool
``lakeops_<table>`` (:mod:`orchestration.airflow.pools`: one slot, so two operations on a table never
overlap while other tables proceed). Tags: ``lakeops``, ``table:<name>``, ``operation:<op>`` for each
operation, ``format:<format>`` when the registry names it, and the registry's tags as ``key:value``;
the owners are the registry's. A registry that Airflow cannot take as written is a
:class:`~lakeops.registry.RegistryError` naming the table and the key, never a table left out.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import DAG, CronDataIntervalTimetable, MultipleCronTriggerTimetable

from lakeops.registry import Registry, RegistryError, TableEntry, registry_path
from orchestration.airflow.health import RegistryHealthOperator
from orchestration.airflow.operator import LakeopsOperator
from orchestration.operations import SPECS

__all__ = ["HEALTH_DAG_ID", "NIGHTLY_START", "build_dags", "dag_id"]

#: The registry's health DAG (:mod:`orchestration.airflow.health`).
HEALTH_DAG_ID = "lakeops__health"

#: Where the nightly DAGs' schedules start (no catch-up: only the latest tick runs).
NIGHTLY_START = datetime(2026, 1, 1, tzinfo=UTC)
#: Airflow's longest tag (``airflow.sdk.definitions.dag.TAG_MAX_LEN``).
TAG_MAX_LEN = 100


def dag_id(entry: TableEntry, kind: str) -> str:
    return f"lakeops__{entry.name}__{kind}"


def _tags(entry: TableEntry, operations: list[str]) -> list[str]:
    tags = ["lakeops", f"table:{entry.name}", *(f"operation:{op}" for op in operations)]
    tags += [] if entry.format == "auto" else [f"format:{entry.format}"]
    for key, value in entry.tags.items():
        tag = f"{key}:{value}"
        if len(tag) > TAG_MAX_LEN:
            raise RegistryError(
                f"table {entry.name!r}: tags.{key}: '{key}: {value}' is {len(tag)} characters as an Airflow tag "
                f"({TAG_MAX_LEN} at most)"
            )
        tags.append(tag)
    return tags


def _dag(entry: TableEntry, kind: str, operations: list[str], registry_file: str, **schedule: object) -> DAG:
    """One DAG of ``entry``: its ``operations`` in order, each a task in the table's pool."""
    what = " then ".join(SPECS[op].command for op in operations)
    with DAG(
        dag_id(entry, kind),
        description=f"lakeops {what} of {entry.address}",
        doc_md=entry.description,
        tags=_tags(entry, operations),
        default_args={"owner": ",".join(entry.owners) or "lakeops", "pool": entry.pool, "pool_slots": 1},
        max_active_runs=1,
        **schedule,  # type: ignore[arg-type]
    ) as dag:
        previous: LakeopsOperator | None = None
        for operation in operations:
            task = LakeopsOperator(task_id=operation, table=entry.name, operation=operation, registry=registry_file)
            if previous is not None:
                previous >> task
            previous = task
    return dag


def table_dags(entry: TableEntry, registry_file: str) -> list[DAG]:
    """``entry``'s DAGs: nightly, compaction, checkpoint and (CDC enabled) cdc."""
    dags = [
        _dag(
            entry,
            "nightly",
            ["expiry", "orphans"],
            registry_file,
            schedule=entry.schedules.nightly,
            start_date=NIGHTLY_START,
            catchup=False,
        ),
        _dag(entry, "compaction", ["compaction"], registry_file, schedule=None),
        _dag(entry, "checkpoint", ["checkpoint"], registry_file, schedule=None),
    ]
    if entry.cdc.enabled:
        assert entry.cdc.start_date is not None  # the registry requires it when CDC is enabled
        start = entry.cdc.start_date
        # The interval timetable, not the string "@daily": Airflow 3 reads a cron string as a trigger
        # timetable whose runs have no data interval, and a CDC run's interval is the day it extracts.
        dags.append(
            _dag(
                entry,
                "cdc",
                ["cdc"],
                registry_file,
                schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
                start_date=datetime(start.year, start.month, start.day, tzinfo=UTC),
                catchup=True,
            )
        )
    return dags


def health_dag(registry: Registry, registry_file: str) -> DAG:
    """``lakeops__health``: every table's health on the tables' health crons
    (:mod:`orchestration.airflow.health`)."""
    crons = sorted({entry.schedules.health for entry in registry.tables})
    with DAG(
        HEALTH_DAG_ID,
        description="lakeops health of every registered table: fails on a table at ERROR",
        tags=["lakeops", "operation:health"],
        default_args={"owner": "lakeops"},
        schedule=MultipleCronTriggerTimetable(*crons, timezone="UTC"),
        start_date=NIGHTLY_START,
        catchup=False,
        max_active_runs=1,
    ) as dag:
        RegistryHealthOperator(task_id="health", registry=registry_file)
    return dag


def build_dags(registry: Registry, registry_file: Path | None = None) -> dict[str, DAG]:
    """Every DAG of ``registry`` by id; its tasks read ``registry_file`` (default: the command line's
    registry, ``$LAKEOPS_REGISTRY``) on the worker, as an absolute path."""
    source = str((registry_file or registry_path()).resolve())
    dags = {dag.dag_id: dag for entry in registry.tables for dag in table_dags(entry, source)}
    if registry.tables:
        dags[HEALTH_DAG_ID] = health_dag(registry, source)
    return dags
