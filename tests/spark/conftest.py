"""One local Spark session for the whole test run: the JVM start-up is paid once.

Every test under ``tests/spark`` gets the ``spark`` marker (``tests/conftest.py``), so ``-m "not spark"``
skips them all.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark_jobs.session import build_session, stop_session


@pytest.fixture(scope="session")
def spark(s3_server: object) -> Iterator[SparkSession]:
    """A ``local[2]`` session built exactly as the CLI builds it, stopped after the last test.

    It depends on ``s3_server`` so the S3 credentials are in the environment before the JVM and
    its Python workers start: workers inherit the environment once, as on a real cluster.
    """
    session = build_session(master="local[2]", app_name="lakeops-tests")
    try:
        yield session
    finally:
        stop_session(session)
