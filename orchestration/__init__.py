"""The Dagster definitions of lakeops (``workspace.yaml`` loads :mod:`orchestration.definitions`).

They need the extra ``dagster`` (``pip install 'lakeops[dagster]'``): without it, importing this
package is a :class:`~spark_jobs.extras.MissingExtra` saying so, not an ImportError from a module below.
"""

from spark_jobs.extras import require

require("dagster", extra="dagster", needed_for="loading the Dagster definitions of lakeops (orchestration)")
