"""Benefit-ranked maintenance within a compute budget (issue 26).

Instead of running every operation on every table on a cron, decide which (table, operation,
partition) needs maintenance most and spend a bounded number of core-minutes per window on it:

- :mod:`lakeops.planning.models`: the plan's pydantic models (observation, action, decision; the budget is
  the registry's, :class:`lakeops.registry.MaintenanceBudget`).
- :mod:`lakeops.planning.benefit`: what each action would gain, in operator units, from a table's
  observation (inspect numbers and dry-run plans), without executing anything.
- :mod:`lakeops.planning.cost`: what each action would cost, from the bytes and files of its plan and
  the throughput the table (else the cluster) showed in its audited runs, corrected by each run's
  prediction error.
- :mod:`lakeops.planning.planner`: greedy by benefit per predicted core-minute within the budget,
  per-table pools and retention/consumer floors, with aging so deferred work does not starve.
- :mod:`lakeops.planning.estate`: real tables of a registry observed through :mod:`lakeops.api` dry
  runs, their run history read from the audit log.
"""
