"""The ``lakeops`` command line and its Spark jobs: one module per command (:mod:`spark_jobs.commands`),
each parsing its options and calling :mod:`lakeops.api` with Spark as the executor
(:mod:`spark_jobs.spark_settings`, :mod:`spark_jobs.spark_tasks`, :mod:`spark_jobs.session`,
:mod:`spark_jobs.preflight`); ``spark-submit spark_jobs/<command>.py`` runs one the same way."""
