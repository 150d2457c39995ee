"""Change feeds: the Delta table of change rows that ``lakeops cdc`` appends to, whatever the source.

* :mod:`lakeops.changefeed.table`: the change table itself: opening the output, its idempotency
  (Delta "Transaction Identifiers": each source position once, no gaps), writing a unit's rows and
  committing them. Every source's export writes through it.
* :mod:`lakeops.changefeed.cdf_export`: a Delta source, exported from its change data feed (read by
  :mod:`lakeops.delta.cdf`).

An Iceberg source's changelog (:mod:`lakeops.iceberg.maintenance.changelog`) and an Icechunk
repository's snapshot diff (:mod:`lakeops.icechunk.maintenance.diff`) derive their rows with their
format's rules and write through :mod:`lakeops.changefeed.table` too. The column names the rows
carry are :mod:`lakeops.change_columns`.

Layer: the change table is a Delta table, so this package sits above :mod:`lakeops.delta` and below
:mod:`lakeops.iceberg` and :mod:`lakeops.icechunk` (the import contracts in ``pyproject.toml``).
"""
