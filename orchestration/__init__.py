"""lakeops orchestration: the Dagster definitions (``workspace.yaml`` loads :mod:`orchestration.definitions`)
and the Airflow DAGs (:mod:`orchestration.airflow`, its DAG folder ``orchestration/airflow/dags``), both
generated from the one registry, and the orchestrator-neutral modules they share
(:mod:`orchestration.operations`, :mod:`orchestration.runs`).

The package itself needs neither orchestrator: each way in asks for its own extra
(:func:`spark_jobs.extras.require` in :mod:`orchestration.definitions`, :mod:`orchestration.component` and
:mod:`orchestration.airflow`), so a missing one ends in a :class:`~spark_jobs.extras.MissingExtra` naming it.
"""
