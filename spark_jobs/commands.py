"""The commands of ``lakeops``: each a module of ``spark_jobs`` (see :mod:`spark_jobs.cli`).

A module of its own so that both the command line (:mod:`spark_jobs.cli`) and the Python entry point
(:func:`spark_jobs.operations.run_operation`) look commands up without importing each other.
"""

from __future__ import annotations

__all__ = ["COMMANDS"]

#: Command name -> module implementing it (``HELP``, ``USES_SPARK``, ``configure``, ``run``).
COMMANDS: dict[str, str] = {
    "inspect": "spark_jobs.inspect_table",  # not `inspect`: scripts run by spark-submit would shadow the stdlib
    "compact": "spark_jobs.compact",
    "checkpoint": "spark_jobs.checkpoint",
    "expire": "spark_jobs.expire",
    "orphans": "spark_jobs.orphans",
    "cdc": "spark_jobs.cdc",
    "restore": "spark_jobs.restore",
    "purge-trash": "spark_jobs.purge_trash",
    "plan-maintenance": "spark_jobs.plan_maintenance",
    "health": "spark_jobs.health",
}
