"""The DAG file of lakeops: every DAG of the registry ``$LAKEOPS_REGISTRY`` names (else ``./lakeops.yaml``),
built by :func:`orchestration.airflow.registry_dags.build_dags` and put in this module's globals, where
Airflow's DAG processor finds them (``AIRFLOW__CORE__DAGS_FOLDER`` pointing at this folder). A registry
error fails this file's import with the table and key named: ``airflow dags list-import-errors`` shows it.
"""

from lakeops.registry import load_registry
from orchestration.airflow.registry_dags import build_dags

globals().update(build_dags(load_registry()))
