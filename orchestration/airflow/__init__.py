"""lakeops on Apache Airflow: the DAGs of a table registry, generated as the Dagster definitions are, from the
one registry schema and the orchestrator-neutral :mod:`orchestration.operations` specs.

- :mod:`orchestration.airflow.registry_dags`: every table's DAGs (``lakeops__<table>__<operation>``);
- :mod:`orchestration.airflow.operator`: ``LakeopsOperator``, one maintenance operation on the worker;
- :mod:`orchestration.airflow.retries`: retries with backoff on transient storage errors only;
- :mod:`orchestration.airflow.pools`: one pool per table (``lakeops_<table>``, one slot);
- ``orchestration/airflow/dags/lakeops_dags.py``: the DAG file Airflow loads
  (``AIRFLOW__CORE__DAGS_FOLDER=orchestration/airflow/dags``).

Needs the extra ``airflow`` (``pip install 'lakeops[airflow]'``): without it, importing this package is a
:class:`~spark_jobs.extras.MissingExtra` saying so. Never imports Dagster (an import-linter contract).
"""

from spark_jobs.extras import require

require("airflow.sdk", extra="airflow", needed_for="loading the Airflow DAGs of lakeops (orchestration.airflow)")
